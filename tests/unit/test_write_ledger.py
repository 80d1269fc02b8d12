"""Exactly-once writes at the tool port: the SQLite write ledger and the local tool runner over it.

Real parts only: the SQLite world store, the retail tools, the seeded world. Faults are injected
into the real store with a SQLite trigger (the commit fails inside its transaction).
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from pipelines.core.ports import UNGROUNDED, ConfirmedCard, LedgerEntry, ToolSession, write_key
from pipelines.core.runner import LocalToolRunner
from pipelines.domains.support import build_support_domain
from pipelines.domains.support.generator import FIXTURES, generate_world
from pipelines.domains.support.world import RetailWorld
from pipelines.errors import ToolError, UnconfirmedWrite
from serve.stores.world_sqlite import SQLiteWorldStore

ALEX = FIXTURES["alex"]
OID = ALEX.pending_order_id
CANCEL = {"order_id": OID, "reason": "no longer needed"}
KEY = write_key("s1", "card.cancel_order", "t3")


@pytest.fixture
def store(tmp_path) -> SQLiteWorldStore:
    s = SQLiteWorldStore(tmp_path / "world.db")
    s.seed_if_empty(generate_world(7))
    yield s
    s.close()


def runner_over(store: SQLiteWorldStore) -> LocalToolRunner:
    return LocalToolRunner(build_support_domain(), store.load(RetailWorld.from_entities), ledger=store)


def session(key: str | None = KEY, texts: tuple[str, ...] = ("please cancel it, I no longer need it", "yes"),
            card: tuple[str, dict] | None = ("cancel_pending_order", CANCEL), **kw) -> ToolSession:
    """The session of the user's yes to ``card`` (tool, arguments): the call the port will run."""
    fields = {"confirmed": True, "card": ConfirmedCard.of(*card) if card else None, **kw}
    return ToolSession(session_id="s1", authenticated_user_id=ALEX.user_id, observed_ids=[OID],
                       idempotency_key=key, user_texts=list(texts), **fields)


def fail_commits(store: SQLiteWorldStore) -> None:
    store._conn().execute(
        "CREATE TRIGGER fail_ledger BEFORE INSERT ON write_ledger BEGIN SELECT RAISE(ABORT, 'disk full'); END"
    )


def heal(store: SQLiteWorldStore) -> None:
    store._conn().execute("DROP TRIGGER fail_ledger")


def cancels(r: LocalToolRunner) -> int:
    return [n for n, _ in r.calls].count("cancel_pending_order")


def agree(store: SQLiteWorldStore, r: LocalToolRunner) -> None:
    """Memory and disk hold the same order, and a recorded write is on disk."""
    disk = store.load(RetailWorld.from_entities).orders[OID]
    assert disk == r.world.orders[OID]
    rows = store.ledger("s1")
    assert (disk.status == "cancelled") == any(e.outcome.observation.ok for e in rows)


# ---- the store ------------------------------------------------------------------------


