"""``SessionLocks`` (one holder per session: an in-process lock, then the store's lease) and the append-only
adapter that lets a plain session store serve the turn runner."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pipelines.errors import SessionBusy
from pipelines.protocols import TurnRecord
from pipelines.sessions import SessionLocks, as_turn_store, lapsing_lease_s


class Leases:
    """A store's lease table: who holds each session; counts the calls."""

    def __init__(self, held: dict[str, str] | None = None) -> None:
        self.held = dict(held or {})
        self.acquires: list[tuple[str, str, float]] = []
        self.releases: list[tuple[str, str]] = []
        self.fail_release = False

    async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> bool:
        self.acquires.append((session_id, holder, ttl_s))
        if self.held.get(session_id, holder) != holder:
            return False
        self.held[session_id] = holder
        return True

    async def release_lease(self, session_id: str, holder: str) -> None:
        self.releases.append((session_id, holder))
        if self.fail_release:
            raise RuntimeError("store down")
        if self.held.get(session_id) == holder:
            del self.held[session_id]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_held_session_is_counted_until_released_and_its_lease_is_given_back():
    store = Leases()
    locks = SessionLocks(store, lease_ttl_s=30)

    async def go():
        lease = await locks.acquire("s", "t1", 1.0)
        assert locks.busy() == 1 and store.held == {"s": "t1"} and store.acquires == [("s", "t1", 30)]
        assert lease.session_id == "s" and lease.holder == "t1" and not lease.released
        await locks.release(lease)
        assert lease.released and locks.busy() == 0 and store.held == {} and store.releases == [("s", "t1")]
        await locks.release(lease)  # idempotent: nothing released twice
        assert store.releases == [("s", "t1")] and locks.busy() == 0
        again = await locks.acquire("s", "t2", 1.0)  # the lock was given back
        await locks.release(again)
        assert locks.busy() == 0 and locks._locks == {} and locks._users == {}
    run(go())


def test_a_second_turn_waits_for_the_first_then_runs_and_both_are_counted_as_one_session():
    store = Leases()
    locks = SessionLocks(store, lease_ttl_s=30)

    async def go():
        first = await locks.acquire("s", "t1", 1.0)
        second = asyncio.create_task(locks.acquire("s", "t2", 1.0))
        await asyncio.sleep(0.01)
        assert not second.done() and locks.busy() == 1 and locks._users == {"s": 2}
        assert [h for _, h, _ in store.acquires] == ["t1"]  # it waits on the process's lock, not the store
        other = await locks.acquire("x", "t3", 1.0)  # another session does not wait
        assert locks.busy() == 2
        await locks.release(first)
        lease = await asyncio.wait_for(second, 1)
        assert lease.holder == "t2" and store.held["s"] == "t2" and locks._users == {"s": 1, "x": 1}
        await locks.release(lease)
        await locks.release(other)
        assert locks.busy() == 0
    run(go())


@pytest.mark.parametrize(("wait_s", "waited"), [(0.05, 0.05), (0.012345, 0.012), (0.0, 0.0), (-1.0, 0.0)])
def test_a_turn_that_waits_past_wait_s_on_the_lock_is_busy_and_leaves_nothing_behind(wait_s, waited):
    locks = SessionLocks(Leases(), lease_ttl_s=30)

    async def go():
        held = await locks.acquire("s", "t1", 1.0)
        released = asyncio.Event()

        async def let_go() -> None:
            await locks.release(held)
            released.set()

        # the holder lets go after 0.3 s: a waiter with a shorter wait_s has given up by then
        asyncio.get_running_loop().call_later(0.3, lambda: asyncio.ensure_future(let_go()))
        with pytest.raises(SessionBusy) as err:
            await locks.acquire("s", "t2", wait_s)
        assert err.value.details == {"waited_s": waited}
        assert err.value.message == "another turn of this session is running; retry when it has finished"
        assert locks._users == {"s": 1}  # only the holder
        await asyncio.wait_for(released.wait(), 60)  # however loaded the box, the release has run
        assert locks.busy() == 0
    run(go())


def test_the_lease_is_polled_every_50_ms_by_default():
    assert SessionLocks(Leases(), lease_ttl_s=30).poll_s == 0.05


