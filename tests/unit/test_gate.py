"""The one sentence gate and its judges."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.counters import Counters
from pipelines.gate import EchoJudge, Judgement, NarrationJudge, SentenceGate
from pipelines.guardrails.post import Violation


class _Fixed:
    def __init__(self, kinds=(), fail=False):
        self.kinds, self.fail = kinds, fail

    async def judge(self, sentence, released):
        if self.fail:
            raise RuntimeError("judge down")
        return Judgement(text=sentence, violations=[Violation(kind=k) for k in self.kinds])


def _gate(*judges, safe="SAFE"):
    events = []
    counters = Counters()
    gate = SentenceGate(list(judges), counters, lambda kind, **f: events.append((kind, f)), stage="post", safe=safe)
    return gate, counters, events


def _run(gate, sentence):
    return asyncio.run(gate.release(sentence))


def test_a_passing_sentence_is_released_and_counted():
    gate, counters, _ = _gate(_Fixed())
    assert _run(gate, "Fine.") == "Fine."
    assert gate.released == ["Fine."] and counters.get("guard", "post.pass") == 1


def test_a_violation_releases_the_safe_wording_but_never_twice_in_a_row():
    gate, counters, events = _gate(_Fixed(["bad"]))
    assert _run(gate, "One.") == "SAFE"
    assert _run(gate, "Two.") is None
    assert gate.withheld == 2 and counters.get("blocked", "bad") == 2
    assert [e[0] for e in events] == ["gate.block", "gate.block"]


def test_a_failing_judge_fails_closed():
    gate, counters, _ = _gate(_Fixed(fail=True), safe="")
    assert _run(gate, "Unjudged.") is None
    assert counters.get("blocked", "guard_unavailable") == 1 and gate.released == []


def test_judges_run_in_order_and_the_first_violation_wins():
    gate, counters, _ = _gate(_Fixed(["first"]), _Fixed(["second"]))
    _run(gate, "x.")
    assert counters.get("blocked", "first") == 1 and counters.get("blocked", "second") == 0


@pytest.mark.parametrize("sentence, kind", [
    ("Let me check order #W1000001.", "narration_id"),
    ("It costs $12.50.", "narration_amount"),
    ("It arrives within 3 days.", "narration_date"),
    ("I will refund you.", "narration_promise"),
    ("Your order has been cancelled.", "narration_claim"),
    ("I've updated it.", "narration_claim"),
    ("Checking the Desk Lamp.", "narration_entity"),
    ("Looking at [EMAIL_1].", "narration_markup"),
])
def test_the_narration_judge_refuses(sentence, kind):
    assert kind in [v.kind for v in NarrationJudge(["Desk Lamp"]).check(sentence).violations]


@pytest.mark.parametrize("sentence", [
    "Let me look into that for you.", "I'll check your account.", "One moment while I look at your orders.",
])
def test_the_narration_judge_passes_plain_acknowledgements(sentence):
    assert NarrationJudge(["Desk Lamp"]).check(sentence).violations == []


def test_the_echo_judge_catches_contract_fields_and_repeats():
    judge = EchoJudge(["authenticated_user_id"])
    assert [v.kind for v in judge.check("path: answer task: authenticated", []).violations] == ["contract_echo"]
    assert [v.kind for v in judge.check("Your authenticated_user_id is set.", []).violations] == ["contract_echo"]
    assert [v.kind for v in judge.check("Order is pending!", ["order is pending."]).violations] == ["repetition"]
    assert judge.check("Order is pending.", ["Something else."]).violations == []


def test_streaming_releases_words_behind_the_model_and_the_close_completes_the_sentence():
    gate, counters, _ = _gate(NarrationJudge(["Desk Lamp"]), safe="SAFE")
    run = lambda coro: asyncio.run(coro)  # noqa: E731
    assert run(gate.stream("Let me look", hold_words=2)) == ""  # 1 complete word, held
    assert run(gate.stream("Let me look into that", hold_words=2)) == "Let me "
    assert run(gate.stream("Let me look into that for", hold_words=2)) == "look "
    assert run(gate.close("Let me look into that for you.")) == "into that for you."
    assert gate.released == ["Let me look into that for you."]


def test_a_violation_stops_the_stream_and_the_safe_wording_follows():
    gate, counters, _ = _gate(NarrationJudge(["Desk Lamp"]), safe="SAFE")
    run = lambda coro: asyncio.run(coro)  # noqa: E731
    assert run(gate.stream("Checking your order now and", hold_words=1)) == "Checking your order "
    assert run(gate.stream("Checking your order now and I have cancelled it", hold_words=1)) == ""
    assert run(gate.stream("Checking your order now and I have cancelled it for", hold_words=1)) == ""
    # "Checking your order " + "SAFE": one space between them, the one already sent
    assert run(gate.close("Checking your order now and I have cancelled it for you.")) == "SAFE"
    assert counters.get("blocked", "narration_claim") == 1


def test_a_held_window_keeps_a_multi_word_name_out():
    gate, _, _ = _gate(NarrationJudge(["Desk Lamp"]), safe="SAFE")
    assert asyncio.run(gate.stream("Checking the Desk", hold_words=2)) == ""  # "the Desk" is held back
    assert asyncio.run(gate.stream("Checking the Desk Lamp now", hold_words=2)) == ""  # the name is refused
    assert asyncio.run(gate.close("Checking the Desk Lamp now.")) == "SAFE"
