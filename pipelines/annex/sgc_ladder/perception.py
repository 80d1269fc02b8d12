"""The W1 step of a turn: snapshot (prewarm / restore + version probe), the streaming 4-in-1 call,
Φ dispatch of the frozen tool set while narration streams, and fill at tool time.

::

    session open   prewarm(PREWARM_KEYS) before the call (the prompt shows the state)
    later turns    the snapshot comes from the last turn's meta; a version probe runs
                   concurrently with the model's first token and marks older entries stale
    </SUB_INTENT>  Φ(intent, sub_intent, snapshot): hit → tools dispatched at once as tasks;
                   miss → wait for <PLAN> (counted: unmapped / state unavailable)
    dispatch       fill (re-read FILL_KEYS and Φ's missing keys, refresh stale ones) runs beside the tools
    <PLAN>         dispatched only when nothing is frozen; otherwise ignored and counted

:meth:`Perception.stream` yields :class:`pipelines.events.NarrationDelta` as the
narration arrives; :meth:`Perception.finish` awaits the tools and the fill.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pipelines.annex.sgc_ladder.contract import SgcSettings, perception_messages
from pipelines.annex.sgc_ladder.ports import ToolsStateLoader
from pipelines.core.contract import C1
from pipelines.core.ports import LiveStateTools, W1Tables
from pipelines.events import NarrationDelta
from pipelines.protocols import ModelCall, ModelClient, StructuredOutput
from pipelines.sgc.phi import PhiOutcome, PhiRow
from pipelines.sgc.snapshot import Snapshot, fill, prewarm
from pipelines.sgc.w1 import NarrationDelta as ParsedNarration
from pipelines.sgc.w1 import PlanParsed, SubIntentParsed
from pipelines.sgc.w1_run import (
    DispatchTools,
    FallThroughCounters,
    PerceptionOutcome,
    PerceptionRun,
)
from pipelines.tools import ToolObservation
from pipelines.turn import TurnContext

from .counters import SgcCounters
from .steps import call_tool

__all__ = ["W1Bundle", "W1Result", "Perception", "restore_snapshot"]


@dataclass(frozen=True)
class W1Bundle:
    """The W1 tables of one rules version, with the grammar and Φ index built once."""

    tables: W1Tables
    grammar: str
    index: dict[tuple[str, str], PhiRow]


@dataclass
class W1Result:
    outcome: PerceptionOutcome
    snapshot: Snapshot
    observations: list[ToolObservation]
    dispatch: DispatchTools
    dispatch_ms: float
    tools_ms: float


def restore_snapshot(ctx: TurnContext) -> Snapshot | None:
    """The snapshot stored by the last turn (``None``: session open, prewarm)."""
    if not ctx.history:
        return None
    raw = (ctx.history[-1].meta.get("sgc") or {}).get("snapshot")
    if not isinstance(raw, dict):
        return None
    try:
        snap = Snapshot.model_validate(raw)
    except ValidationError:
        return None
    return snap if snap.session_id in ("", ctx.session_id) else None


class Perception:
    """One turn's W1 (see module docstring)."""

    def __init__(self, ctx: TurnContext, bundle: W1Bundle, *, models: ModelClient, tools: LiveStateTools,
                 counters: SgcCounters, settings: SgcSettings, turn_index: int, prewarm_keys: Sequence[str],
                 fill_keys: Sequence[str], emit: Callable[..., None], on_c1: Callable[[C1], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.ctx, self.bundle, self.models, self.tools = ctx, bundle, models, tools
        self.counters, self.s, self.turn, self.emit = counters, settings, turn_index, emit
        self.prewarm_keys, self.fill_keys = list(prewarm_keys), list(fill_keys)
        self.on_c1, self.clock = on_c1, clock
        self.loader = ToolsStateLoader(tools)
        self.snapshot = Snapshot(session_id=ctx.session_id)
        self.live_version: int | None = None
        self.run: PerceptionRun | None = None
        self.dispatch: DispatchTools | None = None
        self.dispatch_ms = 0.0
        self.stopped_early = False
        self.narration_chars = 0
        self._t0 = self._t_dispatch = 0.0
        self._tasks: list[asyncio.Task[Any]] = []
        self._tool_tasks: list[asyncio.Task[ToolObservation]] = []
        self._fill_task: asyncio.Task[Snapshot] | None = None

    async def _prewarm(self) -> None:
        try:
            self.snapshot = await prewarm(self.loader, self.ctx.session_id, self.prewarm_keys, turn=self.turn)
            self.counters.state_load("prewarm")
        except Exception as exc:  # the tools are down: Φ will miss (state unavailable) and wait for PLAN
            self.counters.state_load("prewarm_failed")
            self.emit("sgc.snapshot", action="prewarm_failed", error=type(exc).__name__)
            return
        self.live_version = self.snapshot.version
        self.emit("sgc.snapshot", action="prewarm", version=self.snapshot.version,
                  keys=sorted(self.snapshot.entries))

    async def _probe(self) -> int | None:
        try:
            return (await self.loader.load(self.ctx.session_id, [])).version
        except Exception:
            self.counters.state_load("probe_failed")
            return None

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.append(task)
        return task

    async def stream(self) -> AsyncIterator[NarrationDelta]:
        """Run the 4-in-1 call; yield narration as it arrives; dispatch tools when decided."""
        restored = restore_snapshot(self.ctx)
        probe: asyncio.Task[int | None] | None = None
        if restored is None:
            await self._prewarm()
        else:
            self.snapshot = restored
            self.counters.state_load("restored")
            probe = self._spawn(self._probe())
        t = self.bundle.tables
        call = ModelCall(
            messages=perception_messages(self.ctx.request.text, self.ctx.history, t.labels,
                                         self.snapshot.values(), self.s),
            max_tokens=self.s.max_perception_tokens, temperature=self.s.temperature, seed=self.s.seed,
            structured_output=StructuredOutput(kind="grammar", spec=self.bundle.grammar),
        )
        self._t0 = self.clock()
        stream = self.models.stream("orchestrator", call)
        async for chunk in stream:
            if self.run is None:
                self._start_run(await probe if probe is not None else self.live_version)
            assert self.run is not None
            if self.s.stop_moot_plan and self.run.plan_moot:
                # Φ froze the tool set and the narration is done: a later PLAN could change
                # nothing, so stop decoding it (the generator starts that much sooner).
                self.stopped_early = True
                self.emit("sgc.w1.early_stop", offset=self.run.parser._consumed,
                          elapsed_ms=round(self._elapsed_ms(), 3))
                await stream.aclose()  # type: ignore[attr-defined]
                break
            for step in self.run.feed(chunk):
                if isinstance(step, ParsedNarration):
                    text = step.text[: max(0, self.s.narration_max_chars - self.narration_chars)]
                    self.narration_chars += len(step.text)  # the grammar caps it; this guards an unconstrained engine
                    if text:
                        yield NarrationDelta(text=text)
                elif isinstance(step, SubIntentParsed):
                    self._on_sub_intent(step)
                elif isinstance(step, DispatchTools) and step is not self.dispatch:
                    self._dispatch(step)
                elif isinstance(step, PlanParsed) and self.run.plan_ignored:
                    phi = self.run.phi
                    self.counters.plan_ignored(phi.intent, phi.sub_intent)  # type: ignore[union-attr]
                    self.emit("sgc.w1.plan_ignored", plan=[c.tool for c in step.calls],
                              frozen=[c.tool for c in self.dispatch.calls] if self.dispatch else [])
        if self.run is None:
            self._start_run(self.live_version)

    def _start_run(self, live_version: int | None) -> None:
        self.live_version = live_version
        t = self.bundle.tables
        self.run = PerceptionRun(t.phi, self.snapshot, counters=FallThroughCounters(), labels=t.labels,
                                 tools=t.tools, turn=self.turn, live_version=live_version, index=self.bundle.index)

    def _elapsed_ms(self) -> float:
        return (self.clock() - self._t0) * 1000

    def _on_sub_intent(self, step: SubIntentParsed) -> None:
        phi: PhiOutcome = self.run.phi  # type: ignore[union-attr, assignment]
        self.counters.phi(phi.kind)
        c1 = C1(intent=step.intent, sub_intent=step.sub_intent)
        if self.run.dispatched is not None and self.dispatch is None:  # type: ignore[union-attr]
            self._dispatch(self.run.dispatched)  # type: ignore[union-attr]
        self.emit("sgc.w1.c1", intent=c1.intent, sub_intent=c1.sub_intent, offset=step.offset,
                  elapsed_ms=round(self._elapsed_ms(), 3))
        point = self.run.dispatched.point if self.run.dispatched else None  # type: ignore[union-attr]
        self.emit("sgc.phi", outcome=phi.kind, intent=phi.intent, sub_intent=phi.sub_intent,
                  table_version=phi.table_version, tools=[c.tool for c in phi.tools],
                  missing_keys=list(phi.missing_keys), stale_keys=list(phi.stale_keys),
                  live_version=self.live_version, snapshot_version=self.snapshot.version,
                  dispatch=None if point is None else {"char_offset": point.char_offset,
                                                       "chunk_index": point.chunk_index,
                                                       "elapsed_ms": round(self.dispatch_ms, 3)})
        if self.on_c1 is not None:
            self.on_c1(c1)

    def _dispatch(self, step: DispatchTools) -> None:
        self.dispatch = step
        self.dispatch_ms = self._elapsed_ms()
        self._t_dispatch = self.clock()
        self.counters.dispatch(step.source)
        sid, timeout = self.ctx.session_id, self.s.tool_timeout_s
        self._tool_tasks = [self._spawn(call_tool(self.tools, c, sid, timeout_s=timeout, counters=self.counters))
                            for c in step.calls]
        self._fill_task = self._spawn(self._fill())
        self.emit("sgc.dispatch", source=step.source, tools=[c.tool for c in step.calls],
                  char_offset=step.point.char_offset, chunk_index=step.point.chunk_index,
                  elapsed_ms=round(self.dispatch_ms, 3))

    async def _fill(self) -> Snapshot:
        snap = self.snapshot
        phi = self.run.phi if self.run else None
        try:
            wanted = list(dict.fromkeys([*self.fill_keys, *(phi.missing_keys if phi else ())]))
            new = await fill(snap, self.loader, wanted, turn=self.turn, refresh=True)  # the turn's focus
            # stale now, or too old by the next turn: re-read at tool time so the next Φ lookup can hit
            stale = new.stale_keys(list(new.entries), turn=self.turn + 1, live_version=self.live_version,
                                   max_age_turns=self.bundle.tables.phi.max_age_turns)
            if stale:
                new = await fill(new, self.loader, stale, turn=self.turn, refresh=True)
                self.counters.state_load("refresh")
        except Exception as exc:
            self.counters.state_load("fill_failed")
            self.emit("sgc.snapshot", action="fill_failed", error=type(exc).__name__)
            return snap
        fresh = {k: e for k, e in new.entries.items() if e.version >= new.version}
        if len(fresh) != len(new.entries):  # keys the live state no longer has: drop, never serve stale
            self.emit("sgc.snapshot", action="prune", keys=sorted(set(new.entries) - set(fresh)))
            new = new.model_copy(update={"entries": fresh})
        if new.entries != snap.entries:
            self.counters.state_load("fill")
            self.emit("sgc.snapshot", action="fill", version=new.version, keys=sorted(new.entries))
        return new

    async def finish(self) -> W1Result:
        """End of stream: the outcome (raises InvalidModelOutput when incomplete), tool results, new snapshot."""
        assert self.run is not None
        outcome = self.run.finish(stopped_early=self.stopped_early)
        assert self.dispatch is not None  # finish() guarantees </PLAN> or a Φ dispatch
        observations = list(await asyncio.gather(*self._tool_tasks))
        tools_ms = (self.clock() - self._t_dispatch) * 1000
        snapshot = await self._fill_task if self._fill_task is not None else self.snapshot
        return W1Result(outcome=outcome, snapshot=snapshot, observations=observations, dispatch=self.dispatch,
                        dispatch_ms=self.dispatch_ms, tools_ms=tools_ms)

    def cancel(self) -> None:
        """Cancel whatever is still in flight (the turn ended early or failed)."""
        for task in self._tasks:
            if not task.done():
                task.cancel()