def test_a_lease_held_elsewhere_is_polled_until_wait_s_then_busy_and_the_lock_is_free_again():
    now = [0.0]

    class Slow(Leases):
        async def acquire_lease(self, session_id, holder, ttl_s):  # each try takes a quarter second
            now[0] += 0.25
            return await super().acquire_lease(session_id, holder, ttl_s)

    store = Slow({"s": "another-replica"})
    locks = SessionLocks(store, lease_ttl_s=30, poll_s=0.001, clock=lambda: now[0])

    async def go():
        with pytest.raises(SessionBusy):
            await locks.acquire("s", "t1", 0.5)
        assert len(store.acquires) == 2  # tried at 0 and 0.25 s; at 0.5 s the wait is over
        assert locks.busy() == 0 and locks._locks == {}
        store.held.clear()  # the other replica let go: the next turn gets it at once
        lease = await locks.acquire("s", "t2", 0.0)
        assert store.held == {"s": "t2"}
        await locks.release(lease)
    run(go())


def test_a_lease_freed_elsewhere_while_polling_is_taken():
    store = Leases({"s": "another-replica"})
    locks = SessionLocks(store, lease_ttl_s=30, poll_s=0.001)

    async def go():
        async def free_later():
            await asyncio.sleep(0.02)
            store.held.clear()
        asyncio.create_task(free_later())
        lease = await locks.acquire("s", "t1", 2.0)
        assert store.held == {"s": "t1"} and len(store.acquires) > 1
        await locks.release(lease)
    run(go())


def test_release_never_raises_and_frees_the_lock_when_the_store_fails():
    store = Leases()
    locks = SessionLocks(store, lease_ttl_s=30)

    async def go():
        lease = await locks.acquire("s", "t1", 1.0)
        store.fail_release = True
        await locks.release(lease)
        assert lease.released and locks.busy() == 0 and not lease.lock.locked()
    run(go())


def test_a_release_the_store_could_not_take_is_retried_until_it_is_taken():
    store = Leases()
    locks = SessionLocks(store, lease_ttl_s=30, poll_s=0.001)

    async def go():
        lease = await locks.acquire("s", "t1", 1.0)
        store.fail_release = True  # Redis down: the lease stays in the store
        await locks.release(lease)
        assert store.held == {"s": "t1"} and locks.owed() == 1
        for _ in range(500):
            if len(store.releases) >= 3:
                break
            await asyncio.sleep(0.01)
        assert locks.owed() == 1 and len(store.releases) >= 3  # still down: retried, still owed
        store.fail_release = False  # Redis back
        for _ in range(200):
            if not locks.owed():
                break
            await asyncio.sleep(0.01)
        assert store.held == {} and locks.owed() == 0
        # the session is free again: another holder takes it at once
        other = await locks.acquire("s", "t2", 0.0)
        assert store.held == {"s": "t2"}
        await locks.release(other)
    run(go())


def test_an_owed_release_stops_when_the_lease_would_have_expired_and_never_frees_another_holder():
    store = Leases()
    now = [0.0]
    locks = SessionLocks(store, lease_ttl_s=30, poll_s=0.001, clock=lambda: now[0])

    async def go():
        lease = await locks.acquire("s", "t1", 1.0)
        store.fail_release = True
        await locks.release(lease)
        now[0] = 30.0  # the lease's own TTL is over: nothing more is owed
        for _ in range(200):
            if not locks.owed():
                break
            await asyncio.sleep(0.01)
        assert locks.owed() == 0
        # a late release is compare-and-delete: a new holder's lease is never freed by the old one
        store.fail_release, store.held = False, {"s": "t2"}
        await store.release_lease("s", "t1")
        assert store.held == {"s": "t2"}
    run(go())


def test_owed_releases_are_bounded():
    store = Leases()
    locks = SessionLocks(store, lease_ttl_s=30, poll_s=0.001)
    locks.MAX_OWED_RELEASES = 2

    async def go():
        store.fail_release = True
        for i in range(4):
            lease = await locks.acquire(f"s{i}", "t", 1.0)
            await locks.release(lease)
        assert locks.owed() == 2
        store.fail_release = False
        for _ in range(200):
            if not locks.owed():
                break
            await asyncio.sleep(0.01)
        assert locks.owed() == 0 and set(store.held) == {"s2", "s3"}  # beyond the bound: left to their TTL
    run(go())


