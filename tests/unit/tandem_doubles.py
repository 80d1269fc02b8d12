"""A tandem session in process: the real pipeline, runner, retail tools, guardrails and kernels; a scripted model.

``TandemHarness(domain="support")`` builds everything the serve layer would host
(tools over a seeded world, the guardrail table, the domain's rule kernels) as
local objects; only the model is scripted (:class:`ScriptModels`). ``w1(...)``
writes one W1 stream.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pipelines.core.kernels import LocalRuleKernels
from pipelines.core.runner import LocalToolRunner
from pipelines.counters import Counters
from pipelines.domains import load_domain
from pipelines.events import TurnRequest
from pipelines.guardrails import LocalGuardrails
from pipelines.sgc.w1 import LONG_TAGS, W1Tags
from pipelines.tandem.pipeline import TandemPipeline
from pipelines.tandem.settings import TandemSettings
from pipelines.turn import TurnRunner

from .dr_doubles import ListSink, MemStore, ScriptModels, TurnResult, j

__all__ = ["TandemHarness", "w1", "j"]


def w1(intent: str, sub_intent: str, narration: str = "Let me look into that.", tags: W1Tags = LONG_TAGS) -> str:
    """One W1 stream as the grammar allows it (the tandem default's tags)."""
    o, c = tags.open, tags.close
    return (f"{o('INTENT')}{intent}{c('INTENT')}{o('SUB_INTENT')}{sub_intent}{c('SUB_INTENT')}"
            f"{o('NARRATION')}{narration}{c('NARRATION')}{o('PLAN')}[]{c('PLAN')}")


class TandemHarness:
    """One session of the tandem turn over a fresh world (support seed 7, or the coach world)."""

    def __init__(self, domain: str = "support", *, settings: TandemSettings | None = None,
                 tools: Any = None, guardrails: Any = None, user_id: str | None = None) -> None:
        self.domain = load_domain(domain)
        if tools is None and domain == "support":
            from pipelines.domains.support import build_support_domain, generate_world

            self.world = generate_world(7)
            tools = LocalToolRunner(build_support_domain(), self.world)
        elif tools is None and domain == "coach":
            from pipelines.domains.coach import generate_coach_world
            from pipelines.domains.coach.runner import LocalCoachTools

            self.world = generate_coach_world(7)
            self.coach = LocalCoachTools(self.world)
            self.coach.bind("s1", user_id or "u001", {"opponent_id": "o01"})
            tools = self.coach
        self.tools = tools
        self.kernels = LocalRuleKernels.of(self.domain)
        self.models = ScriptModels()
        self.sink = ListSink()
        self.store = MemStore()
        self.counters = Counters()
        self.pipeline = TandemPipeline(self.domain, self.models, tools, guardrails or LocalGuardrails(),
                                       self.kernels, settings=settings, counters=self.counters)
        self.runner = TurnRunner(self.pipeline, self.store, sink=self.sink, max_history_turns=20)
        self.session = "s1"
        self.user_id = user_id
        self.n = 0

    def turn(self, text: str, *, orch: list[Any] = (), gen: list[Any] = (), slots: list[Any] = ()) -> TurnResult:
        self.models.push("orchestrator", *orch)
        self.models.push("generator", *gen)
        self.models.push("slot_extractor", *slots)
        self.n += 1
        start = len(self.sink.events)

        async def go() -> list[Any]:
            req = TurnRequest(text=text, user_id=self.user_id)
            return [e async for e in self.runner.run(self.session, req, trace_id="tr", turn_id=f"t{self.n}")]

        events = asyncio.run(go())
        return TurnResult(events, self.sink.events[start:])

    @property
    def meta(self) -> dict[str, Any]:
        return self.store.turns[self.session][-1].meta["tandem"]

    def calls(self, role: str) -> list[Any]:
        return [c for r, c in self.models.calls if r == role]
