"""KubeRay manifests: rendered from a Serve profile, validated strictly, built from overlays.

Modules, by responsibility:

* :mod:`~serve.k8s.plan` — what a profile asks of the cluster (node shapes, bounds);
* :mod:`~serve.k8s.pods` — the Ray head and worker groups;
* :mod:`~serve.k8s.render` — the ``RayService``, Redis, Secret templates, the
  kustomize base, and the ``serveConfigV2`` patch an overlay takes from a profile;
* :mod:`~serve.k8s.schemas` — the KubeRay CRDs made strict, ``kubernetes-validate --strict``;
* :mod:`~serve.k8s.serveconfig` — ``serveConfigV2`` as Ray and Tandem read it;
* :mod:`~serve.k8s.crosscheck` — what no schema says (ports, GPUs, the head);
* :mod:`~serve.k8s.kustomize` — ``kustomize build`` for the fields the overlays use;
* :mod:`~serve.k8s.validate` — ``tandem k8s validate`` over files, folders and stdin;
* :mod:`~serve.k8s.cli` — the ``tandem k8s`` command.
"""

from serve.k8s.cli import main
from serve.k8s.plan import ClusterPlan, RenderOptions, cpu_deployments, plan_cluster
from serve.k8s.pods import ENV_FLAGS, GPU_PRODUCT_LABELS
from serve.k8s.render import (
    render_all,
    render_rayservice,
    render_redis,
    render_secrets,
    render_serve_config_patch,
    render_yaml,
)
from serve.k8s.schemas import strict_crd_schema, validate_against_crd, validate_core
from serve.k8s.validate import validate_paths

__all__ = [
    "RenderOptions",
    "ClusterPlan",
    "plan_cluster",
    "cpu_deployments",
    "render_rayservice",
    "render_redis",
    "render_secrets",
    "render_all",
    "render_serve_config_patch",
    "render_yaml",
    "strict_crd_schema",
    "validate_against_crd",
    "validate_core",
    "validate_paths",
    "main",
    "ENV_FLAGS",
    "GPU_PRODUCT_LABELS",
]
