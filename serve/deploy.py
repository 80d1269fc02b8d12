"""Declarative deploys: our strictly validated Serve file → Ray Serve's controller.

This is the path ``serve deploy`` and KubeRay's ``serveConfigV2`` take: the
controller builds the app from ``import_path`` + ``args``. Because the code
version of a config deploy is stable, redeploying the same file with only a
changed ``user_config`` (rule tables) *reconfigures* live replicas instead of
restarting them.
"""

from __future__ import annotations

import time
from typing import Any

from serve.config import ServeFile, app_runtime_env

__all__ = ["deploy_schema", "deploy_serve_file", "wait_app_running"]


def deploy_schema(sf: ServeFile, *, http_host: str, http_port: int, grpc_port: int) -> Any:
    """Ray's ``ServeDeploySchema`` for our file, with the ports the proxies really use."""
    from ray.serve.schema import ServeDeploySchema

    raw: dict[str, Any] = {
        "proxy_location": sf.proxy_location,
        "http_options": {"host": http_host, "port": http_port},
        "grpc_options": {"port": grpc_port, "grpc_servicer_functions": list(sf.grpc_options.grpc_servicer_functions)},
        "applications": [
            {
                "name": app.name,
                "route_prefix": app.route_prefix,
                "import_path": app.import_path,
                "runtime_env": app_runtime_env(app.runtime_env, app.args.domain.paths),
                "args": app.args.model_dump(mode="json", exclude_none=True),
                "deployments": [d.model_dump(mode="json") for d in app.deployments],
            }
            for app in sf.applications
        ],
    }
    if sf.logging_config:
        raw["logging_config"] = sf.logging_config
    return ServeDeploySchema.model_validate(raw)


def deploy_serve_file(sf: ServeFile, *, http_host: str, http_port: int, grpc_port: int) -> None:
    """Send the file to the running Serve controller (after ``serve.start``)."""
    from ray.serve.context import _get_global_client

    _get_global_client().deploy_apps(deploy_schema(sf, http_host=http_host, http_port=http_port, grpc_port=grpc_port))


def wait_app_running(name: str, timeout_s: float = 600.0) -> None:
    """Poll ``serve.status()`` until the app is RUNNING; raise on DEPLOY_FAILED or timeout."""
    from ray import serve

    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        app = serve.status().applications.get(name)
        if app is not None:
            last = f"{app.status}: {app.message[:300]}"
            if app.status == "RUNNING":
                return
            if app.status == "DEPLOY_FAILED":
                raise RuntimeError(f"app {name!r} failed to deploy: {app.message[:2000]}")
        time.sleep(1.0)
    raise TimeoutError(f"app {name!r} not running after {timeout_s:.0f} s ({last})")
