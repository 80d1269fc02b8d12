"""Integration fixtures: one Ray cluster and one engine per test session, one app per test module.

:data:`CLUSTER` starts Ray (a fixed number of logical CPUs) and Serve once, on free ports, and — the
first time a module asks — the application ``models``: the embedded model's engine
(``serve.app:build_models_app``). ``start_app(tmp, overrides)`` deploys ``configs/embedded.yaml`` with the
module's overrides as the application ``tandem``; every model entry the overrides left as the profile has
it points at that engine (``shared_app: models``), so no module waits for an engine of its own; a module
that changes the model (a scripted orchestrator, other engine settings) gets its own deployment. The
module's end deletes its application; the session's end shuts Serve and Ray down and removes the
shared-memory files this process tree held in ``/dev/shm`` (never another session's).

Modules marked ``own_ray`` start Ray themselves (a script's own cluster, a multi-node one) or need it
started with other settings (OTLP export to Phoenix): the shared cluster is shut down before each, and
they run after every module that shares it (:func:`pytest_collection_modifyitems`), so it starts once.
Span files (``spans-*.jsonl``, written by every Ray process) go to the session's folder
(``RunningApp.spans_dir``); a module's events to its own (``RunningApp.telemetry``).
"""

from __future__ import annotations

import contextlib
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
    spans_dir: Path | None = None  # the session's span files (every Ray process writes its own)

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

    deadline = time.monotonic() + timeout
    info: dict = {}
    while time.monotonic() < deadline:
        info = read()
        if pred(info):
            return info
        time.sleep(0.5)
    raise AssertionError(f"condition never held; last {info}")


MODELS_APP = "models"


class SessionCluster:
    """Ray + Serve started once, and the shared engine application; restarted only for other settings."""

    def __init__(self) -> None:
        self.running: tuple[Any, ...] | None = None  # the settings it runs with
        self.http_port = self.grpc_port = 0
        self.spans_dir: Path | None = None
        self.models_entry: dict[str, Any] | None = None  # the application ``models`` once deployed
        self._shm_before: set[str] = set()
        self._shm_held: set[str] = set()

    def ensure(self, root: Path, *, num_cpus: int = 4, otlp: str | None = None) -> None:
        settings = (num_cpus, otlp)
        if self.running == settings:
            return
        self.release()
        import ray
        from ray import serve
        from ray.serve.config import gRPCOptions

        from serve.config import load_serve_file
        from serve.eval.runner import shm_names
        from serve.telemetry import ENV_OTLP, configure_env

        self.spans_dir = root / "spans"
        if otlp:
            os.environ[ENV_OTLP] = otlp
        else:
            os.environ.pop(ENV_OTLP, None)
        configure_env(jsonl_dir=str(self.spans_dir), otlp_endpoint=otlp, sampling_ratio=1.0)
        # Ray workers must import test modules (scripted deployments) too.
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        self._shm_before = shm_names()
        if ray.is_initialized():  # left by an earlier module of this process that failed mid-start
            with contextlib.suppress(Exception):
                serve.shutdown()
            ray.shutdown()
        servicers = load_serve_file(EMBEDDED).grpc_options.grpc_servicer_functions
        for attempt in range(3):  # a free port can be taken before the proxy binds it: pick others
            self.http_port, self.grpc_port = free_port(), free_port()
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            try:
                serve.start(http_options={"host": "127.0.0.1", "port": self.http_port},
                            grpc_options=gRPCOptions(port=self.grpc_port, grpc_servicer_functions=servicers))
                break
            except Exception as exc:
                with contextlib.suppress(Exception):
                    serve.shutdown()
                ray.shutdown()
                if "Failed to bind" not in str(exc) or attempt == 2:
                    raise
        self.running = settings

    def release(self) -> None:
        """Shut Serve and Ray down (if this session started them) and free our shared memory."""
        if self.running is None:
            return
        from serve.eval.runner import shm_held_here, shutdown_local

        shutdown_local(shm_held_here() | self._shm_held, self._shm_before)
        self.running, self.models_entry, self._shm_held = None, None, set()

    def snapshot_shm(self) -> None:
        """Remember the shm files this process tree holds now: an engine a module kills (and Serve restarts)
        leaves its files with no holder at shutdown; they are removed all the same."""
        from serve.eval.runner import shm_held_here

        self._shm_held |= shm_held_here()

    def models_application(self, args: dict[str, Any]) -> dict[str, Any]:
        """The ``models`` application's entry (the profile's args: its one model as the ingress)."""
        if self.models_entry is None:
            self.models_entry = {"name": MODELS_APP, "route_prefix": None,
                                 "import_path": "serve.app:build_models_app", "args": copy.deepcopy(args)}
        return self.models_entry


