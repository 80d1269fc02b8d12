"""SentenceGate's streaming, close, trusted texts, summary and span, and the gate's judges.

Pins: the GUARDRAIL span of a release (every attribute), ``stream`` (default hold of 3 words,
a gate without judges, fail-closed blocking until ``close`` after a judge fails or flags, no
judge call when nothing new may go out), ``close`` resetting the stream for the next sentence,
``add_trusted`` and ``summary``; the NarrationJudge's kinds and details (entity names of 2 vs 3
characters, longest name first, case, ids, markup, the canary across released text), the
EchoJudge's terms and repetition key, and the context the GuardrailsJudge passes on.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from pipelines.counters import Counters
from pipelines.gate import EchoJudge, GuardrailsJudge, Judgement, NarrationJudge, SentenceGate, _key
from pipelines.guardrails import post
from pipelines.guardrails.post import Violation


class _Script:
    """A judge of text alone answering each call from a script of violation kinds ([] passes);
    ``"raise"`` fails the call. Records the sentences it was asked about."""

    def __init__(self, *calls):
        self.calls, self.asked = list(calls), []

    async def judge(self, sentence, released):
        self.asked.append(sentence)
        kinds = self.calls.pop(0) if self.calls else []
        if kinds == "raise":
            raise RuntimeError("judge down")
        return Judgement(text=sentence, violations=[Violation(kind=k) for k in kinds])


class _Forming(_Script):
    """A judge that tells where a violation may form: its first answer fails, then every word is releasable."""

    def __init__(self):
        super().__init__()
        self.tells = 0

    def releasable(self, partial):
        self.tells += 1
        if self.tells == 1:
            raise RuntimeError("down")
        return len(partial.split())


def _gate(*judges, **kw):
    kw.setdefault("stage", "post")
    kw.setdefault("safe", "SAFE")
    return SentenceGate(list(judges), Counters(), lambda kind, **f: None, **kw)


def run(coro):
    return asyncio.run(coro)


def _span_attrs(stage, source, mode, sentence, decision, output=None, kinds=None):
    attrs = {"openinference.span.kind": "GUARDRAIL", "input.value": sentence, "input.mime_type": "text/plain",
             "tandem.guard.stage": stage, "tandem.mode": mode, "tandem.guard.decision": decision}
    if source:
        attrs["tandem.source"] = source
    if output is not None:
        attrs.update({"output.value": output, "output.mime_type": "text/plain"})
    if kinds:
        attrs["tandem.guard.kinds"] = kinds
    return attrs


@pytest.mark.parametrize(("source", "mode", "calls", "outs", "decisions"), [
    ("narrator", "enforce", [[], ["bad"], ["bad"]], ["One.", "SAFE", None], ["pass", "block", "block"]),
    ("", "observe", [[], ["bad"]], ["One.", "Two."], ["pass", "observe"]),
])
def test_each_release_is_a_guard_span_with_its_input_source_mode_decision_and_output(
        spans, source, mode, calls, outs, decisions):
    gate = _gate(_Script(*calls), stage="narration", source=source, mode=mode)
    sentences = ["One.", "Two.", "Three."][: len(calls)]
    assert [run(gate.release(s)) for s in sentences] == outs
    got = [(s.name, dict(s.attributes)) for s in spans.get_finished_spans()]
    assert got == [("tandem.guard.narration",
                    _span_attrs("narration", source, mode, s, d, o, ("bad",) if d != "pass" else None))
                   for s, d, o in zip(sentences, decisions, outs, strict=True)]


def test_stream_holds_back_three_words_by_default():
    gate = _gate(_Script())
    assert run(gate.stream("one two three four five")) == "one "


def test_a_gate_without_judges_streams_all_but_the_held_words():
    gate = _gate()
    assert run(gate.stream("a b c d e", hold_words=3)) == "a "
    assert run(gate.stream("a b c d e f g", hold_words=3)) == "b c "
    assert run(gate.close("a b c d e f g.")) == "d e f g."


@pytest.mark.parametrize("first", ["raise", ["bad"]])
def test_a_judge_that_fails_or_flags_the_partial_blocks_the_stream_until_the_close(first):
    judge = _Script(first)  # later calls pass: the stream stays blocked all the same
    gate = _gate(judge)
    assert run(gate.stream("Let me look into that", hold_words=1)) == ""
    assert run(gate.stream("Let me look into that for you", hold_words=1)) == ""
    assert judge.asked == ["Let me look into that"]
    assert run(gate.close("Let me look into that for you.")) == "Let me look into that for you."


def test_a_judge_that_fails_to_tell_where_a_violation_forms_once_blocks_until_the_close():
    judge = _Forming()
    gate = _gate(judge)
    assert run(gate.stream("Let me look into that", hold_words=0)) == ""
    assert run(gate.stream("Let me look into that for", hold_words=0)) == ""
    assert judge.tells == 1 and judge.asked == []
    assert run(gate.close("Let me look into that for you.")) == "Let me look into that for you."


def test_the_judges_are_not_asked_when_no_new_word_may_go_out():
    judge = _Script()
    gate = _gate(judge)
    assert run(gate.stream("Let me", hold_words=2)) == ""  # nothing releasable yet
    assert run(gate.stream("Let me look into it", hold_words=2)) == "Let me "
    assert run(gate.stream("Let me look into it", hold_words=2)) == ""  # the same words again
    assert judge.asked == ["Let me look into it"]


def test_after_a_close_the_next_sentence_streams_from_its_start():
    gate = _gate(_Script([], ["bad"]))
    assert run(gate.stream("Let me look into", hold_words=1)) == "Let me "
    assert run(gate.close("Let me look into it.")) == "SAFE"
    assert run(gate.stream("Now we check that", hold_words=1)) == "Now we "
    assert run(gate.close("Now we check that.")) == "check that."
    assert run(gate.close("Done.")) == "Done."  # not streamed: released whole
    assert gate.released == ["SAFE", "Now we check that.", "Done."]


def test_trusted_texts_count_as_released_replacements_and_judges_see_them():
    gate = _gate(EchoJudge())
    assert run(gate.release("Fine.")) == "Fine."
    gate.add_trusted("Your order is pending.")
    gate.add_trusted("Anything else?")
    assert gate.released == ["Fine.", "Your order is pending.", "Anything else?"]
    assert gate.replaced == 2 and gate.model_released == 1
    assert run(gate.release("Your order is pending!")) == "SAFE"  # a repeat of the trusted text


def test_the_summary_counts_the_turn_and_sorts_its_kinds():
    gate = _gate(_Script([], ["zeta", "alpha"], ["beta"]))
    assert [run(gate.release(s)) for s in ("One.", "Two.", "Three.")] == ["One.", "SAFE", None]
    assert gate.summary() == {"mode": "enforce", "released": 2, "withheld": 2, "kinds": ["alpha", "beta", "zeta"]}


class _Guardrails:
    def __init__(self):
        self.calls = []

    async def post(self, sentence, view, context=""):
        self.calls.append((sentence, view, context))
        return SimpleNamespace(text=sentence.strip(), violations=[Violation(kind="k", detail="d")], replacement="R")


@pytest.mark.parametrize(("released", "context"), [
    ([], ""),
    (["One.", "Two."], "One. Two."),
    (["x" * 100, "y" * 100], "x" * 19 + " " + "y" * 100),  # the last 120 characters
])
def test_the_guardrails_judge_passes_the_tail_of_the_released_text(released, context):
    guardrails, view = _Guardrails(), object()
    verdict = run(GuardrailsJudge(guardrails, view).judge(" Hi. ", released))
    assert guardrails.calls == [(" Hi. ", view, context)]
    assert verdict == Judgement(text="Hi.", violations=[Violation(kind="k", detail="d")], replacement="R")


def _violations(judgement):
    return [(v.kind, v.detail) for v in judgement.violations]


@pytest.mark.parametrize(("names", "sentence", "expected"), [
    (["Mug"], "Checking the Mug now.", [("narration_entity", "Mug")]),  # 3 characters: a name
    (["TV"], "Checking the TV now.", []),  # 2 characters: too short to be one
    (["Desk", "Desk Lamp"], "Checking the Desk Lamp now.", [("narration_entity", "Desk Lamp")]),  # longest first
    (["Desk Lamp"], "checking the desk lamp now.", [("narration_entity", "desk lamp")]),
    (["Desk Lamp", "Mug"], "A Mug and a Desk Lamp.", [("narration_entity", "Mug")]),
    (["Desk Lamp", "Mug"], "A Desk Lamp.", [("narration_entity", "Desk Lamp")]),
    ([], "Orders #W1000002 and #W1000001 are here.", [("narration_id", "#W1000001,#W1000002")]),
    ([], "Use {name} here.", [("narration_markup", "")]),
    ([], "Looking at [EMAIL_1].", [("narration_markup", "")]),
])
def test_the_narration_judge_names_what_it_refuses(names, sentence, expected):
    assert _violations(NarrationJudge(names).check(sentence)) == expected


def test_the_narration_judge_finds_the_canary_in_the_sentence_and_across_the_context(monkeypatch):
    monkeypatch.setattr(post, "canary_token", lambda: "tdmcnryqx")  # 8-character windows
    judge = NarrationJudge()
    assert _violations(judge.check("Here is tdmcnryq.")) == [("canary_leak", "")]
    assert _violations(judge.check("nryqx now.", "Here is tdmc")) == [("canary_leak", "")]
    assert _violations(judge.check("nryqx now.")) == []
    # judge() joins the released sentences with a space: the canary spans them
    assert _violations(run(judge.judge("qx now.", ["Here is tdm", "cnry"]))) == [("canary_leak", "")]


def test_the_narration_check_has_no_context_by_default(monkeypatch):
    monkeypatch.setattr(post, "canary_token", lambda: "xxxxtdmcnry")
    assert _violations(NarrationJudge().check("tdmc now.")) == []
    assert _violations(NarrationJudge().check("tdmc now.", "XXXX")) == [("canary_leak", "")]


@pytest.mark.parametrize(("terms", "sentence", "kinds"), [
    ([], "Order is pending.", []),
    (["internal note"], "The Internal Note says hi.", ["contract_echo"]),
    (["draft reply", "ticket triage"], "Per the draft reply.", ["contract_echo"]),
    (["draft reply", "ticket triage"], "Ticket triage done.", ["contract_echo"]),
    (["draft reply", "ticket triage"], "Your reply is drafted.", []),
])
def test_the_echo_judge_refuses_its_internal_terms_in_any_case(terms, sentence, kinds):
    assert [v.kind for v in EchoJudge(terms).check(sentence, []).violations] == kinds


@pytest.mark.parametrize(("released", "kinds"), [
    (["order is pending."], ["repetition"]),
    (["Order is pending"], ["repetition"]),
    (["Order is now pending."], []),
    ([], []),
])
def test_the_echo_judge_refuses_a_repeat_of_a_released_sentence(released, kinds):
    verdict = run(EchoJudge().judge("Order is pending!", released))
    assert verdict.text == "Order is pending!" and [v.kind for v in verdict.violations] == kinds


@pytest.mark.parametrize(("text", "key"), [
    ("Hello, World!", "hello world"),
    ("  Order #W1-2 is   pending. ", "order w1 2 is pending"),
    ("...", ""),
    ("Straße", "straße"),  # lower-cased, not case-folded: "STRASSE" is another key
    ("STRASSE", "strasse"),
])
def test_the_repetition_key_is_the_lower_cased_words_without_punctuation(text, key):
    assert _key(text) == key


def test_a_sentence_of_punctuation_alone_is_no_repetition():
    assert EchoJudge().check("...", ["..."]).violations == []
