"""Sessions as the turn runner needs them: an owner, turns saved by id, leases, idempotency keys.

:class:`TurnStore` extends :class:`pipelines.protocols.SessionStore` with what
makes a turn safe in front of several users and several ingress replicas:

* **ownership** — the first saved turn claims the session for its principal
  (``save_turn`` refuses any other principal, atomically with the write);
* **turns saved by id** — ``save_turn`` with a known ``turn_id`` overwrites
  that turn in place (a checkpoint, then the final record), never adds a second;
* **leases** — one holder per session at a time across processes
  (:class:`SessionLocks` adds an in-process lock in front, so waiters of one
  replica queue without polling the store); every grant carries a **fencing
  token**, a positive int that grows per session whenever the lease passes to
  another holder, and ``save_turn(..., fence=token)`` stores nothing and raises
  :class:`~pipelines.errors.LeaseLost` unless the token is the session's current
  one (checked in the save's own transaction / script), so a holder that froze
  past its TTL cannot write over the turn that took the session; a store that also offers
  ``lease_left_s(session_id)`` (seconds the lease has left, None without one)
  lets a refused turn's Retry-After say when a stopped holder's lease lapses;
* **idempotency keys** — a key saved with a turn finds that turn again;
* **one read to start a turn** — :func:`load_turn` reads the owner, the turn of
  an idempotency key and the history in one store call where the store offers
  ``load_turn`` (SQLite: one thread hop and one snapshot instead of three).

``serve/stores`` implements it on SQLite and Redis; the tests on a dict.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pipelines.errors import SessionBusy
from pipelines.protocols import SessionStore, TurnRecord

__all__ = ["LOCAL_PRINCIPAL", "TurnStore", "SessionLocks", "Lease", "as_turn_store", "TurnLoad", "load_turn",
           "load_turn_by_calls", "lapsing_lease_s", "fence_of"]

logger = logging.getLogger("tandem.sessions")

# The one principal of single-tenant development mode (auth off).
LOCAL_PRINCIPAL = "local"


@runtime_checkable
class TurnStore(SessionStore, Protocol):
    """A :class:`SessionStore` with owners, turn upserts, leases and idempotency keys."""

    async def owner(self, session_id: str) -> str | None:
        """The principal that owns the session, or None when it does not exist (or expired)."""
        ...

    async def save_turn(
        self, session_id: str, record: TurnRecord, *, principal: str, idempotency_key: str | None = None,
        fence: int | None = None,
    ) -> TurnRecord:
        """Insert the turn (next index) or overwrite the stored turn with the same ``turn_id``.

        Claims the session for ``principal`` on its first turn; raises
        :class:`~pipelines.errors.NotFound` when another principal owns it,
        :class:`~pipelines.errors.LeaseLost` when ``fence`` is given and is not the
        session's current lease token, and :class:`~pipelines.errors.StoreUnavailable`
        when nothing could be written. All of it (the turn, the owner, the
        idempotency key) lands in one transaction or not at all. Returns the stored record.
        """
        ...

    async def find_turn(self, session_id: str, idempotency_key: str) -> TurnRecord | None:
        """The turn saved with this idempotency key in this session, if any."""
        ...

    async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> int:
        """Take (or renew) the session's lease for ``ttl_s`` seconds: its fencing token, a positive int that is
        higher than any earlier holder's (a renewal by the same holder keeps it); 0 while another holder has it."""
        ...

    async def release_lease(self, session_id: str, holder: str) -> None:
        """Give the lease back (only if ``holder`` still has it)."""
        ...


# A lease's time left may be read this much off its run-down during a wait (store round trips, clock steps).
LEASE_SLACK_S = 0.25


def lapsing_lease_s(left_before: float | None, left_after: float | None, waited_s: float,
                    renew_every_s: float, slack_s: float = LEASE_SLACK_S) -> float | None:
    """Seconds a lease has left when its holder has stopped renewing it, else None.

    A live holder renews its lease every ``renew_every_s``: over a wait longer
    than that (plus ``slack_s``) its time left grows back. A lease whose time
    left only ran down by the time waited (within ``slack_s``) has a holder that
    stopped — its replica or node is gone — and the session is free when it
    lapses. None when either reading is missing or the wait was too short to tell.
    """
    if left_before is None or left_after is None or waited_s < renew_every_s + slack_s:
        return None
    if left_after > left_before - waited_s + slack_s:
        return None  # renewed during the wait: the holder is alive
    return max(left_after, 0.0)


