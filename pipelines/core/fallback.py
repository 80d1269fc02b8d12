"""Fallback triggers and their classes, and :class:`Stop`, which ends a decision with one.

A fallback is the conservative end of a turn: the reply explains only the context
already validated (no new action is ever taken, no safety route is ever skipped),
and ``ctx.status`` becomes ``"fallback"``. Each trigger has a class::

    infra   model_timeout, model_error, tool_timeout, tool_error, malformed_output, invalid_tool_call,
            write_outcome_unknown, perception_error, plan_invalid, facts_unavailable
    policy  step_cap, no_eligible_action, ambiguous_state, inconsistent_observation, guardrail_block,
            ungrounded_argument

Every pipeline counts through the one family :class:`pipelines.counters.Counters`:
``counters.fallback(fb.trigger, fb.cls)``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["FALLBACK_TRIGGERS", "FallbackClass", "Fallback", "fallback", "Stop"]

FallbackClass = Literal["infra", "policy"]

FALLBACK_TRIGGERS: dict[str, FallbackClass] = {
    "model_timeout": "infra",
    "model_error": "infra",
    "tool_timeout": "infra",
    "tool_error": "infra",
    "malformed_output": "infra",
    "invalid_tool_call": "infra",
    "write_outcome_unknown": "infra",  # a confirmed write's reply was lost twice: it may have run
    "perception_error": "infra",  # the W1 stream failed before its labels closed
    "plan_invalid": "infra",  # a plan call's output is not a list of known tool calls
    "facts_unavailable": "infra",  # the live facts W2 grounds against could not be read
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


class Stop(Exception):
    """Ends a decision with a fallback (raised inside a turn's steps, caught where the outcome is made)."""

    def __init__(self, fb: Fallback) -> None:
        super().__init__(fb.trigger)
        self.fallback = fb
