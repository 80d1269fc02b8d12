"""What a turn spends on its models: one record per model call, from the engine's own usage.

::

    ModelCall.purpose   why a call is made (``w1.intent``, ``w1.narration``, ``w2.slots``,
                        ``orchestrator.step``, ``generator.reply``, ``judge.<name>`` …); empty: the
                        role's usual purpose (:data:`ROLE_PURPOSE`)
    CallCost            one call: role, purpose, prompt / cached prompt / decode tokens, the engine's
                        time for it (vLLM's scheduled → last token), its queue time, the caller's wall time
    TurnCost            the turn's calls; :meth:`TurnCost.block` is the ``cost`` block of the ``done``
                        event's timings (totals, per role, per purpose)
    metering(cost)      makes ``cost`` the turn's meter for a block (tasks started in it inherit it)
    metered(events, c)  a pipeline's events, each step run under ``metering(c)`` (what the runner
                        iterates: the step's code, whichever task drives the stream, sees the meter)
    record(call)        what a :class:`~pipelines.protocols.ModelClient` implementation calls when a
                        call ends; outside a turn it records nothing

The counts are the engine's (the usage chunk vLLM streams with ``stream_options.include_usage``;
cached prompt tokens with ``enable_prompt_tokens_details``; engine time with
``enable_per_request_metrics``), never estimated here. A call the turn stopped reading early (the
generator past its sentence cap, W1 once the narration closed) has no final usage: its counts are the
engine's last running counts (``continuous_usage_stats``), its cached tokens 0 and its engine time the
caller's wall time; such calls are counted in ``unreported``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")

__all__ = ["CallCost", "CostTotals", "CostBlock", "TurnCost", "ROLE_PURPOSE", "purpose_of", "metering",
           "metered", "current", "record"]

#: The purpose of a call that names none: what its role does in the turn.
ROLE_PURPOSE = {"orchestrator": "orchestrator.step", "generator": "generator.reply", "slot_extractor": "w2.slots"}


def purpose_of(role: str, purpose: str) -> str:
    """``purpose``, or the role's usual one when empty."""
    return purpose or ROLE_PURPOSE.get(role, role)


@dataclass(frozen=True)
class CallCost:
    """One model call as the engine reported it (see module docstring)."""

    role: str
    purpose: str
    prompt_tokens: int = 0
    cached_tokens: int = 0
    decode_tokens: int = 0
    engine_ms: float | None = None  # vLLM's scheduled → last token; None: the engine did not report it
    queue_ms: float | None = None
    wall_ms: float = 0.0  # the caller's: request sent → last chunk read
    reported: bool = True  # the engine's final usage arrived (False: stopped early, running counts)

    @property
    def spent_ms(self) -> float:
        """The engine's time for the call, or the caller's wall time where the engine gave none."""
        return self.engine_ms if self.engine_ms is not None else self.wall_ms

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CostTotals(_Wire):
    """Sums over a set of calls."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    decode_tokens: int = 0
    engine_ms: float = 0.0

    @property
    def tokens(self) -> int:
        """Prompt plus decode tokens (cached ones included: they still occupy the role's context)."""
        return self.prompt_tokens + self.decode_tokens


class CostBlock(CostTotals):
    """The ``cost`` block of a turn's timings: totals, then per role and per purpose."""

    queue_ms: float = 0.0
    unreported: int = 0
    by_role: dict[str, CostTotals] = {}
    by_purpose: dict[str, CostTotals] = {}


def _totals(calls: list[CallCost]) -> dict[str, float | int]:
    return {"calls": len(calls), "prompt_tokens": sum(c.prompt_tokens for c in calls),
            "cached_prompt_tokens": sum(c.cached_tokens for c in calls),
            "decode_tokens": sum(c.decode_tokens for c in calls),
            "engine_ms": round(sum(c.spent_ms for c in calls), 3)}


@dataclass
class TurnCost:
    """The model calls of one turn, in the order they ended."""

    calls: list[CallCost] = field(default_factory=list)

    def add(self, call: CallCost) -> None:
        self.calls.append(call)

    def block(self) -> CostBlock:
        """Totals, per role and per purpose (roles and purposes in order of first appearance)."""
        groups: dict[str, dict[str, list[CallCost]]] = {"role": {}, "purpose": {}}
        for c in self.calls:
            groups["role"].setdefault(c.role, []).append(c)
            groups["purpose"].setdefault(c.purpose, []).append(c)
        return CostBlock(
            **_totals(self.calls),
            queue_ms=round(sum(c.queue_ms or 0.0 for c in self.calls), 3),
            unreported=sum(1 for c in self.calls if not c.reported),
            by_role={k: CostTotals(**_totals(v)) for k, v in groups["role"].items()},
            by_purpose={k: CostTotals(**_totals(v)) for k, v in groups["purpose"].items()},
        )


_current: ContextVar[TurnCost | None] = ContextVar("tandem_turn_cost", default=None)


def current() -> TurnCost | None:
    """The meter of the turn running in this context, if any."""
    return _current.get()


@contextlib.contextmanager
def metering(cost: TurnCost | None) -> Iterator[TurnCost | None]:
    """``cost`` is the meter for the block (and for every task started in it)."""
    token = _current.set(cost)
    try:
        yield cost
    finally:
        _current.reset(token)


def record(call: CallCost) -> None:
    """Add one finished call to the current turn's meter (nothing outside a turn)."""
    meter = _current.get()
    if meter is not None:
        meter.add(call)


async def metered(events: AsyncIterator[T], cost: TurnCost) -> AsyncIterator[T]:
    """``events``, every step of it (and its closing) run with ``cost`` as the meter.

    The meter is set around each ``__anext__`` rather than once: a context variable set inside an async
    generator lives in the context of the task that drove that one step, so a stream driven by another
    task later (a heartbeat pump, a handler) would lose it.
    """
    it: Any = events.__aiter__()
    try:
        while True:
            with metering(cost):
                try:
                    ev = await it.__anext__()
                except StopAsyncIteration:
                    return
            yield ev
    finally:
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            with metering(cost):
                await aclose()
