"""The app with Arize Phoenix: a DR turn's whole trace in Phoenix's UI, checked in a real browser.

Starts Phoenix from its own virtualenv on loopback (``make phoenix``), then the
embedded app (``dr``, the real model in every role) exporting spans over
OTLP/gRPC to it, as ``tandem run --observe`` does. One DR turn carries PII. Then:

* Phoenix's REST API holds the turn's trace: proxy, ingress, the turn and its
  stages, an LLM span with the model id;
* headless Chromium (Debian's ``chromium``) renders Phoenix's page for that
  trace with the LLM span selected: the stage names and the model id are on the
  page; a screenshot lands in ``results/phoenix-trace.png``;
* neither the JSONL spans nor Phoenix's copy of the trace holds the PII sent.

Bounded: one app, one turn, two page loads (≈ 3 min on a 2-core box, most of it
the app's start).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from serve.phoenix import PhoenixServer, phoenix_executable
from tests.integration.conftest import REPO, free_port, start_app

pytestmark = [pytest.mark.integration, pytest.mark.own_ray]

EMAIL, PHONE = "alex.rivera@example.com", "+1 415-555-0134"
TEXT = f"Hi, my email is {EMAIL} and my phone is {PHONE}. Where is my order #W1000002?"
MODEL = "smollm2-135m-instruct"
STAGES = ("tandem.turn", "tandem.guard.pre", "tandem.orchestrate", "tandem.step", "tandem.generate")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1600,1000", "--virtual-time-budget=20000"]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory):
    if phoenix_executable() is None:
        pytest.skip("Phoenix is not installed: `make phoenix` creates .venv-phoenix (make test does)")
    if _chromium() is None:
        pytest.skip("Debian's chromium is not installed and could not be (make system-deps installs it)")
    p = PhoenixServer.start(tmp_path_factory.mktemp("phoenix"), port=free_port(), grpc_port=free_port())
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="module")
def app(phoenix: PhoenixServer, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("observe")
    overrides = {"pipeline": {"kind": "dr", "max_steps": 2, "max_reply_tokens": 48},
                 "domain": {"name": "support", "seed": 7, "world_path": str(tmp / "world.db")}}
    # Ray started with the OTLP endpoint, inherited by every Ray process, as --observe does
    yield from start_app(tmp, overrides, otlp=phoenix.otlp_endpoint)


@pytest.fixture(scope="module")
def traced(app, phoenix: PhoenixServer) -> dict:
    phoenix.wait_ready()
    done = app.turn("observe-1", TEXT)[-1]
    tid = done["trace_id"]
    spans: list[dict] = []
    deadline = time.monotonic() + 90  # the batch exporters flush every second; Phoenix ingests asynchronously
    while time.monotonic() < deadline:
        spans = phoenix.spans(tid)
        names = {s["name"] for s in spans}
        if set(STAGES) <= names and any(s["span_kind"] == "LLM" for s in spans) and any(
                n.startswith("proxy_http_request") for n in names):
            break
        time.sleep(1.0)
    return {"done": done, "trace_id": tid, "spans": spans}


def _render(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = Path(os.environ.get("TMPDIR", "/tmp")) / f"tandem-chromium-{os.getpid()}"
    try:
        return subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
                              capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def test_phoenix_holds_the_whole_tree(traced):
    names = {s["name"] for s in traced["spans"]}
    assert set(STAGES) <= names, sorted(names)
    assert any(n.startswith("proxy_http_request") for n in names), sorted(names)
    assert any("TandemIngress" in n for n in names), sorted(names)
    assert any(n.startswith("tandem.llm.") for n in names) and any("LLMServer" in n for n in names)
    llm = [s for s in traced["spans"] if s["span_kind"] == "LLM"]
    assert {s["attributes"]["llm.model_name"] for s in llm} == {MODEL}
    kinds = {s["name"]: s["span_kind"] for s in traced["spans"]}
    assert kinds["tandem.guard.pre"] == "GUARDRAIL" and kinds["tandem.turn"] == "CHAIN"


def test_the_trace_page_in_chromium_shows_stages_and_model(traced, phoenix: PhoenixServer):
    llm = next(s for s in traced["spans"] if s["name"].startswith("tandem.llm."))
    url = phoenix.span_page(traced["trace_id"], llm["id"])
    dom = _render(url, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    for name in ("tandem.turn", "tandem.guard.pre", "tandem.orchestrate", "tandem.generate", llm["name"]):
        assert name in dom.stdout, name
    assert MODEL in dom.stdout
    out = REPO / "results" / "phoenix-trace.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    shot = _render(url, f"--screenshot={out}")
    assert shot.returncode == 0 and out.is_file() and out.stat().st_size > 10_000, shot.stderr[-2000:]


def test_no_pii_in_any_span(app, traced):
    local = "".join(f.read_text() for f in app.spans_dir.glob("spans-*.jsonl"))
    assert traced["trace_id"] in local
    exported = json.dumps(traced["spans"])
    for secret in (EMAIL, PHONE, "415-555-0134"):
        assert secret not in local, secret
        assert secret not in exported, secret
    assert "[EMAIL_1]" in exported  # the redacted text is there instead
