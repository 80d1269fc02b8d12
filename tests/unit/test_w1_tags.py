"""The W1 stream's tag sets: the same grammar and parser in short or long tags."""

from __future__ import annotations

import lark
import pytest

from pipelines.errors import InvalidModelOutput
from pipelines.sgc.w1 import LONG_TAGS, SHORT_TAGS, PerceptionParser, SubIntentParsed
from pipelines.sgc.w1_grammar import grammar
from pipelines.tandem.settings import TandemSettings
from tests.doubles import w1

from .harnesses import TandemHarness

LABELS = {"cancel": ["order"], "greeting": ["hello", "bye"]}
SHORT = '<I>cancel</I><S>order</S><N>Let me check.</N><P>[]</P>'
LONG = '<INTENT>cancel</INTENT><SUB_INTENT>order</SUB_INTENT><NARRATION>Let me check.</NARRATION><PLAN>[]</PLAN>'


def _parser(tags) -> lark.Lark:
    return lark.Lark(grammar(list(LABELS), LABELS, ["get_order_details"], tags=tags, narration_required=True),
                     parser="earley", lexer="dynamic")


def test_the_grammar_speaks_one_tag_set():
    _parser(SHORT_TAGS).parse(SHORT)
    _parser(LONG_TAGS).parse(LONG)
    with pytest.raises(lark.exceptions.LarkError):
        _parser(SHORT_TAGS).parse(LONG)
    with pytest.raises(lark.exceptions.LarkError):
        _parser(LONG_TAGS).parse(SHORT)


def test_the_parser_dispatches_at_the_short_sub_intent_close():
    p = PerceptionParser(labels=LABELS, tags=SHORT_TAGS)
    events = p.feed("<I>cancel</I><S>ord")
    assert not [e for e in events if isinstance(e, SubIntentParsed)]
    events = p.feed("er</S>")
    assert [(e.intent, e.sub_intent) for e in events if isinstance(e, SubIntentParsed)] == [("cancel", "order")]
    p.feed("<N>Let me check.</N>")
    assert p.narration_closed
    with pytest.raises(InvalidModelOutput):
        PerceptionParser(labels=LABELS, tags=SHORT_TAGS).feed(LONG)


def test_the_tandem_turn_decodes_long_tags_by_default_and_short_on_request():
    h = TandemHarness()
    h.turn("Hi! What can you help me with?", orch=[w1("greeting", "hello", "Happy to help.")])
    call = h.calls("orchestrator")[0]
    assert call.prefix == "<INTENT>" and '"</SUB_INTENT>"' in call.structured_output.spec
    assert "<INTENT>intent</INTENT><SUB_INTENT>sub-intent</SUB_INTENT><NARRATION>" in call.messages[0].content

    h = TandemHarness(settings=TandemSettings(w1_tags="short"))
    r = h.turn("Hi! What can you help me with?", orch=[w1("greeting", "hello", "Happy to help.", tags=SHORT_TAGS)])
    call = h.calls("orchestrator")[0]
    assert call.prefix == "<I>" and '"</S>"' in call.structured_output.spec
    assert "<I>intent</I><S>sub-intent</S><N>" in call.messages[0].content
    assert r.status == "ok" and [e.type for e in r.events][0] == "narration.delta"
