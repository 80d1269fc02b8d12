"""What a Serve profile asks of a KubeRay cluster: node shapes, group bounds, resources.

Everything is derived from the profile: the GPU count per node is the largest
tensor-parallel group, the GPU group's replica bounds come from the GPU models'
autoscaling bounds, the custom resource that pins CPU deployments to the CPU
worker group is the one the profile asks for, and the ports are the Serve file's.
:class:`RenderOptions` holds the cluster-side settings that are not in the profile.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from pipelines.errors import ConfigError

__all__ = [
    "RenderOptions",
    "ClusterPlan",
    "plan_cluster",
    "cpu_deployments",
    "custom_resources",
    "load_profile",
    "STANDARD_RESOURCES",
]

STANDARD_RESOURCES = frozenset({"CPU", "GPU", "memory", "object_store_memory"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RenderOptions(_Strict):
    """Cluster-side settings that are not part of the Serve profile."""

    name: str = "tandem"
    namespace: str = "tandem"
    ray_version: str = "2.60.0"
    image: str = Field("rayproject/ray-llm:2.60.0-py311-cu128", description="head + GPU workers")
    cpu_worker_image: str | None = Field(None, description="CPU workers; default: image")
    image_pull_policy: str = "IfNotPresent"
    # head
    head_cpu: str = "8"
    head_memory: str = "32Gi"
    # GPU worker group
    gpu_group: str = "h100"
    gpu_cpu: str = "96"
    gpu_memory: str = "768Gi"
    gpu_shm: str = "64Gi"
    gpu_node_selector: dict[str, str] | None = Field(None, description="default: the GPU product label")
    # CPU worker group
    cpu_group: str = "cpu"
    cpu_cpu: int = Field(32, ge=1)
    cpu_memory: str = "128Gi"
    cpu_shm: str = "16Gi"
    cpu_min_replicas: int | None = Field(None, ge=0)
    cpu_max_replicas: int | None = Field(None, ge=1)
    # storage, secrets, services
    model_cache_claim: str = "tandem-model-cache"
    model_cache_mount: str = "/models"
    state_claim: str = Field("tandem-state", description="ReadWriteMany claim of the world store and write "
                             "ledger (domain.world_path lies under state_mount), mounted on the CPU workers")
    state_mount: str = "/var/lib/tandem"
    hf_home: str = "/models/huggingface"
    hf_token_secret: str = "tandem-hf-token"
    app_secret: str = "tandem-secrets"
    redis_name: str = "tandem-redis"
    redis_image: str = "redis:7.2.5"
    redis_storage: str = "20Gi"
    redis_session_db: int = Field(1, ge=0, le=15)
    metrics_port: int = Field(8080, ge=1, le=65535)
    autoscaler_idle_timeout_s: int = Field(600, ge=0)
    cluster_deletion_delay_s: int = Field(60, ge=0)


class ClusterPlan(_Strict):
    """What the profile asks of the cluster."""

    profile: str
    http_port: int
    grpc_port: int
    gpus_per_node: int
    accelerator_type: str | None
    gpu_min_nodes: int
    gpu_max_nodes: int
    cpu_min_nodes: int
    cpu_max_nodes: int
    cpu_custom_resources: list[str]
    env_names: dict[str, str]  # what the app reads: auth keys, store URL


# --- the plan -------------------------------------------------------------------


def load_profile(serve_file_path: str | Path) -> tuple[Any, dict[str, Any]]:
    """The strictly validated :class:`~serve.config.ServeFile` and the raw mapping of a profile."""
    from serve.config import load_serve_file

    sf = load_serve_file(serve_file_path)  # strict: a bad key fails here with its path
    raw = yaml.safe_load(Path(serve_file_path).read_text())
    return sf, raw


def custom_resources(resources: Mapping[str, float]) -> list[str]:
    """The custom Ray resources among ``resources`` (not CPU/GPU/memory, not accelerator types)."""
    return [k for k in resources if k not in STANDARD_RESOURCES and not k.startswith("accelerator_type:")]


def _bounds(opts: Any) -> tuple[int, int]:
    if opts.autoscaling is not None:
        return opts.autoscaling.min_replicas, opts.autoscaling.max_replicas
    n = opts.num_replicas or 1
    return n, n


def cpu_deployments(app: Any) -> dict[str, Any]:
    """Name → :class:`~serve.config.DeploymentOptions` of every non-model deployment of the app."""
    out = {"ingress": app.ingress}
    extra = getattr(app, "deployments", None)  # pipeline parts (tools, guardrails...)
    if isinstance(extra, BaseModel):
        for name in type(extra).model_fields:
            opts = getattr(extra, name)
            if isinstance(opts, BaseModel) and hasattr(opts, "num_cpus"):
                out[name] = opts
    return out


def plan_cluster(sf: Any, opts: RenderOptions | None = None) -> ClusterPlan:
    """Derive node shapes and group bounds from a loaded :class:`~serve.config.ServeFile`."""
    opts = opts or RenderOptions()
    if len(sf.applications) != 1:
        raise ConfigError("the KubeRay renderer expects exactly one application")
    app = sf.applications[0].args
    gpu_models = [m for m in app.models.values() if m.accelerator == "gpu"]
    devices = {}
    for m in gpu_models:
        tp = int(m.engine_kwargs.get("tensor_parallel_size", 1))
        pp = int(m.engine_kwargs.get("pipeline_parallel_size", 1))
        devices[m.model_id] = tp * pp
    gpus_per_node = max(devices.values(), default=0)
    for mid, n in devices.items():
        if gpus_per_node % n:
            raise ConfigError(f"model {mid!r} needs {n} GPUs, which does not divide a {gpus_per_node}-GPU node")
    types = {m.accelerator_type for m in gpu_models if m.accelerator_type}
    if len(types) > 1:
        raise ConfigError(f"one GPU worker group serves one accelerator type, got {sorted(types)}")
    gpu_min = gpu_max = 0
    if gpus_per_node:
        lo = sum(_bounds(m.deployment)[0] * devices[m.model_id] for m in gpu_models)
        hi = sum(_bounds(m.deployment)[1] * devices[m.model_id] for m in gpu_models)
        gpu_min, gpu_max = math.ceil(lo / gpus_per_node), math.ceil(hi / gpus_per_node)
    # CPU demand: the ingress replicas and the CPU models' placement bundles.
    custom: list[str] = []
    cpu_lo = cpu_hi = 0.0
    for dep in cpu_deployments(app).values():
        lo_n, hi_n = _bounds(dep)
        cpu_lo += lo_n * dep.num_cpus
        cpu_hi += hi_n * dep.num_cpus
        custom += custom_resources(dep.resources)
    for m in app.models.values():
        if m.accelerator != "cpu":
            continue
        bundles = m.placement_bundles or [{"CPU": 1}]
        per = sum(b.get("CPU", 0) for b in bundles) + m.deployment.num_cpus
        lo_n, hi_n = _bounds(m.deployment)
        cpu_lo += lo_n * per
        cpu_hi += hi_n * per
        for b in bundles:
            custom += custom_resources(b)
        custom += custom_resources(m.deployment.resources)
    cpu_min = opts.cpu_min_replicas if opts.cpu_min_replicas is not None else max(1, math.ceil(cpu_lo / opts.cpu_cpu))
    cpu_max = opts.cpu_max_replicas if opts.cpu_max_replicas is not None else max(cpu_min, math.ceil(cpu_hi / opts.cpu_cpu))
    env_names = {}
    if app.auth.enabled and app.auth.api_keys_env:
        env_names["api_keys"] = app.auth.api_keys_env
    if app.store.kind == "redis" and app.store.url_env:
        env_names["redis_url"] = app.store.url_env
    if app.store.vault_key_env:
        env_names["vault_key"] = app.store.vault_key_env
    return ClusterPlan(
        profile=app.profile,
        http_port=sf.http_options.port,
        grpc_port=sf.grpc_options.port,
        gpus_per_node=gpus_per_node,
        accelerator_type=next(iter(types), None),
        gpu_min_nodes=gpu_min,
        gpu_max_nodes=gpu_max,
        cpu_min_nodes=cpu_min,
        cpu_max_nodes=cpu_max,
        cpu_custom_resources=sorted(set(custom)),
        env_names=env_names,
    )