# -- the append-only adapter ---------------------------------------------------------------------


class Plain:
    def __init__(self) -> None:
        self.turns: dict[str, list[TurnRecord]] = {}
        self.asked: list[tuple[str, Any]] = []

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        self.asked.append((session_id, limit))
        turns = self.turns.get(session_id, [])
        return list(turns[-limit:] if limit else turns)

    async def session_exists(self, session_id: str) -> bool:
        return session_id in self.turns

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        self.turns.setdefault(session_id, []).append(record)


def _rec(turn_id: str, **meta: Any) -> TurnRecord:
    return TurnRecord(turn_id=turn_id, index=0, user_text=turn_id, meta=meta)


def test_a_plain_store_is_served_append_only_with_keys_in_memory():
    inner = Plain()
    store = as_turn_store(inner)
    assert store is not inner

    async def go():
        assert await store.owner("s") is None and await store.acquire_lease("s", "h", 1) == 1
        assert await store.acquire_lease("s", "h", 1) == 1  # the same holder keeps its token
        assert await store.release_lease("s", "h") is None
        assert await store.acquire_lease("s", "h2", 1) == 2  # the next holder gets the next one
        assert not await store.session_exists("s")
        cp = await store.save_turn("s", _rec("t1", checkpoint=True), principal="p", idempotency_key="k")
        assert cp.turn_id == "t1" and inner.turns == {}  # a checkpoint is not appended
        assert await store.find_turn("s", "k") is None
        saved = await store.save_turn("s", _rec("t1"), principal="p", idempotency_key="k")
        assert [r.turn_id for r in inner.turns["s"]] == ["t1"] and saved.turn_id == "t1"
        assert (await store.find_turn("s", "k")).turn_id == "t1"
        assert await store.find_turn("s", "other") is None and await store.find_turn("x", "k") is None
        await store.save_turn("s", _rec("t2"), principal="p")
        await store.append_turn("s", _rec("t3"))
        assert await store.session_exists("s") and not await store.session_exists("x")
        assert [r.turn_id for r in await store.get_history("s", 2)] == ["t2", "t3"]
        assert inner.asked[-1] == ("s", 2)
        assert [r.turn_id for r in await store.get_history("s")] == ["t1", "t2", "t3"]
    run(go())


def test_a_turn_store_is_used_as_it_is():
    class Full(Plain):
        async def owner(self, s): ...
        async def save_turn(self, *a, **k): ...
        async def find_turn(self, *a): ...
        async def acquire_lease(self, *a): ...
        async def release_lease(self, *a): ...

    full = Full()
    assert as_turn_store(full) is full

    class Partial(Plain):
        async def owner(self, s): ...

    assert as_turn_store(Partial()) is not None and not isinstance(as_turn_store(Partial()), Partial)


