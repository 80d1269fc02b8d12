"""LLM, TOOL, GUARDRAIL and RETRIEVER spans (OpenInference kinds) — see :mod:`pipelines.telemetry`.

How to use them: the module docstring of :mod:`pipelines.telemetry`. Every text
recorded here goes through :func:`pipelines.telemetry.safe_text`; the tracer is
looked up on :mod:`pipelines.telemetry` at call time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import trace

from pipelines import telemetry as _t
from pipelines.semconv import OI, MimeType, SpanKind

__all__ = [
    "llm_span", "start_llm_span", "LlmSpan", "tool_span", "ToolSpan",
    "guard_span", "GuardSpan", "guard_decision", "retriever_span", "RetrieverSpan",
]

ATTR = _t.ATTR
safe_text = _t.safe_text


class LlmSpan:
    """Records one model call: output deltas, token usage, first-token time."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self._parts: list[str] = []
        self._t0 = time.perf_counter()
        self._first_ms: float | None = None
        self._usage: tuple[int, int] | None = None
        self._cached: int | None = None
        self._engine_ms: float | None = None

    def activate(self) -> contextlib.AbstractContextManager[trace.Span]:
        """Make this span current for a block (e.g. the remote call, so the model's spans nest under it)."""
        return trace.use_span(self.span, end_on_exit=False)

    def add(self, delta: str) -> None:
        if self._first_ms is None:
            self._first_ms = (time.perf_counter() - self._t0) * 1000
        self._parts.append(delta)

    def usage(self, prompt_tokens: int, completion_tokens: int, *, cached: int | None = None,
              engine_ms: float | None = None) -> None:
        """The engine's counts (``cached``: prompt tokens served from its prefix cache) and its time."""
        self._usage = (int(prompt_tokens), int(completion_tokens))
        self._cached, self._engine_ms = cached, engine_ms

    def purpose(self, purpose: str) -> None:
        """Why the call was made (:mod:`pipelines.cost`)."""
        if self.span.is_recording():
            self.span.set_attribute(ATTR.PURPOSE, purpose)

    def end(self, exc: BaseException | None = None) -> None:
        """Record the output and end the span (``exc``: the error the call ended with, if any)."""
        if exc is not None:
            _t._fail(self.span, exc)
        self._finish()
        self.span.end()

    def _finish(self) -> None:
        s = self.span
        if not s.is_recording():
            return
        text = safe_text("".join(self._parts))
        s.set_attribute(OI.OUTPUT_VALUE, text)
        s.set_attribute(OI.OUTPUT_MIME_TYPE, MimeType.TEXT.value)
        s.set_attribute(OI.message(OI.LLM_OUTPUT_MESSAGES, 0, OI.MESSAGE_ROLE), "assistant")
        s.set_attribute(OI.message(OI.LLM_OUTPUT_MESSAGES, 0, OI.MESSAGE_CONTENT), text)
        s.set_attribute(ATTR.DELTAS, len(self._parts))
        if self._first_ms is not None:
            s.set_attribute(ATTR.FIRST_TOKEN_MS, round(self._first_ms, 3))
        if self._usage is not None:
            p, c = self._usage
            s.set_attribute(OI.LLM_TOKEN_COUNT_PROMPT, p)
            s.set_attribute(OI.LLM_TOKEN_COUNT_COMPLETION, c)
            s.set_attribute(OI.LLM_TOKEN_COUNT_TOTAL, p + c)
            if self._cached is not None:
                s.set_attribute(OI.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_READ, int(self._cached))
            if self._engine_ms is not None:
                s.set_attribute(ATTR.ENGINE_MS, round(self._engine_ms, 3))


def _field(m: Any, name: str) -> Any:
    return m.get(name) if isinstance(m, Mapping) else getattr(m, name, None)


def _llm_attrs(span: trace.Span, role: str, messages: Sequence[Any], model_id: str,
               params: Mapping[str, Any] | None) -> None:
    if not span.is_recording():
        return
    span.set_attribute(OI.SPAN_KIND, SpanKind.LLM.value)
    span.set_attribute(OI.LLM_MODEL_NAME, model_id)
    span.set_attribute(ATTR.ROLE, role)
    for i, m in enumerate(messages):
        span.set_attribute(OI.message(OI.LLM_INPUT_MESSAGES, i, OI.MESSAGE_ROLE), str(_field(m, "role")))
        span.set_attribute(OI.message(OI.LLM_INPUT_MESSAGES, i, OI.MESSAGE_CONTENT),
                           safe_text(str(_field(m, "content") or "")))
    if messages:
        span.set_attribute(OI.INPUT_VALUE, safe_text(str(_field(messages[-1], "content") or "")))
        span.set_attribute(OI.INPUT_MIME_TYPE, MimeType.TEXT.value)
    if params:
        span.set_attribute(OI.LLM_INVOCATION_PARAMETERS, safe_text(dict(params)))


