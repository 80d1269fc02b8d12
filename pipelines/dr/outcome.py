"""The orchestrator's input and outcome, and its settings (plain data shared with the pipeline and replay)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipelines.guardrails.pii import Vault

from .contract import EligibleAction, ObservationRecord, Path
from .fallback import Fallback
from .state import PendingAction, SessionFacts

__all__ = ["OrchestratorSettings", "OrchestratorInput", "Outcome", "Emit"]

#: Logs one structured event of the turn: ``emit(kind, **fields)``.
Emit = Callable[..., None]

@dataclass(frozen=True)
class OrchestratorSettings:
    """Bounds of the ReAct loop and of each model / tool call."""

    max_steps: int = 3
    seed: int = 0
    max_tokens: int = 160
    model_timeout_s: float | None = 30.0
    tool_timeout_s: float | None = 10.0
    open_tools: tuple[str, ...] | None = None  # None: the domain's open reads
    private_reads: tuple[str, ...] | None = None  # None: the domain's private reads (once verified)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")


@dataclass
class OrchestratorInput:
    """One turn as the orchestrator sees it (every text already redacted)."""

    session_id: str
    turn_id: str
    user_text: str
    facts: SessionFacts
    vault: Vault
    locale: str = "en"
    history: list[tuple[str, str]] = field(default_factory=list)
    pending: PendingAction | None = None
    confirmation: str | None = None
    route: str | None = None
    route_rule: str | None = None
    blocked: bool = False
    block_rules: list[str] = field(default_factory=list)


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
    escalation_reason: str | None = None
    fallback: Fallback | None = None
    selected_entity: str | None = None
    steps: int = 0
    changed_user_ids: list[str] = field(default_factory=list)
    changed_order_ids: list[str] = field(default_factory=list)

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
