"""The W2 and W3 steps of a turn.

W2 (:class:`Grounding`): started the moment c1 is known, in parallel with the
rest of the W1 stream — the ``slot_extractor`` call (its own context: the
user's text and c1 only; JSON-schema output :func:`query_slots_schema`) and the
live-facts read. :meth:`Grounding.finish` sends both to
:meth:`RuleKernels.ground` (repair → diff → Ψ → paragraph plan) and returns c2.

W3 (:func:`run_w3`): the prior :class:`AnswerMeta` records of the last K turns,
the intent context (c1 plus the repaired slots' exclusions) and the
state-derived candidates (the user's best counters for the ``recommend``
branch) go to :meth:`RuleKernels.schedule` with the session seed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pipelines.annex.sgc_ladder.contract import SgcSettings, c2_of, slot_messages
from pipelines.core.contract import C1, C2, C3
from pipelines.core.kernels import prior_metas
from pipelines.core.ports import LiveStateTools, RuleKernels
from pipelines.domains.coach import BRANCH_OF_INTENT
from pipelines.domains.coach.runner import CoachFacts
from pipelines.errors import UpstreamError
from pipelines.protocols import ModelCall, ModelClient, StructuredOutput
from pipelines.sgc.w1 import ToolCall
from pipelines.sgc.w2 import GroundingResult, QuerySlots, query_slots_schema
from pipelines.sgc.w3 import AnswerMeta, Candidate, IntentContext
from pipelines.tools import ToolObservation
from pipelines.turn import TurnContext

from .counters import SgcCounters
from .steps import call_tool, collect

__all__ = ["W2Result", "Grounding", "W3Result", "counter_candidates", "run_w3"]

_SCHEMA = query_slots_schema()


@dataclass
class W2Result:
    slots: QuerySlots
    facts: CoachFacts | None
    grounding: GroundingResult | None
    c2: C2 | None
    ms: float


class Grounding:
    """One turn's W2 (see module docstring)."""

    def __init__(self, ctx: TurnContext, c1: C1, *, models: ModelClient, tools: LiveStateTools, kernels: RuleKernels,
                 counters: SgcCounters, settings: SgcSettings, emit: Callable[..., None],
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.ctx, self.c1, self.models, self.tools, self.kernels = ctx, c1, models, tools, kernels
        self.counters, self.s, self.emit, self.clock = counters, settings, emit, clock
        self._t0 = clock()
        self.slots_task: asyncio.Task[QuerySlots] = asyncio.create_task(self._slots())
        self.facts_task: asyncio.Task[CoachFacts] = asyncio.create_task(self._facts())

    async def _slots(self) -> QuerySlots:
        call = ModelCall(messages=slot_messages(self.ctx.request.text, self.c1), max_tokens=self.s.max_slot_tokens,
                         temperature=self.s.temperature, seed=self.s.seed,
                         structured_output=StructuredOutput(kind="json", spec=_SCHEMA))
        try:
            text = await collect(self.models.stream("slot_extractor", call))
            slots = QuerySlots.model_validate_json(text)
        except (UpstreamError, ValidationError, ValueError) as exc:
            self.counters.w2("slots_invalid")
            self.emit("sgc.w2.slots_invalid", error=getattr(exc, "code", type(exc).__name__))
            return QuerySlots()
        self.counters.w2("slots_ok")
        return slots

    async def _facts(self) -> CoachFacts:
        raw = await self.tools.live_facts(self.ctx.session_id)
        return raw if isinstance(raw, CoachFacts) else CoachFacts.model_validate(raw)

    async def finish(self) -> W2Result:
        """Ground the slots against the facts; ``facts`` is None when they could not be read."""
        slots = await self.slots_task
        try:
            facts: CoachFacts | None = await self.facts_task
        except Exception as exc:
            self.emit("sgc.w2", ok=False, error=type(exc).__name__, stage="facts")
            return W2Result(slots, None, None, None, (self.clock() - self._t0) * 1000)
        try:
            raw = await self.kernels.ground(slots.model_dump(mode="json"), facts.facts.model_dump(mode="json"),
                                            self.c1.intent)
            g = raw if isinstance(raw, GroundingResult) else GroundingResult.model_validate(raw)
        except Exception as exc:  # a kernel failure (or a contradictory Ψ table): no c2 this turn
            self.counters.w2("ground_failed")
            self.emit("sgc.w2", ok=False, error=getattr(exc, "code", type(exc).__name__), stage="ground")
            return W2Result(slots, facts, None, None, (self.clock() - self._t0) * 1000)
        self.counters.w2("grounded")
        if g.repairs:
            self.counters.w2("repairs", len(g.repairs))
        for c in g.conflicts:
            self.counters.w2(f"conflicts.{c.tier}")
        ms = (self.clock() - self._t0) * 1000
        self.emit("sgc.w2", ok=True, slots=g.slots.model_dump(mode="json"),
                  repairs=[r.model_dump() for r in g.repairs], conflicts=[c.model_dump() for c in g.conflicts],
                  plan=[p.model_dump() for p in g.plan.paragraphs], psi_fired=list(g.psi.fired),
                  psi_version=g.psi.table_version, ms=round(ms, 3))
        return W2Result(g.slots, facts, g, c2_of(g), ms)

    def cancel(self) -> None:
        for task in (self.slots_task, self.facts_task):
            if not task.done():
                task.cancel()


@dataclass
class W3Result:
    c3: C3
    meta: AnswerMeta
    inputs: dict[str, Any]
    ms: float


def counter_candidates(obs: ToolObservation | None, k: int = 5) -> list[Candidate]:
    """``creature:<species>`` candidates weighted by matchup score, from a ``matchup_scores`` result."""
    if obs is None or not obs.ok or not obs.result:
        return []
    return [Candidate(id=f"creature:{e['species']}", weight=round(max(float(e["score"]), 1.0) / 50.0, 3))
            for e in obs.result.get("scores", [])[:k]]


async def run_w3(ctx: TurnContext, c1: C1, slots: QuerySlots | None, observations: list[ToolObservation],
                 state: dict[str, Any], turn_index: int, *, tools: LiveStateTools, kernels: RuleKernels,
                 counters: SgcCounters, settings: SgcSettings, emit: Callable[..., None],
                 clock: Callable[[], float] = time.perf_counter) -> W3Result:
    """W3 for one turn (see module docstring)."""
    t0 = clock()
    excluded = tuple(f"creature:{e}" for e in (slots.excluded_entities if slots else ()))
    intent_ctx = IntentContext(intent=c1.intent, sub_intent=c1.sub_intent, excluded_subjects=excluded)
    cands: list[Candidate] = []
    if BRANCH_OF_INTENT.get(c1.intent) == "recommend":
        matchup = next((o for o in observations if o.tool == "matchup_scores" and o.ok), None)
        if matchup is None and state.get("user_id") and state.get("opponent_id"):
            call = ToolCall(tool="matchup_scores", args={"user_id": state["user_id"],
                                                          "opponent_id": state["opponent_id"], "top_k": 5})
            matchup = await call_tool(tools, call, ctx.session_id, timeout_s=settings.tool_timeout_s,
                                      counters=counters)
        cands = counter_candidates(matchup)
    seed = settings.session_seed_fn(ctx.session_id)
    inputs = {"c1": intent_ctx.model_dump(mode="json"), "candidates": [c.model_dump() for c in cands],
              "turn_index": turn_index}
    pick, raw = await kernels.schedule(ctx.session_id, prior_metas(ctx, settings.w3_window), inputs["c1"],
                                       inputs["candidates"], turn_index, seed=seed)
    meta = raw if isinstance(raw, AnswerMeta) else AnswerMeta.model_validate(raw)
    counters.w3(f"issued.{meta.guidance_type}" if pick is not None else "none")
    ms = (clock() - t0) * 1000
    emit("sgc.w3", pick=pick, meta=meta.model_dump(mode="json"), candidates=len(cands),
         rules_version=ctx.rules_version, ms=round(ms, 3))
    return W3Result(C3(guidance_type=meta.guidance_type, subject_id=pick), meta, inputs, ms)
