"""Spans for pipeline stages, on the OpenTelemetry API only (the SDK is set up by ``serve/``).

Without a configured tracer provider these are no-ops; inside a Ray Serve
replica with tracing on they become children of the request's span, so one
trace covers ingress → pipeline stages → model deployment.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace

__all__ = ["tracer", "stage_span", "current_trace_id", "ATTR"]

tracer = trace.get_tracer("tandem.pipelines")


class ATTR:
    """Span attribute names, in one place."""

    SESSION = "tandem.session_id"
    TURN = "tandem.turn_id"
    PIPELINE = "tandem.pipeline"
    ROLE = "tandem.role"
    STAGE = "tandem.stage"


_ATTR_KEYS = {
    "session_id": ATTR.SESSION,
    "turn_id": ATTR.TURN,
    "pipeline": ATTR.PIPELINE,
    "role": ATTR.ROLE,
}


@contextlib.contextmanager
def stage_span(stage: str, **attrs: Any) -> Iterator[trace.Span]:
    """A span named ``tandem.<stage>`` with our attribute names."""
    with tracer.start_as_current_span(f"tandem.{stage}") as span:
        span.set_attribute(ATTR.STAGE, stage)
        for k, v in attrs.items():
            if v is not None:
                span.set_attribute(_ATTR_KEYS.get(k, f"tandem.{k}"), v if isinstance(v, str | int | float | bool) else str(v))
        yield span


def current_trace_id() -> str:
    """The active trace id as 32 hex digits, or a fresh random one when no trace is active."""
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        return format(ctx.trace_id, "032x")
    return secrets.token_hex(16)
