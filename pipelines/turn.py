"""The turn runner: ownership, serialization, deadline, first-token timing, atomic writeback.

Every pipeline is an object with a ``name`` and an async ``run(ctx)`` that yields
:mod:`pipelines.events` values (never ``done``). The runner wraps it::

    lock      the session's lease (in-process lock + store lease)  -> SessionBusy (409 / ABORTED)
              the lease's fencing token goes with every save and write -> LeaseLost when stale
    owner     another principal's session                          -> NotFound (404), no oracle
    replay    a known Idempotency-Key returns the recorded answer; the pipeline never re-runs
    history   loaded under the turn deadline
    pipeline  events pass through; ctx.mark_side_effect / ctx.checkpoint record writes
    outcome   ok / fallback   -> stored
              error, rejects_turn and no side effect yet -> rejected: nothing stored
              error after a side effect                  -> completed conservatively (fallback)
              any other error                            -> stored as failed
    save      one transaction (the same turn_id record a checkpoint wrote); a store failure
              -> StoreUnavailable in the stream, and ``done`` is still sent

Every error reaches the stream as an ``error`` event carrying its class's code
and Retry-After (:mod:`pipelines.errors`); the edges map the code back to the
table. The deadline covers the lock wait, the history load and the pipeline;
the save gets ``save_grace_s`` more when the deadline already fired.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipelines.cost import TurnCost, metered
from pipelines.errors import (
    ModelTimeout,
    NotFound,
    StoreUnavailable,
    TandemError,
)
from pipelines.events import (
    DoneEvent,
    ErrorEvent,
    NarrationDelta,
    ReplyDelta,
    Timings,
    TurnRequest,
)
from pipelines.protocols import EventSink, NullEventSink, SessionStore, TurnRecord
from pipelines.sessions import LOCAL_PRINCIPAL, SessionLocks, as_turn_store, load_turn
from pipelines.telemetry import annotate, stage_span
from pipelines.turn_input import SESSION_ID_RE, parse_turn_request, validate_session_id

__all__ = [
    "SESSION_ID_RE",
    "TurnContext",
    "Pipeline",
    "TurnRunner",
    "TurnEvents",
    "validate_session_id",
    "parse_turn_request",
    "new_turn_id",
    "SIDE_EFFECT_NOTICE",
]

logger = logging.getLogger("tandem.turn")

SIDE_EFFECT_NOTICE = "Your request was carried out, but I could not finish this reply."


def new_turn_id() -> str:
    return "t_" + secrets.token_hex(8)


async def _no_checkpoint() -> bool:
    return False


@dataclass
class TurnContext:
    """What a pipeline sees of the turn; pipelines may set ``status`` and ``meta``.

    ``principal`` is who owns the session (an API key's id, or ``local``).
    Two hooks record side effects: :meth:`mark_side_effect` right after a write
    executed, and :meth:`checkpoint` to persist the turn so far before the
    reply is generated.
    """

    session_id: str
    turn_id: str
    trace_id: str
    request: TurnRequest
    history: list[TurnRecord]
    sink: EventSink
    status: str = "ok"
    meta: dict[str, Any] = field(default_factory=dict)
    stage_ms: dict[str, float] = field(default_factory=dict)
    rules_version: str | None = None
    principal: str = LOCAL_PRINCIPAL
    side_effects: list[str] = field(default_factory=list)
    fence: int | None = None  # the session lease's fencing token: saves and ledger commits carry it
    cost: TurnCost = field(default_factory=TurnCost)  # the turn's model calls (pipelines.cost), filled as they end
    _checkpoint: Callable[[], Awaitable[bool]] = field(default=_no_checkpoint, repr=False)

    def mark_side_effect(self, what: str) -> None:
        """Record that a write executed (``what`` names it, e.g. ``card.cancel_order``).

        From now on an error completes the turn conservatively (stored, status
        ``fallback``, the user told the request was carried out) instead of
        rejecting it.
        """
        self.side_effects.append(what)
        self.meta["side_effects"] = list(self.side_effects)

    async def checkpoint(self) -> bool:
        """Persist the turn so far (user text, reply so far, status, meta) as this turn's record.

        The final save overwrites the same record. Returns False when it could not
        be written (logged; the turn goes on and the final save tries again).
        """
        return await self._checkpoint()


# Seconds a session's lease lives between renewals (SessionLocks.renew_ttl_s).
LEASE_RENEW_TTL_S = 30.0


class Pipeline(Protocol):
    name: str

    def run(self, ctx: TurnContext) -> AsyncIterator[Any]:
        """Yield the turn's events (deltas, cards, clarify, escalation, error), never ``done``."""
        ...


@dataclass
class _Turn:
    """The runner's bookkeeping of one turn."""

    session_id: str
    turn_id: str
    trace_id: str
    request: TurnRequest
    principal: str
    idempotency_key: str | None
    t0: float
    started: float
    reply: list[str] = field(default_factory=list)
    answer_events: list[dict[str, Any]] = field(default_factory=list)
    first_token_ms: float | None = None
    stored: bool = False
    fence: int | None = None  # the lease's fencing token (None: the store gives none)


class TurnEvents:
    """The events of a started turn: iterate them to the end, or ``aclose()`` to let the session go."""

    def __init__(self, gen: AsyncIterator[Any], release: Callable[[], Awaitable[None]]) -> None:
        self._gen = gen
        self._release = release

    def __aiter__(self) -> TurnEvents:
        return self

    async def __anext__(self) -> Any:
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        """Close the turn (a running one is cancelled and stored) and release the session."""
        try:
            await self._gen.aclose()  # type: ignore[attr-defined]
        finally:
            await self._release()


class TurnRunner:
    """Runs one pipeline for one turn and owns the turn's bookkeeping (see module docstring)."""

    def __init__(
        self,
        pipeline: Pipeline,
        store: SessionStore,
        *,
        sink: EventSink | None = None,
        max_history_turns: int = 6,
        deadline_s: float = 60.0,
        lock_wait_s: float | None = None,
        save_grace_s: float = 5.0,
        side_effect_notice: str = SIDE_EFFECT_NOTICE,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.pipeline = pipeline
        self.store = as_turn_store(store)
        self.sink = sink or NullEventSink()
        self.max_history_turns = max_history_turns
        self.deadline_s = deadline_s
        self.lock_wait_s = deadline_s if lock_wait_s is None else lock_wait_s
        self.save_grace_s = save_grace_s
        self.side_effect_notice = side_effect_notice
        self.clock = clock
        self.wall_clock = wall_clock
        # A lease renewed while the turn runs: a holder lost with its replica or node frees the session
        # after LEASE_RENEW_TTL_S, not after a whole turn deadline (scripts/chaos.py, node_loss).
        self.locks = SessionLocks(self.store, lease_ttl_s=deadline_s + save_grace_s + 5.0,
                                  renew_ttl_s=LEASE_RENEW_TTL_S)

    # -- records ----------------------------------------------------------------------

    def _record(self, t: _Turn, ctx: TurnContext, status: str, *, checkpoint: bool = False) -> TurnRecord:
        meta = dict(ctx.meta)
        if t.answer_events:
            meta["answer_events"] = list(t.answer_events)
        if checkpoint:
            meta["checkpoint"] = True
        return TurnRecord(
            turn_id=t.turn_id, index=0, user_text=t.request.text, reply_text="".join(t.reply),
            status=status, locale=t.request.locale, user_id=t.request.user_id,  # type: ignore[arg-type]
            trace_id=t.trace_id, pipeline=self.pipeline.name, created_at=self.wall_clock(), meta=meta,
        )

    async def _save(self, t: _Turn, record: TurnRecord) -> None:
        """One transaction; a store failure of any kind becomes :class:`StoreUnavailable`."""
        try:
            fenced = {} if t.fence is None else {"fence": t.fence}  # a stale token: LeaseLost, nothing stored
            await asyncio.shield(self.store.save_turn(
                t.session_id, record, principal=t.principal, idempotency_key=t.idempotency_key, **fenced))
        except TandemError:
            raise
        except Exception as exc:
            raise StoreUnavailable("the session store could not save this turn; nothing of it was written",
                                   details={"reason": type(exc).__name__}) from exc

    def _done(self, t: _Turn, status: str, ctx: TurnContext | None, *, replayed: bool = False) -> DoneEvent:
        timings = Timings(
            queue_ms=round((t.started - t.t0) * 1000, 3),
            first_token_ms=None if t.first_token_ms is None else round(t.first_token_ms, 3),
            end_ms=round((self.clock() - t.t0) * 1000, 3),
            stages={k: round(v, 3) for k, v in (ctx.stage_ms if ctx else {}).items()},
            cost=ctx.cost.block() if ctx else None,
        )
        self.sink.emit(
            "turn.end", session_id=t.session_id, turn_id=t.turn_id, trace_id=t.trace_id, status=status,
            timings=timings.model_dump(), reply_chars=sum(map(len, t.reply)), replayed=replayed,
            model_calls=[c.as_dict() for c in ctx.cost.calls] if ctx else [],
        )
        return DoneEvent(
            session_id=t.session_id, turn_id=t.turn_id, trace_id=t.trace_id, status=status,  # type: ignore[arg-type]
            pipeline=self.pipeline.name, timings=timings, rules_version=ctx.rules_version if ctx else None,
            replayed=replayed,
        )

    def _error_event(self, t: _Turn, exc: TandemError) -> ErrorEvent:
        self.sink.emit("turn.error", turn_id=t.turn_id, code=exc.code, message=exc.message)
        return ErrorEvent(code=exc.code, message=exc.message, retry_after_s=exc.retry_after_s)

    # -- the turn ---------------------------------------------------------------------

    def _new_turn(self, session_id: str, request: TurnRequest, trace_id: str, received_at: float | None,
                  turn_id: str | None, principal: str, idempotency_key: str | None) -> _Turn:
        t0 = received_at if received_at is not None else self.clock()
        return _Turn(session_id, turn_id or new_turn_id(), trace_id, request, principal, idempotency_key,
                     t0=t0, started=self.clock())

    async def start(
        self,
        session_id: str,
        request: TurnRequest,
        *,
        trace_id: str,
        received_at: float | None = None,
        turn_id: str | None = None,
        principal: str = LOCAL_PRINCIPAL,
        idempotency_key: str | None = None,
    ) -> TurnEvents:
        """Hold the session and load it; return the turn's events (iterate them to the end).

        Raises the :class:`TandemError` of a turn refused before anything happened
        (``SessionBusy``, ``NotFound``, ``StoreUnavailable``, the deadline) — the
        edges answer it with its status instead of a stream.
        """
        t = self._new_turn(session_id, request, trace_id, received_at, turn_id, principal, idempotency_key)
        return await self._start(t)

    async def _start(self, t: _Turn) -> TurnEvents:
        deadline = asyncio.get_running_loop().time() + self.deadline_s
        timeout = ModelTimeout(f"the turn ran past its {self.deadline_s:g} s deadline")
        try:
            async with asyncio.timeout_at(deadline):
                # a stopped holder's lease (its replica or node is gone) is waited out if it lapses within half
                # the turn's budget: the turn runs late rather than being refused
                lease = await self.locks.acquire(t.session_id, t.turn_id, min(self.lock_wait_s, self.deadline_s),
                                                 lapse_within_s=self.deadline_s / 2)
        except TimeoutError:
            raise timeout from None
        t.fence = lease.fence
        try:
            async with asyncio.timeout_at(deadline):
                known, history = await self._prepare(t)
        except BaseException as exc:
            await self.locks.release(lease)
            if isinstance(exc, TimeoutError):
                raise timeout from None
            if isinstance(exc, Exception) and not isinstance(exc, TandemError):
                raise StoreUnavailable("the session store could not be read",
                                       details={"reason": type(exc).__name__}) from exc
            raise
        return TurnEvents(self._held(t, lease, known, history, deadline), lambda: self.locks.release(lease))

    async def _held(self, t: _Turn, lease: Any, known: TurnRecord | None, history: list[TurnRecord],
                    deadline: float) -> AsyncIterator[Any]:
        try:
            inner = self._replay(t, known) if known is not None else self._execute(t, history, deadline)
            async with contextlib.aclosing(inner) as events:
                async for ev in events:
                    yield ev
        finally:
            await self.locks.release(lease)

    async def run(
        self,
        session_id: str,
        request: TurnRequest,
        *,
        trace_id: str,
        received_at: float | None = None,
        turn_id: str | None = None,
        principal: str = LOCAL_PRINCIPAL,
        idempotency_key: str | None = None,
    ) -> AsyncIterator[Any]:
        """Yield the pipeline's events then one :class:`DoneEvent` (see module docstring);
        a turn refused before it started yields its ``error`` and a ``failed`` done."""
        t = self._new_turn(session_id, request, trace_id, received_at, turn_id, principal, idempotency_key)
        try:
            events = await self._start(t)
        except TandemError as exc:
            self.sink.emit("turn.rejected", session_id=session_id, turn_id=t.turn_id, code=exc.code)
            yield self._error_event(t, exc)
            yield self._done(t, "failed", None)
            return
        async with contextlib.aclosing(events) as evs:
            async for ev in evs:
                yield ev

    async def _prepare(self, t: _Turn) -> tuple[TurnRecord | None, list[TurnRecord]]:
        loaded = await load_turn(self.store, t.session_id, t.idempotency_key, self.max_history_turns)
        if loaded.owner is not None and loaded.owner != t.principal:
            raise NotFound(f"no session {t.session_id!r}", details={"session_id": t.session_id})
        if loaded.known is not None:
            return loaded.known, []
        return None, loaded.history

    async def _replay(self, t: _Turn, known: TurnRecord) -> AsyncIterator[Any]:
        """The recorded answer of a retried turn (same Idempotency-Key): never re-run."""
        from pipelines.events import EVENT_ADAPTER

        t.turn_id, t.trace_id = known.turn_id, known.trace_id or t.trace_id
        self.sink.emit("turn.replayed", session_id=t.session_id, turn_id=known.turn_id)
        for raw in known.meta.get("answer_events", []):
            ev = EVENT_ADAPTER.validate_python(raw)
            if ev.type == "error":
                yield ev
        if known.reply_text:
            t.reply.append(known.reply_text)
            yield ReplyDelta(text=known.reply_text)
        for raw in known.meta.get("answer_events", []):
            ev = EVENT_ADAPTER.validate_python(raw)
            if ev.type != "error":
                yield ev
        yield self._done(t, known.status, None, replayed=True)

    async def _execute(self, t: _Turn, history: list[TurnRecord], deadline: float) -> AsyncIterator[Any]:
        ctx = TurnContext(t.session_id, t.turn_id, t.trace_id, t.request, history, self.sink,
                          principal=t.principal, fence=t.fence)

        async def checkpoint() -> bool:
            try:
                await self._save(t, self._record(t, ctx, ctx.status, checkpoint=True))
            except TandemError as exc:
                logger.warning("turn %s: checkpoint failed: %s", t.turn_id, exc.message)
                self.sink.emit("turn.checkpoint_failed", turn_id=t.turn_id, code=exc.code)
                return False
            self.sink.emit("turn.checkpoint", turn_id=t.turn_id, side_effects=list(ctx.side_effects))
            return True

        ctx._checkpoint = checkpoint
        self.sink.emit(
            "turn.start", session_id=t.session_id, turn_id=t.turn_id, trace_id=t.trace_id,
            pipeline=self.pipeline.name, history_turns=len(history), locale=t.request.locale,
        )
        error: TandemError | None = None
        try:
            with stage_span("turn", session_id=t.session_id, turn_id=t.turn_id, pipeline=self.pipeline.name,
                            input=t.request.text) as span:  # texts on spans are redacted (safe_text)
                async with asyncio.timeout_at(deadline), \
                        contextlib.aclosing(metered(self.pipeline.run(ctx), ctx.cost)) as steps:
                    async for event in steps:
                        if t.first_token_ms is None and isinstance(event, NarrationDelta | ReplyDelta):
                            t.first_token_ms = (self.clock() - t.t0) * 1000
                        if isinstance(event, ReplyDelta):
                            t.reply.append(event.text)
                        elif not isinstance(event, NarrationDelta):
                            t.answer_events.append(event.model_dump(mode="json"))
                        yield event
                annotate(span, status=ctx.status, output="".join(t.reply), rules_version=ctx.rules_version,
                         first_token_ms=t.first_token_ms, cost=ctx.cost.block().model_dump_json())
        except TimeoutError:
            error = ModelTimeout(f"the turn ran past its {self.deadline_s:g} s deadline")
        except TandemError as exc:
            error = exc
        except (asyncio.CancelledError, GeneratorExit):
            self.sink.emit("turn.cancelled", turn_id=t.turn_id)
            status = "fallback" if ctx.side_effects else "failed"
            try:
                await self._save(t, self._record(t, ctx, status))
            except TandemError as exc:
                logger.error("turn %s: cancelled and not saved: %s", t.turn_id, exc.message)
            raise
        except Exception as exc:  # a bug in a pipeline or tool: report, never leak internals
            logger.exception("turn %s failed unexpectedly", t.turn_id)
            error = TandemError(f"internal error ({type(exc).__name__}); trace {t.trace_id}")
        status = ctx.status
        notice: ReplyDelta | None = None
        if error is not None:
            if ctx.side_effects:
                status = "fallback"  # a write happened: complete the turn, tell the truth
                self.sink.emit("turn.conservative", turn_id=t.turn_id, code=error.code,
                               side_effects=list(ctx.side_effects))
                if not t.reply:
                    notice = ReplyDelta(text=self.side_effect_notice)
                    t.reply.append(notice.text)
            else:
                status = "failed"
            err_ev = self._error_event(t, error)
            t.answer_events.append(err_ev.model_dump(mode="json"))
            if error.rejects_turn and not ctx.side_effects:
                self.sink.emit("turn.rejected", turn_id=t.turn_id, code=error.code)
                yield err_ev
                yield self._done(t, "failed", ctx)
                return
        else:
            err_ev = None
        # Store before yielding anything more: a client that leaves now loses nothing.
        loop = asyncio.get_running_loop()
        budget = max(deadline - loop.time(), self.save_grace_s)
        save_error: TandemError | None = None
        try:
            async with asyncio.timeout(budget):
                await self._save(t, self._record(t, ctx, status))
            t.stored = True
        except TimeoutError:
            save_error = StoreUnavailable("the session store did not answer in time; the turn was not saved")
        except TandemError as exc:
            save_error = exc
        if err_ev is not None:
            yield err_ev
        if notice is not None:
            yield notice
        if save_error is not None:
            logger.error("turn %s: not saved: %s", t.turn_id, save_error.message)
            yield self._error_event(t, save_error)
            status = "failed"
        yield self._done(t, status, ctx)
