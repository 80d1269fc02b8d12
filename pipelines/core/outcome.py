"""Where a turn's decision ended (:class:`Outcome`), and the event callback every step logs through."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .contract import EligibleAction, ObservationRecord, Path
from .fallback import Fallback

__all__ = ["Outcome", "Emit"]

#: Logs one structured event of the turn: ``emit(kind, **fields)``.
Emit = Callable[..., None]


@dataclass
class Outcome:
    """Where the orchestration ended, with everything validated along the way."""

    path: Path
    observations: list[ObservationRecord] = field(default_factory=list)
    card_id: str | None = None
    card_title: str | None = None
    card_params: dict[str, Any] = field(default_factory=dict)
    executed: EligibleAction | None = None
    clarify_question: str | None = None
    clarify_options: list[str] = field(default_factory=list)
    clarify_about: str | None = None
    """What a clarify asks for (a key of the pack's questions: ``payment_method``, ``choose``…)."""
    escalation_reason: str | None = None
    fallback: Fallback | None = None
    selected_entity: str | None = None
    steps: int = 0
    changed: dict[str, list[str]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The comparable part of the outcome (events, replay, ``meta``)."""
        return {
            "path": self.path,
            "card_id": self.card_id,
            "card_params": self.card_params,
            "executed": self.executed.card_id if self.executed else None,
            "clarify_options": self.clarify_options,
            "escalation_reason": self.escalation_reason,
            "fallback": self.fallback.model_dump() if self.fallback else None,
            "selected_entity": self.selected_entity,
            "steps": self.steps,
        }
