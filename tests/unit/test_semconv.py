"""pipelines.semconv mirrors the openinference-semantic-conventions package name for name."""

from __future__ import annotations

import pytest

from pipelines.semconv import OI, PROJECT_NAME, MimeType, SpanKind

oi_trace = pytest.importorskip("openinference.semconv.trace", reason="openinference-semantic-conventions (test extra)")
oi_resource = pytest.importorskip("openinference.semconv.resource")

_SOURCES = (oi_trace.SpanAttributes, oi_trace.MessageAttributes, oi_trace.DocumentAttributes)
_RENAMED = {"SPAN_KIND": "OPENINFERENCE_SPAN_KIND"}  # ours is shorter


def _names() -> list[str]:
    return [k for k, v in vars(OI).items() if k.isupper() and isinstance(v, str)]


def test_every_attribute_name_equals_the_package_constant() -> None:
    assert len(_names()) >= 20
    for name in _names():
        theirs = [getattr(src, _RENAMED.get(name, name)) for src in _SOURCES if hasattr(src, _RENAMED.get(name, name))]
        assert theirs, f"{name} has no counterpart in openinference.semconv.trace"
        assert getattr(OI, name) == theirs[0], name


def test_span_kinds_and_mime_types_are_the_package_values() -> None:
    kinds = {k.value for k in oi_trace.OpenInferenceSpanKindValues}
    assert {k.value for k in SpanKind} <= kinds
    assert {m.value for m in MimeType} == {m.value for m in oi_trace.OpenInferenceMimeTypeValues}
    assert PROJECT_NAME == oi_resource.ResourceAttributes.PROJECT_NAME


def test_nested_names() -> None:
    assert OI.message(OI.LLM_INPUT_MESSAGES, 2, OI.MESSAGE_CONTENT) == "llm.input_messages.2.message.content"
    assert OI.document(0, OI.DOCUMENT_ID) == "retrieval.documents.0.document.id"
