"""The W1 policy driver: parser events in, Φ decision and one tool dispatch out.

:class:`PerceptionRun` wraps a :class:`PerceptionParser`. When
``</SUB_INTENT>`` closes it calls Φ exactly once. On a hit it freezes the tool
set, records the dispatch point (chunk index and stream offset) and emits a
:class:`DispatchTools` step (and calls the ``on_dispatch`` callback, if any, at
once — narration keeps streaming). On a miss it counts the fall-through and
waits for ``<PLAN>``, whose calls are then dispatched. A plan arriving after a
freeze never overrides the frozen set (it is recorded and counted as ignored).
Everything is synchronous and pure; :meth:`PerceptionRun.drive` adapts it to
an async stream of text deltas.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import Field

from pipelines.sgc.config import TableConfig
from pipelines.sgc.phi import PhiOutcome, PhiRow, PhiTable, phi_lookup
from pipelines.sgc.snapshot import Snapshot
from pipelines.sgc.w1 import (
    LONG_TAGS,
    NarrationDelta,
    PerceptionEvent,
    PerceptionParser,
    PerceptionResult,
    PlanParsed,
    SubIntentParsed,
    ToolCall,
    W1Tags,
)

__all__ = [
    "FallThroughCounters",
    "DispatchPoint",
    "DispatchTools",
    "RunStep",
    "PerceptionOutcome",
    "PerceptionRun",
]


@dataclass
class FallThroughCounters:
    """Process-wide W1 counters (share one instance across runs; export as metrics)."""

    hits: int = 0
    unmapped: int = 0
    state_unavailable: int = 0
    plan_ignored: int = 0

    def record(self, outcome: PhiOutcome) -> None:
        if outcome.kind == "hit":
            self.hits += 1
        elif outcome.kind == "miss_unmapped":
            self.unmapped += 1
        else:
            self.state_unavailable += 1

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class DispatchPoint(TableConfig):
    """Where in the stream the tools were released."""

    chunk_index: int = Field(..., ge=0, description="0-based index of the chunk that completed the decision.")
    char_offset: int = Field(..., ge=0, description="Stream offset just after the closing tag.")


class DispatchTools(TableConfig):
    """Run these tool calls now (``source`` says whether Φ or the model's plan chose them)."""

    kind: Literal["dispatch"] = "dispatch"
    source: Literal["phi", "plan"]
    calls: tuple[ToolCall, ...]
    point: DispatchPoint


RunStep = PerceptionEvent | DispatchTools


class PerceptionOutcome(TableConfig):
    """The whole W1 step: parse result, Φ decision, what was dispatched and when."""

    result: PerceptionResult
    phi: PhiOutcome
    dispatched: DispatchTools | None
    plan_ignored: bool = False


class PerceptionRun:
    """One turn's perception: feed chunks, get steps; ``finish`` for the outcome."""

    def __init__(
        self,
        table: PhiTable,
        snapshot: Snapshot,
        *,
        counters: FallThroughCounters | None = None,
        labels: Mapping[str, Collection[str]] | None = None,
        tools: Collection[str] | None = None,
        turn: int | None = None,
        live_version: int | None = None,
        on_dispatch: Callable[[DispatchTools], Any] | None = None,
        index: Mapping[tuple[str, str], PhiRow] | None = None,
        tags: W1Tags = LONG_TAGS,
    ) -> None:
        self.table = table
        self.snapshot = snapshot
        self.counters = counters if counters is not None else FallThroughCounters()
        self.parser = PerceptionParser(labels=labels, tools=tools, tags=tags)
        self._turn = turn
        self._live_version = live_version
        self._on_dispatch = on_dispatch
        self._index = index
        self._chunks = 0
        self.phi: PhiOutcome | None = None
        self.dispatched: DispatchTools | None = None
        self.plan_ignored = False
        self.narration: list[str] = []

    @property
    def frozen(self) -> bool:
        """True once a tool set has been dispatched (by Φ or by the plan)."""
        return self.dispatched is not None

    def feed(self, chunk: str) -> list[RunStep]:
        """Feed one text delta; return parser events and at most one dispatch step, in order."""
        index = self._chunks
        self._chunks += 1
        steps: list[RunStep] = []
        for event in self.parser.feed(chunk):
            steps.append(event)
            if isinstance(event, NarrationDelta):
                self.narration.append(event.text)
            elif isinstance(event, SubIntentParsed):
                self._on_sub_intent(event, index, steps)
            elif isinstance(event, PlanParsed):
                self._on_plan(event, index, steps)
        return steps

    def _dispatch(self, source: Literal["phi", "plan"], calls: tuple[ToolCall, ...], index: int, offset: int,
                  steps: list[RunStep]) -> None:
        step = DispatchTools(source=source, calls=calls, point=DispatchPoint(chunk_index=index, char_offset=offset))
        self.dispatched = step
        steps.append(step)
        if self._on_dispatch is not None:
            self._on_dispatch(step)

    def _on_sub_intent(self, event: SubIntentParsed, index: int, steps: list[RunStep]) -> None:
        outcome = phi_lookup(
            self.table,
            event.intent,
            event.sub_intent,
            self.snapshot,
            turn=self._turn,
            live_version=self._live_version,
            index=self._index,
        )
        self.phi = outcome
        self.counters.record(outcome)
        if outcome.hit:
            self._dispatch("phi", outcome.tools, index, event.offset, steps)

    def _on_plan(self, event: PlanParsed, index: int, steps: list[RunStep]) -> None:
        if self.frozen:
            self.plan_ignored = True
            self.counters.plan_ignored += 1
            return
        self._dispatch("plan", event.calls, index, event.offset, steps)

    @property
    def plan_moot(self) -> bool:
        """Φ froze a tool set and the narration is complete: a later PLAN could change nothing."""
        return self.dispatched is not None and self.dispatched.source == "phi" and self.parser.narration_closed

    def finish(self, *, stopped_early: bool = False) -> PerceptionOutcome:
        """End of stream; raises InvalidModelOutput if the stream was incomplete.

        ``stopped_early``: the caller stopped reading once :attr:`plan_moot` held.
        """
        result = self.parser.finish(plan_optional=stopped_early and self.plan_moot)
        assert self.phi is not None  # set when </SUB_INTENT> closed, which finish() guarantees
        return PerceptionOutcome(
            result=result, phi=self.phi, dispatched=self.dispatched, plan_ignored=self.plan_ignored
        )

    async def drive(self, stream: AsyncIterator[str]) -> AsyncIterator[RunStep]:
        """Consume an async stream of deltas, yielding steps as they become certain.

        Call :meth:`finish` after the iteration ends for the outcome.
        """
        async for chunk in stream:
            for step in self.feed(chunk):
                yield step