def fence_of(grant: object) -> int | None:
    """The fencing token of a lease grant: the positive int a store returned, or None (a store that answers a
    bare ``True`` gives no token, so its saves are not fenced)."""
    return grant if isinstance(grant, int) and not isinstance(grant, bool) and grant > 0 else None


class Lease:
    """A held session: release it exactly once (``SessionLocks.release``). ``fence`` is the grant's fencing
    token (None: the store gives none); ``lost`` turns true when a renewal found the lease had passed to
    another holder meanwhile (the stale token's saves are then refused by the store)."""

    def __init__(self, session_id: str, holder: str, lock: asyncio.Lock, fence: int | None = None) -> None:
        self.session_id = session_id
        self.holder = holder
        self.lock = lock
        self.fence = fence
        self.lost = False
        self.released = False
        self.renewer: asyncio.Task[None] | None = None


class SessionLocks:
    """Serializes the turns of one session: an in-process lock, then the store's lease.

    ``acquire`` waits at most ``wait_s`` seconds in all, then raises
    :class:`SessionBusy` (409 / ABORTED). The lease lives ``lease_ttl_s``
    seconds, so a crashed holder blocks the session for that long at most.

    With ``renew_ttl_s`` (shorter than ``lease_ttl_s``) the lease is taken for
    ``renew_ttl_s`` and renewed every sixth of it while the turn holds it (at most
    ``lease_ttl_s`` in all): a holder that dies with its replica or node stops
    renewing, and the session is free again after ``renew_ttl_s`` instead of a
    whole turn deadline.

    A turn whose wait ends on a lease whose holder did not renew it during the
    wait (the holder's replica or node is gone) waits on for it to lapse when
    ``acquire``'s ``lapse_within_s`` allows, and runs; otherwise it is told when
    the lease lapses: :class:`SessionBusy` with ``retry_after_s`` and
    ``details.lease_left_s`` from the store's ``lease_left_s``
    (:func:`lapsing_lease_s`). A live holder's refusal keeps the table's default
    hint.

    A release the store cannot take (Redis down or restarting, its lease kept by
    the AOF) is owed: retried in the background with a growing pause (at most
    ``MAX_RELEASE_PAUSE_S``) until it is taken or the lease would have expired by
    itself, so a session is free again moments after its store is back, not a
    lease TTL later. At most ``MAX_OWED_RELEASES`` are owed at once; beyond that
    a lease waits for its TTL.
    """

    MAX_OWED_RELEASES = 1024
    MAX_RELEASE_PAUSE_S = 1.0

    def __init__(
        self,
        store: TurnStore,
        *,
        lease_ttl_s: float,
        poll_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
        renew_ttl_s: float | None = None,
    ) -> None:
        self.store = store
        self.lease_ttl_s = lease_ttl_s
        self.renew_ttl_s = renew_ttl_s if renew_ttl_s is not None and 0 < renew_ttl_s < lease_ttl_s else None
        self.poll_s = poll_s
        self.clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}
        self._owed: set[asyncio.Task[None]] = set()

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        self._users[session_id] = self._users.get(session_id, 0) + 1
        return lock

    def _unuse(self, session_id: str) -> None:
        n = self._users.get(session_id, 1) - 1
        if n <= 0:
            self._users.pop(session_id, None)
            self._locks.pop(session_id, None)
        else:
            self._users[session_id] = n

    def busy(self) -> int:
        """Sessions with a turn running or waiting in this process."""
        return len(self._users)

    async def acquire(self, session_id: str, holder: str, wait_s: float, *, lapse_within_s: float = 0.0) -> Lease:
        """Hold the session (see class docstring); raises :class:`SessionBusy` after ``wait_s``.

        ``lapse_within_s``: when ``wait_s`` is over and the lease's holder has stopped (it did not renew during
        the wait), wait on for the lease to lapse — once — if it lapses within this many seconds of the start,
        and take it: the turn runs late instead of being refused (0: never)."""
        lock = self._lock(session_id)
        start = self.clock()
        busy = SessionBusy(
            "another turn of this session is running; retry when it has finished",
            details={"waited_s": round(max(wait_s, 0.0), 3)},
        )
        try:
            try:
                async with asyncio.timeout(max(wait_s, 0.0)):
                    await lock.acquire()
            except TimeoutError:
                raise busy from None
        except BaseException:
            self._unuse(session_id)
            raise
        lease = Lease(session_id, holder, lock)
        ttl = self.renew_ttl_s or self.lease_ttl_s
        first: tuple[float, float | None] | None = None  # (when, time left) at the first refusal
        until, extended = start + max(wait_s, 0.0), False
        try:
            while not (grant := await self.store.acquire_lease(session_id, holder, ttl)):
                if first is None and self.renew_ttl_s is not None:
                    first = (self.clock(), await self._lease_left(session_id))
                now = self.clock()
                if now >= until:
                    left = await self._lapsing(session_id, first)
                    margin = 2 * self.poll_s  # the take after the lapse
                    if left is not None and not extended and now - start + left + margin <= lapse_within_s:
                        until, extended = now + left + margin, True
                        continue
                    raise self._refusal(left, busy)
                await asyncio.sleep(self.poll_s)
        except BaseException:
            lease.released = True
            lock.release()
            self._unuse(session_id)
            raise
        lease.fence = fence_of(grant)
        if self.renew_ttl_s is not None:
            lease.renewer = asyncio.create_task(self._renew(lease, self.renew_ttl_s))
        return lease

    async def _lease_left(self, session_id: str) -> float | None:
        """The store's reading of the lease's time left (None: no lease, no such method, or the store failed)."""
        left = getattr(self.store, "lease_left_s", None)
        if left is None:
            return None
        try:
            return await left(session_id)
        except Exception:  # a hint only: the refusal is typed without it
            return None

    async def _lapsing(self, session_id: str, first: tuple[float, float | None] | None) -> float | None:
        """Seconds until the lease lapses when its holder stopped renewing it during the wait, else None."""
        if first is None or self.renew_ttl_s is None:
            return None
        after = await self._lease_left(session_id)
        return lapsing_lease_s(first[1], after, self.clock() - first[0], self.renew_ttl_s / 6)

    @staticmethod
    def _refusal(left: float | None, busy: SessionBusy) -> SessionBusy:
        """``busy``, told when the lease lapses (``left``) if its holder stopped renewing it."""
        if left is None:
            return busy
        return SessionBusy(
            "the turn holding this session stopped (its replica or node is gone); "
            f"the session is free again in {left:.1f} s",
            details={**busy.details, "lease_left_s": round(left, 3)},
            retry_after_s=max(left, 0.1),
        )

    async def _renew(self, lease: Lease, ttl: float) -> None:
        """Keep ``lease`` alive while held, for ``lease_ttl_s`` in all (the bound without renewal)."""
        until = self.clock() + self.lease_ttl_s - ttl
        while not lease.released and self.clock() < until:
            await asyncio.sleep(ttl / 6)
            if lease.released:
                return
            with contextlib.suppress(Exception):  # a store blip: the next renewal tries again
                grant = await self.store.acquire_lease(lease.session_id, lease.holder, ttl)
                if not grant:
                    lease.lost = True
                    return  # another holder has it (ours expired): nothing to renew
                if fence_of(grant) != lease.fence:
                    # ours lapsed and another holder had it meanwhile: this grant is a new one, and the turn's
                    # token is stale — its saves and writes are refused (LeaseLost); stop renewing
                    lease.lost = True
                    logger.warning("session %s: the lease of turn %s passed to another turn while it ran",
                                   lease.session_id, lease.holder)
                    return

    async def release(self, lease: Lease) -> None:
        """Give the store lease and the in-process lock back (idempotent; never raises)."""
        if lease.released:
            return
        lease.released = True
        if lease.renewer is not None:
            lease.renewer.cancel()
        try:
            try:
                await asyncio.shield(self.store.release_lease(lease.session_id, lease.holder))
            except Exception:  # the store is down: the release is owed, never raised to the turn
                self._owe(lease.session_id, lease.holder)
        finally:
            lease.lock.release()
            self._unuse(lease.session_id)

    def owed(self) -> int:
        """Releases the store has not taken yet (retried in the background)."""
        return len(self._owed)

    def _owe(self, session_id: str, holder: str) -> None:
        if len(self._owed) >= self.MAX_OWED_RELEASES:
            return  # bounded: this lease waits for its TTL
        until = self.clock() + (self.renew_ttl_s or self.lease_ttl_s)  # the lease is gone by then anyway
        task = asyncio.get_running_loop().create_task(self._pay(session_id, holder, until))
        self._owed.add(task)
        task.add_done_callback(self._owed.discard)

    async def _pay(self, session_id: str, holder: str, until: float) -> None:
        """Retry an owed release until the store takes it or the lease would have expired anyway."""
        pause = max(self.poll_s, 0.01)
        while self.clock() < until:
            await asyncio.sleep(pause)
            try:
                await self.store.release_lease(session_id, holder)
                return
            except Exception:
                pause = min(pause * 2, self.MAX_RELEASE_PAUSE_S)


