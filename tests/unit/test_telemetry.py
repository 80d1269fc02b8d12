"""serve.telemetry (JSONL spans and events, Ray Serve's exporter hook) and pipelines.telemetry."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

import pipelines.telemetry as ptel
from serve import telemetry as stel
from serve.telemetry import JsonlEventSink, JsonlSpanExporter, configure_env, span_processors

ENV_KEYS = (stel.ENV_DIR, stel.ENV_OTLP, stel.ENV_EXPORT, stel.ENV_FLUSH_MS, "RAY_SERVE_TRACING_EXPORTER_IMPORT_PATH",
            "RAY_SERVE_TRACING_SAMPLING_RATIO", "TANDEM_CACHE", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)  # restored after each test
    monkeypatch.setenv("TANDEM_CACHE", str(tmp_path / "cache"))


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _provider(tmp_path: Path) -> tuple[TracerProvider, JsonlSpanExporter]:
    exporter = JsonlSpanExporter(tmp_path / "spans")
    provider = TracerProvider(resource=Resource.create({"service.name": "tandem-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_jsonl_span_exporter_writes_parseable_lines(tmp_path: Path) -> None:
    provider, exporter = _provider(tmp_path)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("parent") as parent:
        parent.set_attribute("tandem.turn_id", "t_1")
        with tracer.start_as_current_span("child") as child:
            child.set_attribute("n", 3)
            child.set_attribute("seq", [1, 2])
    provider.shutdown()
    assert exporter.path == tmp_path / "spans" / f"spans-{os.getpid()}.jsonl"
    spans = _lines(exporter.path)
    assert [s["name"] for s in spans] == ["child", "parent"]  # ended first, written first
    child_d, parent_d = spans
    assert child_d["trace_id"] == parent_d["trace_id"] and len(parent_d["trace_id"]) == 32
    assert child_d["parent_span_id"] == parent_d["span_id"] and parent_d["parent_span_id"] is None
    assert len(parent_d["span_id"]) == 16
    assert child_d["attributes"] == {"n": 3, "seq": "(1, 2)"}  # non-scalar values as text
    assert parent_d["attributes"] == {"tandem.turn_id": "t_1"}
    assert parent_d["resource"]["service.name"] == "tandem-test"
    assert parent_d["kind"] == "INTERNAL" and parent_d["status"] == "UNSET"
    assert parent_d["start_ns"] <= child_d["start_ns"] <= child_d["end_ns"] <= parent_d["end_ns"]
    assert parent_d["pid"] == os.getpid()


def test_jsonl_span_exporter_appends(tmp_path: Path) -> None:
    for name in ("a", "b"):
        provider, exporter = _provider(tmp_path)
        with provider.get_tracer("t").start_as_current_span(name):
            pass
        provider.shutdown()
    assert [s["name"] for s in _lines(exporter.path)] == ["a", "b"]


def test_span_processors_without_otlp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(stel.ENV_DIR, str(tmp_path / "tel"))
    procs = span_processors()
    assert len(procs) == 1 and isinstance(procs[0], BatchSpanProcessor)
    assert procs[0]._batch_processor._exporter.path.parent == tmp_path / "tel"
    for p in procs:
        p.shutdown()


def test_span_processors_sync_mode_writes_each_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(stel.ENV_DIR, str(tmp_path / "tel"))
    monkeypatch.setenv(stel.ENV_EXPORT, "sync")
    [proc] = span_processors()
    assert isinstance(proc, SimpleSpanProcessor)
    monkeypatch.setenv(stel.ENV_EXPORT, "eventually")
    with pytest.raises(ValueError, match="TANDEM_SPAN_EXPORT"):
        span_processors()


def _batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush_ms: str) -> tuple[TracerProvider, Any, list[int]]:
    import threading

    monkeypatch.setenv(stel.ENV_DIR, str(tmp_path / "tel"))
    monkeypatch.setenv(stel.ENV_FLUSH_MS, flush_ms)
    [proc] = span_processors()
    exporter = proc._batch_processor._exporter
    threads: list[int] = []
    original = exporter.export
    def export(spans: Any) -> Any:
        result = original(spans)
        threads.append(threading.get_ident())  # after the write: a waiter then finds the file complete
        return result

    monkeypatch.setattr(exporter, "export", export)
    provider = TracerProvider()
    provider.add_span_processor(proc)
    return provider, exporter, threads


def test_batch_export_does_not_write_when_a_span_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A span that ends on the request path is only queued; the file is written at the next flush."""
    provider, exporter, threads = _batch(tmp_path, monkeypatch, "600000")  # no timed flush in this test
    with provider.get_tracer("t").start_as_current_span("request-path"):
        pass
    assert not exporter.path.exists() and threads == []  # ended, not yet written
    assert provider.force_flush()
    assert [s["name"] for s in _lines(exporter.path)] == ["request-path"]
    provider.shutdown()


def test_batch_export_writes_from_its_own_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    provider, exporter, threads = _batch(tmp_path, monkeypatch, "10")
    with provider.get_tracer("t").start_as_current_span("request-path"):
        pass
    deadline = time.monotonic() + 30  # waits for the exporter thread; asserts no duration
    while not threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threads and threading.get_ident() not in threads
    assert [s["name"] for s in _lines(exporter.path)] == ["request-path"]
    provider.shutdown()


