"""Integration fixtures: one real Ray + Serve app (real vLLM on the CPU) per test module.

``start_app(tmp, overrides)`` starts Ray with a fixed number of logical CPUs, picks
free ports, deploys ``configs/embedded.yaml`` (with per-module overrides) and
waits for ``/readyz``. Teardown shuts Serve and Ray down and removes the
shared-memory files this process tree held in ``/dev/shm`` (never another session's).
"""

from __future__ import annotations

import copy
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EMBEDDED = REPO / "configs" / "embedded.yaml"

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


@dataclass
class RunningApp:
    http: str
    grpc: str
    telemetry: Path
    store_path: Path
    args: dict[str, Any]
    serve_file: Any = None
    config_path: Path | None = None
    http_port: int = 0
    grpc_port: int = 0
    app_name: str = "tandem"

    def turn(self, session_id: str, text: str, *, timeout: float = 300, **extra: Any) -> list[dict[str, Any]]:
        """One streamed turn over HTTP/SSE: every event, checked to end with exactly one ``done``."""
        import json

        import httpx

        events: list[dict[str, Any]] = []
        with httpx.stream("POST", f"{self.http}/v1/sessions/{session_id}/turns", json={"text": text, **extra},
                          headers={"Accept": "text/event-stream"}, timeout=timeout) as r:
            assert r.status_code == 200, r.read()
            assert r.headers["content-type"].startswith("text/event-stream")
            name = None
            for line in r.iter_lines():
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    ev = json.loads(line[6:])
                    assert ev["type"] == name  # the SSE event name is the event's type
                    events.append(ev)
        assert events and events[-1]["type"] == "done"
        assert [e["type"] for e in events].count("done") == 1
        return events

    def events(self, turn_id: str | None = None) -> list[dict[str, Any]]:
        """The structured events logged so far (JSON lines), optionally of one turn."""
        import json

        rows: list[dict[str, Any]] = []
        for f in self.telemetry.glob("events-*.jsonl"):
            rows += [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        return rows if turn_id is None else [e for e in rows if e.get("turn_id") == turn_id]

    def redeploy(self, deployments: list[dict[str, Any]], *, validate: bool = True) -> None:
        """Send the same Serve file with new ``deployments`` user_configs (a declarative update).

        ``validate=False`` bypasses our strict loader, as a hand-edited KubeRay
        serveConfigV2 would, to show what the replica itself does with a bad table.
        """
        from ray.serve.context import _get_global_client

        from serve.config import ServeFile
        from serve.deploy import deploy_schema

        raw = self.serve_file.model_dump(mode="json")
        if validate:
            raw["applications"][0]["deployments"] = deployments
            sf = ServeFile.model_validate(raw)
            schema = deploy_schema(sf, http_host="127.0.0.1", http_port=self.http_port, grpc_port=self.grpc_port)
        else:
            schema = deploy_schema(self.serve_file, http_host="127.0.0.1", http_port=self.http_port,
                                   grpc_port=self.grpc_port)
            data = schema.model_dump(mode="json", exclude_unset=True)
            data["applications"][0]["deployments"] = deployments
            schema = type(schema).model_validate(data)
        _get_global_client().deploy_apps(schema)




def wait_for(read: Callable[[], dict], pred: Callable[[dict], bool], timeout: float = 60) -> dict:
    """Poll ``read()`` every 0.5 s until ``pred`` holds for what it returns (a live reload arriving)."""
    import time

    deadline = time.monotonic() + timeout
    info: dict = {}
    while time.monotonic() < deadline:
        info = read()
        if pred(info):
            return info
        time.sleep(0.5)
    raise AssertionError(f"condition never held; last {info}")


def start_app(tmp: Path, overrides: dict[str, Any] | None = None, *, num_cpus: int = 4):
    """Generator used by module fixtures: yields a :class:`RunningApp`."""
    import ray
    import yaml
    from ray import serve
    from ray.serve.config import gRPCOptions

    from serve.cli import wait_ready
    from serve.config import load_serve_file
    from serve.telemetry import configure_env

    raw = yaml.safe_load(EMBEDDED.read_text())
    entry = raw["applications"][0]
    tele_dir, store_path = tmp / "telemetry", tmp / "sessions.db"
    entry["args"] = deep_merge(
        entry["args"],
        {"store": {"kind": "sqlite", "path": str(store_path)}, "telemetry": {"jsonl_dir": str(tele_dir)}},
    )
    if overrides:
        from serve.config import merge_args

        entry["args"] = merge_args(entry["args"], overrides)
    cfg_file = tmp / "app.yaml"
    cfg_file.write_text(yaml.safe_dump(raw))
    sf = load_serve_file(cfg_file)  # strict, like production
    configure_env(jsonl_dir=str(tele_dir), otlp_endpoint=None, sampling_ratio=1.0)
    # Ray workers must import test modules (scripted deployments) too.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    from serve.eval.runner import descendants, shm_held_by, shm_names

    shm_before = shm_names()
    http_port, grpc_port = free_port(), free_port()
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(
            http_options={"host": "127.0.0.1", "port": http_port},
            grpc_options=gRPCOptions(port=grpc_port, grpc_servicer_functions=sf.grpc_options.grpc_servicer_functions),
        )
        from serve.deploy import deploy_serve_file

        deploy_serve_file(sf, http_host="127.0.0.1", http_port=http_port, grpc_port=grpc_port)
        base = f"http://127.0.0.1:{http_port}"
        from serve.deploy import wait_app_running

        wait_app_running("tandem", timeout_s=600)  # fails fast, with the reason, on DEPLOY_FAILED
        wait_ready(base, timeout_s=120)
        yield RunningApp(base, f"127.0.0.1:{grpc_port}", tele_dir, store_path, entry["args"],
                         serve_file=sf, config_path=cfg_file, http_port=http_port, grpc_port=grpc_port)
    finally:
        # Only what this process tree holds is ours: another session's engine may share /dev/shm.
        held = shm_held_by(descendants(os.getpid()))
        try:
            serve.shutdown()
        except Exception as exc:  # teardown must go on
            print(f"serve.shutdown: {exc}", file=sys.stderr)
        ray.shutdown()
        time.sleep(1.0)
        for name in (held & shm_names()) - shm_before:
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass
