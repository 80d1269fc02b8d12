"""SentenceGate.release: what a decision emits, counts, remembers and releases.

Pins the gate's defaults (enforce, no source, fail-closed wording = safe), the logged
``gate.block`` event's fields, the fail-closed warning, the judges' own safe wordings
(and ``replacements=False``), observe mode, the ``accept`` hook, the decision recorded
for ``last_blocked`` and the GUARDRAIL span, and the counts (kinds, replaced, withheld).
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from pipelines.counters import Counters
from pipelines.gate import Judgement, SentenceGate
from pipelines.guardrails.post import Violation
from pipelines.telemetry import ATTR


class _Script:
    """A judge answering each call from a script: a list of (kind, detail) per call ([] passes)."""

    def __init__(self, *calls, replacement="", accepts=False):
        self.calls, self.replacement, self.seen = list(calls), replacement, []
        if accepts:
            self.accept = self.seen.append

    async def judge(self, sentence, released):
        kinds = self.calls.pop(0) if self.calls else []
        return Judgement(text=sentence.strip(), replacement=self.replacement,
                         violations=[Violation(kind=k, detail=d) for k, d in kinds])


class _Boom:
    async def judge(self, sentence, released):
        raise ValueError("judge down")


def _gate(*judges, **kw):
    events, counters = [], Counters()
    kw.setdefault("stage", "post")
    kw.setdefault("safe", "SAFE")
    gate = SentenceGate(list(judges), counters, lambda kind, **f: events.append((kind, f)), **kw)
    return gate, counters, events


def _run(gate, sentence):
    return asyncio.run(gate.release(sentence))


BAD = [("bad", "why")]


def test_a_fresh_gate_enforces_and_has_released_nothing():
    gate, _, _ = _gate(_Script())
    assert gate.summary() == {"mode": "enforce", "released": 0, "withheld": 0, "kinds": []}
    assert gate.last_blocked == [] and gate.model_released == 0 and gate.text == ""


def test_a_withheld_sentence_logs_every_field_of_its_event():
    gate, _, events = _gate(_Script([("a", "d1"), ("b", "d2")]), stage="narration")
    assert _run(gate, "Hi \u200bthere  now.") == "SAFE"
    # no source by default: the field is absent
    assert events == [("gate.block", {"stage": "narration", "decision": "block", "kinds": ["a", "b"],
                                      "details": ["d1", "d2"], "sentence": "Hi there now."})]


@pytest.mark.parametrize(("length", "logged"), [(300, 300), (301, 300), (450, 300), (12, 12)])
def test_the_logged_sentence_is_cut_at_300_characters(length, logged):
    gate, _, events = _gate(_Script(BAD))
    _run(gate, "x" * length)
    assert events[0][1]["sentence"] == "x" * logged


def test_the_event_name_and_source_are_the_gates():
    gate, _, events = _gate(_Script(BAD), event="narration.block", source="narrator")
    _run(gate, "One.")
    assert events == [("narration.block", {"stage": "post", "decision": "block", "kinds": ["bad"],
                                           "details": ["why"], "sentence": "One.", "source": "narrator"})]


@pytest.mark.parametrize(("fail_closed", "out"), [(None, "SAFE"), ("SORRY", "SORRY"), ("", None)])
def test_a_failing_judge_releases_the_fail_closed_wording(fail_closed, out):
    gate, counters, events = _gate(_Script(), _Boom(), fail_closed=fail_closed)
    assert _run(gate, "Unjudged.") == out
    assert events[0][1]["kinds"] == ["guard_unavailable"] and events[0][1]["details"] == ["ValueError"]
    assert counters.get("blocked", "guard_unavailable") == 1 and gate.withheld == 1


def test_a_violation_releases_the_safe_wording_not_the_fail_closed_one():
    gate, _, _ = _gate(_Script(BAD), fail_closed="SORRY")
    assert _run(gate, "One.") == "SAFE"


def test_a_failing_judge_is_named_in_a_warning_with_its_exception(caplog):
    with caplog.at_level(logging.WARNING, logger="tandem.gate"):
        _run(_gate(_Boom())[0], "Unjudged.")
    (rec,) = [r for r in caplog.records if r.name == "tandem.gate"]
    assert rec.levelno == logging.WARNING and rec.getMessage() == "judge _Boom failed"
    assert isinstance(rec.exc_info[1], ValueError) and str(rec.exc_info[1]) == "judge down"


@pytest.mark.parametrize(("replacements", "safe", "out"), [
    (True, "SAFE", "OWN"), (False, "SAFE", "SAFE"), (False, "", None), (True, "", "OWN"),
])
def test_a_judges_own_safe_wording_is_used_unless_replacements_are_off(replacements, safe, out):
    gate, _, _ = _gate(_Script(BAD, replacement="OWN"), safe=safe, replacements=replacements)
    assert _run(gate, "One.") == out


def test_violation_kinds_accumulate_across_sentences_without_duplicates():
    gate, _, _ = _gate(_Script([("a", "")], [], [("b", ""), ("a", "")]))
    for s in ("One.", "Two.", "Three."):
        _run(gate, s)
    assert gate.kinds == ["a", "b"] and gate.summary()["kinds"] == ["a", "b"]


def test_last_blocked_names_the_kinds_of_an_enforced_block_only():
    enforce, _, _ = _gate(_Script(BAD, [], [("c", ""), ("d", "")]))
    _run(enforce, "One.")
    assert enforce.last_blocked == ["bad"]
    _run(enforce, "Two.")
    assert enforce.last_blocked == []
    _run(enforce, "Three.")
    assert enforce.last_blocked == ["c", "d"]
    observe, _, _ = _gate(_Script(BAD), mode="observe")
    _run(observe, "One.")
    assert observe.last_blocked == []


@pytest.mark.parametrize(("mode", "calls", "decision", "kinds"), [
    ("enforce", [BAD], "block", ("bad",)),
    ("observe", [BAD], "observe", ("bad",)),
    ("enforce", [[]], "pass", None),
    ("observe", [[]], "pass", None),
])
def test_the_guard_span_records_the_decision(spans, mode, calls, decision, kinds):
    gate, _, _ = _gate(_Script(*calls), mode=mode)
    _run(gate, "One.")
    (span,) = spans.get_finished_spans()
    attrs = dict(span.attributes)
    assert span.name == "tandem.guard.post" and attrs[ATTR.GUARD_DECISION] == decision
    assert attrs.get(ATTR.GUARD_KINDS) == kinds


def test_observe_mode_releases_the_sentence_and_counts_it_as_delivered():
    first, second = _Script([], accepts=True), _Script([("a", "x"), ("b", "y")], accepts=True)
    gate, counters, events = _gate(first, second, mode="observe", source="audit")
    assert _run(gate, "  Raw  sentence. ") == "  Raw  sentence. "
    assert gate.released == ["  Raw  sentence. "] and gate.withheld == 0 and gate.replaced == 0
    assert counters.get("delivered_violations", "a") == 1 and counters.get("delivered_violations", "b") == 1
    assert counters.total("blocked") == 0 and counters.total("guard") == 0
    assert events == [("gate.block", {"stage": "post", "decision": "observe", "kinds": ["a", "b"],
                                      "details": ["x", "y"], "sentence": " Raw sentence. ", "source": "audit"})]
    # every judge that gave a verdict hears about the released sentence
    assert [j.text for j in first.seen] == ["Raw  sentence."]
    assert [v.kind for v in second.seen[0].violations] == ["a", "b"] and gate.summary()["mode"] == "observe"


def test_accept_hears_each_judges_own_verdict_on_a_pass_but_nothing_on_a_block():
    first, second = _Script([], [], accepts=True), _Script([], BAD, accepts=True)
    gate, counters, _ = _gate(first, second)
    assert _run(gate, " Fine. ") == "Fine."  # the second judge saw (and passed) the first one's text
    assert [j.text for j in first.seen] == ["Fine."] and [j.text for j in second.seen] == ["Fine."]
    assert all(isinstance(j, Judgement) and j.violations == [] for j in first.seen + second.seen)
    assert _run(gate, "Bad.") == "SAFE"
    assert len(first.seen) == 1 and len(second.seen) == 1 and counters.get("guard", "post.pass") == 1


def test_each_safe_wording_released_counts_as_one_replacement():
    gate, counters, _ = _gate(_Script(BAD, [], BAD, BAD))
    assert [_run(gate, s) for s in ("One.", "Fine.", "Two.", "Three.")] == ["SAFE", "Fine.", "SAFE", None]
    assert gate.released == ["SAFE", "Fine.", "SAFE"] and gate.replaced == 2 and gate.model_released == 1
    assert gate.withheld == 3 and counters.get("guard", "post.block") == 3 and counters.get("blocked", "bad") == 3
