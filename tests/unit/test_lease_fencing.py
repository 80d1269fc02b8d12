"""Fencing tokens on session leases, in both session stores and the write ledger.

Every lease grant carries a token that grows per session when the lease passes to another holder; a save, its
idempotency key and a write's ledger commit with a stale token store nothing (``LeaseLost``, 409 / ABORTED). The
case they exist for: a turn holder frozen past its lease's TTL while another turn takes the session — both would
save. Real stores only: SQLite files (two store objects on one file: two replicas) and a real ``redis-server``
started by the tests; a lapse is the store's clock moved past the TTL (SQLite) or the lease key gone, as its PX
removes it (Redis).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from pipelines import errors as E
from pipelines.core.ports import LedgerEntry, MemoryLedger, ToolCallResult, ToolSession, write_key
from pipelines.core.runner import LocalToolRunner
from pipelines.domains.support import FIXTURES, build_support_domain, generate_world
from pipelines.domains.support.world import RetailWorld
from pipelines.events import ReplyDelta, TurnRequest
from pipelines.protocols import TurnRecord
from pipelines.sessions import SessionLocks, fence_of
from pipelines.tools import ToolObservation
from pipelines.turn import TurnContext, TurnRunner
from serve.stores.redis import RedisSessionStore
from serve.stores.sqlite import SQLiteSessionStore
from serve.stores.world_sqlite import SQLiteWorldStore
from tests.fixtures.redis_server import RedisServer, redis_server  # noqa: F401 - pytest fixture

pytestmark = pytest.mark.timeout(60)


def _rec(turn_id: str, text: str = "q") -> TurnRecord:
    return TurnRecord(turn_id=turn_id, index=0, user_text=text)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Stores:
    """Two replicas' stores of one backend, and how a lease lapses on it."""

    def __init__(self, a: Any, b: Any, lapse: Callable[[str], None], close: Callable[[], Any]) -> None:
        self.a, self.b, self.lapse, self.close = a, b, lapse, close


