"""The W1 stream parser with fixed expected values: every refusal's message and details, each
boundary (a section's length limit, the held partial close tag, the whitespace it skips), and what a
refusal must not be confused with. Expected values are written from the parser's rules."""

from __future__ import annotations

import pytest

from pipelines.errors import InvalidModelOutput
from pipelines.sgc.w1 import (
    IntentParsed,
    NarrationDelta,
    PerceptionParser,
    SubIntentParsed,
    _held_suffix,
    parse_perception,
)

LABELS = {"greeting": ["hello"], "cancel": ["order"]}
HEAD = "<INTENT>greeting</INTENT><SUB_INTENT>hello</SUB_INTENT>"
FULL = HEAD + "<NARRATION>Hi there.</NARRATION><PLAN>[]</PLAN>"
CLOSE = "</NARRATION>"


@pytest.mark.parametrize(("buf", "held"), [
    ("Hello", 0),                    # no "<" at all
    ("Hello <", 1),                  # the first character of the close tag
    ("Hello </NARR", 6),
    ("Hello </NARRATION", 11),       # the longest proper prefix: len(close) - 1
    ("</NARRATION>", 0),             # the whole tag is not a *proper* prefix (the caller found it)
    ("a <b", 0),                     # "<b" can never become the close tag
    ("<</NA", 4),                    # the last "<" that starts a prefix wins
    ("</NA<x", 0),                   # an earlier prefix followed by text is not held
    ("<", 1),
    ("", 0),
    ("x" * 30 + "<", 1),             # far from the buffer's start
    ("<" + "x" * 11, 0),             # a "<" further back than the tag is long is not looked at
])
def test_held_suffix_table(buf: str, held: int) -> None:
    assert _held_suffix(buf, CLOSE) == held


def _refusal(stream: str | list[str], *, labels=LABELS, finish: bool = False, plan_optional: bool = False,
             tools=None) -> InvalidModelOutput:
    parser = PerceptionParser(labels=labels, tools=tools)
    with pytest.raises(InvalidModelOutput) as info:
        for chunk in [stream] if isinstance(stream, str) else stream:
            parser.feed(chunk)
        if finish:
            parser.finish(plan_optional=plan_optional)
    return info.value


def test_a_stream_that_does_not_open_with_the_tag() -> None:
    e = _refusal("hello")
    assert (e.message, e.details) == ("perception stream: expected <INTENT>", {"offset": 0, "text": "hello"})
    e = _refusal("  " + "y" * 50)  # the whitespace before a tag is skipped and counted
    assert (e.message, e.details) == ("perception stream: expected <INTENT>", {"offset": 2, "text": "y" * 40})


def test_text_after_the_plan() -> None:
    e = _refusal(FULL + " x")
    assert (e.message, e.details) == ("perception stream: text after </PLAN>", {"text": "x"})
    e = _refusal(FULL + "z" * 50)
    assert e.details == {"text": "z" * 40}
    # only the parser's own whitespace is skipped: a no-break space is text
    e = _refusal(FULL + "\u00a0")
    assert e.details == {"text": "\u00a0"}
    parser = PerceptionParser(labels=LABELS)
    parser.feed(FULL + " \t\r\n")
    assert parser.done is True and parser.finish().narration == "Hi there."


def test_a_label_section_at_and_over_its_limit() -> None:
    close = "</INTENT>"
    parser = PerceptionParser(labels=None)
    parser.feed("<INTENT>" + "a" * (64 + len(close)))  # exactly the limit: still waiting for the close
    e = _refusal("<INTENT>" + "a" * (64 + len(close) + 1), labels=None)
    assert (e.message, e.details) == ("perception stream: <INTENT> section too long", {"limit": 64})


@pytest.mark.parametrize(("section", "stream", "value"), [
    ("INTENT", "<INTENT></INTENT>", ""),
    ("INTENT", "<INTENT>two words</INTENT>", "two words"),
    ("INTENT", "<INTENT>a<b</INTENT>", "a<b"),
    ("INTENT", "<INTENT>" + "a" * 45 + " b</INTENT>", "a" * 40),
    ("SUB_INTENT", "<INTENT>greeting</INTENT><SUB_INTENT> </SUB_INTENT>", ""),
])
def test_a_section_must_hold_one_label(section: str, stream: str, value: str) -> None:
    e = _refusal(stream, labels=None)
    assert (e.message, e.details) == (f"perception stream: <{section}> must hold one label", {"value": value})


