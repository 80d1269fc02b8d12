"""The live model client of a what-if: the engines of the model entries a candidate re-runs calls on.

:func:`live_models` yields ``None`` when no role is re-run (a table or pack what-if needs no engine).
Otherwise it uses the Ray this process already runs (an integration test's cluster) or starts a local one,
deploys each model entry as its own models application (``serve.app:build_models_app``, named
``whatif-<entry>``; an entry with ``shared_app`` uses that application's engine instead), and yields a
:class:`~serve.model_client.ServeModelClient` routing each role to its entry. Every call the what-if
re-runs goes to that engine while the sessions are re-decided side by side, so calls of different
sessions share the engine's batches. At the end it deletes what it deployed and, if it started Ray,
shuts it down and removes the shared-memory files its process tree held.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["live_models", "APP_PREFIX"]

APP_PREFIX = "whatif-"


@contextlib.contextmanager
def live_models(args: Any, roles: dict[str, str], *, num_cpus: float | None = None,
                deploy_timeout_s: float = 900.0) -> Iterator[Any]:
    """``role → model entry`` of ``args`` (an app's config) as one model client (see module docstring)."""
    if not roles:
        yield None
        return
    import ray
    from ray import serve

    from models.llm import MODEL_DEPLOYMENT_PREFIX, SharedModel
    from serve.app import build_models_app
    from serve.deploy import wait_app_running
    from serve.eval.runner import shm_held_here, shm_names, shutdown_local
    from serve.loadtest.cli import free_port
    from serve.model_client import ServeModelClient

    started = not ray.is_initialized()
    before = shm_names()
    if started:
        ray.init(address="local", num_cpus=num_cpus or max(4, os.cpu_count() or 2), include_dashboard=False,
                 log_to_driver=False)
        serve.start(http_options={"host": "127.0.0.1", "port": free_port()})
    deployed: list[str] = []
    held: set[str] = set()
    try:
        handles: dict[str, Any] = {}
        for name in sorted(set(roles.values())):
            m = args.models[name]
            if m.shared_app:
                handles[name] = SharedModel(m.shared_app, m.model_id).handle()
                continue
            if m.source == "embedded":
                from models.prepare import prepare_embedded_model

                prepare_embedded_model()
            own = args.model_copy(update={"models": {name: m}, "roles": args.roles.model_copy(
                update={r: name for r in ("orchestrator", "generator", "slot_extractor")})})
            app = APP_PREFIX + name
            serve.run(build_models_app(own), name=app, route_prefix=None, blocking=False)
            deployed.append(app)
            wait_app_running(app, timeout_s=deploy_timeout_s)
            handles[name] = serve.get_deployment_handle(MODEL_DEPLOYMENT_PREFIX + m.model_id, app_name=app)
        held = shm_held_here()
        yield ServeModelClient({role: (handles[name], args.models[name].model_id) for role, name in roles.items()})
    finally:
        held |= shm_held_here()
        for app in deployed:
            with contextlib.suppress(Exception):
                serve.delete(app)
        if started:
            shutdown_local(held, before)
