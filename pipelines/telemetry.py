"""Spans for a turn's stages, model calls, tools, guard decisions and retrieval (OpenTelemetry API only).

The SDK is set up by ``serve/``; without a tracer provider every helper here is a
no-op. Inside a Ray Serve replica the spans become children of the request's
span, so one trace covers proxy → ingress → stages → model deployment. Each
span carries an OpenInference kind (:class:`~pipelines.semconv.SpanKind`) and
its OpenInference attributes, so trace UIs (Arize Phoenix and others) show
prompts, outputs, tool calls and guard decisions as a tree.

Stage spans and :func:`annotate` live here; the LLM / TOOL / GUARDRAIL / RETRIEVER
helpers in :mod:`pipelines.spans`. How a pipeline uses them::

    from pipelines.spans import guard_decision, guard_span, llm_span, retriever_span, tool_span
    from pipelines.telemetry import annotate, stage_span

    with stage_span("orchestrate", role="orchestrator", turn_id=ctx.turn_id):   # CHAIN span
        annotate(decision="respond", step=2)        # Tandem attributes on the current span
    with tool_span("get_order_details", args, step=1) as tool:                 # TOOL span
        result = await tools.call(...)
        tool.observation(result.observation.result, ok=True)
    with guard_span("post", text=sentence) as guard:                            # GUARDRAIL span
        verdict = await guardrails.post(...)
        guard.decision("block", kinds=["unobserved_id"], output=verdict.replacement)
    guard_decision("mid", "pass", step=1)           # a GUARDRAIL span for a synchronous check
    with retriever_span(query) as r:                                            # RETRIEVER span
        r.documents([{"id": "help.returns", "content": "...", "score": 2.0}])
    with llm_span("generator", call.messages, model_id="m") as llm:             # LLM span
        llm.add(delta); llm.usage(prompt_tokens=120, completion_tokens=40)
    llm = start_llm_span(...)   # the same, not current: for a model client that is an async generator

Never PII: every text these helpers record (inputs, outputs, messages, tool
arguments and observations, documents) goes through :func:`safe_text`, which
replaces what :func:`pipelines.guardrails.pii.detect_pii` finds by ``[EMAIL]``,
``[PHONE]``, ... and caps the length. Pipelines pass the texts they already
redacted (vault placeholders such as ``[EMAIL_1]``), so spans read like the
event log. Exceptions are recorded by class and error code only, never by message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from pipelines.guardrails.pii import detect_pii
from pipelines.semconv import OI, MimeType, SpanKind

__all__ = [
    "tracer", "ATTR", "SpanKind", "MAX_TEXT",
    "stage_span", "annotate", "current_trace_id", "safe_text",
]

tracer = trace.get_tracer("tandem.pipelines")

MAX_TEXT = 16_000  # characters kept of one recorded text


class ATTR:
    """Tandem's own span attribute names, in one place (OpenInference names are in :class:`OI`)."""

    SESSION = "tandem.session_id"
    TURN = "tandem.turn_id"
    PIPELINE = "tandem.pipeline"
    ROLE = "tandem.role"
    STAGE = "tandem.stage"
    STEP = "tandem.step"
    DECISION = "tandem.decision"
    PATH = "tandem.path"
    STATUS = "tandem.status"
    PHI_HIT = "tandem.phi_hit"
    FALLBACK_TRIGGER = "tandem.fallback.trigger"
    FALLBACK_CLASS = "tandem.fallback.class"
    RULES_VERSION = "tandem.rules_version"
    CARD_ID = "tandem.card_id"
    GUARD_STAGE = "tandem.guard.stage"
    GUARD_DECISION = "tandem.guard.decision"
    GUARD_KINDS = "tandem.guard.kinds"
    TOOL_OK = "tandem.tool.ok"
    TOOL_REASON = "tandem.tool.reason"
    OBSERVATION_CHARS = "tandem.tool.observation_chars"
    FIRST_TOKEN_MS = "tandem.first_token_ms"
    DELTAS = "tandem.deltas"
    ERROR_CODE = "tandem.error.code"
    CANCELLED = "tandem.cancelled"
    PURPOSE = "tandem.purpose"
    ENGINE_MS = "tandem.engine_ms"


