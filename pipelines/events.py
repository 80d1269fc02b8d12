"""Wire contracts of a turn, shared by HTTP (SSE / JSON) and gRPC.

A turn streams a sequence of :data:`TurnEvent` values and always ends with one
:class:`DoneEvent`. The same pydantic objects are rendered as SSE frames, as a
JSON answer, and as the ``Event`` message of the gRPC service.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from pipelines.cost import CostBlock

__all__ = [
    "TurnRequest",
    "PerceptionLabels",
    "NarrationDelta",
    "ReplyDelta",
    "ActionCardEvent",
    "ClarifyEvent",
    "EscalationEvent",
    "ErrorEvent",
    "Timings",
    "DoneEvent",
    "Heartbeat",
    "TurnEvent",
    "TurnAnswer",
    "EVENT_ADAPTER",
    "EVENT_TYPES",
]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PerceptionLabels(_Wire):
    """An intent and sub-intent given with a turn instead of perceived (evaluation only: ``--perception oracle``)."""

    intent: str = Field(..., min_length=1, max_length=40, pattern=r"^[a-z_]+$")
    sub_intent: str = Field(..., min_length=1, max_length=40, pattern=r"^[a-z_]+$")


class TurnRequest(_Wire):
    """Body of ``POST /v1/sessions/{id}/turns`` and of the gRPC ``TurnRequest``."""

    text: str = Field(..., description="The user's message (non-empty).")
    locale: str = Field("en", min_length=2, max_length=35, pattern=r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")
    user_id: str | None = Field(None, max_length=128)
    perception: PerceptionLabels | None = Field(
        None, description="Evaluation only: the turn's intent and sub-intent, taken instead of the model's labels "
        "(the mechanisms after perception measured apart). Refused (422) unless the app's pipeline was deployed "
        "with `oracle_perception: true`, which no serving profile sets.")

    @field_validator("text")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("text must not be empty")
        return v


class NarrationDelta(_Wire):
    """A piece of the narration the orchestrator streams while it decides."""

    type: Literal["narration.delta"] = "narration.delta"
    text: str


class ReplyDelta(_Wire):
    """A released piece of the reply (a sentence once the post-guard has passed it)."""

    type: Literal["reply.delta"] = "reply.delta"
    text: str


class ActionCardEvent(_Wire):
    """A structured action card the orchestrator selected and the backend validated."""

    type: Literal["action_card"] = "action_card"
    card_id: str
    title: str
    params: dict[str, Any] = Field(default_factory=dict)


class ClarifyEvent(_Wire):
    type: Literal["clarify"] = "clarify"
    question: str
    options: list[str] = Field(default_factory=list)


class EscalationEvent(_Wire):
    type: Literal["escalation"] = "escalation"
    reason_code: str
    message: str = ""


class ErrorEvent(_Wire):
    """A typed error of the turn: ``code`` is a row of the table in :mod:`pipelines.errors`."""

    type: Literal["error"] = "error"
    code: str
    message: str
    retry_after_s: float | None = Field(None, description="Retry hint for back-pressure errors.")


class Timings(_Wire):
    """Milliseconds since the turn was received by the ingress."""

    queue_ms: float = 0.0
    first_token_ms: float | None = None
    end_ms: float = 0.0
    stages: dict[str, float] = Field(default_factory=dict)
    cost: CostBlock | None = Field(
        None, description="What the turn spent on its models, from the engine's own usage (pipelines.cost): "
        "calls, prompt / cached prompt / decode tokens and engine ms, in total, per role and per purpose. "
        "None: the turn ran no pipeline (refused before it started, or a replayed answer).")


class DoneEvent(_Wire):
    type: Literal["done"] = "done"
    session_id: str
    turn_id: str
    trace_id: str
    status: Literal["ok", "failed", "fallback"]
    pipeline: str
    timings: Timings
    rules_version: str | None = None
    replayed: bool = Field(False, description="A retry with a known Idempotency-Key: the recorded answer.")


class Heartbeat(_Wire):
    """Not an event of the turn: the marker a stream renders as a keep-alive (an SSE comment)."""

    type: Literal["heartbeat"] = "heartbeat"


TurnEvent = Annotated[
    NarrationDelta | ReplyDelta | ActionCardEvent | ClarifyEvent | EscalationEvent | ErrorEvent | DoneEvent,
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(TurnEvent)
EVENT_TYPES = (
    "narration.delta",
    "reply.delta",
    "action_card",
    "clarify",
    "escalation",
    "error",
    "done",
)


class TurnAnswer(_Wire):
    """The non-streaming answer: the whole reply plus every event in order."""

    session_id: str
    turn_id: str
    trace_id: str
    status: str
    reply: str
    narration: str = ""
    events: list[TurnEvent]

    @classmethod
    def from_events(cls, events: list[Any]) -> TurnAnswer:
        done = events[-1]
        reply = "".join(e.text for e in events if isinstance(e, ReplyDelta))
        narration = "".join(e.text for e in events if isinstance(e, NarrationDelta))
        return cls(
            session_id=done.session_id,
            turn_id=done.turn_id,
            trace_id=done.trace_id,
            status=done.status,
            reply=reply,
            narration=narration,
            events=events,
        )
