"""serve.k8s: the KubeRay manifests of the h100 profile (the kustomize base), checked offline by three strict validators.

1. the KubeRay v1.7.0 ``RayService`` CRD schema made strict (``shared/data/README.md``);
2. ``kubernetes-validate --strict`` for the core kinds (Service, StatefulSet, Secret,
   and the Ray pod templates as ``PodTemplate``);
3. Ray's ``ServeDeploySchema`` made strict for ``serveConfigV2``.

Each validator also gets a typo that it must catch. Then what no schema says: ports
agree, GPU counts match the largest tensor-parallel group, the head schedules
nothing, secrets are references, and the checked-in files equal the rendered ones.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.validate import validate_serve_config_v2
from pipelines.errors import ConfigError
from serve.config import load_serve_file, parse_app_config
from serve.k8s import (
    ENV_FLAGS,
    cpu_deployments,
    main,
    render_all,
    render_rayservice,
    render_redis,
    render_secrets,
    strict_crd_schema,
    validate_against_crd,
    validate_core,
)

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "configs" / "h100.yaml"
K8S = ROOT / "k8s"
BASE = K8S / "base"
SHARED = Path(os.environ.get("TANDEM_SHARED_DATA") or ROOT.parent / "shared" / "data")
CRD = SHARED / "kuberay-crds" / "ray.io_rayservices.yaml"


@pytest.fixture(scope="module")
def crd_schema() -> dict[str, Any]:
    if not CRD.is_file():
        pytest.skip(f"KubeRay CRD not found at {CRD}: set TANDEM_SHARED_DATA to the shared data folder")
    return strict_crd_schema(CRD)


@pytest.fixture(scope="module")
def rayservice() -> dict[str, Any]:
    [doc] = render_rayservice(PROFILE)
    return doc


@pytest.fixture(scope="module")
def profile() -> Any:
    return load_serve_file(PROFILE).applications[0].args


def _cluster(rs: dict[str, Any]) -> dict[str, Any]:
    return rs["spec"]["rayClusterConfig"]


def _groups(rs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["groupName"]: g for g in _cluster(rs)["workerGroupSpecs"]}


def _pod_specs(rs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {"head": _cluster(rs)["headGroupSpec"]["template"]["spec"]}
    out.update({name: g["template"]["spec"] for name, g in _groups(rs).items()})
    return out


def _container(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["containers"][0]  # KubeRay: the Ray container is the first one


# --- 1. the CRD, strict ---------------------------------------------------------


def test_rayservice_matches_the_strict_crd(rayservice: dict[str, Any], crd_schema: dict[str, Any]) -> None:
    assert validate_against_crd(rayservice, crd_schema) == []
    assert rayservice["apiVersion"] == "ray.io/v1" and rayservice["kind"] == "RayService"


def test_strict_crd_catches_what_the_plain_crd_misses(
    rayservice: dict[str, Any], crd_schema: dict[str, Any]
) -> None:
    import jsonschema

    bad = copy.deepcopy(rayservice)
    _cluster(bad)["enableInTreeAutoScaling"] = True  # typo: the API server would prune it silently
    _cluster(bad)["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["volumeMount"] = []
    _cluster(bad)["workerGroupSpecs"][1]["maxReplicas"] = 2**31  # over int32
    bad["metadata"]["lables"] = {"x": "y"}
    errors = "\n".join(validate_against_crd(bad, crd_schema))
    for needle in ("enableInTreeAutoScaling", "volumeMount", "2147483648", "lables"):
        assert needle in errors, needle
    raw_crd = yaml.safe_load(CRD.read_text())
    plain = next(v for v in raw_crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    plain_errors = [e.message for e in jsonschema.Draft7Validator(plain).iter_errors(bad)]
    assert not any("enableInTreeAutoScaling" in e or "volumeMount" in e for e in plain_errors)


def test_strict_crd_drops_required_entries_with_defaults(crd_schema: dict[str, Any]) -> None:
    # configMapKeyRef.name has a default: not required any more; key has none: still required.
    ref = crd_schema["properties"]["spec"]["properties"]["rayClusterConfig"]["properties"][
        "gcsFaultToleranceOptions"]["properties"]["redisPassword"]["properties"]["valueFrom"][
        "properties"]["secretKeyRef"]
    assert ref["required"] == ["key"] and ref["additionalProperties"] is False


# --- 2. core kinds, kubernetes-validate --strict ----------------------------------


def _core_docs(rs: dict[str, Any]) -> list[dict[str, Any]]:
    docs = render_redis() + render_secrets()
    svc = rs["spec"]["serveService"]
    docs.append({"apiVersion": "v1", "kind": "Service", **copy.deepcopy(svc)})
    for name, group in [("head", _cluster(rs)["headGroupSpec"]), *_groups(rs).items()]:
        docs.append({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"ray-{name}"},
                     "template": copy.deepcopy(group["template"])})
    return docs


def test_core_kinds_are_strictly_valid(rayservice: dict[str, Any]) -> None:
    docs = _core_docs(rayservice)
    assert {d["kind"] for d in docs} == {"Service", "StatefulSet", "Secret", "PodTemplate"}
    for doc in docs:
        assert validate_core(doc) == [], (doc["kind"], doc["metadata"]["name"])


def test_core_validator_catches_typos(rayservice: dict[str, Any]) -> None:
    sts = copy.deepcopy(render_redis()[1])
    sts["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    assert "imagePullPolcy" in " ".join(validate_core(sts))
    pod = _core_docs(rayservice)[-2]  # the GPU group's pod template
    pod["template"]["spec"]["tolerations"][0]["efect"] = "NoSchedule"
    assert "efect" in " ".join(validate_core(pod))


# --- 3. serveConfigV2, ServeDeploySchema strict ----------------------------------


def test_serve_config_v2_is_the_profile_and_strictly_valid(rayservice: dict[str, Any]) -> None:
    text = rayservice["spec"]["serveConfigV2"]
    assert isinstance(text, str)
    assert yaml.safe_load(text) == yaml.safe_load(PROFILE.read_text())
    schema = validate_serve_config_v2(text, app_args_validator=parse_app_config)
    assert schema.grpc_options.grpc_servicer_functions == [
        "serve.protos.assistant_pb2_grpc.add_AssistantServicer_to_server",
        "grpc_health.v1.health_pb2_grpc.add_HealthServicer_to_server",
    ]


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda c: c["http_options"].update(prot=8000), "http_options.prot"),
        (lambda c: c["applications"][0].update(route_prefx="/"), "applications[0].route_prefx"),
        (lambda c: c["applications"][0].update(deployments=[{"name": "x", "ray_actor_options": {"num_cpu": 1}}]),
         "ray_actor_options.num_cpu"),
        (lambda c: c["applications"][0]["args"]["ingress"].update(num_cpu=1), "args.ingress.num_cpu"),
    ],
)
def test_serve_config_v2_validator_catches_typos(rayservice: dict[str, Any], mutate: Any, needle: str) -> None:
    config = yaml.safe_load(rayservice["spec"]["serveConfigV2"])
    mutate(config)
    with pytest.raises(ConfigError, match=re.escape(needle)):
        validate_serve_config_v2(config, app_args_validator=parse_app_config)


# --- what no schema says ------------------------------------------------------------


def _ports(container: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def test_ports_agree(rayservice: dict[str, Any]) -> None:
    serve_cfg = yaml.safe_load(rayservice["spec"]["serveConfigV2"])
    http, grpc = serve_cfg["http_options"]["port"], serve_cfg["grpc_options"]["port"]
    svc = {p["name"]: p for p in rayservice["spec"]["serveService"]["spec"]["ports"]}
    assert (svc["http"]["port"], svc["http"]["targetPort"]) == (http, http)
    assert (svc["grpc"]["port"], svc["grpc"]["targetPort"]) == (grpc, grpc)
    assert svc["grpc"]["appProtocol"] == "kubernetes.io/h2c"
    groups = [_cluster(rayservice)["headGroupSpec"], *_groups(rayservice).values()]
    for spec, group in zip(_pod_specs(rayservice).values(), groups, strict=True):
        ports = _ports(_container(spec))
        # proxies run on every node (proxy_location EveryNode), so every pod exposes both
        assert ports["serve"] == http and ports["grpc"] == grpc
        assert ports["metrics"] == int(group["rayStartParams"]["metrics-export-port"])
    assert serve_cfg["proxy_location"] == "EveryNode"


def test_gpu_counts_match_the_largest_tensor_parallel_group(rayservice: dict[str, Any], profile: Any) -> None:
    tps = {m.model_id: m.engine_kwargs.get("tensor_parallel_size", 1)
           for m in profile.models.values() if m.accelerator == "gpu"}
    assert max(tps.values()) == 8
    gpu_group = _groups(rayservice)["h100"]
    res = _container(gpu_group["template"]["spec"])["resources"]
    assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"] == str(max(tps.values()))
    assert res["requests"] == res["limits"]
    assert all(8 % tp == 0 for tp in tps.values())
    # bounds: orchestrator 1..4 × 8 GPUs + generator 1..4 × 4 GPUs on 8-GPU nodes
    assert (gpu_group["minReplicas"], gpu_group["maxReplicas"]) == (2, 6)
    for name, spec in _pod_specs(rayservice).items():
        if name != "h100":
            assert "nvidia.com/gpu" not in _container(spec)["resources"].get("limits", {}), name


def test_gpu_group_shape(rayservice: dict[str, Any]) -> None:
    spec = _groups(rayservice)["h100"]["template"]["spec"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["dshm"]["emptyDir"]["medium"] == "Memory"
    mounts = {m["mountPath"]: m["name"] for m in _container(spec)["volumeMounts"]}
    assert mounts["/dev/shm"] == "dshm"
    assert "persistentVolumeClaim" in vols[mounts["/models"]]
    start = _groups(rayservice)["h100"]["rayStartParams"]
    assert json.loads(start["resources"][1:-1].replace("\\", "")) == {"accelerator_type:H100": 1}


def test_head_schedules_nothing(rayservice: dict[str, Any], profile: Any) -> None:
    head = _cluster(rayservice)["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0" and head["rayStartParams"]["num-gpus"] == "0"
    assert "resources" not in head["rayStartParams"]
    # So every deployment must ask for something only a worker has.
    cpu_start = _groups(rayservice)["cpu"]["rayStartParams"]
    cpu_custom = json.loads(cpu_start["resources"][1:-1].replace("\\", ""))
    assert set(cpu_custom) == {"cpu_worker"}
    deps = cpu_deployments(profile)
    assert {"ingress", "tools", "guardrails"} <= set(deps)
    for name, dep in deps.items():
        assert dep.resources and set(dep.resources) <= set(cpu_custom) and dep.num_cpus > 0, name
    for m in profile.models.values():
        bundles = m.placement_bundles or []
        assert bundles, m.model_id
        if m.accelerator == "gpu":
            assert all(b.get("GPU", 0) > 0 for b in bundles)
        else:
            assert all(set(b) & set(cpu_custom) for b in bundles)
    assert "cpu_worker" not in _groups(rayservice)["h100"]["rayStartParams"]["resources"]


def test_cluster_settings(rayservice: dict[str, Any]) -> None:
    cluster = _cluster(rayservice)
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["autoscalerOptions"]["version"] == "v2"
    image = _container(cluster["headGroupSpec"]["template"]["spec"])["image"]
    assert image.startswith("rayproject/ray-llm:") and cluster["rayVersion"] == "2.60.0"
    assert image.split(":")[1].startswith(cluster["rayVersion"] + "-")
    gcs = cluster["gcsFaultToleranceOptions"]
    redis_svc = render_redis()[0]
    host = f"{redis_svc['metadata']['name']}.{redis_svc['metadata']['namespace']}.svc.cluster.local"
    assert gcs["redisAddress"] == f"{host}:{redis_svc['spec']['ports'][0]['port']}"
    assert "secretKeyRef" in gcs["redisPassword"]["valueFrom"]
    assert rayservice["spec"]["upgradeStrategy"]["type"] == "NewCluster"


def test_env_flags_everywhere_and_no_probes(rayservice: dict[str, Any]) -> None:
    for name, spec in _pod_specs(rayservice).items():
        c = _container(spec)
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert {k: env.get(k) for k in ENV_FLAGS} == ENV_FLAGS, name
        assert not {"livenessProbe", "readinessProbe", "startupProbe"} & set(c), name


def _secret_refs(node: Any) -> list[tuple[str, str]]:
    if isinstance(node, dict):
        if "secretKeyRef" in node:
            return [(node["secretKeyRef"]["name"], node["secretKeyRef"]["key"])]
        return [r for v in node.values() for r in _secret_refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _secret_refs(v)]
    return []


def test_secrets_are_references_that_resolve(rayservice: dict[str, Any], profile: Any) -> None:
    provided = {(s["metadata"]["name"], k) for s in render_secrets() for k in s["stringData"]}
    refs = set(_secret_refs(rayservice)) | set(_secret_refs(render_redis()))
    assert refs and refs <= provided
    cpu_env = {e["name"]: e for e in _container(_pod_specs(rayservice)["cpu"])["env"]}
    for var in ("HF_TOKEN", profile.auth.api_keys_env):
        assert "valueFrom" in cpu_env[var] and "value" not in cpu_env[var], var
    url = cpu_env[profile.store.url_env]["value"]  # built from the password reference
    assert url.startswith("redis://:$(REDIS_PASSWORD)@")
    names = [e["name"] for e in _container(_pod_specs(rayservice)["cpu"])["env"]]
    assert names.index("REDIS_PASSWORD") < names.index(profile.store.url_env)  # $(VAR) needs order
    head_env = {e["name"] for e in _container(_pod_specs(rayservice)["head"])["env"]}
    assert not head_env & {"HF_TOKEN", profile.auth.api_keys_env, profile.store.url_env}


def test_renderer_rejects_unknown_profile_keys(tmp_path: Path) -> None:
    raw = yaml.safe_load(PROFILE.read_text())
    raw["applications"][0]["args"]["models"]["generator"]["placement_bundle"] = []
    p = tmp_path / "h100.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="placement_bundle: unknown key"):
        render_rayservice(p)


# --- checked-in == rendered ---------------------------------------------------------


def test_checked_in_manifests_equal_the_rendered_ones() -> None:
    files = render_all(PROFILE)
    assert set(files) == {"rayservice-h100.yaml", "redis.yaml", "secrets.template.yaml", "kustomization.yaml"}
    for name, text in files.items():
        assert (BASE / name).read_text() == text, (
            f"k8s/base/{name} is stale: run `tandem k8s render configs/h100.yaml --out-dir k8s/base`")
    assert list(yaml.safe_load_all(files["rayservice-h100.yaml"])) == render_rayservice(PROFILE)
    # the base applies the RayService and Redis; never the secret placeholders
    [kustomization] = yaml.safe_load_all(files["kustomization.yaml"])
    assert kustomization["resources"] == ["rayservice-h100.yaml", "redis.yaml"]


def test_cli_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(PROFILE), "--out-dir", str(BASE), "--check"]) == 0
    assert main(["render", str(PROFILE), "--out-dir", str(tmp_path), "--check"]) == 1
    assert main(["render", str(PROFILE), "--out-dir", str(tmp_path)]) == 0
    assert main(["render", str(PROFILE), "--out-dir", str(tmp_path), "--check"]) == 0
    (tmp_path / "redis.yaml").write_text("# edited by hand\n")
    assert main(["render", str(PROFILE), "--out-dir", str(tmp_path), "--check"]) == 1
    capsys.readouterr()
    assert main(["render", str(PROFILE)]) == 0
    out = capsys.readouterr().out
    assert "kind: RayService" in out


def test_usage_names_the_tandem_command(capsys: pytest.CaptureFixture[str]) -> None:
    from serve.cli import main as tandem_main

    for argv in (["k8s", "render", "--help"], ["k8s", "validate", "--help"], ["k8s", "--help"]):
        with pytest.raises(SystemExit) as exc:
            tandem_main(argv)
        assert exc.value.code == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: tandem k8s"), out
        assert "python -m" not in out


def test_grafana_dashboard() -> None:
    dash = json.loads((K8S / "grafana-dashboard.json").read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and dash["uid"]
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert exprs and all(re.search(r"\bray_(serve|vllm|tandem)_\w+", e) for e in exprs)
    from serve.metrics import METRIC_NAMES

    ours = {m.split("{")[0] for e in exprs for m in re.findall(r"ray_(tandem_\w+?)(?:_bucket)?\b", e)}
    assert ours and ours <= set(METRIC_NAMES)
