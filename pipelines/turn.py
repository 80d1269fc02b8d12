"""The turn runner: validation, history, deadline, first-token timing, atomic writeback.

Every pipeline (``prompting``, later ``dr`` and the SGC ladder) is an object with
a ``name`` and an async ``run(ctx)`` that yields :mod:`pipelines.events` values
(never ``done``). The runner wraps it: it loads the history, enforces the
turn deadline, turns a :class:`~pipelines.errors.TandemError` into an ``error``
event, stores the whole turn in one write, and always ends with ``done``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from pipelines.errors import (
    InvalidInput,
    InvalidSessionId,
    ModelTimeout,
    PayloadTooLarge,
    TandemError,
    ValidationFailed,
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
from pipelines.telemetry import annotate, stage_span

__all__ = [
    "SESSION_ID_RE",
    "TurnContext",
    "Pipeline",
    "TurnRunner",
    "validate_session_id",
    "parse_turn_request",
    "new_turn_id",
]

logger = logging.getLogger("tandem.turn")

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def validate_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not SESSION_ID_RE.fullmatch(session_id):
        raise InvalidSessionId(
            "session id must be 1-128 characters of letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit",
            details={"session_id": str(session_id)[:64]},
        )
    return session_id


def parse_turn_request(raw: Any, *, max_text_chars: int) -> TurnRequest:
    """Validate a decoded JSON body (or a :class:`TurnRequest`) against the wire contract and limits."""
    if isinstance(raw, TurnRequest):
        req = raw
    else:
        if not isinstance(raw, dict):
            raise InvalidInput("request body must be a JSON object")
        try:
            req = TurnRequest.model_validate(raw)
        except ValidationError as exc:
            problems = [
                {"field": ".".join(str(p) for p in e["loc"]) or "body", "problem": e["msg"]}
                for e in exc.errors(include_url=False)
            ]
            raise ValidationFailed(
                "; ".join(f"{p['field']}: {p['problem']}" for p in problems), details={"fields": problems}
            ) from exc
    if len(req.text) > max_text_chars:
        raise PayloadTooLarge(
            f"text is {len(req.text)} characters; the limit is {max_text_chars}",
            details={"limit": max_text_chars, "length": len(req.text)},
        )
    return req


def new_turn_id() -> str:
    return "t_" + secrets.token_hex(8)


@dataclass
class TurnContext:
    """What a pipeline sees of the turn; pipelines may set ``status`` and ``meta``."""

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
    side_effects: list[str] = field(default_factory=list)
    checkpointer: Callable[[], Awaitable[None]] | None = None

    def mark_side_effect(self, what: str) -> None:
        """A write executed in this turn: from now on errors complete the turn conservatively."""
        self.side_effects.append(what)

    async def checkpoint(self) -> None:
        """Persist the turn so far (the runner's hook; a no-op when none is set)."""
        if self.checkpointer is not None:
            await self.checkpointer()


class Pipeline(Protocol):
    name: str

    def run(self, ctx: TurnContext) -> AsyncIterator[Any]:
        """Yield the turn's events (deltas, cards, clarify, escalation, error), never ``done``."""
        ...


class TurnRunner:
    """Runs one pipeline for one turn and owns the turn's bookkeeping."""

    def __init__(
        self,
        pipeline: Pipeline,
        store: SessionStore,
        *,
        sink: EventSink | None = None,
        max_history_turns: int = 6,
        deadline_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.pipeline = pipeline
        self.store = store
        self.sink = sink or NullEventSink()
        self.max_history_turns = max_history_turns
        self.deadline_s = deadline_s
        self.clock = clock
        self.wall_clock = wall_clock

    async def run(
        self,
        session_id: str,
        request: TurnRequest,
        *,
        trace_id: str,
        received_at: float | None = None,
        turn_id: str | None = None,
    ) -> AsyncIterator[Any]:
        """Yield the pipeline's events then one :class:`DoneEvent`; store the turn exactly once."""
        t0 = received_at if received_at is not None else self.clock()
        started = self.clock()
        turn_id = turn_id or new_turn_id()
        history = await self.store.get_history(session_id, self.max_history_turns)
        ctx = TurnContext(session_id, turn_id, trace_id, request, history, self.sink)
        self.sink.emit(
            "turn.start", session_id=session_id, turn_id=turn_id, trace_id=trace_id,
            pipeline=self.pipeline.name, history_turns=len(history), locale=request.locale,
        )
        first_token_ms: float | None = None
        reply: list[str] = []
        stored = False

        async def store(status: str) -> None:
            nonlocal stored
            if stored:
                return
            stored = True
            record = TurnRecord(
                turn_id=turn_id, index=0, user_text=request.text, reply_text="".join(reply),
                status=status, locale=request.locale, user_id=request.user_id, trace_id=trace_id,
                pipeline=self.pipeline.name, created_at=self.wall_clock(), meta=ctx.meta,
            )
            await asyncio.shield(self.store.append_turn(session_id, record))

        error: ErrorEvent | None = None
        try:
            with stage_span("turn", session_id=session_id, turn_id=turn_id, pipeline=self.pipeline.name,
                            input=request.text) as span:  # texts on spans are redacted (safe_text)
                async with asyncio.timeout(self.deadline_s):
                    async for event in self.pipeline.run(ctx):
                        if first_token_ms is None and isinstance(event, NarrationDelta | ReplyDelta):
                            first_token_ms = (self.clock() - t0) * 1000
                        if isinstance(event, ReplyDelta):
                            reply.append(event.text)
                        yield event
                annotate(span, status=ctx.status, output="".join(reply), rules_version=ctx.rules_version,
                         first_token_ms=first_token_ms)
        except TimeoutError:
            err: TandemError = ModelTimeout(f"the turn ran past its {self.deadline_s:g} s deadline")
            error = ErrorEvent(code=err.code, message=err.message)
        except TandemError as exc:
            error = ErrorEvent(code=exc.code, message=exc.message)
        except (asyncio.CancelledError, GeneratorExit):
            self.sink.emit("turn.cancelled", turn_id=turn_id)
            await store("failed")
            raise
        except Exception as exc:  # a bug in a pipeline or tool: store, report, never leak internals
            logger.exception("turn %s failed unexpectedly", turn_id)
            error = ErrorEvent(code="internal", message=f"internal error ({type(exc).__name__}); trace {trace_id}")
        if error is not None:
            ctx.status = "failed"
            self.sink.emit("turn.error", turn_id=turn_id, code=error.code, message=error.message)
        # Store before yielding anything more: a client that leaves now loses nothing.
        await store(ctx.status)
        if error is not None:
            yield error
        end_ms = (self.clock() - t0) * 1000
        timings = Timings(
            queue_ms=round((started - t0) * 1000, 3),
            first_token_ms=None if first_token_ms is None else round(first_token_ms, 3),
            end_ms=round(end_ms, 3),
            stages={k: round(v, 3) for k, v in ctx.stage_ms.items()},
        )
        self.sink.emit(
            "turn.end", session_id=session_id, turn_id=turn_id, trace_id=trace_id, status=ctx.status,
            timings=timings.model_dump(), reply_chars=sum(map(len, reply)),
        )
        yield DoneEvent(
            session_id=session_id, turn_id=turn_id, trace_id=trace_id, status=ctx.status,  # type: ignore[arg-type]
            pipeline=self.pipeline.name, timings=timings, rules_version=ctx.rules_version,
        )