def test_commit_write_records_entities_and_outcome_in_one_transaction(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    res = asyncio.run(r.call("cancel_pending_order", CANCEL, session()))
    assert res.observation.ok and not res.replayed and res.changed["order"] == [OID]
    [entry] = store.ledger("s1")
    assert entry.key == KEY and entry.tool == "cancel_pending_order" and entry.outcome == res
    assert store.recorded(KEY) == entry and store.recorded("other") is None
    assert store.load(RetailWorld.from_entities).orders[OID].status == "cancelled"
    agree(store, r)


def test_a_recorded_key_is_never_written_twice(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    asyncio.run(r.call("cancel_pending_order", CANCEL, session()))
    entry = store.recorded(KEY)
    world = store.load(RetailWorld.from_entities)
    world.orders[OID].status = "pending"  # a second writer with a stale view
    prior = store.commit_write(entry, world, {"order": [OID]})
    assert prior == entry
    assert store.load(RetailWorld.from_entities).orders[OID].status == "cancelled" and len(store.ledger()) == 1


def test_a_failed_commit_leaves_the_store_unchanged(store: SQLiteWorldStore) -> None:
    fail_commits(store)
    world = store.load(RetailWorld.from_entities)
    world.orders[OID].status = "cancelled"
    entry = LedgerEntry(key=KEY, session_id="s1", tool="cancel_pending_order", request="x",
                        outcome=asyncio.run(runner_over(store).call("get_order_details", {"order_id": OID},
                                                                     session(key=None))))
    with pytest.raises(sqlite3.IntegrityError):
        store.commit_write(entry, world, {"user": [ALEX.user_id], "order": [OID]})
    assert store.load(RetailWorld.from_entities).orders[OID].status == "pending" and store.ledger() == []
    assert not store._conn().in_transaction


# ---- the runner: at most once, recorded, persisted before memory ---------------------------


def test_the_same_key_returns_the_recorded_outcome_without_running(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    first = asyncio.run(r.call("cancel_pending_order", CANCEL, session()))
    refunds = len(r.world.orders[OID].payment_history)
    again = asyncio.run(r.call("cancel_pending_order", CANCEL, session()))
    assert again.replayed and again.model_copy(update={"replayed": False}) == first
    assert cancels(r) == 1 and len(r.world.orders[OID].payment_history) == refunds
    assert len(store.ledger()) == 1
    agree(store, r)


def test_a_new_runner_over_the_same_store_also_replays(store: SQLiteWorldStore) -> None:
    asyncio.run(runner_over(store).call("cancel_pending_order", CANCEL, session()))
    fresh = runner_over(store)  # a restarted replica
    res = asyncio.run(fresh.call("cancel_pending_order", CANCEL, session()))
    assert res.replayed and res.observation.ok and cancels(fresh) == 0


def test_a_key_reused_for_other_arguments_is_refused(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    asyncio.run(r.call("cancel_pending_order", CANCEL, session()))
    other = {"order_id": OID, "reason": "ordered by mistake"}
    with pytest.raises(ToolError) as exc:
        asyncio.run(r.call("cancel_pending_order", other, session(texts=("I ordered it by mistake",),
                                                                  card=("cancel_pending_order", other))))
    assert exc.value.details["reason"] == "idempotency_key_reused"
    assert store.load(RetailWorld.from_entities).orders[OID].cancel_reason == "no longer needed"


def test_different_keys_are_different_writes(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    asyncio.run(r.call("cancel_pending_order", CANCEL, session()))
    res = asyncio.run(r.call("cancel_pending_order", CANCEL, session(key=write_key("s1", "card.cancel_order", "t9"))))
    assert not res.replayed and not res.observation.ok and res.reason == "order_not_pending"
    assert cancels(r) == 2 and len(store.ledger()) == 2  # the refusal is recorded too


def test_a_failed_commit_raises_a_tool_error_and_changes_nothing(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    before = r.world.orders[OID]
    fail_commits(store)
    with pytest.raises(ToolError) as exc:
        asyncio.run(r.call("cancel_pending_order", CANCEL, session()))
    assert exc.value.details["reason"] == "commit_failed"
    assert r.world.orders[OID] is before and before.status == "pending" and before.payment_history[-1].transaction_type == "payment"
    assert store.load(RetailWorld.from_entities).orders[OID].status == "pending" and store.ledger() == []
    heal(store)
    res = asyncio.run(r.call("cancel_pending_order", CANCEL, session()))  # the same key, once the store is back
    assert res.observation.ok and not res.replayed
    agree(store, r)


def test_two_concurrent_calls_with_one_key_execute_once(store: SQLiteWorldStore) -> None:
    r = runner_over(store)

    async def both():
        return await asyncio.gather(*(r.call("cancel_pending_order", CANCEL, session()) for _ in range(2)))

    a, b = asyncio.run(both())
    assert sorted([a.replayed, b.replayed]) == [False, True]
    assert a.observation.ok and b.observation.ok and cancels(r) == 1
    refunds = [p for p in r.world.orders[OID].payment_history if p.transaction_type == "refund"]
    assert len(refunds) == 1 and len(store.ledger()) == 1
    agree(store, r)


def test_an_unkeyed_write_is_refused_before_it_runs(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    with pytest.raises(UnconfirmedWrite) as exc:
        asyncio.run(r.call("cancel_pending_order", CANCEL, session(key=None)))
    assert exc.value.details == {"reason": "no_idempotency_key", "tool": "cancel_pending_order"}
    assert cancels(r) == 0 and store.ledger() == []
    assert r.world.orders[OID].status == "pending" and store.load(RetailWorld.from_entities).orders[OID].status == "pending"


# ---- grounding at the backend ---------------------------------------------------------------


ADDRESS = {"order_id": OID, "address1": "PO Box 666", "address2": "", "city": "Evil Manor", "state": "CA",
           "country": "USA", "zip": "94107"}


def test_precheck_and_execution_refuse_ungrounded_arguments(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    texts = ("change the address of my order", "yes")
    s = session(texts=texts, confirmed=False)
    assert asyncio.run(r.precheck("modify_pending_order_address", ADDRESS, s)) == f"{UNGROUNDED}:address1,city"
    res = asyncio.run(r.call("modify_pending_order_address", ADDRESS,
                             session(texts=texts, card=("modify_pending_order_address", ADDRESS))))
    assert not res.observation.ok and res.reason == UNGROUNDED
    assert r.world.orders[OID].address.address1 == "1 Market Street"
    assert store.load(RetailWorld.from_entities).orders[OID].address.address1 == "1 Market Street"
    [entry] = store.ledger()
    assert entry.outcome.reason == UNGROUNDED  # the refusal is the card's recorded outcome


def test_the_users_own_words_ground_a_new_address(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    texts = ("Please ship it to PO Box 666 in Evil Manor instead", "yes")
    assert asyncio.run(r.precheck("modify_pending_order_address", ADDRESS, session(texts=texts))) is None
    res = asyncio.run(r.call("modify_pending_order_address", ADDRESS,
                             session(texts=texts, card=("modify_pending_order_address", ADDRESS))))
    assert res.observation.ok
    assert store.load(RetailWorld.from_entities).orders[OID].address.city == "Evil Manor" == r.world.orders[OID].address.city


def test_an_ineligible_write_is_refused_before_its_grounding(store: SQLiteWorldStore) -> None:
    r = runner_over(store)
    delivered = {**ADDRESS, "order_id": ALEX.delivered_order_id}
    reason = asyncio.run(r.precheck("modify_pending_order_address", delivered, session(texts=("hi",))))
    assert reason == "order_not_pending"


def test_the_tools_server_uses_the_store_as_its_ledger(tmp_path) -> None:
    from serve.deployments.tools import ToolsServer

    server = ToolsServer({"name": "support", "seed": 7, "world_path": str(tmp_path / "w.db")})
    first = asyncio.run(server.call("cancel_pending_order", CANCEL, session()))
    again = asyncio.run(server.call("cancel_pending_order", CANCEL, session()))
    assert first.observation.ok and again.replayed
    rows = asyncio.run(server.ledger("s1"))
    assert [r["key"] for r in rows] == [KEY]
    assert asyncio.run(server.entity("order", OID))["status"] == "cancelled"
    restarted = ToolsServer({"name": "support", "seed": 7, "world_path": str(tmp_path / "w.db")})
    assert asyncio.run(restarted.entity("order", OID))["status"] == "cancelled"
    assert asyncio.run(restarted.call("cancel_pending_order", CANCEL, session())).replayed
