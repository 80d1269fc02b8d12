"""W1 parser and grammar: events, chunking invariance, malformed streams, Lark / llguidance acceptance."""

from __future__ import annotations

import importlib.util
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.errors import InvalidModelOutput
from pipelines.sgc.phi import PhiTable
from pipelines.sgc.snapshot import Snapshot
from pipelines.sgc.w1 import (
    IntentParsed,
    NarrationDelta,
    PerceptionParser,
    PlanParsed,
    SubIntentParsed,
    ToolCall,
    parse_perception,
)
from pipelines.sgc.w1_grammar import grammar
from pipelines.sgc.w1_run import DispatchTools, PerceptionRun

LABELS = {"recommend": ["lineup_for_opponent", "swap_member"], "chitchat": ["greeting"]}
TOOLS = ["get_inventory", "matchup_scores"]
STREAM = (
    "<INTENT>recommend</INTENT>\n"
    "<SUB_INTENT>lineup_for_opponent</SUB_INTENT>\n"
    "<NARRATION>Let me look at your team, then at Rival Kai's lineup. 3 > 2 & done!</NARRATION>\n"
    '<PLAN>[{"tool": "get_inventory", "args": {"user_id": "u001"}}, '
    '{"tool": "matchup_scores", "args": {"user_id": "u001", "opponent_id": "o01", "k": [1, 2.5, true, null]}}]</PLAN>'
)
SAMPLES = [
    STREAM,
    "<INTENT>chitchat</INTENT><SUB_INTENT>greeting</SUB_INTENT><NARRATION>Hi!</NARRATION><PLAN>[]</PLAN>",
    "  \n<INTENT>recommend</INTENT>  <SUB_INTENT>swap_member</SUB_INTENT>\n\n<NARRATION></NARRATION>"
    '<PLAN>\n[ {"tool":"get_inventory","args":{}} ]\n</PLAN>\n',
]
PHI = PhiTable.model_validate({
    "version": "t1",
    "rows": [{"intent": "recommend", "sub_intent": "lineup_for_opponent", "requires_state": ["user_id"],
              "tools": [{"tool": "get_inventory", "args_from": {"user_id": "user_id"}}]}],
})


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _shape(events):
    """Events with narration deltas merged (their split depends on the chunking)."""
    out, narr = [], ""
    for e in events:
        if isinstance(e, NarrationDelta):
            narr += e.text
            continue
        out.append(e)
    return out, narr


def test_parse_whole_stream_events_and_result():
    events, result = parse_perception([STREAM], labels=LABELS, tools=TOOLS)
    assert isinstance(events[0], IntentParsed) and events[0].intent == "recommend"
    assert isinstance(events[1], SubIntentParsed) and events[1].sub_intent == "lineup_for_opponent"
    assert STREAM[: events[1].offset].endswith("</SUB_INTENT>")
    assert isinstance(events[-1], PlanParsed)
    assert result.plan[0] == ToolCall(tool="get_inventory", args={"user_id": "u001"})
    assert result.narration.startswith("Let me look") and result.narration.endswith("done!")
    assert result.length == len(STREAM)


def test_split_mid_tag_fires_on_close():
    p = PerceptionParser()
    assert p.feed("<INTENT>recommend</INT") == []
    assert [type(e) for e in p.feed("ENT><SUB_INTENT>swap_member</SUB_IN")] == [IntentParsed]
    assert [type(e) for e in p.feed("TENT>")] == [SubIntentParsed]


def test_narration_never_leaks_partial_tag():
    p = PerceptionParser()
    p.feed("<INTENT>chitchat</INTENT><SUB_INTENT>greeting</SUB_INTENT><NARRATION>Hello the")
    out = p.feed("re</NARR")
    assert [e.text for e in out if isinstance(e, NarrationDelta)] == ["re"]
    assert p.feed("ATION><PLAN>[]</PLAN>") == [PlanParsed(calls=(), offset=p._consumed)]


@settings(max_examples=200, deadline=None)
@given(sample=st.sampled_from(SAMPLES), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=40))
def test_any_chunking_parses_identically_and_fires_phi_once(sample, cuts):
    ref_events, ref = parse_perception([sample])
    events, result = parse_perception(_chunks(sample, cuts))
    assert result == ref
    assert _shape(events) == _shape(ref_events)
    assert all(e.text for e in events if isinstance(e, NarrationDelta))
    # the driver calls Φ exactly once, at the same stream offset, whatever the chunking
    fired: list[DispatchTools] = []
    run = PerceptionRun(PHI, Snapshot.of({"user_id": "u001"}), on_dispatch=fired.append)
    for c in _chunks(sample, cuts):
        run.feed(c)
    outcome = run.finish()
    assert run.counters.hits + run.counters.unmapped + run.counters.state_unavailable == 1
    assert len(fired) == 1
    sub_offset = next(e.offset for e in ref_events if isinstance(e, SubIntentParsed))
    if outcome.phi.hit:
        assert fired[0].source == "phi" and fired[0].point.char_offset == sub_offset
    else:
        assert fired[0].source == "plan" and fired[0].point.char_offset == len(sample.rstrip())


