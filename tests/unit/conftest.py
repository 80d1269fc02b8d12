"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pipelines.telemetry as ptel


@pytest.fixture()
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """The pipelines' spans, kept in memory for the test to read (``get_finished_spans()``)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(ptel, "tracer", provider.get_tracer("tandem.pipelines"))
    return exporter
