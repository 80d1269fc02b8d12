"""W1 in segments with ``w1_skip_forced_labels``: a label with one allowed value is given, not decoded; the turn
decides exactly as when it was decoded (its grammar admits nothing else)."""

from __future__ import annotations

from typing import Any

from pipelines.tandem.settings import TandemSettings
from tests.doubles import j, w1

from .harnesses import TandemHarness

ON = TandemSettings(w1_segments=True, w1_skip_forced_labels=True)
OFF = TandemSettings(w1_segments=True)


def engine(full: str, *decisions: str) -> list[Any]:
    """A scripted orchestrator for one turn: every W1 call continues ``full`` (the label's text for a label
    grammar, else the rest); every other call takes the next of ``decisions``. As many entries as calls
    could be made; :func:`play` drops what the turn did not use."""
    left = list(decisions)

    def answer(call: Any) -> str:
        if not call.purpose.startswith("w1"):
            return left.pop(0)
        assert full.startswith(call.prefix), (full, call.prefix)
        rest = full[len(call.prefix):]
        return rest.split("<", 1)[0] if call.structured_output.spec.startswith('start: "') else rest
    return [answer] * (3 + len(decisions))


def play(h: TandemHarness, text: str, full: str, *decisions: str) -> Any:
    r = h.turn(text, orch=engine(full, *decisions))
    h.models.scripts["orchestrator"].clear()
    return r


def _grammar_calls(h: TandemHarness) -> list[Any]:
    return [c for c in h.calls("orchestrator") if c.structured_output and c.structured_output.kind == "grammar"]


def _forced(h: TandemHarness) -> list[dict[str, Any]]:
    return [{"section": f["section"], "value": f["value"]} for k, f in h.sink.events if k == "tandem.w1.forced_label"]


def test_labels_with_one_allowed_value_are_given_without_a_call() -> None:
    full = w1("greeting", "hello", "Happy to help.")
    on, off = TandemHarness(settings=ON), TandemHarness(settings=OFF)
    r_on = play(on, "Hi! What can you help me with?", full)
    r_off = play(off, "Hi! What can you help me with?", full)
    assert [c.purpose for c in _grammar_calls(off)] == ["w1.intent", "w1.sub_intent", "w1.narration"]
    assert [c.purpose for c in _grammar_calls(on)] == ["w1.narration"]  # "Hi" allows greeting / hello alone
    assert _grammar_calls(on)[-1].prefix == _grammar_calls(off)[-1].prefix  # the same text so far
    assert _forced(on) == [{"section": "intent", "value": "greeting"}, {"section": "sub-intent", "value": "hello"}]
    assert _forced(off) == []
    assert on.meta["c1"] == off.meta["c1"] == {"intent": "greeting", "sub_intent": "hello"}
    assert r_on.reply == r_off.reply and on.meta["path"] == off.meta["path"]


def test_a_label_with_several_allowed_values_is_decoded() -> None:
    full = w1("order_status", "status", "Let me check.")
    h = TandemHarness(settings=ON)
    play(h, "Hi, my email is alex.rivera@example.com", w1("greeting", "hello"))
    n = len(_grammar_calls(h))
    play(h, "Where is my order #W1000001?", full, j(decision="respond"))
    # "where is my order" allows order_status alone; its sub-intents (status, refund, details) are decoded
    assert [c.purpose for c in _grammar_calls(h)[n:]] == ["w1.sub_intent", "w1.narration"]
    assert _forced(h)[-1] == {"section": "intent", "value": "order_status"}
    assert h.meta["c1"] == {"intent": "order_status", "sub_intent": "status"}


def test_a_card_decided_after_forced_labels_is_the_same_card() -> None:
    def session(settings: TandemSettings) -> tuple[TandemHarness, Any]:
        h = TandemHarness(settings=settings)
        play(h, "Hi, my email is alex.rivera@example.com", w1("greeting", "hello"))
        full = w1("cancel", "order", "Let me check that order.")
        r = play(h, "Please cancel order #W1000001, I ordered it by mistake", full,
                 j(decision="action", card_id="card.cancel_order",
                   params={"order_id": "#W1000001", "reason": "ordered by mistake"}))
        return h, r

    (on, r_on), (off, r_off) = session(ON), session(OFF)
    assert [c.card_id for c in r_on.of("action_card")] == [c.card_id for c in r_off.of("action_card")] == [
        "card.cancel_order"]
    assert {"section": "sub-intent", "value": "order"} in _forced(on)  # cancel has one sub-intent
    assert on.calls("orchestrator")[-1].messages == off.calls("orchestrator")[-1].messages  # the step sees the same
    assert len(on.calls("orchestrator")) < len(off.calls("orchestrator"))