@pytest.mark.parametrize("bad", [
    "hello<INTENT>x</INTENT>",
    "<INTENT>recommend</INTENT><NARRATION>x</NARRATION>",
    "<INTENT>rec ommend</INTENT>",
    "<INTENT>recommend</INTENT><SUB_INTENT>greeting</SUB_INTENT>",
    "<INTENT>nope</INTENT>",
    "<INTENT>chitchat</INTENT><SUB_INTENT>greeting</SUB_INTENT><NARRATION>a</NARRATION><PLAN>{}</PLAN>",
    "<INTENT>chitchat</INTENT><SUB_INTENT>greeting</SUB_INTENT><NARRATION>a</NARRATION><PLAN>[1]</PLAN>",
    "<INTENT>chitchat</INTENT><SUB_INTENT>greeting</SUB_INTENT><NARRATION>a</NARRATION><PLAN>[nope</PLAN>",
    '<INTENT>chitchat</INTENT><SUB_INTENT>greeting</SUB_INTENT><NARRATION>a</NARRATION><PLAN>[{"tool":"rm"}]</PLAN>',
    "<INTENT>chitchat</INTENT><SUB_INTENT>greeting</SUB_INTENT><NARRATION>a</NARRATION><PLAN>[]</PLAN>trailing",
    "<INTENT>" + "x" * 200,
])
def test_malformed_stream_raises_typed_error(bad):
    with pytest.raises(InvalidModelOutput):
        parse_perception([bad], labels=LABELS, tools=TOOLS)


@pytest.mark.parametrize("cut", ["", "<INTENT>recommend", STREAM[:60], STREAM[:-3]])
def test_truncated_stream_raises_at_finish(cut):
    with pytest.raises(InvalidModelOutput) as info:
        parse_perception([cut])
    assert info.value.code == "invalid_model_output"


def _grammar() -> str:
    return grammar(list(LABELS), LABELS, TOOLS)


def test_grammar_is_deterministic_and_names_labels():
    g = _grammar()
    assert g == _grammar() and g.startswith("start:")
    for label in ["recommend", "swap_member", "greeting", '"\\"get_inventory\\""']:
        assert label in g


@pytest.mark.skipif(importlib.util.find_spec("lark") is None, reason="lark not installed")
@pytest.mark.parametrize("flat", [False, True])
def test_grammar_accepts_samples_and_rejects_off_label(flat):
    import lark

    g = grammar(list(LABELS), ["lineup_for_opponent", "swap_member", "greeting"], TOOLS) if flat else _grammar()
    parser = lark.Lark(g, parser="earley", lexer="dynamic")
    for sample in SAMPLES:
        parser.parse(sample)
    bad = [STREAM.replace("get_inventory", "drop_tables"), STREAM.replace("Let me", "Let <me"),
           STREAM.replace("lineup_for_opponent", "unknown_sub")]
    if not flat:
        bad.append(SAMPLES[1].replace("greeting", "swap_member"))
    for b in bad:
        with pytest.raises(lark.exceptions.LarkError):
            parser.parse(b)


@pytest.mark.skipif(importlib.util.find_spec("llguidance") is None, reason="llguidance not installed")
def test_grammar_accepted_by_llguidance_backend():
    import llguidance

    tok = llguidance.LLTokenizer("byte")
    compiled = llguidance.grammar_from("lark", _grammar())
    is_err, messages = llguidance.LLMatcher.validate_grammar_with_warnings(compiled)
    assert not is_err, messages
    for sample in SAMPLES:
        m = llguidance.LLMatcher(tok, compiled)
        assert m.consume_tokens(tok.tokenize_str(sample)), m.get_error()
        assert m.is_accepting()
    m = llguidance.LLMatcher(tok, compiled)
    assert not m.consume_tokens(tok.tokenize_str(STREAM.replace("get_inventory", "nope")))


def test_plan_json_matches_toolcall_shape():
    _, result = parse_perception([STREAM])
    assert json.loads(json.dumps([c.model_dump() for c in result.plan]))[1]["tool"] == "matchup_scores"
