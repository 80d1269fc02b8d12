"""pipelines.events: the wire contracts of a turn."""

from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from pipelines.events import (
    EVENT_ADAPTER,
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
    TurnEvent,
    TurnRequest,
)


def _done(status: str = "ok", **kw) -> DoneEvent:
    return DoneEvent(
        session_id="s1", turn_id="t_1", trace_id="a" * 32, status=status, pipeline="prompting",
        timings=Timings(queue_ms=0.5, first_token_ms=12.25, end_ms=40.0, stages={"generate": 30.5}), **kw,
    )


SAMPLES = [
    NarrationDelta(text="Let me look… "),
    ReplyDelta(text="Your order ships today. "),
    ActionCardEvent(card_id="cancel_order", title="Cancel order #12", params={"order_id": "o12", "n": 2, "x": [1, None]}),
    ActionCardEvent(card_id="c", title="t"),
    ClarifyEvent(question="Which order?", options=["o1", "o2"]),
    ClarifyEvent(question="Which?"),
    EscalationEvent(reason_code="refund_over_limit", message="A person will follow up."),
    EscalationEvent(reason_code="r"),
    ErrorEvent(code="model_timeout", message="late"),
    _done(),
    _done("failed", rules_version="2024-06-01"),
    DoneEvent(session_id="s", turn_id="t", trace_id="x", status="fallback", pipeline="p", timings=Timings()),
]


def test_samples_cover_every_event_type() -> None:
    assert {e.type for e in SAMPLES} == set(EVENT_TYPES)


def test_event_types_match_the_union() -> None:
    union = typing.get_args(typing.get_args(TurnEvent)[0])
    literals = [cls.model_fields["type"].default for cls in union]
    assert tuple(literals) == EVENT_TYPES
    assert len(set(literals)) == len(literals)


@pytest.mark.parametrize("ev", SAMPLES, ids=lambda e: e.type)
def test_roundtrip_through_the_adapter(ev) -> None:
    assert EVENT_ADAPTER.validate_json(ev.model_dump_json()) == ev
    back = EVENT_ADAPTER.validate_python(ev.model_dump())
    assert type(back) is type(ev) and back == ev
    assert EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(ev)) == ev


def test_unknown_type_and_extra_keys_rejected() -> None:
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python({"type": "reply.deltaa", "text": "x"})
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python({"text": "x"})
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python({"type": "reply.delta", "text": "x", "extra": 1})
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python({"type": "done", "session_id": "s", "turn_id": "t", "trace_id": "x",
                                       "status": "maybe", "pipeline": "p", "timings": {}})


def test_events_are_frozen() -> None:
    ev = ReplyDelta(text="a")
    with pytest.raises(ValidationError):
        ev.text = "b"  # type: ignore[misc]


# -- TurnRequest ----------------------------------------------------------------


def test_turn_request_defaults() -> None:
    req = TurnRequest(text="hi")
    assert req.locale == "en" and req.user_id is None


@pytest.mark.parametrize("text", ["", " ", "\n\t  "])
def test_turn_request_blank_text_rejected(text: str) -> None:
    with pytest.raises(ValidationError) as ei:
        TurnRequest(text=text)
    assert ei.value.errors()[0]["loc"] == ("text",)


@pytest.mark.parametrize("locale", ["en", "de-DE", "zh-Hant-TW", "es-419", "fil"])
def test_turn_request_good_locales(locale: str) -> None:
    assert TurnRequest(text="x", locale=locale).locale == locale


@pytest.mark.parametrize("locale", ["", "e", "en_US", "en-", "-en", "123", "en US", "x" * 36, "english-verylongsubtag"])
def test_turn_request_bad_locales(locale: str) -> None:
    with pytest.raises(ValidationError) as ei:
        TurnRequest(text="x", locale=locale)
    assert ei.value.errors()[0]["loc"] == ("locale",)


def test_turn_request_rejects_extra_keys_and_wrong_types() -> None:
    with pytest.raises(ValidationError) as ei:
        TurnRequest.model_validate({"text": "x", "txet": "y"})
    assert ei.value.errors()[0]["type"] == "extra_forbidden"
    with pytest.raises(ValidationError):
        TurnRequest.model_validate({"text": 5})
    with pytest.raises(ValidationError):
        TurnRequest.model_validate({"text": "x", "user_id": "u" * 129})


# -- TurnAnswer -------------------------------------------------------------------


def test_turn_answer_from_events() -> None:
    events = [
        NarrationDelta(text="Checking. "),
        ReplyDelta(text="Hello "),
        ActionCardEvent(card_id="c", title="t"),
        NarrationDelta(text="Done."),
        ReplyDelta(text="world."),
        _done(),
    ]
    ans = TurnAnswer.from_events(events)
    assert (ans.session_id, ans.turn_id, ans.trace_id, ans.status) == ("s1", "t_1", "a" * 32, "ok")
    assert ans.reply == "Hello world."
    assert ans.narration == "Checking. Done."
    assert ans.events == events
    again = TurnAnswer.model_validate_json(ans.model_dump_json())
    assert again == ans


def test_turn_answer_from_a_failed_turn() -> None:
    events = [ReplyDelta(text="Par"), ErrorEvent(code="model_unavailable", message="m"), _done("failed")]
    ans = TurnAnswer.from_events(events)
    assert ans.status == "failed" and ans.reply == "Par" and ans.narration == ""
    assert [e.type for e in ans.events] == ["reply.delta", "error", "done"]
