"""The small Protocols through which models, tools, stores and event sinks reach the pipelines.

``serve/`` implements them with Ray handles, SQLite or Redis; tests implement
them with scripted doubles. Pipelines ask for a *role* (``orchestrator``,
``generator``, ``slot_extractor``), never for a model name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Role",
    "ROLES",
    "ChatMessage",
    "StructuredOutput",
    "ModelCall",
    "ModelClient",
    "TurnRecord",
    "SessionStore",
    "EventSink",
    "NullEventSink",
]

Role = Literal["orchestrator", "generator", "slot_extractor"]
ROLES: tuple[str, ...] = ("orchestrator", "generator", "slot_extractor")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class StructuredOutput(BaseModel):
    """A constraint for the decoder (vLLM structured outputs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["json", "regex", "grammar", "choice"]
    spec: Any = Field(..., description="JSON schema (dict), regex, Lark grammar, or list of choices.")


class ModelCall(BaseModel):
    """One chat call to a role's model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    messages: list[ChatMessage]
    max_tokens: int = Field(256, ge=1)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)
    repetition_penalty: float = Field(1.0, ge=1.0, le=2.0, description="1.0: off.")
    prefix: str = Field(
        "", description="Text the assistant's reply starts with, already decided (fixed tag text): the model "
        "continues it, the stream yields only what follows, and the constraint applies after it.",
    )
    structured_output: StructuredOutput | None = None
    priority: int = Field(
        0, description="Engine scheduling priority: lower runs earlier (vLLM's order); 0 is every "
        "request's default. Takes effect on an engine with scheduling_policy 'priority'.")
    purpose: str = Field(
        "", description="Why the turn makes this call (w1.intent, w1.narration, w2.slots, orchestrator.step, "
        "generator.reply, …): the turn's cost is accounted by it (pipelines.cost); empty: the role's usual one. "
        "Never sent to the engine.")


@runtime_checkable
class ModelClient(Protocol):
    """Role-addressed access to the model deployments."""

    def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        """Yield the text deltas of the completion, in order.

        Raises :class:`pipelines.errors.UpstreamError` subclasses: ``ModelUnavailable``
        when no replica takes the call, ``ModelTimeout`` past the deadline,
        ``InvalidModelOutput`` when the engine reports an error for the request.
        """
        ...


class TurnRecord(BaseModel):
    """One stored turn: the user's message and what was delivered in reply."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str
    index: int = Field(..., ge=0)
    user_text: str
    reply_text: str = ""
    status: Literal["ok", "failed", "fallback"] = "ok"
    locale: str = "en"
    user_id: str | None = None
    trace_id: str = ""
    pipeline: str = ""
    created_at: float = 0.0
    meta: dict[str, Any] = Field(default_factory=dict)


class SessionStore(Protocol):
    """Session history (and, later, answer metas and live-state caches)."""

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        """The session's turns, oldest first (the last ``limit`` when given); [] when unknown."""
        ...

    async def session_exists(self, session_id: str) -> bool: ...

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        """Store one whole turn atomically (user message, reply, status, meta) or nothing."""
        ...


class EventSink(Protocol):
    """Where the structured events of a turn go (a JSONL log, the trace, a test list)."""

    def emit(self, kind: str, **fields: Any) -> None: ...


class NullEventSink:
    def emit(self, kind: str, **fields: Any) -> None:  # noqa: D401 - trivial
        return None
