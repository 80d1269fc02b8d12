"""A local Arize Phoenix trace UI beside the app (``tandem run --observe``, ``make observe``).

Phoenix runs from its own virtualenv (``.venv-phoenix``, created by ``make
phoenix``): its dependencies (a newer FastAPI among some sixty packages) would
move pins that Ray Serve 2.60 and vLLM 0.32 rely on, so it never shares the
app's environment. It listens on loopback only, with its telemetry and
external resources off; the app exports its spans to Phoenix's OTLP/gRPC port
(``telemetry.otlp_endpoint``), and every turn appears in the ``tandem``
project (the ``openinference.project.name`` resource attribute).

    p = PhoenixServer.start(workdir)          # returns at once; p.wait_ready() blocks
    p.ui                                      # http://127.0.0.1:6006
    p.otlp_endpoint                           # 127.0.0.1:4317
    p.trace_url(trace_id)                     # the page of one trace
    p.stop()
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PHOENIX_VERSION", "PhoenixServer", "phoenix_executable", "REPO"]

PHOENIX_VERSION = "20.26.1"  # installed into .venv-phoenix by `make phoenix`
REPO = Path(__file__).resolve().parents[1]
ENV_VENV = "TANDEM_PHOENIX_VENV"


def phoenix_executable() -> Path | None:
    """The ``phoenix`` command of the Phoenix virtualenv (``$TANDEM_PHOENIX_VENV`` or ``.venv-phoenix``)."""
    venv = Path(os.environ.get(ENV_VENV) or REPO / ".venv-phoenix")
    exe = venv / "bin" / "phoenix"
    return exe if exe.is_file() else None


@dataclass
class PhoenixServer:
    """One Phoenix process (its own process group), its ports and working directory."""

    proc: subprocess.Popen[bytes]
    workdir: Path
    host: str
    port: int
    grpc_port: int
    log_path: Path
    project: str = "tandem"
    _project_ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, workdir: Path, *, host: str = "127.0.0.1", port: int = 6006, grpc_port: int = 4317,
              project: str = "tandem", executable: Path | None = None) -> PhoenixServer:
        """Start Phoenix on ``host`` (loopback unless told otherwise); does not wait for it."""
        exe = executable or phoenix_executable()
        if exe is None:
            raise FileNotFoundError("Phoenix is not installed: run `make phoenix` (creates .venv-phoenix)")
        workdir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAY_", "PHOENIX_"))}
        env.update({
            "PHOENIX_HOST": host, "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc_port),
            "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false", "PHOENIX_PROJECT_NAME": project,
        })
        log_path = workdir / "phoenix.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen([str(exe), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        return cls(proc, workdir, host, port, grpc_port, log_path, project)

    @property
    def ui(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def otlp_endpoint(self) -> str:
        """Where the app's OTLP/gRPC span exporter sends (``telemetry.otlp_endpoint``)."""
        return f"{self.host}:{self.grpc_port}"

    def wait_ready(self, timeout_s: float = 180.0) -> float:
        """Poll ``/healthz`` until 200; returns the seconds waited. Raises if Phoenix exits or times out."""
        import httpx

        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Phoenix exited with {self.proc.returncode}; log: {self.log_path}")
            try:
                if httpx.get(f"{self.ui}/healthz", timeout=2).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"Phoenix not ready after {timeout_s:.0f} s; log: {self.log_path}")

    def trace_url(self, trace_id: str) -> str:
        """Phoenix's page for one trace (it redirects to the trace in its project)."""
        return f"{self.ui}/redirects/traces/{trace_id}"

    def project_id(self, name: str | None = None) -> str:
        """The project's id in Phoenix (its REST API)."""
        import httpx

        name = name or self.project
        if name not in self._project_ids:
            rows = httpx.get(f"{self.ui}/v1/projects", timeout=10).json()["data"]
            self._project_ids.update({r["name"]: r["id"] for r in rows})
        return self._project_ids[name]

    def spans(self, trace_id: str, limit: int = 1000) -> list[dict[str, Any]]:
        """The spans Phoenix stored for ``trace_id`` in the project (REST ``/v1/projects/{p}/spans``)."""
        import httpx

        r = httpx.get(f"{self.ui}/v1/projects/{self.project}/spans",
                      params={"limit": limit, "trace_id": trace_id}, timeout=10)
        if r.status_code == 404:  # no span has reached the project yet
            return []
        r.raise_for_status()
        return [s for s in r.json()["data"] if s["context"]["trace_id"] == trace_id]

    def span_page(self, trace_id: str, span_node_id: str) -> str:
        """The trace page with one span selected (``span_node_id``: the span's ``id`` from :meth:`spans`)."""
        return f"{self.ui}/projects/{self.project_id()}/traces/{trace_id}?selectedSpanNodeId={span_node_id}"

    def stop(self, timeout_s: float = 15.0) -> None:
        """Terminate Phoenix's process group (SIGTERM, then SIGKILL)."""
        if self.proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=timeout_s)
                return
            except subprocess.TimeoutExpired:
                continue
