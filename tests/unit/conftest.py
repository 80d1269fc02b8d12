"""Fixtures shared by the unit tests."""

from __future__ import annotations

import os
import sys

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


# --- unit tests never start Ray -------------------------------------------------------------
# A unit test that starts Ray (directly, or through a library call that reads Ray's runtime
# context and so calls ``ray.init`` behind the test's back) costs seconds, leaves a session
# folder and worker processes behind, and makes the suite depend on a local cluster. The guard
# fails the test after which Ray is up or this process created a new Ray session folder.


def _ray_temp_dir() -> str:
    # Ray's own rule (ray._common.utils.get_default_ray_temp_dir), without importing Ray.
    base = os.environ.get("RAY_TMPDIR") or (
        os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None
    ) or "/tmp"
    return os.path.join(base, "ray")


def _own_ray_sessions() -> set[str]:
    """Session folders a ``ray.init`` in this process made (Ray names them ``session_<date>_<pid>``)."""
    suffix = f"_{os.getpid()}"
    try:
        names = os.listdir(_ray_temp_dir())
    except OSError:
        return set()
    return {n for n in names if n.startswith("session_") and n.endswith(suffix)}


@pytest.fixture(autouse=True)
def _no_ray(request: pytest.FixtureRequest):
    before = _own_ray_sessions()
    yield
    ray = sys.modules.get("ray")
    started = bool(ray is not None and getattr(ray, "is_initialized", lambda: False)())
    new = _own_ray_sessions() - before
    if started:
        ray.shutdown()  # the next test starts clean; this one fails
    if started or new:
        what = "ray.is_initialized() is true" if started else f"new Ray session folder(s) {sorted(new)}"
        pytest.fail(
            f"{request.node.nodeid} started Ray ({what}); unit tests never start Ray: "
            "fake the Ray call (monkeypatch) or move the test to tests/integration",
            pytrace=False,
        )


# --- the heavy files: `make check` deselects them (-m "not slow"); `make unit` / `make test` run all
SLOW_FILES = frozenset({
    "test_fuzz_slice.py",  # property-based fuzzing of the API
    "test_h100_profile.py",  # builds vLLM engine configs for every model of the H100 profile
    "test_dr_adversarial.py",  # adversarial turns through the whole DR pipeline
    "test_support_replay.py",  # every expected action of the 74 retail tasks through the tools (≈ 19 s)
    "test_http_pack_example.py",  # the HTTP example pack's own test suite, in a pytest subprocess
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)


# --- reports the xdist worker channel can carry ------------------------------------------------
# A test that feeds a lone surrogate (test_edge's "bad \ud800 text") gets it back in its
# captured log / output; pytest-xdist's channel encodes reports as UTF-8 and a lone surrogate
# crashed the worker. The captured text is escaped (\ud800) before the report leaves.


def _utf8_safe(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    report.sections = [(_utf8_safe(title), _utf8_safe(body)) for title, body in report.sections]
    if isinstance(report.longrepr, str):
        report.longrepr = _utf8_safe(report.longrepr)