class RenewedLeases(Leases):
    """Counts renewals; sets ``renewed`` once ``n`` acquire calls have been made."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.renewed = asyncio.Event()

    async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> bool:
        ok = await super().acquire_lease(session_id, holder, ttl_s)
        if len(self.acquires) >= self.n:
            self.renewed.set()
        return ok


def test_a_renewed_lease_is_taken_short_and_renewed_while_held_then_stops():
    async def go() -> tuple[list, list, int]:
        store = RenewedLeases(3)
        locks = SessionLocks(store, lease_ttl_s=100.0, renew_ttl_s=0.06)
        lease = await locks.acquire("s1", "turn-1", wait_s=1.0)
        await asyncio.wait_for(store.renewed.wait(), timeout=30)  # two renewals after the first take
        await locks.release(lease)
        after_release = len(store.acquires)
        await asyncio.sleep(0.05)
        return store.acquires, store.releases, after_release

    acquires, releases, after_release = run(go())
    # every take and renewal is for the short TTL (a dead holder frees the session after it), same holder
    assert all(a == ("s1", "turn-1", 0.06) for a in acquires) and len(acquires) >= 3
    assert releases == [("s1", "turn-1")]
    assert len(acquires) == after_release  # no renewal after the release


def test_without_renewal_the_lease_is_taken_for_its_whole_ttl():
    async def go() -> list:
        store = Leases()
        locks = SessionLocks(store, lease_ttl_s=100.0)
        lease = await locks.acquire("s1", "turn-1", wait_s=1.0)
        await locks.release(lease)
        return store.acquires

    assert run(go()) == [("s1", "turn-1", 100.0)]


def test_a_renewal_ttl_not_shorter_than_the_lease_is_no_renewal():
    assert SessionLocks(Leases(), lease_ttl_s=20.0, renew_ttl_s=30.0).renew_ttl_s is None
    assert SessionLocks(Leases(), lease_ttl_s=100.0, renew_ttl_s=30.0).renew_ttl_s == 30.0


# -- a refusal tells when a stopped holder's lease lapses --------------------------------------------------

@pytest.mark.parametrize(
    ("before", "after", "waited", "expected"),
    [
        (20.0, 14.0, 6.0, 14.0),      # ran down by exactly the wait: the holder stopped
        (20.0, 14.25, 6.0, 14.25),    # within the slack: still stopped
        (20.0, 14.26, 6.0, None),     # just past the slack: renewed, the holder is alive
        (20.0, 29.0, 6.0, None),      # renewed to a fresh TTL
        (20.0, 14.0, 5.25, 14.0),     # the shortest wait that can tell (one renewal interval + slack)
        (20.0, 14.0, 5.24, None),     # one step shorter: a live holder may not have renewed yet
        (None, 14.0, 6.0, None),      # a reading missing: no hint
        (20.0, None, 6.0, None),
        (5.0, -1.0, 6.0, 0.0),        # lapsed while reading: free now
    ],
)
def test_a_lease_that_only_ran_down_over_a_renewal_interval_has_a_stopped_holder(before, after, waited, expected):
    assert lapsing_lease_s(before, after, waited, renew_every_s=5.0, slack_s=0.25) == expected


class TimedLeases(Leases):
    """Leases that lapse on the monotonic clock, with ``lease_left_s`` as Redis's PTTL gives it."""

    def __init__(self) -> None:
        super().__init__()
        self.until: dict[str, float] = {}

    async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> bool:
        import time

        if self.until.get(session_id, 0.0) <= time.monotonic():
            self.held.pop(session_id, None)
        ok = await super().acquire_lease(session_id, holder, ttl_s)
        if ok:
            self.until[session_id] = time.monotonic() + ttl_s
        return ok

    async def lease_left_s(self, session_id: str) -> float | None:
        import time

        left = self.until.get(session_id, 0.0) - time.monotonic()
        return left if session_id in self.held and left > 0 else None


def test_a_turn_refused_by_a_stopped_holders_lease_is_told_when_it_lapses():
    async def go() -> SessionBusy:
        store = TimedLeases()
        await store.acquire_lease("s", "dead", 3.0)  # taken by a holder that never renews (its node is gone)
        locks = SessionLocks(store, lease_ttl_s=10.0, renew_ttl_s=0.6, poll_s=0.02)  # renewals every 0.1 s
        with pytest.raises(SessionBusy) as caught:
            await locks.acquire("s", "t2", wait_s=0.6)
        return caught.value

    busy = run(go())
    # 3 s lease, 0.6 s waited: about 2.4 s left, told in the header and the details
    assert 1.5 < busy.retry_after_s < 2.5 and busy.details["lease_left_s"] == pytest.approx(busy.retry_after_s, abs=1e-3)
    assert "stopped" in busy.message


def test_a_turn_refused_by_a_live_holder_keeps_the_default_hint():
    async def go() -> SessionBusy:
        store = TimedLeases()
        live = SessionLocks(store, lease_ttl_s=10.0, renew_ttl_s=0.6, poll_s=0.02)
        lease = await live.acquire("s", "t1", wait_s=1.0)  # renewed every 0.1 s while held
        waiter = SessionLocks(store, lease_ttl_s=10.0, renew_ttl_s=0.6, poll_s=0.02)
        try:
            with pytest.raises(SessionBusy) as caught:
                await waiter.acquire("s", "t2", wait_s=0.6)
        finally:
            await live.release(lease)
        return caught.value

    busy = run(go())
    assert busy.retry_after_s == SessionBusy.retry_after_s == 1.0 and "lease_left_s" not in busy.details


