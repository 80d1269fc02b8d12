"""The cross-checks of tandem k8s validate, each with a case just inside and just outside its rule.

They run on the checked-in base RayService (valid) with one change each; the
profile's values (model keys, TP sizes, ports) are read from it, not assumed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from serve.k8s.crosscheck import cross_check
from serve.k8s.issues import json_path
from serve.k8s.serveconfig import serve_config_issues

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "k8s" / "base" / "rayservice-h100.yaml"


@pytest.fixture
def rs() -> dict[str, Any]:
    [doc] = [d for d in yaml.safe_load_all(BASE.read_text()) if d]
    return doc


def cross(rs: dict[str, Any]) -> list[str]:
    """The cross-check findings as 'path: message' (the Serve config must stay valid)."""
    issues, view = serve_config_issues(rs["spec"]["serveConfigV2"])
    assert issues == [] and view is not None
    return [f"{json_path(i.path)}: {i.message}" for i in cross_check(rs, view)]


def cluster(rs: dict[str, Any]) -> dict[str, Any]:
    return rs["spec"]["rayClusterConfig"]


def group(rs: dict[str, Any], name: str) -> dict[str, Any]:
    return next(g for g in cluster(rs)["workerGroupSpecs"] if g["groupName"] == name)


def container(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["template"]["spec"]["containers"][0]


def serve(rs: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> None:
    cfg = yaml.safe_load(rs["spec"]["serveConfigV2"])
    change(cfg["applications"][0]["args"])
    rs["spec"]["serveConfigV2"] = yaml.safe_dump(cfg, sort_keys=False)


def gpu_models(rs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    args = yaml.safe_load(rs["spec"]["serveConfigV2"])["applications"][0]["args"]
    return {k: m for k, m in args["models"].items() if m.get("accelerator") == "gpu"}


def test_the_base_passes(rs: dict[str, Any]) -> None:
    assert cross(rs) == []


def test_tensor_parallel_group_fits_one_pod(rs: dict[str, Any]) -> None:
    gpus = int(container(group(rs, "h100"))["resources"]["limits"]["nvidia.com/gpu"])
    key = next(iter(gpu_models(rs)))
    serve(rs, lambda a: a["models"][key]["engine_kwargs"].update(tensor_parallel_size=gpus))
    assert cross(rs) == []  # exactly the pod's GPUs: fits
    serve(rs, lambda a: a["models"][key]["engine_kwargs"].update(tensor_parallel_size=gpus // 2,
                                                                  pipeline_parallel_size=4))
    [line] = cross(rs)
    assert line.startswith(f"spec.serveConfigV2.applications[0].args.models.{key}.engine_kwargs."
                           "tensor_parallel_size: ")
    assert f"needs {gpus * 2} GPUs in one pod (tensor_parallel_size {gpus // 2} × pipeline_parallel_size 4)" in line
    assert f"the largest worker group has {gpus} ('h100')" in line


def test_an_accelerator_type_must_be_advertised(rs: dict[str, Any]) -> None:
    del group(rs, "h100")["rayStartParams"]["resources"]
    typed = [k for k, m in gpu_models(rs).items() if m.get("accelerator_type")]
    assert typed
    lines = cross(rs)
    assert [line.split(":")[0] for line in lines] == [
        f"spec.serveConfigV2.applications[0].args.models.{k}.accelerator_type" for k in typed]
    assert "cannot add a node" in lines[0]


def test_the_head_schedules_nothing(rs: dict[str, Any]) -> None:
    head = cluster(rs)["headGroupSpec"]
    head["rayStartParams"]["num-cpus"] = "1"
    assert cross(rs) == ["spec.rayClusterConfig.headGroupSpec.rayStartParams.num-cpus: the head must schedule "
                         "nothing: set num-cpus to \"0\" (got '1')"]
    del head["rayStartParams"]["num-cpus"]
    assert len(cross(rs)) == 1
    head["rayStartParams"]["num-cpus"] = "0"
    del head["rayStartParams"]["num-gpus"]
    assert cross(rs) == []  # no GPUs on the head: num-gpus may be left out
    container(head)["resources"]["limits"]["nvidia.com/gpu"] = "1"
    assert cross(rs) == ["spec.rayClusterConfig.headGroupSpec.rayStartParams.num-gpus: the head has GPUs but "
                         "must schedule nothing: set num-gpus to \"0\""]


def test_custom_resources_are_offered_by_a_worker_and_not_the_head(rs: dict[str, Any]) -> None:
    cpu_start = group(rs, "cpu")["rayStartParams"]
    offered = cpu_start.pop("resources")
    lines = cross(rs)
    assert lines and all("which no worker group advertises" in line for line in lines)
    assert any(line.startswith("spec.serveConfigV2.applications[0].args.ingress.resources.") for line in lines)
    cpu_start["resources"] = offered
    cluster(rs)["headGroupSpec"]["rayStartParams"]["resources"] = offered
    lines = cross(rs)
    assert lines and all("which the head advertises too" in line for line in lines)


def test_a_deployment_that_asks_for_nothing_could_land_on_the_head(rs: dict[str, Any]) -> None:
    serve(rs, lambda a: a["deployments"]["tools"].update(num_cpus=0.01))
    assert cross(rs) == []  # a hundredth of a CPU is still something the head does not have
    serve(rs, lambda a: a["deployments"]["tools"].update(num_cpus=0, resources={}))
    assert cross(rs) == ["spec.serveConfigV2.applications[0].args.deployments.tools: deployment 'tools' asks for "
                         "no CPU, GPU or custom resource: it could be placed on the head, which must schedule "
                         "nothing"]


def test_worker_bounds_and_gpu_counts(rs: dict[str, Any]) -> None:
    g = group(rs, "h100")
    g["replicas"] = g["maxReplicas"]
    assert cross(rs) == []  # at the bound: fine
    g["replicas"] = g["maxReplicas"] + 1
    assert cross(rs) == [f"spec.rayClusterConfig.workerGroupSpecs[0].replicas: replicas {g['replicas']} is "
                         f"outside [{g['minReplicas']}, {g['maxReplicas']}]"]
    g["replicas"], g["minReplicas"] = g["maxReplicas"], g["maxReplicas"] + 1
    assert cross(rs)[0].startswith("spec.rayClusterConfig.workerGroupSpecs[0].minReplicas: minReplicas")
    g["minReplicas"] = 1
    gpus = int(container(g)["resources"]["limits"]["nvidia.com/gpu"])
    g["rayStartParams"]["num-gpus"] = str(gpus)
    assert cross(rs) == []
    g["rayStartParams"]["num-gpus"] = str(gpus + 1)
    assert cross(rs) == [f"spec.rayClusterConfig.workerGroupSpecs[0].rayStartParams.num-gpus: num-gpus "
                         f"'{gpus + 1}' is more than the pod's {gpus} GPUs"]
    g["rayStartParams"]["num-gpus"] = str(gpus)
    container(g)["resources"]["requests"]["nvidia.com/gpu"] = str(gpus - 1)
    [line] = cross(rs)
    assert "requests['nvidia.com/gpu']: GPU request" in line and "requires them equal" in line


def test_ports_agree_with_the_serve_config(rs: dict[str, Any]) -> None:
    cfg = yaml.safe_load(rs["spec"]["serveConfigV2"])
    http, grpc = cfg["http_options"]["port"], cfg["grpc_options"]["port"]
    ports = rs["spec"]["serveService"]["spec"]["ports"]
    ports[1]["targetPort"] = "grpc"  # a named port resolves to the Serve config's
    assert cross(rs) == []
    ports[1]["targetPort"] = grpc + 1
    assert cross(rs) == [
        f"spec.serveService.spec.ports[1].targetPort: targets {grpc + 1}, which is neither the Serve HTTP port "
        f"({http}) nor the gRPC port ({grpc}) of serveConfigV2",
        f"spec.serveService.spec.ports: no port targets the Serve gRPC port {grpc}"]
    ports[1]["targetPort"] = grpc
    head = container(cluster(rs)["headGroupSpec"])
    serve_port = next(p for p in head["ports"] if p["name"] == "serve")
    serve_port["containerPort"] = http + 1
    [line] = cross(rs)
    assert line.startswith("spec.rayClusterConfig.headGroupSpec.template.spec.containers[0].ports[")
    assert f"port 'serve' is {http + 1}, but serveConfigV2 serves on {http}" in line
    serve_port["containerPort"] = http
    cluster(rs)["headGroupSpec"]["rayStartParams"]["metrics-export-port"] = "9999"
    [line] = cross(rs)
    assert "port 'metrics' is 8080, but rayStartParams metrics-export-port is '9999'" in line


def test_the_app_environment_is_set_where_the_ingress_runs(rs: dict[str, Any]) -> None:
    args = yaml.safe_load(rs["spec"]["serveConfigV2"])["applications"][0]["args"]
    var = args["auth"]["api_keys_env"]
    env = container(group(rs, "cpu"))["env"]
    env[:] = [e for e in env if e["name"] != var]
    [line] = cross(rs)
    assert line == (f"spec.rayClusterConfig.workerGroupSpecs[1].template.spec.containers[0].env: {var} is not "
                    f"set, but args.auth.api_keys_env names it and the ingress can run on group 'cpu'")
    container(group(rs, "cpu"))["envFrom"] = [{"secretRef": {"name": "tandem-secrets"}}]
    assert cross(rs) == []  # envFrom may set it: not knowable here
    del container(group(rs, "cpu"))["envFrom"]
    serve(rs, lambda a: a["auth"].update(enabled=False))
    assert cross(rs) == []  # auth off: the app reads no keys


def test_the_world_store_lies_on_a_claimed_volume_where_the_tools_run(rs: dict[str, Any]) -> None:
    where = "spec.serveConfigV2.applications[0].args.domain.world_path"
    spec = group(rs, "cpu")["template"]["spec"]
    assert {"name": "tandem-state", "mountPath": "/var/lib/tandem"} in container(group(rs, "cpu"))["volumeMounts"]
    serve(rs, lambda a: a["domain"].pop("world_path"))
    [line] = cross(rs)
    assert line.startswith(f"{where}: not set: the world store and write ledger of pack 'support' would live on "
                           "the pod's own disk of group 'cpu'") and line.endswith("(/models, /var/lib/tandem)")
    serve(rs, lambda a: a["domain"].update(world_path="/tmp/world.db"))
    [line] = cross(rs)
    assert line.startswith(f"{where}: /tmp/world.db is on no persistent volume of group 'cpu'")
    serve(rs, lambda a: a["domain"].update(world_path="/var/lib/tandemx/world.db"))
    assert len(cross(rs)) == 1  # a sibling folder is not under the mount
    serve(rs, lambda a: a["domain"].update(world_path="/var/lib/tandem/sub/world.db"))
    assert cross(rs) == []
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "tandem-state"]
    [line] = cross(rs)  # mounted, but no claim behind it: the pod's own disk again
    assert "is on no persistent volume of group 'cpu'" in line
    serve(rs, lambda a: a["domain"].update(name="coach"))
    assert cross(rs) == []  # a pack whose world is generated, not stored, needs no volume


REDIS = ROOT / "k8s" / "base" / "redis.yaml"


@pytest.fixture
def redis() -> dict[str, Any]:
    [doc] = [d for d in yaml.safe_load_all(REDIS.read_text()) if d and d["kind"] == "StatefulSet"]
    return doc


def durability(doc: dict[str, Any]) -> list[str]:
    from serve.k8s.crosscheck import redis_durability

    return [f"{json_path(i.path)}: {i.message.split(':')[0]}" for i in redis_durability(doc)]


def test_the_base_redis_survives_its_restart(redis: dict[str, Any]) -> None:
    assert durability(redis) == []


def test_redis_without_aof_or_without_a_claimed_data_folder_is_refused(redis: dict[str, Any]) -> None:
    c = container(redis["spec"])
    args = c["args"]
    c["args"] = [a for a in args if a not in ("--appendonly", "yes")]
    assert durability(redis) == ["spec.template.spec.containers[0].args: Redis runs without AOF"]
    c["args"] = ["--appendonly=no", *args]  # the last one given wins: still on
    assert durability(redis) == []
    c["args"] = [*args, "--appendonly", "no"]
    assert durability(redis) == ["spec.template.spec.containers[0].args: Redis runs without AOF"]
    c["args"] = args
    c["args"] = [*args, "--dir", "/var/redis"]  # the AOF moved off the claimed /data
    assert durability(redis) == ["spec.template.spec.containers[0].volumeMounts: Redis keeps its AOF in /var/redis, "
                                 "which is on no persistent volume claim"]
    c["args"] = [*args, "--dir", "/data/aof"]  # under the claimed mount: fine
    assert durability(redis) == []
    c["args"] = args
    redis["spec"].pop("volumeClaimTemplates")  # /data mounted, but from no claim
    redis["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    assert durability(redis) == ["spec.template.spec.containers[0].volumeMounts: Redis keeps its AOF in /data, "
                                 "which is on no persistent volume claim"]
    redis["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "r"}}]
    assert durability(redis) == []
    redis["kind"] = "Service"
    assert durability(redis) == []  # only workloads run Redis


def test_validate_reports_a_redis_without_aof(tmp_path: Path) -> None:
    from serve.k8s.validate import validate_paths

    docs = [d for d in yaml.safe_load_all(REDIS.read_text()) if d]
    ss = next(d for d in docs if d["kind"] == "StatefulSet")
    ss["spec"]["template"]["spec"]["containers"][0]["args"] = []
    f = tmp_path / "redis.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    report = validate_paths([str(f)])
    assert [i.message.split(":")[0] for i in report.errors] == ["Redis runs without AOF"]
