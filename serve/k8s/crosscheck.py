"""What no schema says: a RayService's cluster must fit its own Serve config.

* **ports** — the Serve service targets the Serve config's HTTP and gRPC ports;
  containers' ``serve`` / ``grpc`` / ``metrics`` ports agree with it and with
  ``metrics-export-port``.
* **GPUs vs tensor parallelism** — every GPU model's ``tensor_parallel_size ×
  pipeline_parallel_size`` fits one pod of some worker group, and a model that
  asks for an accelerator type finds a group that advertises it.
* **the head schedules nothing** (a cluster serving a Tandem app) — ``num-cpus: "0"``
  on the head (and ``num-gpus: "0"`` if it has GPUs); every deployment and placement bundle asks
  for something only a worker has, and every custom resource asked for is
  advertised by some worker group.
* **worker bounds** — ``minReplicas ≤ replicas ≤ maxReplicas``; a GPU request
  equals its limit (an extended resource), ``num-gpus`` ≤ the pod's GPUs.
* **the app's environment** — the variables the app reads (API keys, the Redis
  URL) are set on every worker group that can host the ingress.
* **Redis survives its restart** (:func:`redis_durability`, any StatefulSet or
  Deployment running a ``redis`` image) — AOF on (``--appendonly yes``) and its
  data folder on a persistent volume claim: the session store keeps turns,
  leases, idempotency keys and vaults there (``scripts/chaos.py``'s
  ``redis_restart`` kills it with SIGKILL and checks what comes back).

The checks read the documents defensively: a shape the schemas already reject
is skipped here, not reported twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from serve.k8s.issues import Issue, JsonPath
from serve.k8s.plan import cpu_deployments, custom_resources
from serve.k8s.pods import parse_ray_resources_param
from serve.k8s.serveconfig import ServeView

__all__ = ["cross_check", "redis_durability"]

_GPU = "nvidia.com/gpu"


@dataclasses.dataclass
class _Group:
    path: JsonPath  # the group spec
    name: str
    spec: Mapping[str, Any]
    container: Mapping[str, Any]
    start: Mapping[str, Any]
    gpus: int
    resources: dict[str, float]


def _dict(node: Any) -> Mapping[str, Any]:
    return node if isinstance(node, Mapping) else {}


def _list(node: Any) -> list[Any]:
    return node if isinstance(node, list) else []


def _qty(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _group(spec: Any, path: JsonPath, name: str, out: list[Issue]) -> _Group:
    spec = _dict(spec)
    containers = _list(_dict(_dict(spec.get("template")).get("spec")).get("containers"))
    container = _dict(containers[0]) if containers else {}
    res = _dict(container.get("resources"))
    limits, requests = _dict(res.get("limits")), _dict(res.get("requests"))
    cpath = (*path, "template", "spec", "containers", 0, "resources")
    if _GPU in limits and _GPU in requests and _qty(limits[_GPU]) != _qty(requests[_GPU]):
        out.append(Issue((*cpath, "requests", _GPU), f"GPU request {requests[_GPU]!r} differs from the limit "
                         f"{limits[_GPU]!r}: Kubernetes requires them equal", "cross"))
    start = _dict(spec.get("rayStartParams"))
    resources: dict[str, float] = {}
    if "resources" in start:
        try:
            resources = parse_ray_resources_param(str(start["resources"]))
        except ValueError as exc:
            out.append(Issue((*path, "rayStartParams", "resources"),
                             f"not a Ray resources value like '\"{{\\\"name\\\": 1}}\"': {exc}", "cross"))
    return _Group(path, name, spec, container, start, _qty(limits.get(_GPU, requests.get(_GPU, 0))), resources)


def _groups(cluster: Mapping[str, Any], cpath: JsonPath, out: list[Issue]) -> tuple[_Group, list[_Group]]:
    head = _group(cluster.get("headGroupSpec"), (*cpath, "headGroupSpec"), "head", out)
    workers = [_group(g, (*cpath, "workerGroupSpecs", i), str(_dict(g).get("groupName", i)), out)
               for i, g in enumerate(_list(cluster.get("workerGroupSpecs")))]
    return head, workers


def _head(head: _Group, out: list[Issue]) -> None:
    if str(head.start.get("num-cpus")) != "0":
        out.append(Issue((*head.path, "rayStartParams", "num-cpus"),
                         f"the head must schedule nothing: set num-cpus to \"0\" (got {head.start.get('num-cpus')!r})",
                         "cross"))
    if head.gpus and str(head.start.get("num-gpus")) != "0":
        out.append(Issue((*head.path, "rayStartParams", "num-gpus"),
                         "the head has GPUs but must schedule nothing: set num-gpus to \"0\"", "cross"))


def _bounds(workers: list[_Group], out: list[Issue]) -> None:
    for g in workers:
        lo, hi, n = g.spec.get("minReplicas"), g.spec.get("maxReplicas"), g.spec.get("replicas")
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            out.append(Issue((*g.path, "minReplicas"), f"minReplicas {lo} > maxReplicas {hi}", "cross"))
        elif isinstance(n, int) and ((isinstance(lo, int) and n < lo) or (isinstance(hi, int) and n > hi)):
            out.append(Issue((*g.path, "replicas"), f"replicas {n} is outside [{lo}, {hi}]", "cross"))
        if "num-gpus" in g.start and _qty(g.start["num-gpus"]) > g.gpus:
            out.append(Issue((*g.path, "rayStartParams", "num-gpus"),
                             f"num-gpus {g.start['num-gpus']!r} is more than the pod's {g.gpus} GPUs", "cross"))


def _ports(doc: Mapping[str, Any], view: ServeView, groups: list[_Group], out: list[Issue]) -> None:
    serve = {view.http_port: "HTTP", view.grpc_port: "gRPC"}
    names = {"serve": view.http_port, "grpc": view.grpc_port}
    for g in groups:
        for k, p in enumerate(_list(g.container.get("ports"))):
            p = _dict(p)
            want = names.get(str(p.get("name")))
            if want is not None and p.get("containerPort") != want:
                out.append(Issue((*g.path, "template", "spec", "containers", 0, "ports", k, "containerPort"),
                                 f"port {p.get('name')!r} is {p.get('containerPort')!r}, but serveConfigV2 "
                                 f"serves on {want}", "cross"))
            metrics = g.start.get("metrics-export-port")
            if p.get("name") == "metrics" and metrics is not None and str(p.get("containerPort")) != str(metrics):
                out.append(Issue((*g.path, "template", "spec", "containers", 0, "ports", k, "containerPort"),
                                 f"port 'metrics' is {p.get('containerPort')!r}, but rayStartParams "
                                 f"metrics-export-port is {metrics!r}", "cross"))
    svc = _dict(_dict(doc.get("spec")).get("serveService"))
    ports = _list(_dict(svc.get("spec")).get("ports"))
    if not svc:
        return
    targets = set()
    for k, p in enumerate(ports):
        p = _dict(p)
        target = p.get("targetPort", p.get("port"))
        if isinstance(target, str):
            target = names.get(target, target)
        targets.add(target)
        if target not in serve:
            out.append(Issue(("spec", "serveService", "spec", "ports", k, "targetPort" if "targetPort" in p else "port"),
                             f"targets {target!r}, which is neither the Serve HTTP port ({view.http_port}) nor the "
                             f"gRPC port ({view.grpc_port}) of serveConfigV2", "cross"))
    needed = [view.http_port] + ([view.grpc_port] if view.grpc_servicers else [])
    for port in needed:
        if port not in targets:
            out.append(Issue(("spec", "serveService", "spec", "ports"),
                             f"no port targets the Serve {serve[port]} port {port}", "cross"))


def _gpu_fit(i: int, cfg: Any, workers: list[_Group], base: JsonPath, out: list[Issue]) -> None:
    for key, m in cfg.models.items():
        if m.accelerator != "gpu":
            continue
        tp = int(m.engine_kwargs.get("tensor_parallel_size", 1))
        pp = int(m.engine_kwargs.get("pipeline_parallel_size", 1))
        need = tp * pp
        where = (*base, "applications", i, "args", "models", key)
        fits = [g for g in workers if g.gpus >= need]
        if not fits:
            largest = max(workers, key=lambda g: g.gpus, default=None)
            has = f"{largest.gpus} ({largest.name!r})" if largest else "none"
            out.append(Issue((*where, "engine_kwargs", "tensor_parallel_size"),
                             f"model {m.model_id!r} needs {need} GPUs in one pod (tensor_parallel_size {tp} × "
                             f"pipeline_parallel_size {pp}); the largest worker group has {has}", "cross"))
        elif m.accelerator_type and not any(f"accelerator_type:{m.accelerator_type}" in g.resources for g in fits):
            out.append(Issue((*where, "accelerator_type"),
                             f"no worker group with {need}+ GPUs advertises accelerator_type:{m.accelerator_type} in "
                             "rayStartParams.resources: the autoscaler cannot add a node for this model", "cross"))


def _placement(i: int, cfg: Any, head: _Group, workers: list[_Group], base: JsonPath, out: list[Issue]) -> None:
    offered = {r for g in workers for r in g.resources}
    args = (*base, "applications", i, "args")

    def need(resources: Mapping[str, float], cpus: float, gpus: float, where: JsonPath, what: str) -> None:
        custom = custom_resources(resources)
        for r in custom:
            if r not in offered:
                out.append(Issue((*where, r) if r in resources else where,
                                 f"{what} asks for Ray resource {r!r}, which no worker group advertises "
                                 "(rayStartParams.resources): it would never be scheduled", "cross"))
            elif r in head.resources:
                out.append(Issue((*where, r), f"{what} asks for {r!r}, which the head advertises too: the head "
                                 "must schedule nothing", "cross"))
        if not cpus and not gpus and not custom:
            out.append(Issue(where, f"{what} asks for no CPU, GPU or custom resource: it could be placed on the "
                             "head, which must schedule nothing", "cross"))

    for name, opts in cpu_deployments(cfg).items():
        where = (*args, "ingress") if name == "ingress" else (*args, "deployments", name)
        need(opts.resources, opts.num_cpus, opts.num_gpus, (*where, "resources") if opts.resources else where,
             f"deployment {name!r}")
    for key, m in cfg.models.items():
        for k, b in enumerate(m.placement_bundles or [{"CPU": 1}]):
            need(b, b.get("CPU", 0), b.get("GPU", 0), (*args, "models", key, "placement_bundles", k),
                 f"model {m.model_id!r} bundle {k}")


def _app_env(i: int, cfg: Any, workers: list[_Group], base: JsonPath, out: list[Issue]) -> None:
    wanted: list[tuple[str, str]] = []
    if cfg.auth.enabled and cfg.auth.api_keys_env:
        wanted.append(("auth.api_keys_env", cfg.auth.api_keys_env))
    if cfg.store.kind == "redis" and cfg.store.url_env:
        wanted.append(("store.url_env", cfg.store.url_env))
    ingress_needs = set(custom_resources(cfg.ingress.resources))
    for g in workers:
        if not ingress_needs <= set(g.resources) or g.container.get("envFrom"):
            continue  # the ingress cannot run here, or envFrom may set anything
        names = {_dict(e).get("name") for e in _list(g.container.get("env"))}
        for field, var in wanted:
            if var not in names:
                out.append(Issue((*g.path, "template", "spec", "containers", 0, "env"),
                                 f"{var} is not set, but args.{field} names it and the ingress can run on "
                                 f"group {g.name!r}", "cross"))


def _claimed_mounts(g: _Group) -> list[str]:
    """The mount paths of the group's container that hold a PersistentVolumeClaim."""
    vols = _list(_dict(_dict(g.spec.get("template")).get("spec")).get("volumes"))
    claims = {_dict(v).get("name") for v in vols if _dict(v).get("persistentVolumeClaim")}
    return [str(_dict(m).get("mountPath", "")) for m in _list(g.container.get("volumeMounts"))
            if _dict(m).get("name") in claims and _dict(m).get("mountPath")]