def test_the_first_close_tag_ends_a_section() -> None:
    e = _refusal("<INTENT>a</INTENT></INTENT>", labels=None)
    assert e.message == "perception stream: expected <SUB_INTENT>"


def test_unknown_labels_name_what_was_read() -> None:
    e = _refusal("<INTENT>refund</INTENT>")
    assert (e.message, e.details) == ("perception stream: unknown intent 'refund'", {"intent": "refund"})
    e = _refusal("<INTENT>\u00a0greeting</INTENT>")  # only the parser's whitespace is stripped
    assert e.details == {"intent": "\u00a0greeting"}
    e = _refusal("<INTENT>greeting</INTENT><SUB_INTENT>order</SUB_INTENT>")
    assert (e.message, e.details) == ("perception stream: unknown sub-intent 'order' for 'greeting'",
                                      {"intent": "greeting", "sub_intent": "order"})
    events, _ = parse_perception([FULL], labels=LABELS)
    assert [type(ev) for ev in events[:2]] == [IntentParsed, SubIntentParsed]
    with pytest.raises(InvalidModelOutput, match="unknown intent 'cancel'"):
        parse_perception([FULL.replace("greeting", "cancel")], labels={"greeting": ["hello"]})


def test_the_stream_ends_early() -> None:
    e = _refusal([HEAD, "<NARRATION>Hi"], finish=True)
    assert (e.message, e.details) == ("perception stream: stream ended inside <NARRATION>",
                                      {"section": "NARRATION", "offset": len(HEAD) + len("<NARRATION>Hi")})  # "Hi" was released
    stream = HEAD + "<NARRATION>Hi.</NARRATION>"
    e = _refusal(stream, finish=True)
    assert (e.message, e.details) == ("perception stream: stream ended before <PLAN>",
                                      {"section": "PLAN", "offset": len(stream)})
    e = _refusal([HEAD, "<NARRATION>Hi"], finish=True, plan_optional=True)  # the narration never closed
    assert e.message == "perception stream: stream ended inside <NARRATION>"


def test_plan_optional_keeps_a_plan_that_was_read_and_joins_the_narration() -> None:
    parser = PerceptionParser(labels=LABELS)
    assert parser.done is False
    for chunk in [HEAD, "<NARRATION>Hi ", "there.", "</NARRATION>"]:
        parser.feed(chunk)
    result = parser.finish(plan_optional=True)
    assert (result.narration, result.plan) == ("Hi there.", ())
    parser = PerceptionParser(labels=LABELS)
    parser.feed(HEAD + '<NARRATION>Hi.</NARRATION><PLAN>[{"tool": "t", "args": {}}]</PLAN>')
    assert [c.tool for c in parser.finish(plan_optional=True).plan] == ["t"]


def test_plan_refusals_name_the_item() -> None:
    import json

    try:
        json.loads("[oops")
    except json.JSONDecodeError as exc:
        expected = str(exc)
    e = _refusal(HEAD + "<NARRATION>Hi.</NARRATION><PLAN>[oops</PLAN>")
    assert (e.message, e.details) == ("perception stream: PLAN is not valid JSON", {"error": expected})
    e = _refusal(HEAD + '<NARRATION>Hi.</NARRATION><PLAN>[{"tool": "t", "args": {}}, 3]</PLAN>')
    assert (e.message, e.details) == ("perception stream: PLAN item 1 is not a tool call", {"index": 1})


def test_narration_is_released_up_to_a_possible_close_tag() -> None:
    parser = PerceptionParser(labels=LABELS)
    parser.feed(HEAD)
    assert parser.feed("<NARRATION>Hi </NARR") == [NarrationDelta(text="Hi ")]
    assert parser.feed("ATION>") == []  # the held "</NARR" was the tag: nothing more to release
    assert parser.narration_closed
