"""W1 decoded in segments: the labels alone, then the narration; the tags between them are given, not decoded."""

from __future__ import annotations

from typing import Any

from pipelines.sgc.w1_grammar import label_grammar
from pipelines.tandem.settings import TandemSettings

from .tandem_doubles import TandemHarness, j, w1

SEGMENTS = TandemSettings(w1_segments=True)


def segment(full: str) -> Any:
    """A scripted engine for one segment of ``full`` (the whole W1 text): it continues the call's prefix
    up to the end of the label when the grammar is a label's, else to the end."""
    def answer(call: Any) -> str:
        assert full.startswith(call.prefix), (full, call.prefix)
        rest = full[len(call.prefix):]
        return rest.split("<", 1)[0] if call.structured_output.spec.startswith('start: "') else rest
    return answer


def _w1_calls(h: TandemHarness) -> list[Any]:
    return [c for c in h.calls("orchestrator") if c.structured_output and c.structured_output.kind == "grammar"]


def test_three_calls_each_continue_the_text_so_far_and_the_tags_are_never_decoded():
    h = TandemHarness(settings=SEGMENTS)
    full = w1("greeting", "hello", "Happy to help.")
    r = h.turn("Hi! What can you help me with?", orch=[segment(full)] * 3)
    calls = _w1_calls(h)
    assert [c.prefix for c in calls] == [
        "<INTENT>", "<INTENT>greeting</INTENT><SUB_INTENT>",
        "<INTENT>greeting</INTENT><SUB_INTENT>hello</SUB_INTENT><NARRATION>"]
    assert calls[0].structured_output.spec == label_grammar("intent", _allowed(h))
    assert calls[1].structured_output.spec == 'start: "hello"\n'  # the intent's sub-intents (narrowed by "Hi")
    assert calls[2].structured_output.spec.startswith("start: narration_body ws plan ws")
    assert all(c.priority == SEGMENTS.first_call_priority for c in calls)
    # the same turn as one stream would give
    assert "".join(e.text for e in r.of("narration.delta")) == "Happy to help."
    assert h.meta["c1"] == {"intent": "greeting", "sub_intent": "hello"} and r.reply.startswith("Hi! I can help")


def _allowed(h: TandemHarness) -> list[str]:
    return [f for k, f in h.sink.events if k == "tandem.w1"][-1]["allowed"]


def test_phi_dispatches_before_the_narration_call_starts():
    h = TandemHarness(settings=SEGMENTS)
    h.turn("Hi, my email is alex.rivera@example.com", orch=[segment(w1("greeting", "hello"))] * 3)
    kinds = [k for k, _ in h.sink.events]
    assert kinds.index("tandem.phi") < kinds.index("tandem.w1")
    assert h.meta["state"]["authenticated_user_id"] == "alex_rivera_1001"


def test_a_segmented_turn_runs_the_orchestrator_after_w1_as_usual():
    h = TandemHarness(settings=SEGMENTS)
    h.turn("Hi, my email is alex.rivera@example.com", orch=[segment(w1("greeting", "hello"))] * 3)
    full = w1("cancel", "order", "Let me check that order.")
    r = h.turn("Please cancel order #W1000001", orch=[segment(full)] * 3 + [
        j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "ordered by mistake"})])
    assert [c.card_id for c in r.of("action_card")] == ["card.cancel_order"]
    step = h.calls("orchestrator")[-1]  # the step continues the W1 text as one assistant message
    assert step.messages[-2].content == full.split("<PLAN>")[0]


def test_a_label_outside_the_grammar_degrades_like_a_broken_stream():
    h = TandemHarness(settings=SEGMENTS)
    r = h.turn("Hi! What can you help me with?", orch=["not_a_label", j(decision="clarify", about="details")])
    assert h.meta["w1_error"] == "invalid_model_output" and h.meta["c1"]["intent"] == "other"
    assert "".join(e.text for e in r.of("narration.delta")) == h.domain.texts.safe_ack
    assert len(_w1_calls(h)) == 1  # nothing decoded after the refused label


def test_one_stream_is_the_default():
    assert TandemSettings().w1_segments is False
    h = TandemHarness()
    h.turn("Hi! What can you help me with?", orch=[w1("greeting", "hello")])
    assert [c.prefix for c in _w1_calls(h)] == ["<INTENT>"]
