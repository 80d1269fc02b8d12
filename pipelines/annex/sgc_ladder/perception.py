"""The SGC rungs' W1: the core's perception (:class:`pipelines.core.perception.Perception`) in the 4-in-1
form of the SGC design, with its snapshot kept from turn to turn.

::

    session open   prewarm(PREWARM_KEYS) before the call (the prompt shows the state)
    later turns    the snapshot comes from the last turn's meta; a version probe runs concurrently
                   with the model's first token and marks older entries stale (Φ awaits it)
    W1             one stream: <INTENT><SUB_INTENT><NARRATION><PLAN>; the narration streams as decoded;
                   at </SUB_INTENT> Φ(intent, sub_intent, snapshot) freezes the tool set (hit) or waits
                   for <PLAN> (miss: unmapped / state unavailable); a moot plan is not decoded
    dispatch       the frozen set's tools start at once; fill (re-read FILL_KEYS and Φ's missing keys,
                   refresh stale ones) runs beside them

:meth:`LadderW1.stream` yields :class:`pipelines.events.NarrationDelta` as the narration arrives;
:meth:`LadderW1.finish` awaits the tools and the fill.
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
from pipelines.core.perception import Perception, W1Config
from pipelines.core.ports import LiveStateTools, W1Tables
from pipelines.events import NarrationDelta
from pipelines.sgc.phi import PhiRow
from pipelines.sgc.snapshot import Snapshot, fill, prewarm
from pipelines.sgc.w1 import SubIntentParsed
from pipelines.sgc.w1_run import DispatchTools, PerceptionOutcome
from pipelines.tools import ToolObservation
from pipelines.turn import TurnContext

from .counters import SgcCounters
from .steps import call_tool

__all__ = ["W1Bundle", "W1Result", "LadderW1", "restore_snapshot"]


@dataclass(frozen=True)
class W1Bundle:
    """The W1 tables of one rules version, with Φ's index built once."""

    tables: W1Tables
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


class LadderW1:
    """One turn's W1 on an SGC rung (see module docstring)."""

    def __init__(self, ctx: TurnContext, bundle: W1Bundle, *, models: Any, tools: LiveStateTools,
                 counters: SgcCounters, settings: SgcSettings, turn_index: int, prewarm_keys: Sequence[str],
                 fill_keys: Sequence[str], emit: Callable[..., None],
                 on_c1: Callable[[SubIntentParsed], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.ctx, self.bundle, self.models, self.tools = ctx, bundle, models, tools
        self.counters, self.s, self.turn, self.emit = counters, settings, turn_index, emit
        self.prewarm_keys, self.fill_keys = list(prewarm_keys), list(fill_keys)
        self.on_c1, self.clock = on_c1, clock
        self.loader = ToolsStateLoader(tools)
        self.snapshot = Snapshot(session_id=ctx.session_id)
        self.live_version: int | None = None
        self.w1: Perception | None = None
        self._t_dispatch = 0.0
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
        self.emit("sgc.snapshot", action="prewarm", version=self.snapshot.version, keys=sorted(self.snapshot.entries))

    async def _probe(self) -> int | None:
        try:
            self.live_version = (await self.loader.load(self.ctx.session_id, [])).version
        except Exception:
            self.counters.state_load("probe_failed")
            self.live_version = None
        return self.live_version

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.append(task)
        return task

    def _dispatch(self, step: DispatchTools) -> None:
        self._t_dispatch = self.clock()
        sid, timeout = self.ctx.session_id, self.s.tool_timeout_s
        self._tool_tasks = [self._spawn(call_tool(self.tools, c, sid, timeout_s=timeout, counters=self.counters))
                            for c in step.calls]
        self._fill_task = self._spawn(self._fill())
        assert self.w1 is not None
        self.emit("sgc.dispatch", source=step.source, tools=[c.tool for c in step.calls],
                  char_offset=step.point.char_offset, chunk_index=step.point.chunk_index,
                  elapsed_ms=round(self.w1.elapsed_ms(), 3))

    def _c1(self, ev: SubIntentParsed) -> None:
        assert self.w1 is not None
        self.emit("sgc.w1.c1", intent=ev.intent, sub_intent=ev.sub_intent, offset=ev.offset,
                  elapsed_ms=round(self.w1.elapsed_ms(), 3))
        if self.on_c1 is not None:
            self.on_c1(ev)

    async def stream(self) -> AsyncIterator[NarrationDelta]:
        """Run the 4-in-1 call; yield narration as it arrives; dispatch tools when decided."""
        restored = restore_snapshot(self.ctx)
        live: Any = self.live_version
        if restored is None:
            await self._prewarm()
            live = self.live_version
        else:
            self.snapshot = restored
            self.counters.state_load("restored")
            live = self._spawn(self._probe())
        s, t = self.s, self.bundle.tables
        config = W1Config(max_tokens=s.max_perception_tokens, temperature=s.temperature, seed=s.seed,
                          narration_max_chars=s.narration_max_chars, narration_required=False, opened=False,
                          plan=True, stop_moot_plan=s.stop_moot_plan, degrade=False)
        self.w1 = Perception(self.models, config, labels=t.labels, tools=t.tools, phi=t.phi, snapshot=self.snapshot,
                             counters=self.counters, emit=self.emit, prefix="sgc", dispatch=self._dispatch,
                             on_c1=self._c1, turn=self.turn, live_version=live, index=self.bundle.index,
                             clock=self.clock)
        messages = perception_messages(self.ctx.request.text, self.ctx.history, t.labels, self.snapshot.values(), s)
        async for delta in self.w1.stream(messages):
            yield delta

    async def _fill(self) -> Snapshot:
        snap = self.snapshot
        phi = self.w1.out.phi if self.w1 else None
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
        assert self.w1 is not None
        outcome = self.w1.finish()
        dispatch = self.w1.out.dispatched
        assert dispatch is not None  # finish() guarantees </PLAN> or a Φ dispatch
        observations = list(await asyncio.gather(*self._tool_tasks))
        tools_ms = (self.clock() - self._t_dispatch) * 1000
        snapshot = await self._fill_task if self._fill_task is not None else self.snapshot
        return W1Result(outcome=outcome, snapshot=snapshot, observations=observations, dispatch=dispatch,
                        dispatch_ms=self.w1.out.dispatch_ms or 0.0, tools_ms=tools_ms)

    def cancel(self) -> None:
        """Cancel whatever is still in flight (the turn ended early or failed)."""
        for task in self._tasks:
            if not task.done():
                task.cancel()
