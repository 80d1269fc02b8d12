"""Tracing and structured-event setup for every Tandem process.

Ray Serve owns the tracer provider in each replica and proxy; it loads our span
processors from ``RAY_SERVE_TRACING_EXPORTER_IMPORT_PATH=serve.telemetry:span_processors``.
:func:`configure_env` sets those variables (and ours) before Ray starts, so
every process of the cluster inherits them.

* ``TANDEM_TELEMETRY_DIR``: spans land in ``<dir>/spans-<pid>.jsonl`` and
  structured events in ``<dir>/events-<pid>.jsonl`` (one file per process).
* ``TANDEM_OTLP_ENDPOINT``: when set, spans are also exported over OTLP/gRPC
  (to any collector: Arize Phoenix under ``tandem run --observe``, an
  OpenTelemetry Collector, Jaeger, ...).
* ``TANDEM_SPAN_EXPORT``: ``batch`` (default) exports spans from a background
  thread every ``TANDEM_SPAN_FLUSH_MS`` (default 1000) or when 512 are queued —
  no span export ever writes a file or a socket on the request path; ``sync``
  writes each span as it ends (for debugging a process that may die abruptly).
* ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``: the service and the
  OpenInference project name (``openinference.project.name``) on every span,
  read by the tracer provider Ray Serve creates in each process.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from models.prepare import cache_dir

__all__ = [
    "telemetry_dir",
    "export_mode",
    "flush_ms",
    "configure_env",
    "span_processors",
    "JsonlSpanExporter",
    "JsonlEventSink",
    "span_to_dict",
]

ENV_DIR = "TANDEM_TELEMETRY_DIR"
ENV_OTLP = "TANDEM_OTLP_ENDPOINT"
ENV_EXPORT = "TANDEM_SPAN_EXPORT"
ENV_FLUSH_MS = "TANDEM_SPAN_FLUSH_MS"
EXPORT_MODES = ("batch", "sync")


def telemetry_dir() -> Path:
    return Path(os.environ.get(ENV_DIR) or cache_dir() / "telemetry")


def configure_env(*, jsonl_dir: str | None, otlp_endpoint: str | None, sampling_ratio: float,
                  service_name: str = "tandem") -> Path:
    """Set the tracing env vars for this process and every Ray process it starts."""
    from pipelines.semconv import PROJECT_NAME

    d = Path(jsonl_dir).expanduser() if jsonl_dir else telemetry_dir()
    d.mkdir(parents=True, exist_ok=True)
    os.environ[ENV_DIR] = str(d)
    if otlp_endpoint:
        os.environ[ENV_OTLP] = otlp_endpoint
    os.environ["OTEL_SERVICE_NAME"] = service_name
    kept = [kv for kv in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(",")
            if kv.strip() and not kv.strip().startswith(PROJECT_NAME + "=")]
    os.environ["OTEL_RESOURCE_ATTRIBUTES"] = ",".join([*kept, f"{PROJECT_NAME}={service_name}"])
    os.environ["RAY_SERVE_TRACING_EXPORTER_IMPORT_PATH"] = "serve.telemetry:span_processors"
    os.environ["RAY_SERVE_TRACING_SAMPLING_RATIO"] = str(sampling_ratio)
    return d


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent else None,
        "kind": str(span.kind).rsplit(".", 1)[-1],
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": str(span.status.status_code).rsplit(".", 1)[-1],
        "attributes": {k: (v if isinstance(v, str | int | float | bool) else str(v)) for k, v in (span.attributes or {}).items()},
        "resource": {k: str(v) for k, v in span.resource.attributes.items() if k.startswith("service")},
        "pid": os.getpid(),
    }


class JsonlSpanExporter(SpanExporter):
    """Writes one JSON object per span to ``<dir>/spans-<pid>.jsonl``."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / f"spans-{os.getpid()}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(span_to_dict(s)) + "\n" for s in spans)
        with self._lock, self.path.open("a") as f:
            f.write(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def export_mode() -> str:
    """``batch`` (default) or ``sync`` from ``TANDEM_SPAN_EXPORT``; anything else is refused."""
    mode = os.environ.get(ENV_EXPORT, "batch").strip().lower() or "batch"
    if mode not in EXPORT_MODES:
        raise ValueError(f"{ENV_EXPORT} must be one of {EXPORT_MODES}, not {mode!r}")
    return mode


def flush_ms() -> int:
    """How often the batch processors export (``TANDEM_SPAN_FLUSH_MS``, default 1000, at least 1)."""
    return max(1, int(os.environ.get(ENV_FLUSH_MS) or 1000))


def span_processors() -> list[Any]:
    """Ray Serve's exporter hook: a JSONL processor, plus OTLP when an endpoint is set.

    Both export in batches from a background thread (``TANDEM_SPAN_EXPORT=sync``
    makes the JSONL one write each span as it ends).
    """
    jsonl = JsonlSpanExporter(telemetry_dir())
    procs: list[Any] = [
        SimpleSpanProcessor(jsonl) if export_mode() == "sync"
        else BatchSpanProcessor(jsonl, schedule_delay_millis=flush_ms(), max_export_batch_size=512)
    ]
    endpoint = os.environ.get(ENV_OTLP)
    if endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        procs.append(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True),
                                        schedule_delay_millis=flush_ms()))
    return procs


class JsonlEventSink:
    """Structured events (JSON lines) for one process: ``<dir>/events-<pid>.jsonl``.

    Implements :class:`pipelines.protocols.EventSink`; each record carries the
    active trace id so events and spans join on it.
    """

    def __init__(self, directory: str | Path | None = None, *, component: str = "tandem") -> None:
        d = Path(directory) if directory else telemetry_dir()
        d.mkdir(parents=True, exist_ok=True)
        self.path = d / f"events-{os.getpid()}.jsonl"
        self.component = component
        self._lock = threading.Lock()
        self._f = self.path.open("a", buffering=1)

    def emit(self, kind: str, **fields: Any) -> None:
        from pipelines.telemetry import current_trace_id

        rec = {"ts": time.time(), "kind": kind, "component": self.component, **fields}
        rec.setdefault("trace_id", current_trace_id())
        line = json.dumps(rec, default=str)
        with self._lock:
            self._f.write(line + "\n")
