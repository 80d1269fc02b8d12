"""serve.stores.sqlite as a TurnStore: owners, upserts, leases, idempotency keys, TTL, and faults
injected into the real SQLite file (nothing half-written)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from pipelines import errors as E
from pipelines.events import ReplyDelta, TurnRequest
from pipelines.protocols import TurnRecord
from pipelines.turn import TurnRunner
from serve.stores.sqlite import SQLiteSessionStore
from tests.doubles import ScriptedPipeline, collect

pytestmark = pytest.mark.timeout(20)


def _rec(turn_id: str, text: str = "q", **kw) -> TurnRecord:
    return TurnRecord(turn_id=turn_id, index=0, user_text=text, **kw)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _save(store, sid, rec, principal="alice", **kw):
    return asyncio.run(store.save_turn(sid, rec, principal=principal, **kw))


def test_first_save_claims_and_another_principal_is_refused(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    assert asyncio.run(store.owner("s")) is None
    _save(store, "s", _rec("t1"))
    assert asyncio.run(store.owner("s")) == "alice"
    with pytest.raises(E.NotFound):
        _save(store, "s", _rec("t2"), principal="mallory")
    assert [t.turn_id for t in asyncio.run(store.get_history("s"))] == ["t1"]


def test_saving_a_known_turn_id_overwrites_it_in_place(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    _save(store, "s", _rec("t1", "a", meta={"checkpoint": True}))
    _save(store, "s", _rec("t1", "a", reply_text="done", status="fallback"))
    _save(store, "s", _rec("t2", "b"))
    hist = asyncio.run(store.get_history("s"))
    assert [(t.index, t.turn_id, t.reply_text, t.status) for t in hist] == [
        (0, "t1", "done", "fallback"), (1, "t2", "", "ok")]
    row = sqlite3.connect(store.path).execute("SELECT turn_count FROM sessions").fetchone()
    assert row == (2,)


def test_idempotency_keys_find_their_turn_in_their_session_only(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    _save(store, "s", _rec("t1", "a"), idempotency_key="k")
    assert asyncio.run(store.find_turn("s", "k")).turn_id == "t1"
    assert asyncio.run(store.find_turn("s", "other")) is None
    assert asyncio.run(store.find_turn("s2", "k")) is None


def test_leases_one_holder_until_release_or_expiry(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteSessionStore(tmp_path / "s.db", clock=clock)
    other = SQLiteSessionStore(tmp_path / "s.db", clock=clock)  # another replica on the same file
    first = asyncio.run(store.acquire_lease("s", "a", 10))
    assert first == 1_000_000  # a session's first grant: its fencing token starts from the store clock in ms
    assert asyncio.run(store.acquire_lease("s", "a", 10)) == first  # re-entrant for its holder, same token
    assert asyncio.run(other.acquire_lease("s", "b", 10)) == 0
    clock.now += 10.0
    assert asyncio.run(other.acquire_lease("s", "b", 10)) == first + 1  # expired at exactly its ttl: next token
    asyncio.run(store.release_lease("s", "a"))  # not the holder any more: no effect
    assert asyncio.run(store.acquire_lease("s", "a", 10)) == 0
    asyncio.run(other.release_lease("s", "b"))
    assert asyncio.run(store.acquire_lease("s", "a", 10)) == first + 2


def test_a_leases_time_left_runs_down_with_the_clock_and_is_none_once_lapsed_or_released(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteSessionStore(tmp_path / "s.db", clock=clock)
    assert asyncio.run(store.lease_left_s("s")) is None  # nobody holds it
    asyncio.run(store.acquire_lease("s", "a", 10))
    assert asyncio.run(store.lease_left_s("s")) == 10.0
    clock.now += 9.5
    assert asyncio.run(store.lease_left_s("s")) == 0.5
    clock.now += 0.5
    assert asyncio.run(store.lease_left_s("s")) is None  # lapsed at exactly its ttl (as acquire sees it)
    clock.now -= 5.0
    asyncio.run(store.release_lease("s", "a"))
    assert asyncio.run(store.lease_left_s("s")) is None


def test_sessions_expire_after_their_ttl_and_are_purged_lazily(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteSessionStore(tmp_path / "s.db", ttl_s=100, clock=clock)
    _save(store, "old", _rec("t1"), idempotency_key="k", vault=b"sealed")
    clock.now += 99.0
    assert asyncio.run(store.session_exists("old")) is True
    clock.now += 1.0
    assert asyncio.run(store.session_exists("old")) is False
    assert asyncio.run(store.get_history("old")) == [] and asyncio.run(store.owner("old")) is None
    assert asyncio.run(store.find_turn("old", "k")) is None and asyncio.run(store.get_vault("old")) is None
    _save(store, "new", _rec("t2"))  # any write purges what expired
    conn = sqlite3.connect(store.path)
    for table in ("sessions", "turns", "idempotency", "vaults"):
        assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE session_id='old'").fetchone() == (0,), table


def test_an_expired_session_can_be_claimed_afresh(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteSessionStore(tmp_path / "s.db", ttl_s=10, clock=clock)
    _save(store, "s", _rec("t1"))
    clock.now += 11
    _save(store, "s", _rec("t2"), principal="bob")
    assert asyncio.run(store.owner("s")) == "bob"
    assert [t.turn_id for t in asyncio.run(store.get_history("s"))] == ["t2"]


def test_a_file_from_before_owners_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE sessions (session_id TEXT PRIMARY KEY, created_at REAL NOT NULL,"
                       " updated_at REAL NOT NULL, turn_count INTEGER NOT NULL DEFAULT 0);")
    conn.execute("INSERT INTO sessions VALUES ('legacy', 1, 1, 0)")
    conn.commit()
    store = SQLiteSessionStore(path)
    assert asyncio.run(store.session_exists("legacy")) is True and asyncio.run(store.owner("legacy")) is None
    _save(store, "legacy", _rec("t1"), principal="carol")  # an unowned session is claimed by its next turn
    assert asyncio.run(store.owner("legacy")) == "carol"


# -- faults injected into the real store -------------------------------------------------------


def _deny_session_writes(conn: sqlite3.Connection) -> None:
    def authorizer(action, table, *_):
        if table == "sessions" and action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK
    conn.set_authorizer(authorizer)


def test_a_failure_mid_transaction_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    healthy = SQLiteSessionStore(path)
    _save(healthy, "s", _rec("t1", "first"))
    broken = SQLiteSessionStore(path, on_connect=_deny_session_writes)
    with pytest.raises(E.StoreUnavailable):  # the turns row was inserted, then the sessions write failed
        _save(broken, "s", _rec("t2", "second"), idempotency_key="k", vault=b"v")
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT turn_id FROM turns").fetchall() == [("t1",)]
    assert conn.execute("SELECT COUNT(*) FROM idempotency").fetchone() == (0,)
    assert conn.execute("SELECT COUNT(*) FROM vaults").fetchone() == (0,)
    _save(healthy, "s", _rec("t2", "second"))  # the store keeps working
    assert [t.index for t in asyncio.run(healthy.get_history("s"))] == [0, 1]


def test_store_down_at_save_reaches_the_client_as_a_typed_error_then_done(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db", on_connect=_deny_session_writes)
    runner = TurnRunner(ScriptedPipeline([ReplyDelta(text="Your order is on its way.")]), store)
    events = asyncio.run(collect(runner.run("s", TurnRequest(text="where is it?"), trace_id="tr")))
    assert [e.type for e in events] == ["reply.delta", "error", "done"]
    assert events[1].code == "store_unavailable" and events[1].retry_after_s == 1.0
    assert events[-1].status == "failed"
    conn = sqlite3.connect(store.path)
    assert conn.execute("SELECT COUNT(*) FROM turns").fetchone() == (0,)
    assert conn.execute("SELECT COUNT(*) FROM leases").fetchone() == (0,)  # the session was released


def test_a_locked_database_is_store_unavailable_not_a_hang(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteSessionStore(path, busy_timeout_s=0.05)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(E.StoreUnavailable):
            _save(store, "s", _rec("t1"))
    finally:
        blocker.execute("ROLLBACK")
    _save(store, "s", _rec("t1"))
