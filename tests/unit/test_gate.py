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


class _Flags:
    """A judge of text alone (no ``releasable``): flags a sentence with any of its words."""

    def __init__(self, *words):
        self.words = words

    async def judge(self, sentence, released):
        hit = [w for w in self.words if w in sentence]
        return Judgement(text=sentence, violations=[Violation(kind="flagged", detail=w) for w in hit])


def run(coro):
    return asyncio.run(coro)


def test_a_judge_of_text_alone_holds_the_last_words_back():
    gate, _, _ = _gate(_Flags("cancelled"), safe="SAFE")
    assert run(gate.stream("Let me look", hold_words=2)) == ""  # 2 complete words, both held
    assert run(gate.stream("Let me look into that", hold_words=2)) == "Let me "
    assert run(gate.stream("Let me look into that for", hold_words=2)) == "look "
    assert run(gate.close("Let me look into that for you.")) == "into that for you."
    assert gate.released == ["Let me look into that for you."]


def test_a_violation_stops_the_stream_and_the_safe_wording_follows():
    gate, counters, _ = _gate(_Flags("cancelled"), safe="SAFE")
    assert run(gate.stream("Checking your order now and", hold_words=1)) == "Checking your order "
    assert run(gate.stream("Checking your order now and I have cancelled it", hold_words=1)) == ""
    assert run(gate.stream("Checking your order now and I have cancelled it for", hold_words=1)) == ""
    # "Checking your order " + "SAFE": one space between them, the one already sent
    assert run(gate.close("Checking your order now and I have cancelled it for you.")) == "SAFE"
    assert counters.get("blocked", "flagged") == 1


def test_the_narration_judge_releases_every_word_no_violation_can_grow_from():
    gate, _, _ = _gate(NarrationJudge(["Desk Lamp"]), safe="SAFE")
    # hold_words is for judges of text alone: nothing here may become a violation
    assert run(gate.stream("Let me look", hold_words=3)) == "Let me "
    assert run(gate.stream("Let me look into that", hold_words=3)) == "look into "
    assert run(gate.close("Let me look into that for you.")) == "that for you."


def test_the_first_word_of_a_name_is_held_while_the_name_may_follow():
    gate, _, _ = _gate(NarrationJudge(["Desk Lamp"]), safe="SAFE")
    assert run(gate.stream("Checking the Desk", hold_words=0)) == "Checking the "  # "Desk Lamp" may follow
    assert run(gate.stream("Checking the Desk Lamp now", hold_words=0)) == ""  # the name is refused
    assert run(gate.close("Checking the Desk Lamp now.")) == "SAFE"  # "Desk" never went out


def test_a_promise_in_the_making_is_held_from_its_subject():
    gate, counters, _ = _gate(NarrationJudge(), safe="SAFE")
    assert run(gate.stream("Sure, I'll go and", hold_words=0)) == "Sure, "  # I'll + two words + an outcome may follow
    assert run(gate.stream("Sure, I'll go and cancel it", hold_words=0)) == ""
    assert run(gate.close("Sure, I'll go and cancel it.")) == "SAFE"
    assert counters.get("blocked", "narration_promise") == 1


def test_the_tighter_of_two_judges_decides_how_much_is_released():
    gate, _, _ = _gate(NarrationJudge(), _Flags("cancelled"), safe="SAFE")
    assert run(gate.stream("Let me look into that", hold_words=2)) == "Let me "  # 4 words; the second judge holds 2


def test_a_judge_that_fails_to_tell_where_a_violation_forms_releases_nothing():
    class Broken(NarrationJudge):
        def releasable(self, partial):
            raise RuntimeError("down")

    gate, _, _ = _gate(Broken(), safe="SAFE")
    assert run(gate.stream("Let me look into that", hold_words=0)) == ""
    assert run(gate.stream("Let me look into that for", hold_words=0)) == ""  # blocked until the close
    assert run(gate.close("Let me look into that for you.")) == "Let me look into that for you."  # judged whole


@pytest.mark.parametrize(("partial", "releasable"), [
    ("Let me look into that", 4),  # nothing can grow from any complete word ("that" is not complete)
    ("I'll go and", 0),  # "I'll" + up to two words, then an outcome: a promise may follow
    ("I'll go ahead and", 3),  # two words already between "I'll" and "and": no promise from "I'll" any more
    ("Sure, I will", 1),  # the subject "I" starts the held part
    ("We have", 0),  # "We have (already) cancelled …" may follow
    ("Checking the Desk", 2),  # "Desk Lamp" may follow
    ("Checking the Desk Lamp now", 4),  # a whole name forms no more: it is check()'s to refuse
    ("It should arrive in two", 3),  # "in two days" may follow
    ("Your total is $", 3),  # an amount may follow the sign
    ("Your order #W", 2),  # an order id may follow
    ("One moment while I", 3),
    ("", 0),
])
def test_releasable_words_of_a_partial_narration(partial: str, releasable: int) -> None:
    assert NarrationJudge(["Desk Lamp"]).releasable(partial) == releasable


def test_forming_at_is_where_a_match_that_could_still_complete_begins():
    from pipelines.gate import _PROMISE, forming_at

    assert forming_at(_PROMISE, "I will") == 0
    assert forming_at(_PROMISE, "ok then, I'll") == 9
    assert forming_at(_PROMISE, "Let me") is None
    assert forming_at(_PROMISE, "I will cancel it now") is None  # a complete match is no partial one


@pytest.mark.parametrize(("words", "first"), [
    (["Here ", "is ", "tdm"], 2),  # the last word starts the token
    (["ok ", "tdmc ", "nry"], 1),  # "tdmcnry": the token spans the last two words
    (["hello"], None),  # no tail of it is part of the token
    (["ok ", "42x"], 1),  # the token's end is a tail: more of it cannot follow, but it is part of it
    ([], None),
])
def test_canary_forming_finds_the_word_a_canary_window_may_grow_from(monkeypatch, words, first) -> None:
    from pipelines.guardrails import post

    monkeypatch.setattr(post, "canary_token", lambda: "tdmcnry42x")
    assert post.canary_forming(words) == first


def test_canary_forming_takes_the_longest_tail_in_the_token(monkeypatch) -> None:
    from pipelines.guardrails import post

    monkeypatch.setattr(post, "canary_token", lambda: "btdmcnry42x")
    # "abtdmc": "btdmc" (5 letters) is the longest tail in the token, and it starts in "ab"
    assert post.canary_forming(["ab ", "tdmc"]) == 0
