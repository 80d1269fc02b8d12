"""Our pydantic events ⇄ the ``tandem.v1`` protobuf messages (one mapping for both directions)."""

from __future__ import annotations

import json
from typing import Any

from pipelines.events import (
    EVENT_ADAPTER,
    ActionCardEvent,
    ClarifyEvent,
    DoneEvent,
    ErrorEvent,
    EscalationEvent,
    NarrationDelta,
    ReplyDelta,
    TurnAnswer,
)
from pipelines.protocols import TurnRecord
from serve.protos import assistant_pb2 as pb

__all__ = ["event_to_proto", "proto_to_event", "answer_to_proto", "session_to_proto"]


def event_to_proto(ev: Any) -> pb.Event:
    out = pb.Event(type=ev.type)
    if isinstance(ev, NarrationDelta):
        out.narration.text = ev.text
    elif isinstance(ev, ReplyDelta):
        out.reply.text = ev.text
    elif isinstance(ev, ActionCardEvent):
        out.action_card.CopyFrom(pb.ActionCard(card_id=ev.card_id, title=ev.title, params_json=json.dumps(ev.params)))
    elif isinstance(ev, ClarifyEvent):
        out.clarify.CopyFrom(pb.Clarify(question=ev.question, options=ev.options))
    elif isinstance(ev, EscalationEvent):
        out.escalation.CopyFrom(pb.Escalation(reason_code=ev.reason_code, message=ev.message))
    elif isinstance(ev, ErrorEvent):
        err = pb.Error(code=ev.code, message=ev.message)
        if ev.retry_after_s is not None:
            err.retry_after_s = ev.retry_after_s
        out.error.CopyFrom(err)
    elif isinstance(ev, DoneEvent):
        t = ev.timings
        timings = pb.Timings(queue_ms=t.queue_ms, end_ms=t.end_ms, stages=t.stages,
                             cost_json=t.cost.model_dump_json() if t.cost is not None else "")
        if t.first_token_ms is not None:
            timings.first_token_ms = t.first_token_ms
        out.done.CopyFrom(
            pb.Done(
                session_id=ev.session_id, turn_id=ev.turn_id, trace_id=ev.trace_id, status=ev.status,
                pipeline=ev.pipeline, timings=timings, rules_version=ev.rules_version or "",
                replayed=ev.replayed,
            )
        )
    else:  # pragma: no cover - the union is closed
        raise TypeError(f"unknown event {type(ev).__name__}")
    return out


def proto_to_event(msg: pb.Event) -> Any:
    """The inverse of :func:`event_to_proto` (used by clients and tests)."""
    kind = msg.WhichOneof("body")
    if kind in ("narration", "reply"):
        data: dict[str, Any] = {"text": getattr(msg, kind).text}
    elif kind == "action_card":
        data = {"card_id": msg.action_card.card_id, "title": msg.action_card.title,
                "params": json.loads(msg.action_card.params_json or "{}")}
    elif kind == "clarify":
        data = {"question": msg.clarify.question, "options": list(msg.clarify.options)}
    elif kind == "escalation":
        data = {"reason_code": msg.escalation.reason_code, "message": msg.escalation.message}
    elif kind == "error":
        data = {"code": msg.error.code, "message": msg.error.message,
                "retry_after_s": msg.error.retry_after_s if msg.error.HasField("retry_after_s") else None}
    elif kind == "done":
        d, t = msg.done, msg.done.timings
        data = {
            "session_id": d.session_id, "turn_id": d.turn_id, "trace_id": d.trace_id, "status": d.status,
            "pipeline": d.pipeline, "rules_version": d.rules_version or None, "replayed": d.replayed,
            "timings": {"queue_ms": t.queue_ms, "end_ms": t.end_ms, "stages": dict(t.stages),
                        "first_token_ms": t.first_token_ms if t.HasField("first_token_ms") else None,
                        "cost": json.loads(t.cost_json) if t.cost_json else None},
        }
    else:
        raise ValueError("event without a body")
    return EVENT_ADAPTER.validate_python({"type": msg.type, **data})


def answer_to_proto(ans: TurnAnswer) -> pb.TurnAnswer:
    return pb.TurnAnswer(
        session_id=ans.session_id, turn_id=ans.turn_id, trace_id=ans.trace_id, status=ans.status,
        reply=ans.reply, narration=ans.narration, events=[event_to_proto(e) for e in ans.events],
    )


def session_to_proto(session_id: str, turns: list[TurnRecord]) -> pb.Session:
    return pb.Session(
        session_id=session_id,
        turns=[
            pb.StoredTurn(
                turn_id=t.turn_id, index=t.index, user_text=t.user_text, reply_text=t.reply_text,
                status=t.status, locale=t.locale, trace_id=t.trace_id, pipeline=t.pipeline,
                created_at=t.created_at, meta_json=json.dumps(t.meta),
            )
            for t in turns
        ],
    )
