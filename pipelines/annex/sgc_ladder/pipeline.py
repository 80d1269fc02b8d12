"""The SGC rungs ``sgc_w1``, ``sgc_w1w2`` and ``sgc_full``: one class, three levels.

::

    kernels.tables_version / w1_tables    Φ, labels, grammar (cached per rules version) → ctx.rules_version
    Perception (W1)       snapshot, streaming 4-in-1 call, narration → client, Φ dispatch, fill
      └ on c1: Grounding (W2, sgc_w1w2+)  slot extraction + live facts, in parallel with the stream
    tools                  the frozen set's results (dispatched during the stream)
    Grounding.finish       kernels.ground → c2 (conflicts + paragraph plan)
    run_w3 (sgc_full)      kernels.schedule → c3 (guidance pick) and ctx.meta["w3"] (AnswerMeta)
    Generation             generator writes from the forward contract; W2+: every sentence passes the
                           post-guard (withheld → safe wording); lower rungs: audited, counted only

``ctx.meta["sgc"]`` holds: pipeline, turn_index, rules_version, c1, phi, dispatch,
plan_ignored, snapshot (the whole Snapshot, read back next turn), snapshot_version,
tools, w2, w3_inputs, guard, fallback. ``ctx.meta["w3"]`` holds the AnswerMeta (sgc_full).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal

from pipelines.annex.sgc_ladder.contract import SgcSettings, ladder_contract
from pipelines.core.contract import C1
from pipelines.core.ports import LiveStateTools, RuleKernels, W1Tables
from pipelines.core.prologue import emitter
from pipelines.domains.coach import FILL_KEYS, PREWARM_KEYS
from pipelines.domains.coach.runner import CoachFacts
from pipelines.errors import UpstreamError
from pipelines.events import ReplyDelta
from pipelines.protocols import ModelClient
from pipelines.sgc.w1 import SubIntentParsed
from pipelines.sgc.w3 import HISTORY_WINDOW
from pipelines.telemetry import annotate, stage_span
from pipelines.turn import TurnContext

from .counters import SgcCounters, sgc_fallback
from .grounding import Grounding, run_w3
from .perception import LadderW1, W1Bundle
from .steps import next_turn_index, reply_step

__all__ = ["SgcLevel", "SgcPipeline", "audit_facts_result"]

SgcLevel = Literal["sgc_w1", "sgc_w1w2", "sgc_full"]


class SgcPipeline:
    """An SGC rung (see module docstring); ``history_turns`` is what the runner should load (K = 20)."""

    history_turns = HISTORY_WINDOW

    def __init__(self, level: SgcLevel, models: ModelClient, tools: LiveStateTools, kernels: RuleKernels, *,
                 settings: SgcSettings | None = None, counters: SgcCounters | None = None,
                 prewarm_keys: Sequence[str] = PREWARM_KEYS, fill_keys: Sequence[str] = FILL_KEYS,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if level not in ("sgc_w1", "sgc_w1w2", "sgc_full"):
            raise ValueError(f"unknown SGC level {level!r}")
        self.name: str = level
        self.w2 = level in ("sgc_w1w2", "sgc_full")
        self.w3 = level == "sgc_full"
        self.models, self.tools, self.kernels = models, tools, kernels
        self.settings = settings or SgcSettings()
        self.counters = counters or SgcCounters()
        self.prewarm_keys, self.fill_keys = tuple(prewarm_keys), tuple(fill_keys)
        self.clock = clock
        self._bundle: W1Bundle | None = None

    async def _w1_bundle(self) -> W1Bundle:
        version = await self.kernels.tables_version()
        if self._bundle is None or self._bundle.tables.version != version:
            raw = await self.kernels.w1_tables()
            t = raw if isinstance(raw, W1Tables) else W1Tables.model_validate(raw)
            self._bundle = W1Bundle(tables=t, index=t.phi.index())
        return self._bundle

    async def run(self, ctx: TurnContext) -> AsyncIterator[Any]:
        s = self.settings

        emit = emitter(ctx, self.name)

        turn_index = next_turn_index(ctx.history)
        meta: dict[str, Any] = ctx.meta.setdefault("sgc", {})
        meta.update(pipeline=self.name, turn_index=turn_index, fallback=None)
        bundle = await self._w1_bundle()
        ctx.rules_version = bundle.tables.version
        meta["rules_version"] = bundle.tables.version
        holder: dict[str, Grounding] = {}

        def on_c1(ev: SubIntentParsed) -> None:
            c1 = C1(intent=ev.intent, sub_intent=ev.sub_intent)
            meta["c1"] = c1.model_dump()
            if self.w2:
                holder["w2"] = Grounding(ctx, c1, models=self.models, tools=self.tools, kernels=self.kernels,
                                         counters=self.counters, settings=s, emit=emit, clock=self.clock)

        w1 = LadderW1(ctx, bundle, models=self.models, tools=self.tools, counters=self.counters, settings=s,
                        turn_index=turn_index, prewarm_keys=self.prewarm_keys, fill_keys=self.fill_keys,
                        emit=emit, on_c1=on_c1, clock=self.clock)
        audit_facts = None
        try:
            t0 = self.clock()
            try:
                if not self.w2 and s.audit_unguarded:
                    audit_facts = asyncio.create_task(self.tools.live_facts(ctx.session_id))
                with stage_span("w1", turn_id=ctx.turn_id, pipeline=self.name):
                    async for event in w1.stream():
                        yield event
                    ctx.stage_ms["w1_stream"] = (self.clock() - t0) * 1000
                    result = await w1.finish()
                    annotate(phi_hit=result.outcome.phi.kind == "hit", phi=result.outcome.phi.kind,
                             intent=result.outcome.result.intent, sub_intent=result.outcome.result.sub_intent,
                             dispatch=result.dispatch.source, rules_version=bundle.tables.version)
            except UpstreamError as exc:
                async for event in self._fallback(ctx, meta, emit, "perception_error", exc.code):
                    yield event
                return
            ctx.stage_ms["dispatch_at"] = result.dispatch_ms
            ctx.stage_ms["tools"] = result.tools_ms
            outcome = result.outcome
            meta.update(
                phi={"kind": outcome.phi.kind, "table_version": outcome.phi.table_version,
                     "missing_keys": list(outcome.phi.missing_keys), "stale_keys": list(outcome.phi.stale_keys)},
                dispatch={"source": result.dispatch.source, "tools": [c.tool for c in result.dispatch.calls],
                          "char_offset": result.dispatch.point.char_offset,
                          "chunk_index": result.dispatch.point.chunk_index, "ms": round(result.dispatch_ms, 3)},
                plan_ignored=outcome.plan_ignored,
                snapshot=result.snapshot.model_dump(mode="json"), snapshot_version=result.snapshot.version,
                tools=[{"tool": o.tool, "ok": o.ok, "error_code": o.error_code} for o in result.observations],
            )
            emit("sgc.w1.parsed", intent=outcome.result.intent, sub_intent=outcome.result.sub_intent,
                 narration_chars=len(outcome.result.narration), plan=[c.tool for c in outcome.result.plan],
                 plan_ignored=outcome.plan_ignored, length=outcome.result.length,
                 ms=round(ctx.stage_ms["w1_stream"], 3))
            emit("sgc.tools", source=result.dispatch.source, ms=round(result.tools_ms, 3),
                 calls=[{"tool": o.tool, "args": o.args, "ok": o.ok, "error_code": o.error_code}
                        for o in result.observations])
            c1 = C1(intent=outcome.result.intent, sub_intent=outcome.result.sub_intent)
            contract = ladder_contract(ctx, result.snapshot.values(), result.observations,
                                       narration=outcome.result.narration, c1=c1)
            facts: CoachFacts | None = None
            slots = None
            w2_c2 = None
            if self.w2:
                with stage_span("w2", turn_id=ctx.turn_id):  # slot extraction + the W2 kernels
                    w2 = await holder["w2"].finish()
                ctx.stage_ms["w2"] = w2.ms
                facts, slots, w2_c2 = w2.facts, w2.slots, w2.c2
                if facts is None:
                    async for event in self._fallback(ctx, meta, emit, "facts_unavailable", "facts"):
                        yield event
                    return
                if w2.grounding is None:
                    meta["fallback"] = "ground_failed"
                    ctx.status = "fallback"
                else:
                    meta["w2"] = {"slots": w2.grounding.slots.model_dump(mode="json"),
                                  "repairs": [r.model_dump() for r in w2.grounding.repairs],
                                  "conflicts": [c.model_dump() for c in w2.grounding.conflicts],
                                  "plan": [p.model_dump() for p in w2.grounding.plan.paragraphs]}
                contract = contract.model_copy(update={"c2": w2.c2.model_dump() if w2.c2 else None})
            if self.w3:
                with stage_span("w3", turn_id=ctx.turn_id):  # the W3 guidance kernel
                    w3 = await run_w3(ctx, c1, slots, result.observations, result.snapshot.values(), turn_index,
                                      tools=self.tools, kernels=self.kernels, counters=self.counters, settings=s,
                                      emit=emit, clock=self.clock)
                ctx.stage_ms["w3"] = w3.ms
                ctx.meta["w3"] = w3.meta.model_dump(mode="json")
                meta["w3_inputs"] = w3.inputs
                contract = contract.model_copy(update={"c3": w3.c3.model_dump()})
            if facts is None and audit_facts is not None:
                facts = await audit_facts_result(audit_facts)
            async for event in reply_step(ctx, contract, facts, meta, models=self.models, settings=s,
                                          counters=self.counters, emit=emit, c2=w2_c2, summary=True,
                                          mode="enforce" if self.w2 else "observe", clock=self.clock):
                yield event
        finally:
            w1.cancel()
            if "w2" in holder:
                holder["w2"].cancel()
            if audit_facts is not None and not audit_facts.done():
                audit_facts.cancel()

    async def _fallback(self, ctx: TurnContext, meta: dict[str, Any], emit: Callable[..., None], trigger: str,
                        detail: str) -> AsyncIterator[ReplyDelta]:
        sgc_fallback(self.counters, trigger)
        meta["fallback"] = trigger
        ctx.status = "fallback"
        emit("sgc.fallback", trigger=trigger, detail=detail)
        yield ReplyDelta(text=self.settings.fallback_reply)


async def audit_facts_result(task: Any) -> CoachFacts | None:
    try:
        raw = await task
    except Exception:
        return None
    return raw if isinstance(raw, CoachFacts) else CoachFacts.model_validate(raw)