class _AppendOnly:
    """A plain :class:`SessionStore` seen as a :class:`TurnStore` (single tenant, one process).

    Owners are not recorded, a turn is appended once (a checkpoint is kept in
    memory and the final save appends), leases always succeed (the in-process
    lock still serializes; the tokens grow per holder, and saves are not
    fenced: one process), idempotency keys are remembered in memory.
    """

    def __init__(self, store: SessionStore) -> None:
        self.inner = store
        self._keys: dict[tuple[str, str], TurnRecord] = {}
        self._grants: dict[str, tuple[str, int]] = {}  # session -> (holder, token): one process, no fencing

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        return await self.inner.get_history(session_id, limit)

    async def session_exists(self, session_id: str) -> bool:
        return await self.inner.session_exists(session_id)

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        await self.inner.append_turn(session_id, record)

    async def owner(self, session_id: str) -> str | None:
        return None

    async def save_turn(
        self, session_id: str, record: TurnRecord, *, principal: str, idempotency_key: str | None = None,
        fence: int | None = None,
    ) -> TurnRecord:
        if record.meta.get("checkpoint"):
            return record  # an append-only store cannot overwrite: the final save carries it
        await self.inner.append_turn(session_id, record)
        if idempotency_key:
            self._keys[(session_id, idempotency_key)] = record
        return record

    async def find_turn(self, session_id: str, idempotency_key: str) -> TurnRecord | None:
        return self._keys.get((session_id, idempotency_key))

    async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> int:
        last = self._grants.get(session_id)
        token = last[1] if last is not None and last[0] == holder else (last[1] + 1 if last else 1)
        self._grants[session_id] = (holder, token)
        return token

    async def release_lease(self, session_id: str, holder: str) -> None:
        return None


