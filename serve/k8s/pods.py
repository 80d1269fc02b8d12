"""The Ray pods of a KubeRay cluster: the head and the GPU and CPU worker groups.

The head schedules nothing (``num-cpus: "0"``); the GPU group's pods hold the
largest tensor-parallel group; the CPU group advertises the custom resource
that pins CPU deployments to it. ``rayStartParams.resources`` is written (and
read back by the cross-checks) in the quoted JSON form KubeRay passes to
``ray start``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from serve.k8s.plan import ClusterPlan, RenderOptions

__all__ = [
    "head_group",
    "gpu_group",
    "cpu_group",
    "redis_host",
    "ray_resources_param",
    "parse_ray_resources_param",
    "ENV_FLAGS",
    "GPU_PRODUCT_LABELS",
]

# Ray Serve / vLLM flags set on the head and every worker (KubeRay).
ENV_FLAGS: dict[str, str] = {
    "RAY_SERVE_ENABLE_HA_PROXY": "1",
    "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
    "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING": "1",
    "VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "1",
}

# Ray accelerator type → the NVIDIA GPU feature discovery node label value.
GPU_PRODUCT_LABELS: dict[str, str] = {
    "H100": "NVIDIA-H100-80GB-HBM3",
    "H200": "NVIDIA-H200",
    "A100": "NVIDIA-A100-SXM4-80GB",
    "L4": "NVIDIA-L4",
}


def ray_resources_param(resources: Mapping[str, int]) -> str:
    """The ``rayStartParams.resources`` string KubeRay and the autoscaler expect: '"{\\"a\\": 1}"'."""
    return '"' + json.dumps(dict(resources), sort_keys=True).replace('"', '\\"') + '"'


def parse_ray_resources_param(value: str) -> dict[str, float]:
    """The inverse of :func:`ray_resources_param`; also takes plain JSON. ValueError if malformed."""
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].replace('\\"', '"')
    parsed = json.loads(text)
    if not isinstance(parsed, dict) or not all(isinstance(v, int | float) for v in parsed.values()):
        raise ValueError("expected a JSON object of resource name -> number")
    return {str(k): float(v) for k, v in parsed.items()}
def redis_host(opts: RenderOptions) -> str:
    """The in-cluster DNS name of the Redis service."""
    return f"{opts.redis_name}.{opts.namespace}.svc.cluster.local"


def _env(opts: RenderOptions, plan: ClusterPlan, *, hf: bool, app: bool) -> list[dict[str, Any]]:
    """The flags everywhere; the HF token where models load; the app's secrets where the ingress runs."""
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in ENV_FLAGS.items()]
    if hf:
        env.append({"name": "HF_HOME", "value": opts.hf_home})
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
            "name": opts.hf_token_secret, "key": "token"}}})
    if app and "api_keys" in plan.env_names:
        env.append({"name": plan.env_names["api_keys"], "valueFrom": {"secretKeyRef": {
            "name": opts.app_secret, "key": "api-keys"}}})
    if app and "vault_key" in plan.env_names:
        env.append({"name": plan.env_names["vault_key"], "valueFrom": {"secretKeyRef": {
            "name": opts.app_secret, "key": "vault-key"}}})
    if app and "redis_url" in plan.env_names:
        env.append({"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": {
            "name": opts.redis_name, "key": "password"}}})
        env.append({"name": plan.env_names["redis_url"],
                    "value": f"redis://:$(REDIS_PASSWORD)@{redis_host(opts)}:6379/{opts.redis_session_db}"})
    return env


def _ports(plan: ClusterPlan, opts: RenderOptions, *, head: bool) -> list[dict[str, Any]]:
    ports = []
    if head:
        ports += [
            {"containerPort": 6379, "name": "gcs-server", "protocol": "TCP"},
            {"containerPort": 8265, "name": "dashboard", "protocol": "TCP"},
            {"containerPort": 10001, "name": "client", "protocol": "TCP"},
        ]
    ports += [
        {"containerPort": opts.metrics_port, "name": "metrics", "protocol": "TCP"},
        {"containerPort": plan.http_port, "name": "serve", "protocol": "TCP"},
        {"containerPort": plan.grpc_port, "name": "grpc", "protocol": "TCP"},
    ]
    return ports


def _shm(size: str) -> dict[str, Any]:
    return {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size}}


def _labels(opts: RenderOptions, component: str) -> dict[str, str]:
    # No profile label on pods: an overlay that swaps the profile would leave it stale.
    return {"app.kubernetes.io/name": opts.name, "app.kubernetes.io/component": component}