def start_llm_span(role: str, messages: Sequence[Any], *, model_id: str,
                   params: Mapping[str, Any] | None = None) -> LlmSpan:
    """An LLM span ``tandem.llm.<role>`` that is *not* made current; end it with :meth:`LlmSpan.end`.

    For an async generator that yields while the call runs (a current span would leak into
    the caller's context between items): wrap the remote call in :meth:`LlmSpan.activate` so
    the model deployment's spans nest under it.
    """
    span = _t.tracer.start_span(f"tandem.llm.{role}", record_exception=False, set_status_on_exception=False)
    _llm_attrs(span, role, messages, model_id, params)
    return LlmSpan(span)


@contextlib.contextmanager
def llm_span(role: str, messages: Sequence[Any], *, model_id: str,
             params: Mapping[str, Any] | None = None) -> Iterator[LlmSpan]:
    """An LLM span ``tandem.llm.<role>`` (current for the block): model id, redacted input messages,
    invocation parameters; then output, token counts and first-token time (see :class:`LlmSpan`)."""
    with _t.tracer.start_as_current_span(f"tandem.llm.{role}", record_exception=False,
                                      set_status_on_exception=False) as span:
        _llm_attrs(span, role, messages, model_id, params)
        rec = LlmSpan(span)
        try:
            yield rec
        except BaseException as exc:
            _t._fail(span, exc)
            raise
        finally:
            rec._finish()


# -- tools, guards, retrieval ------------------------------------------------------------------


class ToolSpan:
    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def observation(self, result: Any, *, ok: bool, reason: str | None = None) -> None:
        """Record the (redacted) observation, whether it succeeded, and its size in characters."""
        if not self.span.is_recording():
            return
        text = safe_text(result) if result is not None else ""
        self.span.set_attribute(OI.OUTPUT_VALUE, text)
        self.span.set_attribute(OI.OUTPUT_MIME_TYPE, MimeType.JSON.value)
        self.span.set_attribute(ATTR.TOOL_OK, ok)
        self.span.set_attribute(ATTR.OBSERVATION_CHARS, len(text))
        if reason:
            self.span.set_attribute(ATTR.TOOL_REASON, reason)


@contextlib.contextmanager
def tool_span(name: str, args: Mapping[str, Any], **attrs: Any) -> Iterator[ToolSpan]:
    """A TOOL span ``tandem.tool.<name>`` with its (redacted) arguments as input."""
    with _t._open(f"tandem.tool.{name}", SpanKind.TOOL, attrs) as span:
        if span.is_recording():
            span.set_attribute(OI.TOOL_NAME, name)
            span.set_attribute(OI.INPUT_VALUE, safe_text(dict(args)))
            span.set_attribute(OI.INPUT_MIME_TYPE, MimeType.JSON.value)
        yield ToolSpan(span)


class GuardSpan:
    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def decision(self, decision: str, *, kinds: Iterable[str] = (), output: str | None = None, **attrs: Any) -> None:
        """Record the guard's decision (``pass`` / ``block`` / ``route`` ...), violation kinds, what it released."""
        kinds = tuple(kinds)
        _t._set(self.span, {"output": output, "guard_decision": decision, "guard_kinds": kinds or None, **attrs})


@contextlib.contextmanager
def guard_span(stage: str, *, text: str | None = None, **attrs: Any) -> Iterator[GuardSpan]:
    """A GUARDRAIL span ``tandem.guard.<stage>`` around one guard call; ``text`` is what it judges."""
    with _t._open(f"tandem.guard.{stage}", SpanKind.GUARDRAIL, {"input": text, "guard_stage": stage, **attrs}) as span:
        yield GuardSpan(span)


def guard_decision(stage: str, decision: str, *, kinds: Iterable[str] = (), text: str | None = None,
                   **attrs: Any) -> None:
    """A GUARDRAIL span for a synchronous check that already decided (e.g. the mid-guard)."""
    with guard_span(stage, text=text, **attrs) as g:
        g.decision(decision, kinds=kinds)


class RetrieverSpan:
    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def documents(self, docs: Sequence[Mapping[str, Any]]) -> None:
        """Record retrieved documents: each a mapping with ``id``, ``content``, optional ``score`` / ``metadata``."""
        if not self.span.is_recording():
            return
        for i, d in enumerate(docs):
            self.span.set_attribute(OI.document(i, OI.DOCUMENT_ID), str(d.get("id", i)))
            self.span.set_attribute(OI.document(i, OI.DOCUMENT_CONTENT), safe_text(str(d.get("content", ""))))
            if d.get("score") is not None:
                self.span.set_attribute(OI.document(i, OI.DOCUMENT_SCORE), float(d["score"]))
            if d.get("metadata"):
                self.span.set_attribute(OI.document(i, OI.DOCUMENT_METADATA), safe_text(d["metadata"]))


@contextlib.contextmanager
def retriever_span(query: str, **attrs: Any) -> Iterator[RetrieverSpan]:
    """A RETRIEVER span ``tandem.retrieve`` for a (redacted) query; record what it found."""
    with _t._open("tandem.retrieve", SpanKind.RETRIEVER, {"input": query, **attrs}) as span:
        yield RetrieverSpan(span)
