"""The one orchestrator loop: a bounded ReAct over what is offered, with the parts a family supplies.

::

    step 1..max_steps   offer → one structured-output call (its schema: the offer) → parse, re-checked
                        against the offer → ``<prefix>.step`` event (raw output, the offer's summary —
                        enough to re-parse it on replay —, decision, error)
        read tool       the family's read step (checks, the tool port, the observation folded);
                        it may end the decision itself (a repeated read: answer from what was seen)
        terminal        respond / clarify / select / action / escalate → the family's outcome
        malformed       the mid-guard refuses it (counted, logged) → fallback ``malformed_output``
    step cap            fallback ``step_cap``
    model failure       fallback ``model_timeout`` / ``model_error`` (:func:`complete`)

A :class:`StepPolicy` is what differs between families: the ``tandem`` turn offers enums of grounded
candidates and an append-only prompt; the ``dr`` rung offers its eligible tools and cards with a
fresh prompt per step and lets its mid-guard judge every decision's shape. The loop, its events and
its failures are the same. Failures end the loop by raising :class:`~pipelines.core.fallback.Stop`.
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from typing import Any, Protocol

from pipelines.errors import ModelTimeout, UpstreamError
from pipelines.protocols import ModelCall, ModelClient
from pipelines.telemetry import annotate, stage_span

from .decisions import TERMINALS, DecisionError, Offer, parse_decision
from .fallback import Stop, fallback
from .outcome import Emit, Outcome

__all__ = ["StepPolicy", "complete", "run_steps"]


class StepPolicy(Protocol):
    """The parts of the loop a family supplies (see module docstring)."""

    prefix: str
    """Event prefix of the family (``tandem``, ``dr``)."""

    def offer(self, step: int) -> Offer:
        """What may be decided at this step."""
        ...

    def early(self, step: int, offer: Offer) -> Outcome | None:
        """An outcome that needs no model call (e.g. nothing to propose: ask what is missing), or ``None``."""
        ...

    def call(self, step: int, offer: Offer) -> ModelCall:
        """The step's model call, constrained by the offer's schema."""
        ...

    def reject(self, step: int, kind: str, detail: str) -> None:
        """Count and log one refusal of the mid-guard."""
        ...

    def decided(self, step: int, raw: str) -> None:
        """The step's output was a decision (an append-only prompt records it)."""
        ...

    async def read(self, step: int, decision: dict[str, Any]) -> Outcome | None:
        """Run a read decision; ``None`` goes on to the next step, an outcome ends the decision."""
        ...

    async def terminal(self, step: int, decision: dict[str, Any], offer: Offer) -> Outcome:
        """The outcome of a terminal decision (respond, clarify, select, action, escalate)."""
        ...


async def complete(models: ModelClient, call: ModelCall, timeout_s: float | None, *,
                   role: str = "orchestrator") -> str:
    """``role``'s whole completion; a timeout or an engine failure ends the decision (:class:`Stop`)."""
    chunks: list[str] = []
    try:
        async with asyncio.timeout(timeout_s) if timeout_s else nullcontext():
            async for delta in models.stream(role, call):
                chunks.append(delta)
    except (ModelTimeout, TimeoutError) as exc:
        raise Stop(fallback("model_timeout", role)) from exc
    except UpstreamError as exc:
        raise Stop(fallback("model_error", exc.code)) from exc
    return "".join(chunks)


async def run_steps(policy: StepPolicy, models: ModelClient, *, max_steps: int, timeout_s: float | None,
                    emit: Emit) -> Outcome:
    """Run the loop (see module docstring); raises :class:`Stop` on a fallback."""
    for step in range(1, max_steps + 1):
        with stage_span("step", role="orchestrator", step=step) as span:
            offer = policy.offer(step)
            early = policy.early(step, offer)
            if early is not None:
                return early
            raw = await complete(models, policy.call(step, offer), timeout_s)
            try:
                decision = parse_decision(raw, offer)
            except DecisionError as exc:
                annotate(span, decision="malformed_output")
                emit(f"{policy.prefix}.step", step=step, raw=raw, offer=offer.summary(), decision=None,
                     error=exc.detail)
                policy.reject(step, "malformed_output", exc.detail)
                raise Stop(fallback("malformed_output", exc.detail)) from exc
            annotate(span, decision=decision["decision"], output=raw)
            emit(f"{policy.prefix}.step", step=step, raw=raw, offer=offer.summary(), decision=decision, error=None)
            policy.decided(step, raw)
            if decision["decision"] not in TERMINALS:
                out = await policy.read(step, decision)
                if out is None:
                    continue
            else:
                out = await policy.terminal(step, decision, offer)
            out.steps = step
            return out
    raise Stop(fallback("step_cap", f"{max_steps} steps"))
