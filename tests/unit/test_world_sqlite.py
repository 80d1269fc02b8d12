"""SQLiteWorldStore: roundtrip, partial upserts, atomicity, seeding."""

from __future__ import annotations

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
    assert store.load() == RetailWorld()


def test_roundtrip(store: SQLiteWorldStore) -> None:
    world = generate_world(2)
    store.save(world)
    assert store.load() == world
    assert store.load().to_json() == world.to_json()
    smaller = generate_world(3, n_users=2, n_orders=7, n_products=2)
    store.save(smaller)  # replaces, never merges
    assert store.load() == smaller


def test_seed_if_empty_only_once(store: SQLiteWorldStore) -> None:
    assert store.seed_if_empty(generate_world(1)) is True
    assert store.seed_if_empty(generate_world(9)) is False
    assert store.load() == generate_world(1)


def test_tool_changes_persist_through_save_changed(store: SQLiteWorldStore, tmp_path) -> None:
    world = generate_world(4)
    store.seed_if_empty(world)
    ctx = authenticate(ToolContext(confirmed=True), ALEX.user_id, world)
    out = invoke(build_registry(), "cancel_pending_order",
                 {"order_id": ALEX.pending_order_id, "reason": "ordered by mistake"}, ctx, world)
    assert out.observation.ok
    store.save_changed(world, out.changed_user_ids, out.changed_order_ids)
    reopened = SQLiteWorldStore(tmp_path / "state" / "world.db")
    assert reopened.load() == world
    assert reopened.load().orders[ALEX.pending_order_id].status == "cancelled"


def test_save_entities_is_atomic(store: SQLiteWorldStore) -> None:
    world = generate_world(5)
    store.save(world)
    user = world.users[ALEX.user_id].model_copy(deep=True)
    user.email = "changed@example.com"
    order = world.orders[ALEX.pending_order_id].model_copy(deep=True)
    order.status = "cancelled"
    with pytest.raises(AttributeError):
        store.save_entities(users=[user], orders=[order, object()])  # the second order is not an Order
    assert store.load() == world  # neither the user nor the first order landed
    store.save_entities(users=[user], orders=[order])
    loaded = store.load()
    assert loaded.users[ALEX.user_id].email == "changed@example.com"
    assert loaded.orders[ALEX.pending_order_id].status == "cancelled"
    assert len(loaded.orders) == len(world.orders)


async def _async_roundtrip(store: SQLiteWorldStore, world: RetailWorld) -> RetailWorld:
    await store.asave_changed(world, [ALEX.user_id], [ALEX.pending_order_id])
    return await store.aload()


def test_async_wrappers(store: SQLiteWorldStore) -> None:
    import asyncio

    world = generate_world(6)
    store.save(generate_world(6))
    world.users[ALEX.user_id].email = "async@example.com"
    assert asyncio.run(_async_roundtrip(store, world)).users[ALEX.user_id].email == "async@example.com"