def _under_path(path: str, mount: str) -> bool:
    mount = mount.rstrip("/") or "/"
    return path == mount or path.startswith(mount + "/") or mount == "/"


def _world_volume(i: int, cfg: Any, workers: list[_Group], base: JsonPath, out: list[Issue]) -> None:
    """A persistent pack's world store (and its write ledger) must outlive the pod: ``domain.world_path`` on a
    claimed volume of every group the tools replica can run on."""
    from pipelines.domains import UnknownDomain, load_domain

    try:
        persistent = bool(load_domain(cfg.domain.name).persistent)
    except (UnknownDomain, ValueError):
        return  # the schema check names an unknown pack
    if not persistent:
        return
    needs = set(custom_resources(cfg.deployments.tools.resources or {}))
    if not needs:
        return  # it could land anywhere, the head included: the placement check reports that
    groups = [g for g in workers if needs <= set(g.resources)]
    path = cfg.domain.world_path
    where: JsonPath = (*base, "applications", i, "args", "domain", "world_path")
    for g in groups:
        mounts = _claimed_mounts(g)
        if not path:
            out.append(Issue(where, f"not set: the world store and write ledger of pack {cfg.domain.name!r} "
                             f"would live on the pod's own disk of group {g.name!r} (a restarted or rescheduled "
                             "tools replica starts from a fresh world); put it under a persistent volume "
                             f"mounted there ({', '.join(mounts) or 'none is mounted'})", "cross"))
            return
        if not any(_under_path(str(path), m) for m in mounts):
            out.append(Issue(where, f"{path} is on no persistent volume of group {g.name!r}, where the tools "
                             f"replica can run ({', '.join(mounts) or 'no claim is mounted'}): a restarted or "
                             "rescheduled replica would start from a fresh world", "cross"))


