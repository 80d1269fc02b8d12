"""The ``pe_agent`` baseline: Plan-and-Execute.

One ``orchestrator`` call returns the whole plan (JSON: a list of
``{"tool", "args"}``), the tools run one after the other, then one ``generator``
call writes the reply from the same forward contract the SGC rungs use
(without c1 / c2 / c3). Nothing streams before the reply: the first token is
the first reply token. The reply is audited (not guarded) so the ladder's
delivered-violation counts compare side by side.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from pydantic import ValidationError

from pipelines.annex.sgc_ladder.contract import (
    SgcSettings,
    ladder_contract,
    plan_messages,
)
from pipelines.core.ports import LiveStateTools
from pipelines.core.prologue import emitter
from pipelines.domains.coach import SNAPSHOT_KEYS, TOOL_NAMES
from pipelines.errors import UpstreamError
from pipelines.events import ReplyDelta
from pipelines.protocols import ModelCall, ModelClient, StructuredOutput
from pipelines.sgc.snapshot import LoadedState
from pipelines.sgc.w1 import ToolCall
from pipelines.telemetry import stage_span
from pipelines.turn import TurnContext

from .counters import SgcCounters, sgc_fallback
from .pipeline import audit_facts_result
from .steps import call_tool, collect, next_turn_index, reply_step

__all__ = ["plan_schema", "parse_plan", "PlanExecutePipeline"]


def plan_schema(tools: Collection[str]) -> dict[str, Any]:
    """JSON schema of the plan: a list of tool calls over the registered tools."""
    return {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"tool": {"enum": sorted(tools)}, "args": {"type": "object"}},
            "required": ["tool", "args"],
            "additionalProperties": False,
        },
    }


def parse_plan(text: str, tools: Collection[str]) -> list[ToolCall]:
    """The plan's tool calls; ValueError when it is not a list of calls to known tools."""
    raw = json.loads(text)
    if not isinstance(raw, list):
        raise ValueError("the plan is not a JSON list")
    calls = [ToolCall.model_validate(item) for item in raw]
    unknown = [c.tool for c in calls if c.tool not in tools]
    if unknown:
        raise ValueError(f"unknown tools {unknown}")
    return calls


class PlanExecutePipeline:
    """``pe_agent`` (see module docstring)."""

    name = "pe_agent"

    def __init__(self, models: ModelClient, tools: LiveStateTools, *, settings: SgcSettings | None = None,
                 counters: SgcCounters | None = None, tool_names: Collection[str] = TOOL_NAMES,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.models, self.tools = models, tools
        self.settings = settings or SgcSettings()
        self.counters = counters or SgcCounters()
        self.tool_names = tuple(sorted(tool_names))
        self.clock = clock

    async def run(self, ctx: TurnContext) -> AsyncIterator[Any]:
        s = self.settings

        emit = emitter(ctx, self.name)

        meta: dict[str, Any] = ctx.meta.setdefault("sgc", {})
        meta.update(pipeline=self.name, turn_index=next_turn_index(ctx.history), fallback=None)
        try:
            raw = await self.tools.load_state(ctx.session_id, list(SNAPSHOT_KEYS))
            state = dict((raw if isinstance(raw, LoadedState) else LoadedState.model_validate(raw)).values)
        except Exception:
            self.counters.state_load("load_failed")
            state = {}
        audit = asyncio.create_task(self.tools.live_facts(ctx.session_id)) if s.audit_unguarded else None
        try:
            t0 = self.clock()
            call = ModelCall(messages=plan_messages(ctx.request.text, ctx.history, state, s),
                             max_tokens=s.max_plan_tokens, temperature=s.temperature, seed=s.seed,
                             structured_output=StructuredOutput(kind="json", spec=plan_schema(self.tool_names)))
            try:
                with stage_span("plan", role="orchestrator", turn_id=ctx.turn_id):
                    plan = parse_plan(await collect(self.models.stream("orchestrator", call)), self.tool_names)
            except (UpstreamError, ValidationError, ValueError) as exc:
                sgc_fallback(self.counters, "plan_invalid")
                meta["fallback"] = "plan_invalid"
                ctx.status = "fallback"
                emit("sgc.fallback", trigger="plan_invalid", detail=getattr(exc, "code", type(exc).__name__))
                yield ReplyDelta(text=s.fallback_reply)
                return
            ctx.stage_ms["plan"] = (self.clock() - t0) * 1000
            emit("sgc.pe.plan", tools=[c.tool for c in plan], ms=round(ctx.stage_ms["plan"], 3))
            t1 = self.clock()
            observations = []
            with stage_span("tools", turn_id=ctx.turn_id):
                for c in plan:  # serially, by design of the baseline
                    observations.append(await call_tool(self.tools, c, ctx.session_id, timeout_s=s.tool_timeout_s,
                                                        counters=self.counters))
            ctx.stage_ms["tools"] = (self.clock() - t1) * 1000
            emit("sgc.tools", source="plan", ms=round(ctx.stage_ms["tools"], 3),
                 calls=[{"tool": o.tool, "args": o.args, "ok": o.ok, "error_code": o.error_code}
                        for o in observations])
            meta.update(plan=[c.tool for c in plan],
                        tools=[{"tool": o.tool, "ok": o.ok, "error_code": o.error_code} for o in observations])
            contract = ladder_contract(ctx, state, observations)
            facts = await audit_facts_result(audit) if audit is not None else None
            async for event in reply_step(ctx, contract, facts, meta, models=self.models, settings=s,
                                          counters=self.counters, emit=emit, mode="observe", clock=self.clock):
                yield event
        finally:
            if audit is not None and not audit.done():
                audit.cancel()
