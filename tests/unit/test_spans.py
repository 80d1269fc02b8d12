"""pipelines.telemetry / pipelines.spans: OpenInference kinds and attributes, redaction, error recording."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pipelines.telemetry as ptel
from pipelines.protocols import ChatMessage
from pipelines.spans import (
    guard_decision,
    guard_span,
    llm_span,
    retriever_span,
    start_llm_span,
    tool_span,
)
from pipelines.telemetry import ATTR, annotate, safe_text, stage_span

EMAIL = "jane.doe@example.org"
PHONE = "+1 415-555-0134"


def _by_name(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {s.name: s for s in exporter.get_finished_spans()}


# -- safe_text -------------------------------------------------------------------------------


def test_safe_text_replaces_pii_and_keeps_placeholders() -> None:
    text = f"mail {EMAIL} or call {PHONE}; ship to 12 Ocean Drive; known [EMAIL_1]"
    assert safe_text(text) == "mail [EMAIL] or call [PHONE]; ship to [ADDRESS]; known [EMAIL_1]"
    assert safe_text({"email": EMAIL, "n": 2}) == '{"email": "[EMAIL]", "n": 2}'
    assert safe_text("card 4111 1111 1111 1111") == "card [CARD]"
    assert safe_text("card 4111 1111 1111 1112") == "card 4111 1111 1111 1112"  # fails Luhn: not a card


def test_safe_text_length_cap_boundary() -> None:
    assert safe_text("x" * 10, limit=10) == "x" * 10
    assert safe_text("x" * 11, limit=10) == "x" * 9 + "…"


# -- stage spans and annotate -----------------------------------------------------------------


def test_stage_span_is_a_chain_unless_told(spans: InMemorySpanExporter) -> None:
    with stage_span("turn", session_id="s1", input=f"hi, I am {EMAIL}") as turn:
        with stage_span("pre_guard", kind=ptel.SpanKind.GUARDRAIL):
            pass
        annotate(turn, status="fallback", fallback_trigger="step_cap", fallback_class="policy", card_id=None,
                 output={"reply": "ok"}, phi_hit=True, rules_version="g-1", steps=3)
    got = _by_name(spans)
    t = dict(got["tandem.turn"].attributes)
    assert t["openinference.span.kind"] == "CHAIN" and t["session.id"] == "s1" and t[ATTR.SESSION] == "s1"
    assert t["input.value"] == "hi, I am [EMAIL]" and t["input.mime_type"] == "text/plain"
    assert t["output.value"] == '{"reply": "ok"}' and t["output.mime_type"] == "application/json"
    assert t[ATTR.STATUS] == "fallback" and t[ATTR.FALLBACK_TRIGGER] == "step_cap"
    assert t[ATTR.FALLBACK_CLASS] == "policy" and t[ATTR.PHI_HIT] is True and t[ATTR.RULES_VERSION] == "g-1"
    assert t["tandem.steps"] == 3 and ATTR.CARD_ID not in t  # None is not recorded
    assert got["tandem.pre_guard"].attributes["openinference.span.kind"] == "GUARDRAIL"
    assert got["tandem.pre_guard"].parent.span_id == got["tandem.turn"].context.span_id


def test_annotate_without_a_span_sets_the_current_one(spans: InMemorySpanExporter) -> None:
    with stage_span("orchestrate"):
        annotate(decision="respond", path="answer")
    annotate(decision="ignored")  # no active span: a no-op
    attrs = _by_name(spans)["tandem.orchestrate"].attributes
    assert attrs[ATTR.DECISION] == "respond" and attrs[ATTR.PATH] == "answer"


def test_errors_are_recorded_by_class_and_code_never_by_message(spans: InMemorySpanExporter) -> None:
    from pipelines.errors import ModelTimeout

    with pytest.raises(ValueError), stage_span("a"):
        raise ValueError(f"bad value {EMAIL}")
    with pytest.raises(ModelTimeout), stage_span("b"):
        raise ModelTimeout("slow")
    got = _by_name(spans)
    a, b = got["tandem.a"], got["tandem.b"]
    assert a.status.status_code == trace.StatusCode.ERROR and a.status.description == "ValueError"
    assert not a.events  # no exception event with the message
    assert EMAIL not in str(dict(a.attributes))
    assert b.attributes[ATTR.ERROR_CODE] == "model_timeout" and b.status.description == "ModelTimeout"


def test_a_generator_closed_early_is_cancelled_not_failed(spans: InMemorySpanExporter) -> None:
    async def gen():
        with stage_span("generate"):
            yield 1
            yield 2

    async def take_one() -> None:
        g = gen()
        await g.__anext__()
        await g.aclose()

    asyncio.run(take_one())
    s = _by_name(spans)["tandem.generate"]
    assert s.attributes[ATTR.CANCELLED] is True and s.status.status_code == trace.StatusCode.UNSET


# -- LLM ----------------------------------------------------------------------------------------


def test_llm_span_records_messages_model_output_and_usage(spans: InMemorySpanExporter) -> None:
    msgs = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content=f"I'm {EMAIL}")]
    with llm_span("generator", msgs, model_id="smollm2-135m-instruct", params={"max_tokens": 8, "seed": 0}) as llm:
        llm.add("Hello ")
        llm.add(f"{EMAIL}!")
        llm.usage(prompt_tokens=12, completion_tokens=4)
    a = dict(_by_name(spans)["tandem.llm.generator"].attributes)
    assert a["openinference.span.kind"] == "LLM" and a["llm.model_name"] == "smollm2-135m-instruct"
    assert a["llm.input_messages.0.message.role"] == "system"
    assert a["llm.input_messages.0.message.content"] == "Be brief."
    assert a["llm.input_messages.1.message.content"] == "I'm [EMAIL]"
    assert a["input.value"] == "I'm [EMAIL]"
    assert a["llm.invocation_parameters"] == '{"max_tokens": 8, "seed": 0}'
    assert a["llm.output_messages.0.message.role"] == "assistant"
    assert a["llm.output_messages.0.message.content"] == a["output.value"] == "Hello [EMAIL]!"
    assert (a["llm.token_count.prompt"], a["llm.token_count.completion"], a["llm.token_count.total"]) == (12, 4, 16)
    assert a[ATTR.DELTAS] == 2 and a[ATTR.FIRST_TOKEN_MS] >= 0 and a[ATTR.ROLE] == "generator"


def test_llm_span_without_output_or_usage(spans: InMemorySpanExporter) -> None:
    with llm_span("orchestrator", [{"role": "user", "content": "hi"}], model_id="m"):
        pass
    a = dict(_by_name(spans)["tandem.llm.orchestrator"].attributes)
    assert a["output.value"] == "" and a[ATTR.DELTAS] == 0
    assert ATTR.FIRST_TOKEN_MS not in a and "llm.token_count.prompt" not in a


def test_start_llm_span_is_current_only_inside_activate(spans: InMemorySpanExporter) -> None:
    with stage_span("generate") as parent:
        llm = start_llm_span("generator", [], model_id="m")
        assert trace.get_current_span() is parent
        with llm.activate():
            assert trace.get_current_span() is llm.span
            with stage_span("remote"):
                pass
        assert trace.get_current_span() is parent
        llm.add("x")
        llm.end(TimeoutError())
    got = _by_name(spans)
    assert got["tandem.remote"].parent.span_id == got["tandem.llm.generator"].context.span_id
    assert got["tandem.llm.generator"].parent.span_id == got["tandem.generate"].context.span_id
    assert got["tandem.llm.generator"].status.description == "TimeoutError"
    assert got["tandem.llm.generator"].attributes["output.value"] == "x"


# -- tools, guards, retrieval -----------------------------------------------------------------------


def test_tool_span_arguments_and_observation(spans: InMemorySpanExporter) -> None:
    with tool_span("find_user_id_by_email", {"email": "[EMAIL_1]"}, step=1) as t:
        t.observation({"user_id": "alex_rivera_1", "contact": EMAIL}, ok=True)
    with tool_span("cancel_pending_order", {"order_id": "#W1"}) as t:
        t.observation(None, ok=False, reason="not_confirmed")
    got = _by_name(spans)
    a = dict(got["tandem.tool.find_user_id_by_email"].attributes)
    assert a["openinference.span.kind"] == "TOOL" and a["tool.name"] == "find_user_id_by_email"
    assert a["input.value"] == '{"email": "[EMAIL_1]"}' and a["input.mime_type"] == "application/json"
    assert a["output.value"] == '{"user_id": "alex_rivera_1", "contact": "[EMAIL]"}'
    assert a[ATTR.OBSERVATION_CHARS] == len(a["output.value"]) and a[ATTR.TOOL_OK] is True and a[ATTR.STEP] == 1
    b = dict(got["tandem.tool.cancel_pending_order"].attributes)
    assert b[ATTR.TOOL_OK] is False and b[ATTR.TOOL_REASON] == "not_confirmed" and b[ATTR.OBSERVATION_CHARS] == 0


def test_guard_spans(spans: InMemorySpanExporter) -> None:
    with guard_span("post", text="Your order #W9 ships today.", source="generator") as g:
        g.decision("block", kinds=["unobserved_id"], output="I can't confirm that yet.")
    guard_decision("mid", "pass", step=2)
    got = _by_name(spans)
    post, mid = dict(got["tandem.guard.post"].attributes), dict(got["tandem.guard.mid"].attributes)
    assert post["openinference.span.kind"] == "GUARDRAIL" and post[ATTR.GUARD_STAGE] == "post"
    assert post[ATTR.GUARD_DECISION] == "block" and post[ATTR.GUARD_KINDS] == ("unobserved_id",)
    assert post["input.value"] == "Your order #W9 ships today." and post["output.value"] == "I can't confirm that yet."
    assert post["tandem.source"] == "generator"
    assert mid[ATTR.GUARD_DECISION] == "pass" and ATTR.GUARD_KINDS not in mid and mid[ATTR.STEP] == 2


def test_retriever_span_documents(spans: InMemorySpanExporter) -> None:
    with retriever_span("how do returns work", source="help") as r:
        r.documents([{"id": "help.returns", "content": "Return within 30 days.", "score": 5.0,
                      "metadata": {"title": "Returns"}}, {"id": "help.ship", "content": "Ships in 2 days."}])
    a = dict(_by_name(spans)["tandem.retrieve"].attributes)
    assert a["openinference.span.kind"] == "RETRIEVER" and a["input.value"] == "how do returns work"
    assert a["retrieval.documents.0.document.id"] == "help.returns"
    assert a["retrieval.documents.0.document.score"] == 5.0
    assert a["retrieval.documents.0.document.metadata"] == '{"title": "Returns"}'
    assert a["retrieval.documents.1.document.content"] == "Ships in 2 days."
    assert "retrieval.documents.1.document.score" not in a


def test_helpers_are_no_ops_without_a_provider() -> None:
    with stage_span("x") as s, tool_span("t", {"a": 1}) as t, guard_span("post") as g:
        t.observation({"r": 1}, ok=True)
        g.decision("pass")
        annotate(s, decision="d")
    assert not s.is_recording()


def test_safe_text_remembers_only_clean_texts_and_stays_bounded() -> None:
    ptel._CLEAN.clear()
    assert safe_text("order 42 ships soon") == "order 42 ships soon"
    assert "order 42 ships soon" in ptel._CLEAN
    assert safe_text(f"mail {EMAIL}") == "mail [EMAIL]" and f"mail {EMAIL}" not in ptel._CLEAN
    assert safe_text("no digits, no at-sign") == "no digits, no at-sign"
    assert "no digits, no at-sign" not in ptel._CLEAN  # never scanned: nothing to remember
    for i in range(ptel._CLEAN_MAX + 5):
        safe_text(f"step {i}")
    assert len(ptel._CLEAN) <= ptel._CLEAN_MAX
