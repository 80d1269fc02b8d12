"""A multi-node Ray cluster on one machine, shaped like the production cluster (``tandem run --cluster N``).

The production topology (``configs/h100.yaml``, ``k8s/base/``) is a head that schedules no work, model
nodes, and CPU worker nodes for the ingress, tools, guardrails and kernels, with Serve proxies on every
node and Redis for sessions and rate limits. :func:`plan_nodes` reads which custom resources a Serve
file's deployments ask for and lays out the nodes that advertise them; :class:`LocalCluster` starts those
nodes as separate raylets (``ray.cluster_utils.Cluster``), a ``redis-server`` (AOF on, as the manifests
set it) for the session store, the rate limits and, with ``gcs_ft``, the GCS's fault-tolerance storage,
deploys the file and tears down only what it started. A node can be removed and added back
(``scripts/chaos.py``). Each CPU node has its own disk (``TANDEM_CACHE`` under the cluster's work folder,
wiped when the node is removed), so state a replica keeps on its node's disk moves — or is lost — the way
it would on a pod's ephemeral volume.

On one machine every node's proxy would bind the same port: each worker node's proxy gets its own
(Ray's ``RAY_SERVE_WORKER_PROXY_HTTP_PORT`` / ``..._GRPC_PORT``, read by the proxy from its raylet's
environment); the head's proxy keeps the file's ports.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError
from serve.config import ServeFile

__all__ = ["NodeSpec", "plan_nodes", "placement_of", "check_placement", "RedisServer", "LocalCluster",
           "MODEL_RESOURCE", "CPU_RESOURCE"]

MODEL_RESOURCE = "model_node"
CPU_RESOURCE = "cpu_worker"


@dataclass(frozen=True)
class NodeSpec:
    """One Ray node: its role, logical CPUs and custom resources."""

    name: str
    role: str  # head | model | cpu
    num_cpus: float
    resources: dict[str, float] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def placement_of(sf: ServeFile) -> dict[str, dict[str, float]]:
    """What each deployment's replica (or its engine's first bundle) needs: ``{name: {resource: amount}}``.

    Names are the Serve deployments' roles: ``ingress``, ``tools``, ``guardrails`` (only where it runs as a
    deployment), ``rule_kernels`` and ``model:<key>`` per model.
    """
    args = sf.applications[0].args
    out: dict[str, dict[str, float]] = {}
    ing = args.ingress
    out["ingress"] = {"CPU": ing.num_cpus, **ing.resources}
    deps = args.deployments
    out["tools"] = {"CPU": deps.tools.num_cpus, **deps.tools.resources}
    if args.guardrails.placement == "deployment":
        out["guardrails"] = {"CPU": deps.guardrails.num_cpus, **deps.guardrails.resources}
    out["rule_kernels"] = {"CPU": deps.rule_kernels.num_cpus, **deps.rule_kernels.resources}
    for key, m in args.models.items():
        if m.shared_app:  # another application's engine: it is placed where that application says
            continue
        need: dict[str, float] = {}
        for b in m.placement_bundles or [{"CPU": m.deployment.num_cpus}]:
            for r, v in b.items():
                need[r] = need.get(r, 0.0) + float(v)
        out[f"model:{key}"] = need
    return out


def plan_nodes(sf: ServeFile, cpu_nodes: int = 2, *, cpu_node_cpus: float = 1.0) -> list[NodeSpec]:
    """The nodes for ``sf``: a head with no CPUs, one model node, ``cpu_nodes`` CPU worker nodes.

    The model node advertises :data:`MODEL_RESOURCE` and the CPUs its engines' bundles take; a CPU node
    advertises :data:`CPU_RESOURCE` (enough for every CPU replica the file places with it) and
    ``cpu_node_cpus`` logical CPUs. A file that places nothing on these resources is refused: it would run
    everything wherever Ray pleases, which is not the production shape.
    """
    if cpu_nodes < 1:
        raise ConfigError(f"a cluster needs at least one CPU node (got {cpu_nodes})")
    need = placement_of(sf)
    models = {k: v for k, v in need.items() if k.startswith("model:")}
    cpu_parts = {k: v for k, v in need.items() if not k.startswith("model:")}
    unplaced = sorted([k for k, v in models.items() if v.get(MODEL_RESOURCE, 0) <= 0]
                      + [k for k, v in cpu_parts.items() if v.get(CPU_RESOURCE, 0) <= 0])
    if unplaced:
        raise ConfigError(f"{', '.join(unplaced)}: no {MODEL_RESOURCE} / {CPU_RESOURCE} resource in the "
                          "file, so nothing pins them to the model or CPU nodes")
    model_cpus = sum(v.get("CPU", 0.0) for v in models.values())
    model_res = sum(v.get(MODEL_RESOURCE, 0.0) for v in models.values())
    # Every CPU part on one node must fit: a node lost leaves the other to take them all.
    # A node's resource quantities are whole numbers (Ray's rule): rounded up.
    cpu_res = math.ceil(round(sum(v.get(CPU_RESOURCE, 0.0) for v in cpu_parts.values()) * 2, 6))
    cpu_cpus = max(cpu_node_cpus, math.ceil(round(sum(v.get("CPU", 0.0) for v in cpu_parts.values()) * 2, 6)))
    nodes = [NodeSpec("head", "head", 0.0),
             NodeSpec("model", "model", float(max(1, math.ceil(round(model_cpus, 6)))),
                      {MODEL_RESOURCE: float(max(1, math.ceil(round(model_res, 6))))})]
    nodes += [NodeSpec(f"cpu-{i + 1}", "cpu", float(cpu_cpus), {CPU_RESOURCE: float(cpu_res)})
              for i in range(cpu_nodes)]
    return nodes


def check_placement(sf: ServeFile, nodes: list[NodeSpec]) -> dict[str, list[str]]:
    """Which nodes can host each deployment (``{name: [node, ...]}``); a deployment no node fits is refused.

    ``ingress`` with ``max_replicas_per_node`` needs that many fitting nodes per replica count.
    """
    out: dict[str, list[str]] = {}
    for name, need in placement_of(sf).items():
        fits = [n.name for n in nodes
                if all((n.num_cpus if r == "CPU" else n.resources.get(r, 0.0)) >= v for r, v in need.items())]
        if not fits:
            raise ConfigError(f"{name} needs {need}: no node offers it")
        out[name] = fits
    ing = sf.applications[0].args.ingress
    if ing.max_replicas_per_node and ing.num_replicas:
        room = len(out["ingress"]) * ing.max_replicas_per_node
        if room < ing.num_replicas:
            raise ConfigError(f"ingress: {ing.num_replicas} replicas, at most {ing.max_replicas_per_node} per node, "
                              f"on {len(out['ingress'])} node(s)")
    return out


class RedisServer:
    """A ``redis-server`` this process started (AOF on), restartable on the same data directory."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 20.0) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise ConfigError("redis-server is not installed (the cluster's session store and GCS storage)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            time.sleep(0.1)
        raise TimeoutError(f"redis-server not answering on port {self.port}")

    def crash(self) -> None:
        """SIGKILL, as a node or container dies: no shutdown save; what comes back is what the AOF holds."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None


@dataclass
class Endpoint:
    node: str
    http: str
    grpc: str


class LocalCluster:
    """The nodes of :func:`plan_nodes` as raylets on this machine, Redis, the app; see the module docstring."""

    def __init__(self, config_path: str | Path, *, cpu_nodes: int = 2, gcs_ft: bool = False,
                 workdir: str | Path | None = None, api_key: str | None = None,
                 overrides: dict[str, Any] | None = None, node_disks: bool = True) -> None:
        from serve.config import load_serve_file

        self._own_tmp = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="tandem-cluster-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = str(config_path)
        import yaml

        from serve.config import merge_args

        raw = yaml.safe_load(Path(config_path).read_text())
        entry = raw["applications"][0]
        overrides = dict(overrides or {})
        if not (entry.get("args", {}).get("domain") or {}).get("world_path") and \
                not (overrides.get("domain") or {}).get("world_path"):
            # The world and its write ledger on the cluster's persistent volume (a PVC in KubeRay), never
            # on a node's own disk: a tools replica rescheduled after a node loss finds its writes.
            volume = self.workdir / "volume"
            volume.mkdir(parents=True, exist_ok=True)
            overrides = merge_args(overrides, {"domain": {"world_path": str(volume / "world.db")}})
        if overrides:  # the app's args with ``overrides`` merged in, checked by the same strict loader
            entry["args"] = merge_args(entry["args"], overrides)
            self.config_path = str(self.workdir / "app.yaml")
            Path(self.config_path).write_text(yaml.safe_dump(raw, sort_keys=False))
        self.sf = load_serve_file(self.config_path)
        self.nodes = plan_nodes(self.sf, cpu_nodes)
        self.placement = check_placement(self.sf, self.nodes)
        self.gcs_ft = gcs_ft
        self.node_disks = node_disks
        self.node_start_attempts = 3  # a raylet that crashes while it starts is started again (_start_node)
        self.redis = RedisServer(self.workdir / "redis")
        self.api_key = api_key or "tandem-cluster-" + os.urandom(8).hex()
        self.cluster: Any = None
        self.node_handles: dict[str, Any] = {}
        self.endpoints: dict[str, Endpoint] = {}
        self.ready: set[str] = set()  # nodes whose proxy answered /readyz since they (re)started
        self._ports: dict[str, tuple[int, int]] = {}
        self._env_before: dict[str, str | None] = {}
        self._shm_before: set[str] = set()
        self._shm_held: set[str] = set()  # shared-memory files this object's processes held when last looked at

    # -- environment -----------------------------------------------------------------
    def _setenv(self, key: str, value: str) -> None:
        self._env_before.setdefault(key, os.environ.get(key))
        os.environ[key] = value

    def _app_env(self) -> None:
        """What every replica reads from its environment (set before any raylet starts)."""
        import hashlib

        args = self.sf.applications[0].args
        if args.store.url_env:
            self._setenv(args.store.url_env, self.redis.url)
        if args.limits.storage_url_env:
            self._setenv(args.limits.storage_url_env, self.redis.url)
        if args.store.vault_key_env and not os.environ.get(args.store.vault_key_env):
            from cryptography.fernet import Fernet

            self._setenv(args.store.vault_key_env, Fernet.generate_key().decode())
        if args.auth.enabled and args.auth.api_keys_env:
            self._setenv(args.auth.api_keys_env, "cluster:" + hashlib.sha256(self.api_key.encode()).hexdigest())
        repo = str(Path(__file__).resolve().parents[1])
        self._setenv("PYTHONPATH", os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
        self._setenv("RAY_SERVE_GRPC_MAX_MESSAGE_SIZE", str(4 * 2**20))

    # -- lifecycle -------------------------------------------------------------------
    def start(self, *, ready_timeout_s: float = 900.0) -> dict[str, Endpoint]:
        from serve.eval.runner import shm_names
        from serve.telemetry import configure_env

        self._shm_before = shm_names()
        tele = self.sf.applications[0].args.telemetry
        configure_env(jsonl_dir=tele.jsonl_dir or str(self.workdir / "telemetry"), otlp_endpoint=tele.otlp_endpoint,
                      sampling_ratio=tele.sampling_ratio, service_name=tele.service_name)
        for m in self.sf.applications[0].args.models.values():
            if m.source == "embedded":
                from models.prepare import prepare_embedded_model

                prepare_embedded_model()
        self.redis.start()
        self._app_env()
        if self.gcs_ft:
            self._setenv("RAY_REDIS_ADDRESS", f"127.0.0.1:{self.redis.port}")
            self._setenv("RAY_external_storage_namespace", "tandem-cluster")
            self._setenv("RAY_gcs_rpc_server_reconnect_timeout_s", "60")
        import ray
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "resources": {}, "include_dashboard": False,
            "object_store_memory": 100 * 2**20})
        self.node_handles["head"] = self.cluster.head_node
        self._ports["head"] = (self.sf.http_options.port, self.sf.grpc_options.port)
        for n in self.nodes[1:]:
            self.add_node(n.name, wait=False)
        self.cluster.wait_for_nodes()
        ray.init(address=self.cluster.address, log_to_driver=False, namespace="tandem-cluster")
        self._deploy()
        self.wait_ready(ready_timeout_s)
        return self.endpoints

    def add_node(self, name: str, *, wait: bool = True) -> Any:
        """Start (or start again) the node ``name`` of the plan, its proxy on its own ports."""
        spec = next(n for n in self.nodes if n.name == name)
        http_port, grpc_port = self._ports.get(name) or (_free_port(), _free_port())
        self._ports[name] = (http_port, grpc_port)
        node_env = {"RAY_SERVE_WORKER_PROXY_HTTP_PORT": str(http_port),
                    "RAY_SERVE_WORKER_PROXY_GRPC_PORT": str(grpc_port)}
        if self.node_disks and spec.role == "cpu":
            # The node's own disk: what a replica keeps under the cache (a world file, a key file) stays
            # on this node, as on a pod's ephemeral volume. Removing the node wipes it.
            disk = self.workdir / "disks" / name
            disk.mkdir(parents=True, exist_ok=True)
            node_env["TANDEM_CACHE"] = str(disk)
        saved = {k: os.environ.get(k) for k in node_env}
        os.environ.update(node_env)
        try:
            node = self._start_node(spec, wait=wait)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.node_handles[name] = node
        self.endpoints[name] = Endpoint(name, f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}")
        return node

    def _start_node(self, spec: NodeSpec, *, wait: bool) -> Any:
        """Start one raylet; a start that fails is cleaned up and tried again (``node_start_attempts``).

        On a loaded machine a raylet can die while it starts (seen: SIGSEGV in its first second, then
        ``The current node timed out during startup``), as a pod can crash-loop once; KubeRay starts the
        pod again, and so does this. What the failed start left (its log monitor, a half-started raylet)
        is killed by pid: the processes below this one that were not there before the attempt.
        """
        from serve.eval.runner import descendants

        last: Exception | None = None
        for attempt in range(self.node_start_attempts):
            before = descendants(os.getpid())
            try:
                return self.cluster.add_node(wait=wait, num_cpus=spec.num_cpus, resources=dict(spec.resources),
                                             object_store_memory=100 * 2**20)
            except Exception as exc:  # Ray raises a bare Exception for a node that never came up
                last = exc
                for pid in sorted(descendants(os.getpid()) - before, reverse=True):
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
                print(f"node {spec.name}: start {attempt + 1}/{self.node_start_attempts} failed: {exc}",
                      flush=True)
                if attempt + 1 < self.node_start_attempts:
                    time.sleep(2.0 * (attempt + 1))
        raise RuntimeError(f"node {spec.name} did not start in {self.node_start_attempts} attempts: {last}")

    def remove_node(self, name: str) -> None:
        """Kill a node's raylet and every worker on it (a lost machine)."""
        node = self.node_handles.pop(name)
        self.cluster.remove_node(node, allow_graceful=False)
        self.endpoints.pop(name, None)
        self.ready.discard(name)
        if self.node_disks:  # a lost machine's local disk goes with it (a new pod starts empty)
            shutil.rmtree(self.workdir / "disks" / name, ignore_errors=True)

    def node_id(self, name: str) -> str:
        return str(self.node_handles[name].node_id)

    def _deploy(self) -> None:
        from ray import serve
        from ray.serve.config import gRPCOptions

        from serve.deploy import deploy_serve_file

        http_port, grpc_port = self._ports["head"]
        serve.start(
            proxy_location=self.sf.proxy_location,
            http_options={"host": self.sf.http_options.host, "port": http_port},
            grpc_options=gRPCOptions(port=grpc_port,
                                     grpc_servicer_functions=self.sf.grpc_options.grpc_servicer_functions),
        )
        deploy_serve_file(self.sf, http_host=self.sf.http_options.host, http_port=http_port, grpc_port=grpc_port)
        self.endpoints = {"head": Endpoint("head", f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}"),
                          **{k: v for k, v in self.endpoints.items() if k != "head"}}

    def wait_ready(self, timeout_s: float = 900.0, nodes: list[str] | None = None) -> float:
        """The app RUNNING and ``/readyz`` 200 on the proxies of ``nodes`` (default: the CPU nodes)."""
        from serve.deploy import wait_app_running
        from serve.launch import wait_ready

        t0 = time.monotonic()
        wait_app_running(self.sf.applications[0].name, timeout_s=timeout_s)
        for name in nodes or [n.name for n in self.nodes if n.role == "cpu" and n.name in self.endpoints]:
            wait_ready(self.endpoints[name].http, timeout_s=max(30.0, timeout_s - (time.monotonic() - t0)))
            self.ready.add(name)
        return time.monotonic() - t0

    def kill_gcs(self) -> None:
        """Kill the head's GCS server (with ``gcs_ft``, restart it with :meth:`restart_gcs`)."""
        self.cluster.head_node.kill_gcs_server()

    def restart_gcs(self) -> None:
        self.cluster.head_node.start_gcs_server()

    def snapshot_shm(self) -> None:
        """Remember the shared-memory files this process tree holds now: a process killed later (a fault, an
        engine restarted) leaves its files with no holder at shutdown, and they are removed all the same."""
        from serve.eval.runner import shm_held_here

        self._shm_held |= shm_held_here()

    def shutdown(self) -> None:
        """Serve, Ray's nodes, Redis: only what this object started; then its shared-memory files (those held now
        and those :meth:`snapshot_shm` saw held before)."""
        import ray

        from serve.eval.runner import shm_held_here, shm_names

        held = shm_held_here() | self._shm_held
        try:
            if ray.is_initialized():
                from ray import serve

                try:
                    serve.shutdown()
                except Exception as exc:  # teardown goes on
                    print(f"serve.shutdown: {exc}", flush=True)
                ray.shutdown()
        finally:
            if self.cluster is not None:
                self.cluster.shutdown()
                self.cluster = None
            self.redis.stop()
            for k, v in self._env_before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            self._env_before.clear()
            time.sleep(0.5)
            for name in (held & shm_names()) - self._shm_before:
                try:
                    os.unlink(os.path.join("/dev/shm", name))
                except OSError:
                    pass
            if self._own_tmp:
                shutil.rmtree(self.workdir, ignore_errors=True)