def cross_check(doc: Mapping[str, Any], view: ServeView | None) -> list[Issue]:
    """Every cross-check of one RayService (with its Serve view) or RayCluster (``view`` None).

    Worker bounds and GPU requests apply to any cluster; ports need a valid Serve
    config; the rest needs a valid Tandem application in it.
    """
    spec = _dict(doc.get("spec"))
    is_service = doc.get("kind") == "RayService"
    cpath: JsonPath = ("spec", "rayClusterConfig") if is_service else ("spec",)
    cluster = _dict(spec.get("rayClusterConfig")) if is_service else spec
    out: list[Issue] = []
    head, workers = _groups(cluster, cpath, out)
    _bounds(workers, out)
    if view is not None:
        base: JsonPath = ("spec", "serveConfigV2")
        _ports(doc, view, [head, *workers], out)
        if view.apps:  # Tandem's rule for its clusters, not for every RayService
            _head(head, out)
        for i, cfg in view.apps:
            _gpu_fit(i, cfg, workers, base, out)
            _placement(i, cfg, head, workers, base, out)
            _app_env(i, cfg, workers, base, out)
            _world_volume(i, cfg, workers, base, out)
    return out


def _flag(args: list[Any], name: str) -> str | None:
    """The value of ``--name value`` among a container's args (the last one given), else None."""
    words = [str(a) for a in args]
    value = None
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            value = words[i + 1]
        elif w.startswith(name + "="):
            value = w.split("=", 1)[1]
    return value


def redis_durability(doc: Mapping[str, Any]) -> list[Issue]:
    """A Redis that restarts must come back with what it had (see the module docstring)."""
    if doc.get("kind") not in ("StatefulSet", "Deployment"):
        return []
    spec = _dict(doc.get("spec"))
    pod = _dict(_dict(spec.get("template")).get("spec"))
    claims = {str(_dict(t.get("metadata")).get("name")) for t in _list(spec.get("volumeClaimTemplates"))}
    claims |= {str(v.get("name")) for v in _list(pod.get("volumes"))
               if isinstance(v, Mapping) and "persistentVolumeClaim" in v}
    out: list[Issue] = []
    for k, c in enumerate(_list(pod.get("containers"))):
        if not isinstance(c, Mapping) or not str(c.get("image") or "").split("/")[-1].startswith("redis"):
            continue
        where: JsonPath = ("spec", "template", "spec", "containers", k)
        args = [*_list(c.get("command")), *_list(c.get("args"))]
        if str(_flag(args, "--appendonly") or "no").lower() != "yes":
            out.append(Issue((*where, "args"), "Redis runs without AOF: a restart loses the sessions' turns, leases, "
                             "idempotency keys and vaults", "cross", suggestion="add --appendonly yes "
                             "(and --appendfsync everysec)"))
        data = _flag(args, "--dir") or "/data"
        mounts = [m for m in _list(c.get("volumeMounts")) if isinstance(m, Mapping)
                  and (data == str(m.get("mountPath")).rstrip("/") or data.startswith(str(m.get("mountPath")).rstrip("/") + "/"))]
        if not any(str(m.get("name")) in claims for m in mounts):
            out.append(Issue((*where, "volumeMounts"), f"Redis keeps its AOF in {data}, which is on no persistent "
                             "volume claim: a restarted pod comes back empty", "cross",
                             suggestion=f"mount a PersistentVolumeClaim (or a volumeClaimTemplate) at {data}"))
    return out