_ATTR_KEYS = {
    "session_id": ATTR.SESSION, "turn_id": ATTR.TURN, "pipeline": ATTR.PIPELINE, "role": ATTR.ROLE,
    "stage": ATTR.STAGE, "step": ATTR.STEP, "decision": ATTR.DECISION, "path": ATTR.PATH,
    "status": ATTR.STATUS, "phi_hit": ATTR.PHI_HIT, "fallback_trigger": ATTR.FALLBACK_TRIGGER,
    "fallback_class": ATTR.FALLBACK_CLASS, "rules_version": ATTR.RULES_VERSION, "card_id": ATTR.CARD_ID,
    "guard_stage": ATTR.GUARD_STAGE, "guard_decision": ATTR.GUARD_DECISION, "guard_kinds": ATTR.GUARD_KINDS,
    "first_token_ms": ATTR.FIRST_TOKEN_MS,
}


_MAYBE_PII = re.compile(r"[@\d]")  # every PII kind detect_pii knows needs an '@' or a digit
_CLEAN: dict[str, None] = {}  # texts already found free of PII (prompts repeat every call); bounded
_CLEAN_MAX = 256


def safe_text(value: Any, limit: int = MAX_TEXT) -> str:
    """``value`` as text (JSON unless a string) with PII replaced by ``[KIND]``, at most ``limit`` chars."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    if text in _CLEAN or not _MAYBE_PII.search(text):
        found = []
    else:
        found = detect_pii(text)
        if not found:
            if len(_CLEAN) >= _CLEAN_MAX:
                _CLEAN.clear()
            _CLEAN[text] = None
    if found:
        parts, last = [], 0
        for m in found:
            parts += [text[last:m.start], f"[{m.kind}]"]
            last = m.end
        text = "".join(parts) + text[last:]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _scalar(v: Any) -> Any:
    if isinstance(v, str | bool | int | float):
        return v
    if isinstance(v, list | tuple) and all(isinstance(x, str) for x in v):
        return tuple(v)
    return str(v)


def _set(span: trace.Span, attrs: Mapping[str, Any]) -> None:
    """Set Tandem attributes (``input`` / ``output`` become OpenInference values, redacted)."""
    if not span.is_recording():
        return
    for k, v in attrs.items():
        if v is None:
            continue
        if k in ("input", "output"):
            key = OI.INPUT_VALUE if k == "input" else OI.OUTPUT_VALUE
            span.set_attribute(key, safe_text(v))
            span.set_attribute(key.replace(".value", ".mime_type"),
                               (MimeType.TEXT if isinstance(v, str) else MimeType.JSON).value)
        elif k == "session_id":
            span.set_attribute(ATTR.SESSION, str(v))
            span.set_attribute(OI.SESSION_ID, str(v))
        else:
            span.set_attribute(_ATTR_KEYS.get(k, f"tandem.{k}"), _scalar(v))


def _fail(span: trace.Span, exc: BaseException) -> None:
    if isinstance(exc, GeneratorExit | asyncio.CancelledError):
        span.set_attribute(ATTR.CANCELLED, True)
        return
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        span.set_attribute(ATTR.ERROR_CODE, code)
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))


@contextlib.contextmanager
def _open(name: str, kind: SpanKind, attrs: Mapping[str, Any]) -> Iterator[trace.Span]:
    with tracer.start_as_current_span(name, record_exception=False, set_status_on_exception=False) as span:
        span.set_attribute(OI.SPAN_KIND, kind.value)
        _set(span, attrs)
        try:
            yield span
        except BaseException as exc:
            _fail(span, exc)
            raise


@contextlib.contextmanager
def stage_span(stage: str, *, kind: SpanKind = SpanKind.CHAIN, **attrs: Any) -> Iterator[trace.Span]:
    """A span named ``tandem.<stage>`` (a CHAIN unless ``kind`` says otherwise) with Tandem attributes.

    ``input=`` / ``output=`` are recorded as OpenInference input / output values (redacted);
    every other keyword becomes ``tandem.<key>`` (see :class:`ATTR`).
    """
    with _open(f"tandem.{stage}", kind, {"stage": stage, **attrs}) as span:
        yield span


def annotate(span: trace.Span | None = None, **attrs: Any) -> None:
    """Set Tandem attributes (decision, phi_hit, fallback_trigger, card_id, output, ...) on ``span``
    or on the current span."""
    _set(span or trace.get_current_span(), attrs)


def current_trace_id() -> str:
    """The active trace id as 32 hex digits, or a fresh random one when no trace is active."""
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        return format(ctx.trace_id, "032x")
    return secrets.token_hex(16)



