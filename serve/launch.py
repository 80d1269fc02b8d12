"""Start the app locally: a local Ray, Serve's proxies, the application from a Serve file; wait until ready.

Used by ``tandem run``, ``tandem load --start``, ``tandem eval`` and the benchmark scripts
(this module imports no CLI, so the CLIs that start apps do not import each other).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["start_app", "wait_ready", "example_turn", "PortTaken", "Leftovers"]


def _print(msg: str) -> None:
    print(msg, flush=True)


# Ray Serve's gRPC proxy parses whole messages before any of our code runs; Ray's cap is 2 GiB.
# 4 MiB bounds a hostile request and still fits a long session's GetSession answer (the same
# option caps what the proxy sends). The proxy reads it at start: set before Ray starts.
GRPC_MAX_MESSAGE_BYTES = 4 * 2**20


class PortTaken(RuntimeError):
    """A proxy's port was taken between choosing it and binding it (start again on other ports)."""


def start_app(config_path: str, *, num_cpus: float | None = None, metrics_port: int | None = None,
              http_port: int | None = None, grpc_port: int | None = None,
              otlp_endpoint: str | None = None) -> dict[str, Any]:
    """Start a local Ray, Serve's proxies and the app from a Serve file. Returns endpoints.

    ``otlp_endpoint`` overrides the config's ``telemetry.otlp_endpoint`` (``tandem run --observe``).
    """
    from serve.config import load_serve_file
    from serve.telemetry import configure_env

    sf = load_serve_file(config_path)
    entry = sf.applications[0]
    tele = entry.args.telemetry
    tdir = configure_env(jsonl_dir=tele.jsonl_dir, otlp_endpoint=otlp_endpoint or tele.otlp_endpoint,
                         sampling_ratio=tele.sampling_ratio, service_name=tele.service_name)
    for m in entry.args.models.values():
        if m.source == "embedded":
            from models.prepare import prepare_embedded_model

            prepared = prepare_embedded_model()
            _print(f"model      {prepared.path} ({'converted' if prepared.converted else 'cached'})")
    os.environ.setdefault("RAY_SERVE_GRPC_MAX_MESSAGE_SIZE", str(GRPC_MAX_MESSAGE_BYTES))
    import ray
    from ray import serve
    from ray.serve.config import gRPCOptions

    from serve.deploy import deploy_serve_file

    http = sf.http_options.model_copy(update={"port": http_port} if http_port else {})
    grpc_port = grpc_port or sf.grpc_options.port
    init_kwargs: dict[str, Any] = {"address": "local", "num_cpus": num_cpus or max(4, os.cpu_count() or 2),
                                   "include_dashboard": False, "log_to_driver": False}
    if metrics_port:
        init_kwargs["_metrics_export_port"] = metrics_port
    ray.init(**init_kwargs)
    try:
        serve.start(
            http_options={"host": http.host, "port": http.port},
            grpc_options=gRPCOptions(port=grpc_port, grpc_servicer_functions=sf.grpc_options.grpc_servicer_functions),
        )
        # Declarative deploy (as `serve deploy` and KubeRay do): a later redeploy of the same file
        # with changed rule tables reconfigures live replicas instead of restarting them.
        deploy_serve_file(sf, http_host=http.host, http_port=http.port, grpc_port=grpc_port)
    except BaseException as exc:  # a proxy that cannot bind its port, a bad deploy: leave no Ray behind
        with contextlib.suppress(Exception):
            serve.shutdown()
        ray.shutdown()
        if "Failed to bind" in str(exc):
            raise PortTaken(f"a Serve proxy could not bind its port (HTTP {http.port}, gRPC {grpc_port}): "
                            f"{str(exc).splitlines()[-1][:200]}") from exc
        raise
    host = "127.0.0.1" if http.host in ("0.0.0.0", "::") else http.host
    return {
        "http": f"http://{host}:{http.port}",
        "grpc": f"{host}:{grpc_port}",
        "openai": f"http://{host}:{http.port}{entry.route_prefix.rstrip('/')}/v1",
        "telemetry": str(tdir),
        "app": entry.name,
        "metrics": f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port else None,
    }


def wait_ready(base_url: str, timeout_s: float = 600.0) -> float:
    """Poll ``/readyz`` until 200; returns seconds waited."""
    import httpx

    t0 = time.monotonic()
    last = ""
    while time.monotonic() - t0 < timeout_s:
        try:
            r = httpx.get(f"{base_url}/readyz", timeout=5)
            if r.status_code == 200:
                return time.monotonic() - t0
            last = r.text[:200]
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(1.0)
    raise TimeoutError(f"app not ready after {timeout_s:.0f} s (last: {last})")


def example_turn(base_url: str, session_id: str = "demo-session", text: str = "Hi! What can you help me with?") -> dict[str, Any]:
    """One streamed turn over SSE; prints the reply as it arrives; returns the done event."""
    import httpx

    done: dict[str, Any] = {}
    with httpx.stream("POST", f"{base_url}/v1/sessions/{session_id}/turns", json={"text": text},
                      headers={"Accept": "text/event-stream"}, timeout=120) as r:
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            ev = json.loads(line[6:])
            if ev["type"] in ("reply.delta", "narration.delta"):
                sys.stdout.write(ev["text"])
                sys.stdout.flush()
            elif ev["type"] == "done":
                done = ev
            elif ev["type"] == "error":
                sys.stdout.write(f"\n[error {ev['code']}: {ev['message']}]")
    sys.stdout.write("\n")
    return done


def _started(pid: int) -> str | None:
    """A running process's start time (``/proc/PID/stat`` field 22): with the pid, it names one process (pids are
    reused); ``None`` when it is gone or a zombie (it has exited, its parent has not reaped it yet)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


class Leftovers:
    """What a local run (``tandem run``) must not leave behind: its shared-memory files in ``/dev/shm`` and the
    processes of its tree (Ray's GCS, raylet, workers, the engines).

    :meth:`snapshot` remembers, while the run is up, the files its tree holds and its processes (a process whose
    parent died is no longer below this one, and an engine killed by a Ctrl-C sent to the whole process group
    leaves its files with no holder). :meth:`sweep`, after Serve and Ray were shut down, stops the remembered
    processes still alive (SIGTERM, then SIGKILL after ``grace_s``) and removes the remembered files that were
    not there when the run started — never anyone else's: only what this tree held.
    """

    def __init__(self) -> None:
        from serve.eval.runner import shm_names

        self.shm_before = shm_names()
        self.shm_held: set[str] = set()
        self.procs: dict[int, str] = {}

    def snapshot(self) -> None:
        from serve.eval.runner import descendants, shm_held_by

        me = os.getpid()
        tree = descendants(me)
        self.shm_held |= shm_held_by(tree)
        for pid in tree - {me}:
            started = _started(pid)
            if started is not None:
                self.procs.setdefault(pid, started)

    def alive(self) -> list[int]:
        """The remembered processes still running (the same processes: their start times match)."""
        return [pid for pid, started in self.procs.items() if _started(pid) == started]

    def sweep(self, grace_s: float = 5.0) -> tuple[int, int]:
        """Stop what is left of the tree and remove its shm files; returns (processes stopped, files removed)."""
        from serve.eval.runner import shm_names

        left = found = self.alive()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + grace_s
            while left and time.monotonic() < deadline:
                time.sleep(0.1)
                left = self.alive()
            if not left:
                break
        removed = 0
        for name in (self.shm_held & shm_names()) - self.shm_before:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join("/dev/shm", name))
                removed += 1
        return len(found), removed
