"""Fallback triggers and their classes, and the counters every DR decision increments.

A fallback is the conservative end of a turn: the generator explains only the
context already validated (no new action is ever taken, no safety route is
ever skipped), and ``ctx.status`` becomes ``"fallback"``. Each trigger has a
class::

    infra   model_timeout, model_error, tool_timeout, tool_error, malformed_output, invalid_tool_call
    policy  step_cap, no_eligible_action, ambiguous_state, inconsistent_observation, guardrail_block,
            ungrounded_argument

:class:`Counters` holds plain dict counters (``serve/`` exports a snapshot as
Prometheus metrics); all increments go through its methods.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from pipelines.counters import CounterFamilies

__all__ = ["FALLBACK_TRIGGERS", "FallbackClass", "Fallback", "Counters", "fallback"]

FallbackClass = Literal["infra", "policy"]

FALLBACK_TRIGGERS: dict[str, FallbackClass] = {
    "model_timeout": "infra",
    "model_error": "infra",
    "tool_timeout": "infra",
    "tool_error": "infra",
    "malformed_output": "infra",
    "invalid_tool_call": "infra",
    "step_cap": "policy",
    "no_eligible_action": "policy",
    "ambiguous_state": "policy",
    "inconsistent_observation": "policy",
    "guardrail_block": "policy",
    "ungrounded_argument": "policy",
}


class Fallback(BaseModel):
    """Why a turn fell back: the trigger, its class, and a reason code or detail."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trigger: str
    cls: FallbackClass
    detail: str = ""


def fallback(trigger: str, detail: str = "") -> Fallback:
    """A :class:`Fallback` for a known trigger (unknown triggers are a programming error)."""
    return Fallback(trigger=trigger, cls=FALLBACK_TRIGGERS[trigger], detail=detail[:200])


class Counters(CounterFamilies):
    """Process-wide DR counters: fallbacks, escalations, blocked attempts, guard decisions, paths."""

    FAMILIES = ("fallbacks", "fallback_classes", "escalations", "blocked", "guard", "paths", "delivered_violations")



    def fallback(self, fb: Fallback) -> None:
        """One fallback, by trigger and by class."""
        self._inc("fallbacks", fb.trigger)
        self._inc("fallback_classes", fb.cls)

    def escalation(self, reason_code: str) -> None:
        """One escalation to a person, by reason code."""
        self._inc("escalations", reason_code)

    def blocked(self, kind: str) -> None:
        """One blocked attempt (a withheld sentence, a refused tool call or card), by kind."""
        self._inc("blocked", kind)

    def guard(self, stage: str, decision: str) -> None:
        """One guardrail decision, e.g. ``("post", "pass")`` or ``("pre", "block")``."""
        self._inc("guard", f"{stage}.{decision}")

    def path(self, path: str) -> None:
        """One turn ended on ``path`` (answer, clarify, action_card, escalate, fallback)."""
        self._inc("paths", path)

    def delivered_violation(self, kind: str) -> None:
        """A violation found in delivered text by the final closure check (must stay at zero)."""
        self._inc("delivered_violations", kind)



