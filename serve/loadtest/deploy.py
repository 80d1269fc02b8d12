"""Deploying one app per sweep point on a reused Ray: start the cluster once, serve.run, wait, fail fast.

:func:`start_local_cluster` mirrors :func:`serve.cli.start_app` (telemetry env, ``ray.init``,
Serve's HTTP and gRPC proxies) on free loopback ports but deploys nothing;
:func:`deploy_app` runs one validated Serve file's app and waits until it is RUNNING and
``/readyz`` answers 200, raising at once when Serve reports ``DEPLOY_FAILED``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .cli import free_port

__all__ = ["start_local_cluster", "deploy_app"]


def start_local_cluster(sf: Any, num_cpus: float | None, work: Path) -> tuple[str, str]:
    """ray.init + Serve proxies on free loopback ports (as serve.cli.start_app does)."""
    import os

    import ray
    from ray import serve
    from ray.serve.config import gRPCOptions

    from serve.telemetry import configure_env

    configure_env(jsonl_dir=str(work / "telemetry"), otlp_endpoint=None, sampling_ratio=1.0)
    http_port, grpc_port = free_port(), free_port()
    ray.init(address="local", num_cpus=num_cpus or max(4, os.cpu_count() or 2), include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": http_port},
                grpc_options=gRPCOptions(port=grpc_port, grpc_servicer_functions=sf.grpc_options.grpc_servicer_functions))
    return f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}"


def deploy_app(sf: Any, http: str, timeout_s: float) -> float:
    """serve.run the point's app and wait until RUNNING and /readyz is 200; raises on DEPLOY_FAILED."""
    import httpx
    from ray import serve

    from serve.app import build_app

    entry = sf.applications[0]
    if any(m.source == "embedded" for m in entry.args.models.values()):
        from models.prepare import prepare_embedded_model

        prepare_embedded_model()
    t0 = time.monotonic()
    serve.run(build_app(entry.args), name=entry.name, route_prefix=entry.route_prefix, blocking=False)
    while time.monotonic() - t0 < timeout_s:
        app = serve.status().applications.get(entry.name)
        status = str(getattr(app.status, "value", app.status)) if app else "NOT_STARTED"
        if status == "DEPLOY_FAILED":
            raise RuntimeError(f"deploy failed: {app.message[:500] if app else ''}")
        if status == "RUNNING":
            try:
                if httpx.get(f"{http}/readyz", timeout=5).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
        time.sleep(1.0)
    raise TimeoutError(f"app {entry.name!r} not ready after {timeout_s:.0f} s")
