"""A promise's subject goes out at once; a refused sentence after it is ended by the judge's completion.

``NarrationJudge(completion=...)`` releases "I'll" / "we will" as soon as nothing else may be
forming before its end (the words after it stay held while an outcome may follow), and
``SentenceGate.close`` ends a refused sentence whose released fragment ends with that subject
with the completion — judged like any sentence — instead of a safe wording after a fragment.
Every expected value below is written from that rule.
"""

from __future__ import annotations

import asyncio

import pytest

from pipelines.counters import Counters
from pipelines.gate import Judgement, NarrationJudge, SentenceGate
from pipelines.guardrails.post import Violation

END = "look into that."


@pytest.mark.parametrize(("partial", "with_completion", "without"), [
    ("I", 1, 0),                    # a sentence opening with the subject being written: all of it goes,
    ("I'", 1, 0),                   # whatever it turns into ("I'll cancel", "I've cancelled") is ended
    ("I'll", 1, 0),                 # by the completion; without one it is held
    ("I ", 1, 0),                   # "I will" may still follow
    ("I w", 2, 0),
    ("W", 1, 0), ("We", 1, 0), ("we’", 1, 0),
    ("I've", 0, 0),                 # no longer a subject: a claim may be forming
    ("I'm", 0, 0),                  # "I'm cancelling it" is a promise; "I'm" opens no completion
    ("Is", 0, 0),                   # not a subject: "is cancelled" may be forming
    ("It", 0, 0),                   # not a subject, nothing forming: the word is not complete yet
    ("It ", 1, 1),
    ("Sure, I", 1, 1),              # inside a sentence only whole words go out
    ("Sure, I ", 1, 1),
    ("I'll ", 1, 0),                # complete: out at once with a completion, held without one
    ("I’ll ", 1, 0),                # the typographic apostrophe is the same subject
    ("We'll ", 1, 0),
    ("I will ", 2, 0),
    ("we will ", 2, 0),
    ("You'll ", 0, 0),              # "you'll get a refund": no completion makes the subject harmless
    ("you will ", 0, 0),
    ("I'll see ", 1, 0),            # an outcome may still follow within two words: held
    ("I'll see what ", 1, 0),
    ("I'll see what I ", 3, 3),     # the window passed; the new "I" may open one again
    ("Sure, I will ", 3, 1),        # words before the subject went out already
    ("Sure ", 1, 1),
    ("I'll Desk ", 1, 0),           # a name forming right at the subject's end: the subject still goes
    ("I will Desk ", 2, 0),
])
def test_the_subject_of_a_promise_is_released_only_with_a_completion(partial, with_completion, without):
    assert NarrationJudge(["Desk Lamp"], completion=END).releasable(partial) == with_completion
    assert NarrationJudge(["Desk Lamp"]).releasable(partial) == without


def test_something_forming_inside_the_subject_holds_it():
    # "Will Sutton" may be forming from "will": it starts before the subject ends
    judge = NarrationJudge(["Will Sutton"], completion=END)
    assert judge.releasable("I will ") == 0
    assert judge.releasable("I'll ") == 1  # "'ll" is not "Will"
    # a subject still being written goes out: only its own letters do, and a refused sentence is
    # ended by finishing the subject, so "I" of "Ivy Lane" or "w" of "Will" shows nothing of the name
    assert judge.releasable("I w") == 2
    assert NarrationJudge(["Ivy Lane"], completion=END).releasable("I") == 1
    assert NarrationJudge(["Ivy Lane"], completion=END).releasable("Iv") == 0


def test_a_complete_promise_is_not_forming_and_is_refused_whole():
    judge = NarrationJudge(completion=END)
    assert judge.check("I'll cancel it.").violations[0].kind == "narration_promise"
    assert judge.check("I’ll cancel it.").violations[0].kind == "narration_promise"
    assert judge.check("I’ve cancelled it.").violations[0].kind == "narration_claim"
    assert judge.check(f"I'll {END}").violations == []


@pytest.mark.parametrize(("fragment", "ending"), [
    ("I'll ", END), ("Sure, I’ll ", END), ("We will ", END), ("i will ", END),
    # a sentence that went out while its subject was being written: the subject is finished first
    ("I'll", " " + END), ("I", "'ll " + END), ("I’", "ll " + END), ("I ", "will " + END),
    ("I w", "ill " + END), ("We", "'ll " + END), ("W", "e'll " + END), ("we’l", "l " + END),
    ("We will", " " + END),
    ("Sure, I", None),       # inside a sentence only whole words went out
    ("I'll see ", None),     # the fragment goes on past the subject
    ("I'v", None), ("Is", None),
    ("You'll ", None), ("Sure ", None), ("", None),
])
def test_the_completion_is_offered_for_a_fragment_ending_with_the_subject(fragment, ending):
    assert NarrationJudge(completion=END).completion(fragment) == ending
    assert NarrationJudge().completion(fragment) is None


def _gate(*judges, safe="SAFE"):
    events: list[tuple[str, dict]] = []
    gate = SentenceGate(list(judges), Counters(), lambda kind, **f: events.append((kind, f)),
                        stage="narration", safe=safe)
    return gate, events


def _streamed(gate, words, sentence):
    """Feed the sentence word by word through stream(), then close it: what went out, in order."""
    async def go():
        out, partial = [], ""
        for w in words:
            partial += w
            new = await gate.stream(partial)
            if new:
                out.append(new)
        out.append(await gate.close(sentence))
        return out
    return asyncio.run(go())


def test_a_refused_promise_after_its_subject_went_out_is_completed():
    gate, events = _gate(NarrationJudge(completion=END))
    sentence = "I'll cancel your order."
    out = _streamed(gate, ["I'll ", "cancel ", "your "], sentence)
    assert out == ["I'll ", END]
    assert gate.released == [f"I'll {END}"] and gate.withheld == 1 and gate.replaced == 1
    assert [(k, f["decision"]) for k, f in events] == [("gate.block", "block"), ("gate.block", "complete")]
    assert events[-1][1]["sentence"] == f"I'll {END}" and events[-1][1]["kinds"] == []


def test_a_sentence_that_passes_after_its_subject_went_out_is_released_as_written():
    gate, events = _gate(NarrationJudge(completion=END))
    sentence = "I'll see what I can do."
    out = _streamed(gate, ["I'll ", "see ", "what ", "I ", "can "], sentence)
    assert out[0] == "I'll " and "".join(out) == sentence
    assert gate.released == [sentence] and gate.withheld == 0 and events == []


def test_without_a_completion_the_subject_is_held_and_the_safe_wording_replaces_the_sentence():
    gate, _ = _gate(NarrationJudge())
    out = _streamed(gate, ["I'll ", "cancel ", "your "], "I'll cancel your order.")
    assert out == ["SAFE"] and gate.released == ["SAFE"]


def test_a_fragment_that_does_not_end_with_the_subject_gets_the_safe_wording():
    gate, _ = _gate(NarrationJudge(["Desk Lamp"], completion=END))
    out = _streamed(gate, ["Sure, ", "the ", "Desk "], "Sure, the Desk Lamp is here.")
    assert out == ["Sure, ", "the ", "SAFE"] and gate.released == ["SAFE"]


class _Refuses:
    """Refuses every sentence that contains ``word``; ``boom`` raises instead."""

    def __init__(self, word: str, boom: bool = False):
        self.word, self.boom, self.seen = word, boom, []

    def releasable(self, partial):  # holds nothing back itself: every complete word
        return len(partial.split()) - (not partial[-1:].isspace())

    async def judge(self, sentence, released):
        self.seen.append((sentence, list(released)))
        if self.word in sentence:
            if self.boom:
                raise RuntimeError("judge down")
            return Judgement(text=sentence, violations=[Violation(kind="refused")])
        return Judgement(text=sentence)


def test_the_completed_sentence_is_judged_by_every_judge_and_refused_like_any_other():
    other = _Refuses("that")  # refuses the completion itself
    gate, _ = _gate(NarrationJudge(completion=END), other)
    out = _streamed(gate, ["I'll ", "cancel ", "it "], "I'll cancel it.")
    assert out == ["I'll ", "SAFE"] and gate.released == ["SAFE"] and gate.replaced == 1
    # it saw the completed sentence without the safe wording it would replace
    assert (f"I'll {END}", []) in other.seen


def test_a_judge_that_fails_on_the_completed_sentence_keeps_the_safe_wording():
    gate, _ = _gate(NarrationJudge(completion=END), _Refuses("that", boom=True))
    out = _streamed(gate, ["I'll ", "cancel ", "it "], "I'll cancel it.")
    assert out == ["I'll ", "SAFE"] and gate.released == ["SAFE"]


def test_a_completion_replaces_nothing_when_the_safe_wording_was_not_repeated():
    gate, _ = _gate(NarrationJudge(completion=END))
    gate.add_trusted("SAFE")  # the safe wording was the last thing released: it is not repeated
    out = _streamed(gate, ["I'll ", "cancel ", "it "], "I'll cancel it.")
    assert out == ["I'll ", END]
    assert gate.released == ["SAFE", f"I'll {END}"] and gate.replaced == 2


def test_the_first_judge_with_a_completion_for_the_fragment_gives_it():
    gate, _ = _gate(_Refuses("cancel"), NarrationJudge(completion="see to it."),
                    NarrationJudge(completion=END))
    out = _streamed(gate, ["I'll ", "cancel ", "it "], "I'll cancel it.")
    assert out == ["I'll ", "see to it."]


def test_observe_mode_releases_the_sentence_and_completes_nothing():
    events: list = []
    gate = SentenceGate([NarrationJudge(completion=END)], Counters(), lambda k, **f: events.append(k),
                        stage="narration", safe="SAFE", mode="observe")
    out = _streamed(gate, ["I'll ", "cancel ", "it "], "I'll cancel it.")
    assert "".join(out) == "I'll cancel it." and gate.released == ["I'll cancel it."]


@pytest.mark.parametrize(("words", "first"), [
    (["Let ", "me ", "see "], None),      # "e": a tail of one character holds nothing
    (["and ", "the ", "tdm"], 2),          # three characters of the token: held from that word
    (["ok ", "xtd"], None),                # two ("td"): released
    (["ok ", "td ", "m"], 1),              # three across two words: held from the first of them
])
def test_a_canary_tail_holds_words_from_three_characters_on(monkeypatch, words, first):
    from pipelines.guardrails import post

    monkeypatch.setattr(post, "canary_token", lambda: "tdmcnry42x")
    assert post.CANARY_TAIL_MIN == 3
    assert post.canary_forming(words) == first


def test_ordinary_words_are_not_held_by_the_default_canary():
    # the default canary's token holds t, d, m, c, n, r, y, e, b: every one a common last letter
    assert NarrationJudge().releasable("Let me see what can be done ") == 7


def test_a_canary_tail_of_three_characters_holds_its_word_in_the_narration_judge():
    # the default token "tdm-cnry-4e9b71c2d8": "tdm" may grow into a window; nothing else forms here
    judge = NarrationJudge(completion=END)
    assert judge.releasable("Here is tdm ") == 2
    assert judge.releasable("Here is tdx ") == 3


class _Seen:
    """Passes everything; records what each judgement saw as already released."""

    def __init__(self):
        self.seen = []

    def releasable(self, partial):
        return len(partial.split())

    async def judge(self, sentence, released):
        self.seen.append((sentence, list(released)))
        return Judgement(text=sentence)


def test_the_completed_sentence_is_judged_after_everything_released_before_it():
    seen = _Seen()
    gate, _ = _gate(NarrationJudge(completion=END), seen)
    assert asyncio.run(gate.release("Hello there.")) == "Hello there."
    out = _streamed(gate, ["I'll ", "cancel ", "it "], "I'll cancel it.")
    assert out == ["I'll ", END]
    # judged with the sentence released before it, without the safe wording it replaces
    assert (f"I'll {END}", ["Hello there."]) in seen.seen
    assert gate.released == ["Hello there.", f"I'll {END}"]


def test_with_the_safe_wording_not_repeated_the_completion_is_judged_after_it():
    seen = _Seen()
    gate, _ = _gate(NarrationJudge(completion=END), seen)
    gate.add_trusted("SAFE")
    out = _streamed(gate, ["I'll ", "cancel ", "it "], "I'll cancel it.")
    assert out == ["I'll ", END]
    assert (f"I'll {END}", ["SAFE"]) in seen.seen


def test_a_subject_being_written_goes_out_token_by_token_and_a_claim_after_it_is_completed():
    gate, events = _gate(NarrationJudge(completion=END))
    out = _streamed(gate, ["I", "'ve", " cancelled", " it"], "I've cancelled it.")
    assert out == ["I", "'ll " + END]  # nothing after "I" went out; the subject is finished first
    assert gate.released == [f"I'll {END}"] and gate.withheld == 1
    assert [f["decision"] for _, f in events] == ["block", "complete"]


def test_a_sentence_opening_with_a_subject_that_passes_is_released_as_written():
    gate, _ = _gate(NarrationJudge(completion=END))
    out = _streamed(gate, ["I", "'ll", " check", " your", " order"], "I'll check your order.")
    assert out[:3] == ["I", "'ll", " "] and "".join(out) == "I'll check your order."
    assert gate.released == ["I'll check your order."]


class _RefusesHoldingNothing(_Refuses):
    def releasable(self, partial):  # every word, the one still being written too
        return len(partial.split())


def test_the_safe_wording_after_an_unfinished_subject_is_a_sentence_of_its_own():
    # the completion is refused too
    gate, _ = _gate(NarrationJudge(completion=END), _RefusesHoldingNothing("that"))
    out = _streamed(gate, ["I", "'ve", " cancelled", " it"], "I've cancelled it.")
    assert out == ["I", " SAFE"] and gate.released == ["SAFE"]


def test_after_a_whole_word_the_safe_wording_needs_no_space():
    gate, _ = _gate(NarrationJudge(completion=END), _Refuses("that"))
    out = _streamed(gate, ["I'll ", "cancel ", "it "], "I'll cancel it.")
    assert out == ["I'll ", "SAFE"]


def test_without_a_completion_a_subject_being_written_is_held():
    gate, _ = _gate(NarrationJudge())
    out = _streamed(gate, ["I", "'ll", " check", " your", " order"], "I'll check your order.")
    assert out == ["I'll check your ", "order."]  # once no outcome can follow within two words


@pytest.mark.parametrize(("sentence", "kind"), [
    ("I'm cancelling your order.", "narration_promise"),
    ("I am going to refund you.", "narration_promise"),
    ("We're processing the exchange.", "narration_promise"),
    ("we are updating it", "narration_promise"),
    ("I'm checking your order.", None),    # no outcome follows
    ("I am sure we can help.", None),
])
def test_a_promise_in_the_present_is_a_promise(sentence, kind):
    got = NarrationJudge().check(sentence).violations
    assert [v.kind for v in got] == ([kind] if kind else [])


class _Plain:
    """A judge of text alone (no ``releasable``): passes everything."""

    async def judge(self, sentence, released):
        return Judgement(text=sentence)


@pytest.mark.parametrize(("partial", "new"), [
    ("Hello there ", "Hello there "),  # every word ends in whitespace: all complete
    ("Hello there", "Hello "),         # "there" may still grow
    ("Hello", ""),
])
def test_without_a_hold_every_complete_word_goes_out_and_the_one_being_written_does_not(partial, new):
    gate, _ = _gate(_Plain())
    assert asyncio.run(gate.stream(partial, hold_words=0, forming=False)) == new
