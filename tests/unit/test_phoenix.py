"""serve.phoenix: how Phoenix is started (env, loopback, process group), waited for and stopped.

A stand-in executable plays Phoenix here (it serves ``/healthz`` on ``PHOENIX_PORT``
and records its environment); the real Phoenix runs in
``tests/integration/test_observe_phoenix.py``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest

from serve.phoenix import PHOENIX_VERSION, REPO, PhoenixServer, phoenix_executable

FAKE = f"""#!{sys.executable}
import http.server, json, os, sys
json.dump(dict(os.environ), open(os.path.join(os.environ["PHOENIX_WORKING_DIR"], "env.json"), "w"))
if os.environ.get("FAKE_EXIT"):
    sys.exit(int(os.environ["FAKE_EXIT"]))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer((os.environ["PHOENIX_HOST"], int(os.environ["PHOENIX_PORT"])), H).serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def fake(tmp_path: Path) -> Path:
    exe = tmp_path / "venv" / "bin" / "phoenix"
    exe.parent.mkdir(parents=True)
    exe.write_text(FAKE)
    exe.chmod(0o755)
    return exe


def test_the_makefile_installs_the_pinned_version() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(rf"^PHOENIX_VERSION := {re.escape(PHOENIX_VERSION)}$", makefile, re.M)
    assert "/.venv-phoenix/" in (REPO / ".gitignore").read_text()


def test_the_executable_comes_from_the_phoenix_venv(fake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TANDEM_PHOENIX_VENV", str(fake.parents[1]))
    assert phoenix_executable() == fake
    monkeypatch.setenv("TANDEM_PHOENIX_VENV", str(fake.parents[1] / "missing"))
    assert phoenix_executable() is None
    with pytest.raises(FileNotFoundError, match="make phoenix"):
        PhoenixServer.start(fake.parents[2] / "w")


def test_start_on_loopback_wait_and_stop(fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=other")
    monkeypatch.setenv("RAY_SERVE_TRACING_EXPORTER_IMPORT_PATH", "serve.telemetry:span_processors")
    port, grpc = _free_port(), _free_port()
    p = PhoenixServer.start(tmp_path / "work", port=port, grpc_port=grpc, executable=fake)
    try:
        assert p.wait_ready(timeout_s=60) >= 0
        env = json.loads((tmp_path / "work" / "env.json").read_text())
        assert env["PHOENIX_HOST"] == "127.0.0.1" and env["PHOENIX_PORT"] == str(port)
        assert env["PHOENIX_GRPC_PORT"] == str(grpc) and env["PHOENIX_PROJECT_NAME"] == "tandem"
        assert env["PHOENIX_TELEMETRY_ENABLED"] == "false" and env["PHOENIX_ALLOW_EXTERNAL_RESOURCES"] == "false"
        assert not any(k.startswith(("OTEL_", "RAY_")) for k in env)  # the app's tracing setup stays out
        assert p.ui == f"http://127.0.0.1:{port}" and p.otlp_endpoint == f"127.0.0.1:{grpc}"
        assert p.trace_url("ab" * 16) == f"http://127.0.0.1:{port}/redirects/traces/{'ab' * 16}"
        assert os.getpgid(p.proc.pid) == p.proc.pid  # its own process group: stop() ends all of it
    finally:
        p.stop(timeout_s=10)
    assert p.proc.poll() is not None
    p.stop()  # idempotent


def test_wait_ready_reports_an_early_exit(fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_EXIT", "3")
    p = PhoenixServer.start(tmp_path / "work", port=_free_port(), grpc_port=_free_port(), executable=fake)
    with pytest.raises(RuntimeError, match="exited with 3"):
        p.wait_ready(timeout_s=60)