@pytest.mark.parametrize("reading", ["absent", "raises", "too_short"])
def test_without_a_reading_the_refusal_keeps_the_default_hint(reading):
    class Store(TimedLeases):
        async def lease_left_s(self, session_id: str) -> float | None:
            if reading == "raises":
                raise RuntimeError("store down")
            return await super().lease_left_s(session_id)

    async def go() -> SessionBusy:
        store = Store()
        if reading == "absent":
            store.lease_left_s = None  # a store without the method: getattr finds nothing callable
        await store.acquire_lease("s", "dead", 3.0)
        locks = SessionLocks(store, lease_ttl_s=10.0, renew_ttl_s=0.6, poll_s=0.02)
        wait = 0.05 if reading == "too_short" else 0.6  # shorter than a renewal interval: cannot tell
        with pytest.raises(SessionBusy) as caught:
            await locks.acquire("s", "t2", wait_s=wait)
        return caught.value

    busy = run(go())
    assert busy.retry_after_s == 1.0 and "lease_left_s" not in busy.details


def test_a_stopped_holders_lease_that_lapses_within_the_bound_is_waited_out_and_taken():
    async def go() -> tuple[str, float]:
        import time

        store = TimedLeases()
        await store.acquire_lease("s", "dead", 1.5)  # a holder that never renews
        locks = SessionLocks(store, lease_ttl_s=10.0, renew_ttl_s=0.6, poll_s=0.02)
        t0 = time.monotonic()
        lease = await locks.acquire("s", "t2", wait_s=0.6, lapse_within_s=5.0)
        took = time.monotonic() - t0
        held = store.held["s"]
        await locks.release(lease)
        return held, took

    held, took = run(go())
    assert held == "t2" and took >= 1.4  # taken once the dead holder's lease lapsed, not before


@pytest.mark.parametrize("lapse_within_s", [0.0, 1.0])
def test_a_stopped_holders_lease_that_lapses_past_the_bound_is_refused_with_its_hint(lapse_within_s):
    async def go() -> SessionBusy:
        store = TimedLeases()
        await store.acquire_lease("s", "dead", 3.0)  # lapses about 3 s after the start: past either bound
        locks = SessionLocks(store, lease_ttl_s=10.0, renew_ttl_s=0.6, poll_s=0.02)
        with pytest.raises(SessionBusy) as caught:
            await locks.acquire("s", "t2", wait_s=0.6, lapse_within_s=lapse_within_s)
        return caught.value

    busy = run(go())
    assert 1.5 < busy.retry_after_s < 2.5 and "lease_left_s" in busy.details


def test_a_live_holder_is_never_waited_out_past_wait_s():
    async def go() -> tuple[SessionBusy, float]:
        import time

        store = TimedLeases()
        live = SessionLocks(store, lease_ttl_s=10.0, renew_ttl_s=0.6, poll_s=0.02)
        lease = await live.acquire("s", "t1", wait_s=1.0)
        waiter = SessionLocks(store, lease_ttl_s=10.0, renew_ttl_s=0.6, poll_s=0.02)
        t0 = time.monotonic()
        try:
            with pytest.raises(SessionBusy) as caught:
                await waiter.acquire("s", "t2", wait_s=0.6, lapse_within_s=30.0)
        finally:
            waited = time.monotonic() - t0
            await live.release(lease)
        return caught.value, waited

    busy, waited = run(go())
    assert busy.retry_after_s == 1.0 and waited < 2.0  # refused at wait_s: a live turn may run for long


def test_the_turn_runner_waits_out_a_stopped_holder_within_half_its_deadline():
    from pipelines.events import ReplyDelta, TurnRequest
    from pipelines.turn import TurnRunner
    from tests.doubles import InMemorySessionStore, ScriptedPipeline

    seen: list[dict] = []
    runner = TurnRunner(ScriptedPipeline([ReplyDelta(text="x")]), InMemorySessionStore(), deadline_s=40,
                        lock_wait_s=10)
    real = runner.locks.acquire

    async def spy(session_id, holder, wait_s, **kw):
        seen.append({"wait_s": wait_s, **kw})
        return await real(session_id, holder, wait_s, **kw)

    runner.locks.acquire = spy

    async def go() -> list:
        return [ev async for ev in runner.run("s", TurnRequest(text="hi"), trace_id="t")]

    assert run(go())[-1].type == "done"
    assert seen == [{"wait_s": 10, "lapse_within_s": 20.0}]
