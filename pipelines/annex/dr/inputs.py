"""The DR orchestrator's input (one turn as it sees it) and its loop settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelines.annex.dr.state import SessionFacts
from pipelines.core.contract import PendingCard
from pipelines.guardrails.pii import Vault

__all__ = ["OrchestratorSettings", "OrchestratorInput"]


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
    pending: PendingCard | None = None
    confirmation: str | None = None
    route: str | None = None
    route_rule: str | None = None
    blocked: bool = False
    block_rules: list[str] = field(default_factory=list)
    user_texts: list[str] = field(default_factory=list)  # the session's user texts (redacted), for grounding
    fence: int | None = None  # the turn's lease token (TurnContext.fence): the write ledger refuses a stale one