CLUSTER = SessionCluster()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules that share the session's cluster first, then those that start Ray their own way."""
    items.sort(key=lambda it: it.get_closest_marker("own_ray") is not None)  # a stable sort


@pytest.fixture(autouse=True, scope="module")
def _own_ray_modules_start_without_ours(request: pytest.FixtureRequest):
    if request.node.get_closest_marker("own_ray") is not None:
        CLUSTER.release()
    yield


@pytest.fixture(autouse=True, scope="session")
def _session_cluster_shut_down_at_the_end():
    yield
    CLUSTER.release()


def _share_models(args: dict[str, Any], profile_models: dict[str, Any]) -> list[str]:
    """Point every model entry the module left as the profile has it at the ``models`` application."""
    shared = []
    for key, m in args["models"].items():
        if profile_models.get(key) == m:
            m["shared_app"] = MODELS_APP
            shared.append(key)
    return shared


def start_app(tmp: Path, overrides: dict[str, Any] | None = None, *, num_cpus: int = 4, otlp: str | None = None,
              share_models: bool = True):
    """Generator used by module fixtures: yields a :class:`RunningApp` (the application ``tandem``)."""
    import yaml
    from ray import serve

    from serve.cli import wait_ready
    from serve.config import load_serve_file
    from serve.deploy import deploy_serve_file, wait_app_running

    raw = yaml.safe_load(EMBEDDED.read_text())
    entry = raw["applications"][0]
    profile_args = copy.deepcopy(entry["args"])
    tele_dir, store_path = tmp / "telemetry", tmp / "sessions.db"
    tele_dir.mkdir(parents=True, exist_ok=True)
    entry["args"] = deep_merge(
        entry["args"],
        {"store": {"kind": "sqlite", "path": str(store_path)}, "telemetry": {"jsonl_dir": str(tele_dir)}},
    )
    if overrides:
        from serve.config import merge_args

        entry["args"] = merge_args(entry["args"], overrides)
    CLUSTER.ensure(tmp.parent, num_cpus=num_cpus, otlp=otlp)
    shared = share_models and bool(_share_models(entry["args"], profile_args["models"]))
    if shared or CLUSTER.models_entry is not None:  # a declarative deploy would delete what it leaves out
        raw["applications"].append(CLUSTER.models_application(profile_args))
    cfg_file = tmp / "app.yaml"
    cfg_file.write_text(yaml.safe_dump(raw))
    sf = load_serve_file(cfg_file)  # strict, like production
    http_port, grpc_port = CLUSTER.http_port, CLUSTER.grpc_port
    deploy_serve_file(sf, http_host="127.0.0.1", http_port=http_port, grpc_port=grpc_port)
    base = f"http://127.0.0.1:{http_port}"
    try:
        if len(sf.applications) > 1:
            wait_app_running(MODELS_APP, timeout_s=600)
        wait_app_running("tandem", timeout_s=600)  # fails fast, with the reason, on DEPLOY_FAILED
        wait_ready(base, timeout_s=120)
        CLUSTER.snapshot_shm()
        yield RunningApp(base, f"127.0.0.1:{grpc_port}", tele_dir, store_path, entry["args"],
                         serve_file=sf, config_path=cfg_file, http_port=http_port, grpc_port=grpc_port,
                         spans_dir=CLUSTER.spans_dir)
    finally:
        try:
            serve.delete("tandem")
        except Exception as exc:  # the next module must still start: without a cluster, start over
            print(f"serve.delete(tandem): {exc}", file=sys.stderr)
            CLUSTER.release()