def test_flush_interval_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert stel.flush_ms() == 1000
    monkeypatch.setenv(stel.ENV_FLUSH_MS, "250")
    assert stel.flush_ms() == 250
    monkeypatch.setenv(stel.ENV_FLUSH_MS, "0")
    assert stel.flush_ms() == 1


def test_span_processors_honours_otlp_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(stel.ENV_DIR, str(tmp_path / "tel"))
    monkeypatch.setenv(stel.ENV_OTLP, "localhost:1")  # never contacted: nothing is exported
    procs = span_processors()
    try:
        assert len(procs) == 2
        assert all(isinstance(p, BatchSpanProcessor) for p in procs)
    finally:
        for p in procs:
            p.shutdown()


def test_telemetry_dir_defaults_under_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert stel.telemetry_dir() == tmp_path / "cache" / "telemetry"
    monkeypatch.setenv(stel.ENV_DIR, str(tmp_path / "elsewhere"))
    assert stel.telemetry_dir() == tmp_path / "elsewhere"


def test_configure_env_sets_the_ray_serve_hook(tmp_path: Path) -> None:
    d = configure_env(jsonl_dir=str(tmp_path / "t"), otlp_endpoint="collector:4317", sampling_ratio=0.25)
    assert d == tmp_path / "t" and d.is_dir()
    assert os.environ[stel.ENV_DIR] == str(d)
    assert os.environ[stel.ENV_OTLP] == "collector:4317"
    assert os.environ["RAY_SERVE_TRACING_EXPORTER_IMPORT_PATH"] == "serve.telemetry:span_processors"
    assert os.environ["RAY_SERVE_TRACING_SAMPLING_RATIO"] == "0.25"
    assert os.environ["OTEL_SERVICE_NAME"] == "tandem"
    assert os.environ["OTEL_RESOURCE_ATTRIBUTES"] == "openinference.project.name=tandem"


def test_configure_env_names_the_project_on_the_resource(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=dev,openinference.project.name=old")
    configure_env(jsonl_dir=str(tmp_path / "t"), otlp_endpoint=None, sampling_ratio=1.0, service_name="shop")
    assert os.environ["OTEL_RESOURCE_ATTRIBUTES"] == "deployment.environment=dev,openinference.project.name=shop"
    # the tracer provider Ray Serve creates in each process reads them
    res = TracerProvider().resource.attributes
    assert res["service.name"] == "shop" and res["openinference.project.name"] == "shop"


def test_configure_env_default_dir_and_no_otlp(tmp_path: Path) -> None:
    d = configure_env(jsonl_dir=None, otlp_endpoint=None, sampling_ratio=1.0)
    assert d == tmp_path / "cache" / "telemetry" and d.is_dir()
    assert stel.ENV_OTLP not in os.environ


def test_jsonl_event_sink_writes_records(tmp_path: Path) -> None:
    sink = JsonlEventSink(tmp_path / "ev", component="ingress")
    sink.emit("turn.start", session_id="s1", n=2, obj=Path("/x"))
    sink.emit("turn.end", trace_id="f" * 32, timings={"end_ms": 1.5})
    assert sink.path == tmp_path / "ev" / f"events-{os.getpid()}.jsonl"
    first, second = _lines(sink.path)  # line-buffered: readable without a flush
    assert first["kind"] == "turn.start" and first["component"] == "ingress"
    assert isinstance(first["ts"], float) and first["ts"] > 0
    assert first["session_id"] == "s1" and first["n"] == 2 and first["obj"] == "/x"
    assert len(first["trace_id"]) == 32 and int(first["trace_id"], 16) >= 0
    assert second["trace_id"] == "f" * 32  # an explicit trace id is kept
    assert second["timings"] == {"end_ms": 1.5}


def test_jsonl_event_sink_uses_the_active_trace_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    provider, _ = _provider(tmp_path)
    monkeypatch.setattr(ptel, "tracer", provider.get_tracer("tandem.pipelines"))
    sink = JsonlEventSink(tmp_path / "ev")
    with ptel.stage_span("turn", turn_id="t_1") as span:
        sink.emit("inside")
        expected = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()
    [rec] = _lines(sink.path)
    assert rec["trace_id"] == expected


# -- pipelines.telemetry ---------------------------------------------------------------


def test_stage_span_names_and_attributes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    provider, exporter = _provider(tmp_path)
    monkeypatch.setattr(ptel, "tracer", provider.get_tracer("tandem.pipelines"))
    with ptel.stage_span("generate", session_id="s1", turn_id="t_1", pipeline="prompting", role="generator",
                         deltas=3, extra=None, obj=["x"]):
        inner_trace = ptel.current_trace_id()
    provider.shutdown()
    [span] = _lines(exporter.path)
    assert span["name"] == "tandem.generate"
    assert span["trace_id"] == inner_trace
    assert span["attributes"] == {
        "openinference.span.kind": "CHAIN", "session.id": "s1",
        ptel.ATTR.STAGE: "generate", ptel.ATTR.SESSION: "s1", ptel.ATTR.TURN: "t_1",
        ptel.ATTR.PIPELINE: "prompting", ptel.ATTR.ROLE: "generator", "tandem.deltas": 3, "tandem.obj": "('x',)",
    }


def test_current_trace_id_without_a_span_is_random() -> None:
    a, b = ptel.current_trace_id(), ptel.current_trace_id()
    assert len(a) == 32 and a != b
    int(a, 16)