def as_turn_store(store: SessionStore) -> TurnStore:
    """``store`` itself when it is a :class:`TurnStore`, else an append-only adapter."""
    if all(hasattr(store, m) for m in ("owner", "save_turn", "find_turn", "acquire_lease", "release_lease")):
        return store  # type: ignore[return-value]
    return _AppendOnly(store)  # type: ignore[return-value]


@dataclass(frozen=True)
class TurnLoad:
    """What a turn reads before it runs: the session's owner, the turn an idempotency key names, the history."""

    owner: str | None
    known: TurnRecord | None = None
    history: list[TurnRecord] = field(default_factory=list)


async def load_turn(store: TurnStore, session_id: str, idempotency_key: str | None, limit: int | None) -> TurnLoad:
    """One read where the store has ``load_turn`` (owner, keyed turn and history at once), else three calls.

    ``known`` is looked up only with a key; ``history`` is only read when no keyed turn was found.
    """
    one = getattr(store, "load_turn", None)
    if one is not None:
        return await one(session_id, idempotency_key, limit)
    return await load_turn_by_calls(store, session_id, idempotency_key, limit)


async def load_turn_by_calls(store: TurnStore, session_id: str, idempotency_key: str | None,
                             limit: int | None) -> TurnLoad:
    """:func:`load_turn` as three calls of the :class:`TurnStore` methods (a store without a one-call read)."""
    owner = await store.owner(session_id)
    known = await store.find_turn(session_id, idempotency_key) if idempotency_key else None
    return TurnLoad(owner, known, [] if known is not None else await store.get_history(session_id, limit))
