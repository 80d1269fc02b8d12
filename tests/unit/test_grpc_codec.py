"""serve.grpc_codec: pydantic events ⇄ tandem.v1 protobuf messages."""

from __future__ import annotations

import json

import pytest

from pipelines.cost import CostBlock, CostTotals
from pipelines.events import (
    EVENT_TYPES,
    ActionCardEvent,
    ClarifyEvent,
    DoneEvent,
    ErrorEvent,
    EscalationEvent,
    NarrationDelta,
    ReplyDelta,
    Timings,
    TurnAnswer,
)
from pipelines.protocols import TurnRecord
from serve.grpc_codec import answer_to_proto, event_to_proto, proto_to_event, session_to_proto
from serve.protos import assistant_pb2 as pb


def _done(**kw) -> DoneEvent:
    base = dict(session_id="s1", turn_id="t_1", trace_id="f" * 32, status="ok", pipeline="prompting",
                timings=Timings(queue_ms=0.25, first_token_ms=10.5, end_ms=99.125, stages={"generate": 80.0, "guard": 1.5}))
    base.update(kw)
    return DoneEvent(**base)


SAMPLES = [
    NarrationDelta(text="Looking… ✓"),
    ReplyDelta(text="Hi there."),
    ActionCardEvent(card_id="cancel", title="Cancel #1", params={"order_id": "o1", "qty": 2, "nested": {"a": [1, 2.5, None]}}),
    ActionCardEvent(card_id="c", title="t"),
    ClarifyEvent(question="Which one?", options=["a", "b"]),
    ClarifyEvent(question="Which one?"),
    EscalationEvent(reason_code="over_limit", message="A person will call."),
    ErrorEvent(code="model_timeout", message="the turn ran past its 60 s deadline"),
    _done(),
    _done(status="failed", rules_version="v3", timings=Timings()),
    _done(status="fallback", timings=Timings(queue_ms=1.0, first_token_ms=0.0, end_ms=2.0)),
    _done(timings=Timings(end_ms=5.0, cost=CostBlock(
        calls=2, prompt_tokens=300, cached_prompt_tokens=256, decode_tokens=14, engine_ms=80.5, unreported=1,
        by_role={"orchestrator": CostTotals(calls=2, prompt_tokens=300, cached_prompt_tokens=256, decode_tokens=14,
                                            engine_ms=80.5)},
        by_purpose={"w1.intent": CostTotals(calls=1, prompt_tokens=150, decode_tokens=2, engine_ms=30.0),
                    "w1.sub_intent": CostTotals(calls=1, prompt_tokens=150, cached_prompt_tokens=256,
                                                decode_tokens=12, engine_ms=50.5)}))),
]


def test_samples_cover_every_event_type() -> None:
    assert {e.type for e in SAMPLES} == set(EVENT_TYPES)


@pytest.mark.parametrize("ev", SAMPLES, ids=lambda e: e.type)
def test_event_roundtrip(ev) -> None:
    msg = event_to_proto(ev)
    assert msg.type == ev.type
    wire = pb.Event.FromString(msg.SerializeToString())
    back = proto_to_event(wire)
    assert type(back) is type(ev)
    assert back == ev


def test_body_field_matches_type() -> None:
    names = {"narration.delta": "narration", "reply.delta": "reply", "action_card": "action_card",
             "clarify": "clarify", "escalation": "escalation", "error": "error", "done": "done"}
    for ev in SAMPLES:
        assert event_to_proto(ev).WhichOneof("body") == names[ev.type]


def test_first_token_ms_presence_is_kept() -> None:
    none = event_to_proto(_done(timings=Timings(end_ms=1.0)))
    assert not none.done.timings.HasField("first_token_ms")
    zero = event_to_proto(_done(timings=Timings(first_token_ms=0.0)))
    assert zero.done.timings.HasField("first_token_ms")
    assert proto_to_event(zero).timings.first_token_ms == 0.0


def test_event_without_body_rejected() -> None:
    with pytest.raises(ValueError):
        proto_to_event(pb.Event(type="reply.delta"))


def test_answer_to_proto() -> None:
    events = [NarrationDelta(text="n"), ReplyDelta(text="Hello "), ReplyDelta(text="you."), _done()]
    ans = TurnAnswer.from_events(events)
    msg = pb.TurnAnswer.FromString(answer_to_proto(ans).SerializeToString())
    assert (msg.session_id, msg.turn_id, msg.trace_id, msg.status) == ("s1", "t_1", "f" * 32, "ok")
    assert msg.reply == "Hello you." and msg.narration == "n"
    assert [proto_to_event(e) for e in msg.events] == events


def test_session_to_proto() -> None:
    turns = [
        TurnRecord(turn_id="t_a", index=0, user_text="hi", reply_text="hello", status="ok", locale="en",
                   trace_id="tr1", pipeline="prompting", created_at=1700000000.5, meta={"seed": 3, "ids": ["x"]}),
        TurnRecord(turn_id="t_b", index=1, user_text="again", status="failed", locale="de-DE"),
    ]
    msg = pb.Session.FromString(session_to_proto("s9", turns).SerializeToString())
    assert msg.session_id == "s9"
    assert [t.turn_id for t in msg.turns] == ["t_a", "t_b"]
    a, b = msg.turns
    assert (a.index, a.user_text, a.reply_text, a.status, a.locale, a.trace_id, a.pipeline, a.created_at) == (
        0, "hi", "hello", "ok", "en", "tr1", "prompting", 1700000000.5)
    assert json.loads(a.meta_json) == {"seed": 3, "ids": ["x"]}
    assert (b.index, b.reply_text, b.status, b.locale) == (1, "", "failed", "de-DE")
    assert json.loads(b.meta_json) == {}
    assert session_to_proto("empty", []).turns == []