def head_group(opts: RenderOptions, plan: ClusterPlan) -> dict[str, Any]:
    """The head group: GCS, the Serve controller and a proxy; no Ray work."""
    res = {"cpu": opts.head_cpu, "memory": opts.head_memory}
    return {
        # The head schedules nothing: no CPUs or GPUs for Ray tasks, actors or replicas.
        "rayStartParams": {"num-cpus": "0", "num-gpus": "0", "dashboard-host": "0.0.0.0",
                           "metrics-export-port": str(opts.metrics_port)},
        "template": {
            "metadata": {"labels": _labels(opts, "ray-head")},
            "spec": {
                "containers": [{
                    "name": "ray-head",
                    "image": opts.image,
                    "imagePullPolicy": opts.image_pull_policy,
                    "env": _env(opts, plan, hf=False, app=False),
                    "ports": _ports(plan, opts, head=True),
                    "resources": {"requests": dict(res), "limits": dict(res)},
                }],
            },
        },
    }


def gpu_group(opts: RenderOptions, plan: ClusterPlan) -> dict[str, Any]:
    """The GPU worker group: one pod holds the largest tensor-parallel group."""
    gpus = str(plan.gpus_per_node)
    res = {"cpu": opts.gpu_cpu, "memory": opts.gpu_memory, "nvidia.com/gpu": gpus}
    selector = opts.gpu_node_selector
    if selector is None:
        selector = {}
        if plan.accelerator_type and plan.accelerator_type in GPU_PRODUCT_LABELS:
            selector = {"nvidia.com/gpu.product": GPU_PRODUCT_LABELS[plan.accelerator_type]}
    start: dict[str, str] = {"metrics-export-port": str(opts.metrics_port)}
    if plan.accelerator_type:
        # So the autoscaler knows a new node satisfies accelerator_type:<T> bundles.
        start["resources"] = ray_resources_param({f"accelerator_type:{plan.accelerator_type}": 1})
    spec: dict[str, Any] = {
        "restartPolicy": "Never",  # autoscaler v2: a failed worker is replaced, not restarted
        "containers": [{
            "name": "ray-worker",
            "image": opts.image,
            "imagePullPolicy": opts.image_pull_policy,
            "env": _env(opts, plan, hf=True, app=False),
            "ports": _ports(plan, opts, head=False),
            "resources": {"requests": dict(res), "limits": dict(res)},
            "volumeMounts": [
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "model-cache", "mountPath": opts.model_cache_mount},
            ],
        }],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": [
            _shm(opts.gpu_shm),
            {"name": "model-cache", "persistentVolumeClaim": {"claimName": opts.model_cache_claim}},
        ],
    }
    if selector:
        spec["nodeSelector"] = dict(selector)
    return {
        "groupName": opts.gpu_group,
        "replicas": plan.gpu_min_nodes,
        "minReplicas": plan.gpu_min_nodes,
        "maxReplicas": plan.gpu_max_nodes,
        "rayStartParams": start,
        "template": {"metadata": {"labels": _labels(opts, f"ray-worker-{opts.gpu_group}")}, "spec": spec},
    }


def cpu_group(opts: RenderOptions, plan: ClusterPlan) -> dict[str, Any]:
    """The CPU worker group: ingress, CPU deployments and CPU models; the app's secrets live here."""
    res = {"cpu": str(opts.cpu_cpu), "memory": opts.cpu_memory}
    start: dict[str, str] = {"metrics-export-port": str(opts.metrics_port)}
    if plan.cpu_custom_resources:
        # One unit per CPU: a replica asking for 1 takes a slot on this group only.
        start["resources"] = ray_resources_param({k: opts.cpu_cpu for k in plan.cpu_custom_resources})
    return {
        "groupName": opts.cpu_group,
        "replicas": plan.cpu_min_nodes,
        "minReplicas": plan.cpu_min_nodes,
        "maxReplicas": plan.cpu_max_nodes,
        "rayStartParams": start,
        "template": {
            "metadata": {"labels": _labels(opts, f"ray-worker-{opts.cpu_group}")},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "ray-worker",
                    "image": opts.cpu_worker_image or opts.image,
                    "imagePullPolicy": opts.image_pull_policy,
                    "env": _env(opts, plan, hf=True, app=True),
                    "ports": _ports(plan, opts, head=False),
                    "resources": {"requests": dict(res), "limits": dict(res)},
                    "volumeMounts": [
                        {"name": "dshm", "mountPath": "/dev/shm"},
                        {"name": "model-cache", "mountPath": opts.model_cache_mount},
                        # the world store and write ledger: they outlive the pod the tools replica ran in
                        {"name": "tandem-state", "mountPath": opts.state_mount},
                    ],
                }],
                "volumes": [
                    _shm(opts.cpu_shm),
                    {"name": "model-cache", "persistentVolumeClaim": {"claimName": opts.model_cache_claim}},
                    {"name": "tandem-state", "persistentVolumeClaim": {"claimName": opts.state_claim}},
                ],
            },
        },
    }


