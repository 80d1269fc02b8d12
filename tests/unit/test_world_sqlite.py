"""SQLiteWorldStore: roundtrip, partial upserts, atomicity, seeding."""

from __future__ import annotations

import sqlite3

import pytest

from pipelines.domains.support import authenticate, build_registry, invoke
from pipelines.domains.support.generator import FIXTURES, generate_world
from pipelines.domains.support.world import RetailWorld
from pipelines.tools import ToolContext
from serve.stores.world_sqlite import SQLiteWorldStore

ALEX = FIXTURES["alex"]


@pytest.fixture
def store(tmp_path) -> SQLiteWorldStore:
    s = SQLiteWorldStore(tmp_path / "state" / "world.db")
    yield s
    s.close()


def test_wal_and_empty(store: SQLiteWorldStore) -> None:
    assert store.journal_mode() == "wal"
    assert store.is_empty()
    assert store.load(RetailWorld.from_entities) == RetailWorld()


def test_roundtrip(store: SQLiteWorldStore) -> None:
    world = generate_world(2)
    store.save(world)
    assert store.load(RetailWorld.from_entities) == world
    assert store.load(RetailWorld.from_entities).to_json() == world.to_json()
    smaller = generate_world(3, n_users=2, n_orders=7, n_products=2)
    store.save(smaller)  # replaces, never merges
    assert store.load(RetailWorld.from_entities) == smaller


def test_seed_if_empty_only_once(store: SQLiteWorldStore) -> None:
    assert store.seed_if_empty(generate_world(1)) is True
    assert store.seed_if_empty(generate_world(9)) is False
    assert store.load(RetailWorld.from_entities) == generate_world(1)


def test_tool_changes_persist_through_save_changed(store: SQLiteWorldStore, tmp_path) -> None:
    world = generate_world(4)
    store.seed_if_empty(world)
    ctx = authenticate(ToolContext(confirmed=True), ALEX.user_id, world)
    out = invoke(build_registry(), "cancel_pending_order",
                 {"order_id": ALEX.pending_order_id, "reason": "ordered by mistake"}, ctx, world)
    assert out.observation.ok
    assert out.changed == {"user": [ALEX.user_id], "order": [ALEX.pending_order_id]}
    store.save_changed(world, out.changed)
    reopened = SQLiteWorldStore(tmp_path / "state" / "world.db")
    assert reopened.load(RetailWorld.from_entities) == world
    assert reopened.load(RetailWorld.from_entities).orders[ALEX.pending_order_id].status == "cancelled"


def test_save_rows_is_atomic(store: SQLiteWorldStore) -> None:
    world = generate_world(5)
    store.save(world)
    user = world.users[ALEX.user_id].model_copy(deep=True)
    user.email = "changed@example.com"
    order = world.orders[ALEX.pending_order_id].model_copy(deep=True)
    order.status = "cancelled"
    rows = [("user", user.user_id, user.model_dump_json()), ("order", order.order_id, order.model_dump_json())]
    with pytest.raises(sqlite3.Error):
        store.save_rows([*rows, ("order", "#W0", None)])  # a row without a body
    assert store.load(RetailWorld.from_entities) == world  # neither the user nor the first order landed
    store.save_rows(rows)
    loaded = store.load(RetailWorld.from_entities)
    assert loaded.users[ALEX.user_id].email == "changed@example.com"
    assert loaded.orders[ALEX.pending_order_id].status == "cancelled"
    assert len(loaded.orders) == len(world.orders)


async def _async_roundtrip(store: SQLiteWorldStore, world: RetailWorld) -> RetailWorld:
    await store.asave_changed(world, {"user": [ALEX.user_id], "order": [ALEX.pending_order_id]})
    return await store.aload(RetailWorld.from_entities)


def test_async_wrappers(store: SQLiteWorldStore) -> None:
    import asyncio

    world = generate_world(6)
    store.save(generate_world(6))
    world.users[ALEX.user_id].email = "async@example.com"
    assert asyncio.run(_async_roundtrip(store, world)).users[ALEX.user_id].email == "async@example.com"


def test_a_file_of_the_earlier_layout_is_read_into_entities_once(tmp_path) -> None:
    path = tmp_path / "old.db"
    world = generate_world(2)
    conn = sqlite3.connect(path)
    for table, items in (("users", world.users), ("orders", world.orders), ("products", world.products)):
        conn.execute(f"CREATE TABLE {table} (id TEXT PRIMARY KEY, body TEXT NOT NULL)")
        conn.executemany(f"INSERT INTO {table} VALUES (?, ?)",
                         [(k, v.model_dump_json(exclude_none=True)) for k, v in items.items()])
    conn.commit()
    conn.close()
    assert SQLiteWorldStore(path).load(RetailWorld.from_entities) == world
    assert SQLiteWorldStore(path).load(RetailWorld.from_entities) == world  # reopened: no second import


def test_only_id_body_tables_named_by_a_plural_are_read_as_earlier_kinds(tmp_path) -> None:
    path = tmp_path / "mixed.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)")
    conn.execute("INSERT INTO notes VALUES ('n1', '{\"text\": \"hi\"}')")
    conn.execute("CREATE TABLE audit (id TEXT PRIMARY KEY, body TEXT NOT NULL)")  # not a plural: kept
    conn.execute("CREATE TABLE tags (id TEXT PRIMARY KEY, body TEXT NOT NULL, extra TEXT)")  # other columns: kept
    conn.commit()
    conn.close()
    store = SQLiteWorldStore(path)
    assert store.rows() == [("note", "n1", '{"text": "hi"}')]
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"entities", "write_ledger", "ledger_fences", "audit", "tags"}
