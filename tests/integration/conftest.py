"""Integration fixtures: one real Ray + Serve app (real vLLM on the CPU) per test module.

``start_app(tmp, overrides)`` starts Ray with a fixed number of logical CPUs, picks
free ports, deploys ``configs/embedded.yaml`` (with per-module overrides) and
waits for ``/readyz``. Teardown shuts Serve and Ray down and removes the
shared-memory files the engine left in ``/dev/shm``.
"""

from __future__ import annotations

import copy
import os
import socket
import sys
import time
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
    app_name: str = "tandem"


def _shm() -> set[str]:
    try:
        return {p for p in os.listdir("/dev/shm") if p.startswith(("psm_", "sem.mp-"))}
    except OSError:
        return set()


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
        entry["args"] = deep_merge(entry["args"], overrides)
    cfg_file = tmp / "app.yaml"
    cfg_file.write_text(yaml.safe_dump(raw))
    sf = load_serve_file(cfg_file)  # strict, like production
    configure_env(jsonl_dir=str(tele_dir), otlp_endpoint=None, sampling_ratio=1.0)
    # Ray workers must import test modules (scripted deployments) too.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    shm_before = _shm()
    http_port, grpc_port = free_port(), free_port()
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(
            http_options={"host": "127.0.0.1", "port": http_port},
            grpc_options=gRPCOptions(port=grpc_port, grpc_servicer_functions=sf.grpc_options.grpc_servicer_functions),
        )
        from serve.app import build_app

        serve.run(build_app(sf.applications[0].args), name="tandem", route_prefix="/", blocking=False)
        base = f"http://127.0.0.1:{http_port}"
        wait_ready(base, timeout_s=600)
        yield RunningApp(base, f"127.0.0.1:{grpc_port}", tele_dir, store_path, entry["args"])
    finally:
        try:
            serve.shutdown()
        except Exception as exc:  # teardown must go on
            print(f"serve.shutdown: {exc}", file=sys.stderr)
        ray.shutdown()
        time.sleep(1.0)
        for name in _shm() - shm_before:
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass
