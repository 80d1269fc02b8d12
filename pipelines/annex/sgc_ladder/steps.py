"""Shared turn steps: turn index, tool execution, and the (guarded or audited) generator step."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from pipelines.annex.sgc_ladder.contract import SgcSettings, generator_messages, sgc_view
from pipelines.annex.sgc_ladder.guard import guard_gate
from pipelines.core.contract import C2, ForwardContract
from pipelines.core.generate import guarded_sentences
from pipelines.core.ports import LiveStateTools, ToolCallResult, ToolSession
from pipelines.domains.coach.judge import ReplyJudge
from pipelines.domains.coach.runner import CoachFacts
from pipelines.errors import UpstreamError
from pipelines.events import ReplyDelta
from pipelines.gate import SentenceGate
from pipelines.guardrails import SentenceSplitter
from pipelines.protocols import ModelCall, ModelClient, TurnRecord
from pipelines.sgc.w1 import ToolCall
from pipelines.spans import tool_span
from pipelines.telemetry import stage_span
from pipelines.tools import ToolObservation
from pipelines.turn import TurnContext

from .counters import SgcCounters, sgc_fallback

__all__ = ["next_turn_index", "call_tool", "collect", "Generation", "reply_step"]


def next_turn_index(history: list[TurnRecord]) -> int:
    """One past the newest stored ``meta["sgc"]["turn_index"]`` (the history may be a window)."""
    for t in reversed(history):
        idx = (t.meta.get("sgc") or {}).get("turn_index")
        if isinstance(idx, int) and idx >= 0:
            return idx + 1
    return len(history)


async def call_tool(tools: LiveStateTools, call: ToolCall, session_id: str, *, timeout_s: float,
                    counters: SgcCounters) -> ToolObservation:
    """Run one tool call; a timeout or a failure of the port becomes a failed observation."""
    args = dict(call.args)
    try:
        with tool_span(call.tool, args) as span:
            async with asyncio.timeout(timeout_s):
                raw = await tools.call(call.tool, args, ToolSession(session_id=session_id))
            res = raw if isinstance(raw, ToolCallResult) else ToolCallResult.model_validate(raw)
            obs = res.observation
            span.observation(obs.result, ok=obs.ok, reason=res.reason or obs.error_code)
    except TimeoutError:
        counters.tool("timeout")
        return ToolObservation(tool=call.tool, args=args, ok=False, error_code="tool_timeout",
                               error_message=f"no result within {timeout_s:g} s")
    except Exception as exc:  # a tools deployment failure: the turn goes on without this result
        counters.tool("failed")
        return ToolObservation(tool=call.tool, args=args, ok=False, error_code=getattr(exc, "code", "tool_error"),
                               error_message=type(exc).__name__)
    counters.tool("ok" if obs.ok else "failed")
    return obs


async def collect(stream: AsyncIterator[str]) -> str:
    return "".join([d async for d in stream])


class Generation:
    """The generator call: streams raw deltas (unguarded, optionally audited) or guarded sentences."""

    def __init__(self, models: ModelClient, settings: SgcSettings, counters: SgcCounters,
                 emit: Callable[..., None]) -> None:
        self.models = models
        self.s = settings
        self.counters = counters
        self.emit = emit
        self.failed = False
        self.text = ""

    def call(self, contract: ForwardContract) -> ModelCall:
        s = self.s
        return ModelCall(messages=generator_messages(contract, s.max_list_items), max_tokens=s.max_reply_tokens,
                         temperature=s.temperature, seed=s.seed)

    async def run(self, contract: ForwardContract, gate: SentenceGate | None) -> AsyncIterator[ReplyDelta]:
        """Yield the reply; on a model failure before any text, the fallback reply (``failed`` is set)."""
        parts: list[str] = []
        call = self.call(contract)
        try:
            if gate is not None and gate.mode == "enforce":
                async for out in guarded_sentences(self.models, call, gate):
                    parts.append(("" if not parts else " ") + out)
                    yield ReplyDelta(text=parts[-1])
            else:
                async for delta in self.models.stream("generator", call):
                    if delta:
                        parts.append(delta)
                        yield ReplyDelta(text=delta)
        except UpstreamError as exc:
            self.failed = True
            sgc_fallback(self.counters, "model_error")
            self.emit("sgc.fallback", trigger="model_error", stage="generate", code=exc.code)
        if not parts:
            self.failed = True
            parts.append(self.s.fallback_reply)
            yield ReplyDelta(text=self.s.fallback_reply)
        self.text = "".join(parts)
        if gate is not None and gate.mode == "observe":
            audit = SentenceSplitter()
            for sentence in audit.feed(self.text) + audit.flush():
                await gate.release(sentence)


async def reply_step(ctx: TurnContext, contract: ForwardContract, facts: CoachFacts | None, meta: dict[str, Any], *,
                     models: ModelClient, settings: SgcSettings, counters: SgcCounters, emit: Callable[..., None],
                     mode: Literal["enforce", "observe"], c2: C2 | None = None, summary: bool = False,
                     clock: Callable[[], float] = time.perf_counter) -> AsyncIterator[ReplyDelta]:
    """A ladder turn's reply: the contract logged, the coach judge's gate over the live facts (enforced, or
    audited on the unguarded rungs), the generator through it; the stage timed, ``meta`` written."""
    s = settings
    emit("contract.forward", contract=contract.model_dump(mode="json"))
    gate = None
    if facts is not None:
        gate = guard_gate(ReplyJudge(facts, sgc_view(contract, s.max_list_items), c2), counters, emit, mode=mode,
                          safe_unowned=s.safe_unowned, safe_contradiction=s.safe_contradiction)
    gen = Generation(models, s, counters, emit)
    t0 = clock()
    with stage_span("generate", role="generator", turn_id=ctx.turn_id):
        async for event in gen.run(contract, gate):
            yield event
    ctx.stage_ms["generate"] = (clock() - t0) * 1000
    if gen.failed:
        meta["fallback"] = meta.get("fallback") or "model_error"
        ctx.status = "fallback"
    meta["guard"] = gate.summary() if gate is not None else None
    if summary:
        emit("sgc.post_guard", decision="summary", **(meta["guard"] or {"mode": "off"}))
    emit("stage.generate", role="generator", ms=round(ctx.stage_ms["generate"], 3), reply_chars=len(gen.text))