@pytest.fixture(params=["sqlite", "redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Stores:
    if request.param == "sqlite":
        clock = Clock()
        a = SQLiteSessionStore(tmp_path / "s.db", clock=clock, ttl_s=3600)
        b = SQLiteSessionStore(tmp_path / "s.db", clock=clock, ttl_s=3600)

        def lapse(session_id: str) -> None:
            clock.now += 31.0  # past the 30 s lease

        return Stores(a, b, lapse, lambda: None)
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = f"f{uuid.uuid4().hex[:8]}"
    a, b = (RedisSessionStore(server.url, prefix=prefix, ttl_s=3600) for _ in range(2))
    import redis

    raw = redis.Redis.from_url(server.url, decode_responses=True)

    def lapse_redis(session_id: str) -> None:
        raw.delete(a.lease_key(session_id))  # what PX does when the TTL runs out

    async def close() -> None:
        await a.aclose()
        await b.aclose()

    return Stores(a, b, lapse_redis, close)


def run(stores: Stores, coro: Any) -> Any:
    async def main() -> Any:
        try:
            return await coro
        finally:
            done = stores.close()
            if done is not None:
                await done

    return asyncio.run(main())


# -- the tokens --------------------------------------------------------------------------------------------


def test_a_token_grows_when_the_lease_passes_to_another_holder_and_stays_for_its_holder(stores: Stores) -> None:
    async def go() -> list[int]:
        a, b = stores.a, stores.b
        out = [await a.acquire_lease("s", "ta", 30), await a.acquire_lease("s", "ta", 30)]  # taken, renewed
        out.append(await b.acquire_lease("s", "tb", 30))  # held by ta: refused
        stores.lapse("s")
        out.append(await b.acquire_lease("s", "tb", 30))  # ta froze past its TTL: tb takes it
        out.append(await a.acquire_lease("s", "ta", 30))  # ta wakes up and renews: refused, tb holds it
        await b.release_lease("s", "tb")
        out.append(await a.acquire_lease("s", "ta", 30))  # ta again, after tb: a new grant
        out.append(await b.acquire_lease("other", "tx", 30))  # another session counts for itself
        return out

    first, renewed, refused, taken, late, again, other = run(stores, go())
    assert first > 0 and renewed == first
    assert refused == 0 and late == 0
    assert taken == first + 1 and again == first + 2
    assert other > 0


def test_the_same_holder_keeps_its_token_when_nobody_took_the_lease_meanwhile(stores: Stores) -> None:
    async def go() -> tuple[int, int, str]:
        first = await stores.a.acquire_lease("s", "ta", 30)
        stores.lapse("s")
        again = await stores.a.acquire_lease("s", "ta", 30)  # lapsed, nobody else came: still ta's token
        saved = await stores.a.save_turn("s", _rec("t1"), principal="alice", fence=again)
        return first, again, saved.turn_id

    first, again, saved = run(stores, go())
    assert again == first and saved == "t1"


# -- a save with a stale token stores nothing -----------------------------------------------------------------


def test_a_save_with_a_stale_token_stores_nothing_and_the_current_holder_saves(stores: Stores) -> None:
    async def go() -> dict[str, Any]:
        a, b = stores.a, stores.b
        ta = await a.acquire_lease("s", "ta", 30)
        await a.save_turn("s", _rec("t1", "first"), principal="alice", idempotency_key="k1", fence=ta)
        await a.release_lease("s", "ta")
        ta2 = await a.acquire_lease("s", "ta2", 30)  # the turn that will freeze
        stores.lapse("s")
        tb = await b.acquire_lease("s", "tb", 30)  # took the session while ta2 was frozen
        out: dict[str, Any] = {"tokens": (ta, ta2, tb)}
        errors = []
        for fence in (ta2, ta, tb + 1):  # stale, older, never granted
            try:
                await a.save_turn("s", _rec("t2", "stale"), principal="alice", idempotency_key="k2", fence=fence)
            except E.LeaseLost as exc:
                errors.append(exc)
        out["errors"] = errors
        out["after_refusal"] = [(t.index, t.turn_id) for t in await b.get_history("s")]
        out["key_after_refusal"] = await b.find_turn("s", "k2")
        await b.save_turn("s", _rec("t3", "current"), principal="alice", idempotency_key="k3", fence=tb)
        out["history"] = [(t.index, t.turn_id) for t in await b.get_history("s")]
        out["k3"] = (await b.find_turn("s", "k3")).turn_id
        out["unfenced"] = (await b.save_turn("s", _rec("t4"), principal="alice")).index  # no token: not checked
        return out

    out = run(stores, go())
    ta, ta2, tb = out["tokens"]
    assert ta2 == ta + 1 and tb == ta2 + 1
    assert len(out["errors"]) == 3
    err = out["errors"][0]
    assert (err.code, err.http_status, err.grpc_status, err.retry_after_s) == ("lease_lost", 409, "ABORTED", 1.0)
    assert err.details["fence"] == ta2 and str(err.details["current"]) == str(tb)
    assert out["after_refusal"] == [(0, "t1")] and out["key_after_refusal"] is None
    assert out["history"] == [(0, "t1"), (1, "t3")] and out["k3"] == "t3"
    assert out["unfenced"] == 2


def test_a_stale_first_save_claims_no_session(stores: Stores) -> None:
    async def go() -> tuple[str | None, bool, list]:
        ta = await stores.a.acquire_lease("new", "ta", 30)
        stores.lapse("new")
        await stores.b.acquire_lease("new", "tb", 30)
        with pytest.raises(E.LeaseLost):
            await stores.a.save_turn("new", _rec("t1"), principal="mallory", fence=ta)
        return await stores.b.owner("new"), await stores.b.session_exists("new"), await stores.b.get_history("new")

    assert run(stores, go()) == (None, False, [])


def test_sqlite_tokens_keep_growing_after_an_idle_sessions_fence_is_purged(tmp_path: Path) -> None:
    clock = Clock()
    store = SQLiteSessionStore(tmp_path / "s.db", clock=clock, ttl_s=100)

    async def go() -> tuple[int, int, int]:
        first = await store.acquire_lease("s", "ta", 30)
        await store.save_turn("s", _rec("t1"), principal="alice", fence=first)
        await store.release_lease("s", "ta")
        clock.now += 200.0  # the session and its fence row lapse; the next write purges them
        await store.save_turn("other", _rec("t9"), principal="bob")
        rows = store._conn().execute("SELECT COUNT(*) FROM fences WHERE session_id='s'").fetchone()[0]
        later = await store.acquire_lease("s", "tb", 30)
        return first, rows, later

    first, rows, later = asyncio.run(go())
    assert rows == 0 and first == 1_000_000 and later == 1_200_000 > first  # from the clock: still growing


# -- the turn runner: a holder frozen past its TTL ------------------------------------------------------------


class Frozen:
    """A pipeline whose first turn streams, then freezes until ``thaw`` is set (a replica stopped mid-turn)."""

    name = "frozen"

    def __init__(self) -> None:
        self.thaw = asyncio.Event()
        self.streaming = asyncio.Event()

    async def run(self, ctx: TurnContext) -> AsyncIterator[Any]:
        yield ReplyDelta(text=f"reply to {ctx.request.text}")
        if ctx.request.text == "first":
            self.streaming.set()
            await self.thaw.wait()
        ctx.meta["fence"] = ctx.fence


def test_a_turn_frozen_past_its_lease_is_not_saved_over_the_turn_that_took_the_session(stores: Stores) -> None:
    async def go() -> dict[str, Any]:
        frozen = Frozen()
        one = TurnRunner(frozen, stores.a, deadline_s=30.0)  # replica one
        two = TurnRunner(frozen, stores.b, deadline_s=30.0)  # replica two

        async def turn(runner: TurnRunner, text: str, key: str) -> list[Any]:
            return [e async for e in runner.run("s", TurnRequest(text=text), trace_id="tr", idempotency_key=key)]

        first = asyncio.create_task(turn(one, "first", "k-first"))
        await frozen.streaming.wait()
        stores.lapse("s")  # its renewals stopped while frozen: the lease ran out
        second = await turn(two, "second", "k-second")  # another replica takes the session and saves
        frozen.thaw.set()
        late = await first  # the frozen turn wakes and tries to save
        retried = await turn(two, "first", "k-first")  # its client retries, same key
        again = await turn(one, "first", "k-first")  # and once more: the recorded answer, never a second turn
        history = await stores.b.get_history("s")
        return {"second": second, "late": late, "retried": retried, "again": again, "history": history}

    out = run(stores, go())
    assert out["second"][-1].status == "ok"
    late = out["late"]
    assert [e.code for e in late if e.type == "error"] == ["lease_lost"]
    assert late[-1].type == "done" and late[-1].status == "failed"
    assert out["retried"][-1].status == "ok" and not out["retried"][-1].replayed
    assert out["again"][-1].replayed
    history = out["history"]
    assert [(t.index, t.user_text) for t in history] == [(0, "second"), (1, "first")]  # none lost, none twice
    fences = [t.meta["fence"] for t in history]
    assert all(fences) and fences[1] > fences[0]


# -- the write ledger ---------------------------------------------------------------------------------------


ALEX = FIXTURES["alex"]
OID = ALEX.pending_order_id
CANCEL = {"order_id": OID, "reason": "no longer needed"}


def _outcome() -> ToolCallResult:
    return ToolCallResult(observation=ToolObservation(tool="t", args={}, ok=True))


@pytest.mark.parametrize("make", ["memory", "sqlite"])
def test_a_ledger_refuses_a_token_lower_than_one_it_accepted_for_the_session(make: str, tmp_path: Path) -> None:
    ledger: Any = MemoryLedger() if make == "memory" else SQLiteWorldStore(tmp_path / "w.db")

    def entry(key: str, session: str = "s") -> LedgerEntry:
        return LedgerEntry(key=key, session_id=session, tool="t", request="r", outcome=_outcome())

    assert ledger.commit_write(entry("k1"), None, {}, fence=5) is None
    with pytest.raises(E.LeaseLost) as exc:
        ledger.commit_write(entry("k2"), None, {}, fence=4)  # a holder the session has moved past
    assert exc.value.details == {"fence": 4, "current": 5, "session_id": "s"}
    assert ledger.recorded("k2") is None
    assert ledger.commit_write(entry("k3"), None, {}, fence=5) is None  # the same holder again
    assert ledger.commit_write(entry("k4"), None, {}, fence=6) is None  # the next one
    with pytest.raises(E.LeaseLost):
        ledger.commit_write(entry("k5"), None, {}, fence=5)
    assert ledger.commit_write(entry("k6", session="other"), None, {}, fence=1) is None  # per session
    assert ledger.commit_write(entry("k7"), None, {}, fence=None) is None  # unfenced: not checked
    assert [ledger.recorded(k) is not None for k in ("k1", "k3", "k4", "k5", "k6", "k7")] == [
        True, True, True, False, True, True]


def test_a_confirmed_write_with_a_stale_token_changes_nothing_and_runs_once_for_the_current_holder(
        tmp_path: Path) -> None:
    store = SQLiteWorldStore(tmp_path / "w.db")
    store.seed_if_empty(generate_world(7))
    runner = LocalToolRunner(build_support_domain(), store.load(RetailWorld.from_entities), ledger=store)
    other = write_key("s1", "card.cancel_order", "t0")
    yes = ToolSession(session_id="s1", authenticated_user_id=ALEX.user_id, observed_ids=[OID],
                      user_texts=["please cancel it, I no longer need it", "yes"])
    asyncio.run(runner.call("get_order_details", {"order_id": OID}, yes.model_copy(update={"fence": 8})))
    # the successor (token 8) recorded a write of its own; the frozen holder (token 7) wakes up with its yes
    store.commit_write(LedgerEntry(key=other, session_id="s1", tool="t", request="r", outcome=_outcome()),
                       runner.world, {}, fence=8)
    key = write_key("s1", "card.cancel_order", "t1")
    with pytest.raises(E.LeaseLost):
        asyncio.run(runner.call("cancel_pending_order", CANCEL, yes.confirm("cancel_pending_order", CANCEL, key)
                                .model_copy(update={"fence": 7})))
    assert runner.world.orders[OID].status == "pending" and store.recorded(key) is None
    assert store.load(RetailWorld.from_entities).orders[OID].status == "pending"
    current = yes.confirm("cancel_pending_order", CANCEL, key).model_copy(update={"fence": 8})
    first, again = (asyncio.run(runner.call("cancel_pending_order", CANCEL, current)) for _ in range(2))
    assert first.observation.ok and again.replayed
    assert store.load(RetailWorld.from_entities).orders[OID].status == "cancelled"


# -- the locks ----------------------------------------------------------------------------------------------


def test_the_lease_carries_its_grants_token_and_a_renewal_that_finds_another_grant_marks_it_lost() -> None:
    class Grants:
        def __init__(self) -> None:
            self.answers = [41, 42]

        async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> int:
            return self.answers.pop(0) if self.answers else 42

        async def release_lease(self, session_id: str, holder: str) -> None:
            return None

    async def go() -> tuple[int | None, bool]:
        locks = SessionLocks(Grants(), lease_ttl_s=10.0, renew_ttl_s=0.06)  # type: ignore[arg-type]
        lease = await locks.acquire("s", "t1", 1.0)
        fence = lease.fence
        assert lease.renewer is not None
        while not lease.lost and not lease.renewer.done():
            await asyncio.sleep(0.01)
        await locks.release(lease)
        return fence, lease.lost

    assert asyncio.run(go()) == (41, True)
    assert [fence_of(x) for x in (7, True, False, 0, None, -3)] == [7, None, None, None, None, None]
