"""tandem k8s validate: any manifest, every document, each problem with its place and a suggestion.

A typo planted at each depth of a RayService — its spec, the cluster config, a
worker group, a worker pod, a Ray deployment option and a Tandem deployment
option inside serveConfigV2, a Tandem app arg, a Ray enum value — is reported
exactly once, with the source, the document, the JSON path and the closest
allowed key. Then the inputs (files, folders, stdin, multi-document files) and
the exit codes.
"""

from __future__ import annotations

import copy
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from serve.k8s.cli import main
from serve.k8s.issues import did_you_mean, json_path
from serve.k8s.validate import Source, validate_documents

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
SHARED = Path(os.environ.get("TANDEM_SHARED_DATA") or ROOT.parent / "shared" / "data")
CRDS = SHARED / "kuberay-crds"


@pytest.fixture(scope="module", autouse=True)
def _crds() -> None:
    if not (CRDS / "ray.io_rayservices.yaml").is_file():
        pytest.skip(f"KubeRay CRDs not found at {CRDS}: set TANDEM_SHARED_DATA to the shared data folder")


@pytest.fixture(scope="module")
def base_text() -> str:
    return (K8S / "base" / "rayservice-h100.yaml").read_text()


@pytest.fixture
def rs(base_text: str) -> dict[str, Any]:
    [doc] = [d for d in yaml.safe_load_all(base_text) if d]
    return doc


def errors(doc: Any, label: str = "m.yaml") -> list[str]:
    issues = validate_documents(Source(label, [doc]), CRDS)
    return [i.format() for i in issues if i.severity == "error"]


def serve_config(rs: dict[str, Any]) -> dict[str, Any]:
    return yaml.safe_load(rs["spec"]["serveConfigV2"])


def edit_serve(rs: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> None:
    cfg = serve_config(rs)
    change(cfg)
    rs["spec"]["serveConfigV2"] = yaml.safe_dump(cfg, sort_keys=False)


def args(cfg: dict[str, Any]) -> dict[str, Any]:
    return cfg["applications"][0]["args"]


def test_the_checked_in_base_is_valid(rs: dict[str, Any]) -> None:
    assert errors(rs) == []


def _cluster(rs: dict[str, Any]) -> dict[str, Any]:
    return rs["spec"]["rayClusterConfig"]


def _guardrails_entry(cfg: dict[str, Any]) -> None:
    table = yaml.safe_load((ROOT / "configs" / "guardrails.yaml").read_text())
    cfg["applications"][0]["deployments"] = [
        {"name": "GuardrailsServer", "user_config": {"table": table}, "max_ongoing_request": 8}]


TYPOS = [
    ("rayservice spec", lambda rs: rs["spec"].update(upgradeStrategie={"type": "NewCluster"}),
     "spec.upgradeStrategie", "upgradeStrategie", "upgradeStrategy", "crd"),
    ("rayClusterConfig", lambda rs: _cluster(rs).update(enableInTreeAutoScaling=True),
     "spec.rayClusterConfig.enableInTreeAutoScaling", "enableInTreeAutoScaling", "enableInTreeAutoscaling", "crd"),
    ("worker group", lambda rs: _cluster(rs)["workerGroupSpecs"][1].update(maxReplica=4),
     "spec.rayClusterConfig.workerGroupSpecs[1].maxReplica", "maxReplica", "maxReplicas", "crd"),
    ("worker pod", lambda rs: _cluster(rs)["workerGroupSpecs"][0]["template"]["spec"]["containers"][0].update(
        volumeMount=[]),
     "spec.rayClusterConfig.workerGroupSpecs[0].template.spec.containers[0].volumeMount", "volumeMount",
     "volumeMounts", "crd"),
    ("serveConfigV2 deployment option", lambda rs: edit_serve(rs, _guardrails_entry),
     "spec.serveConfigV2.applications[0].deployments[0].max_ongoing_request", "max_ongoing_request",
     "max_ongoing_requests", "serve"),
    ("Tandem deployment option", lambda rs: edit_serve(
        rs, lambda c: args(c)["deployments"]["guardrails"].update(num_cpu=1)),
     "spec.serveConfigV2.applications[0].args.deployments.guardrails.num_cpu", "num_cpu", "num_cpus", "tandem"),
    ("Tandem app arg", lambda rs: edit_serve(rs, lambda c: args(c)["pipeline"].update(max_step=3)),
     "spec.serveConfigV2.applications[0].args.pipeline.max_step", "max_step", "max_steps", "tandem"),
    ("Tandem model arg", lambda rs: edit_serve(
        rs, lambda c: next(iter(args(c)["models"].values())).update(placement_bundle=[])),
     "placement_bundle", "placement_bundle", "placement_bundles", "tandem"),
]


@pytest.mark.parametrize(("mutate", "path", "key", "suggestion", "check"),
                         [t[1:] for t in TYPOS], ids=[t[0] for t in TYPOS])
def test_a_planted_typo_is_reported_once_with_its_path_and_suggestion(
        rs: dict[str, Any], mutate: Any, path: str, key: str, suggestion: str, check: str) -> None:
    mutate(rs)
    [line] = errors(rs)
    assert line.startswith("m.yaml: document 1 (RayService tandem): spec."), line
    assert f"{path}: unknown field {key!r} (did you mean {suggestion!r}?) [{check}]" in line, line


def test_a_value_typo_names_the_value_and_the_closest_allowed_one(rs: dict[str, Any]) -> None:
    edit_serve(rs, lambda c: c.update(proxy_location="EveryNod"))
    [line] = errors(rs)
    assert "spec.serveConfigV2.proxy_location: " in line
    assert "'EveryNod'" in line and "(did you mean 'EveryNode'?)" in line


def test_a_pipeline_kind_typo_names_the_kind_key(rs: dict[str, Any]) -> None:
    kind = args(serve_config(rs))["pipeline"]["kind"]
    edit_serve(rs, lambda c: args(c)["pipeline"].update(kind=kind[:-1]))
    [line] = errors(rs)
    assert "spec.serveConfigV2.applications[0].args.pipeline.kind: " in line
    assert f"{kind[:-1]!r}" in line and f"(did you mean {kind!r}?) [tandem]" in line


def test_several_problems_in_one_document_are_all_reported(rs: dict[str, Any]) -> None:
    _cluster(rs)["enableInTreeAutoScaling"] = True
    _cluster(rs)["workerGroupSpecs"][1]["maxReplicas"] = 2**31  # over int32
    edit_serve(rs, lambda c: args(c)["pipeline"].update(max_step=3))
    out = "\n".join(errors(rs))
    assert len(out.splitlines()) == 3
    assert "workerGroupSpecs[1].maxReplicas: 2147483648 is greater than the maximum of 2147483647" in out


def test_a_far_off_key_gets_no_suggestion(rs: dict[str, Any]) -> None:
    _cluster(rs)["colour"] = "blue"
    [line] = errors(rs)
    assert "spec.rayClusterConfig.colour: unknown field 'colour' [crd]" in line
    assert "did you mean" not in line


def test_serve_config_that_is_not_yaml(rs: dict[str, Any]) -> None:
    rs["spec"]["serveConfigV2"] = "applications: [\n  - name: x\n"
    [line] = errors(rs)
    assert "spec.serveConfigV2: not valid YAML" in line and "[serve]" in line


def test_did_you_mean_and_paths() -> None:
    allowed = ["maxReplicas", "minReplicas", "replicas", "groupName"]
    assert did_you_mean("maxreplicas", allowed) == "maxReplicas"  # case only
    assert did_you_mean("maxReplica", allowed) == "maxReplicas"
    assert did_you_mean("colour", allowed) is None
    assert did_you_mean("num_cpu", ["num_gpus", "num_cpus"]) == "num_cpus"  # the closest of two near ones
    assert json_path(["spec", "groups", 0, "app.kubernetes.io/name", "num-cpus"]) == (
        "spec.groups[0]['app.kubernetes.io/name'].num-cpus")


# --- inputs and exit codes -----------------------------------------------------------


def test_the_k8s_folder_validates_base_overlays_and_loose_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(K8S)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, out  # one summary line, nothing else
    assert out[0].startswith("ok: ") and "3 kustomize builds; 0 errors, 0 warnings" in out[0]


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], base_text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(base_text))
    assert main(["validate", "-"]) == 0
    assert capsys.readouterr().out.startswith("ok: 1 document in 1 source;")
    bad = base_text.replace("enableInTreeAutoscaling:", "enableInTreeAutoScaling:")
    assert bad != base_text
    monkeypatch.setattr("sys.stdin", io.StringIO(bad))
    assert main(["validate", "-"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("<stdin>: document 1 (RayService tandem): spec.rayClusterConfig.enableInTreeAutoScaling: "
                      "unknown field 'enableInTreeAutoScaling' (did you mean 'enableInTreeAutoscaling'?) [crd]")
    assert out[-1].startswith("invalid: 1 document in 1 source; 1 error, 0 warnings")


def test_a_multi_document_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    redis = [d for d in yaml.safe_load_all((K8S / "base" / "redis.yaml").read_text()) if d]
    sts = copy.deepcopy(redis[1])
    sts["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": {"name": "tandem"}}
    f = tmp_path / "all.yaml"
    f.write_text(yaml.safe_dump_all([redis[0], sts, monitor]) + "---\n---\njust a string\n")
    assert main(["validate", str(f)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{f}: document 2 (StatefulSet tandem-redis): spec.template.spec.containers[0].imagePullPolcy: "
        "unknown field 'imagePullPolcy' (did you mean 'imagePullPolicy'?) [core]",
        f"warning: {f}: document 3 (PodMonitor tandem): no schema for monitoring.coreos.com/v1 PodMonitor: "
        "not checked [core]",
        f"{f}: document 5: not a Kubernetes object (no apiVersion and kind) [input]",
        "invalid: 4 documents in 1 source; 2 errors, 1 warning",
    ]


def test_folders_are_walked_and_bad_inputs_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "broken.yaml").write_text("kind: Service\nmetadata: {name: [unclosed\n")
    (tmp_path / "notes.txt").write_text("not yaml, not read\n")
    redis = (K8S / "base" / "redis.yaml").read_text()
    (tmp_path / "redis.yml").write_text(redis)
    assert main(["validate", str(tmp_path), str(tmp_path / "missing.yaml")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{tmp_path / 'missing.yaml'}: no such file or folder [input]")
    assert out[1].startswith(f"{tmp_path / 'sub' / 'broken.yaml'}: not valid YAML at line ") and "[yaml]" in out[1]
    assert out[2] == "invalid: 2 documents in 3 sources; 2 errors, 0 warnings"


def test_a_kustomization_that_cannot_be_built_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [redis.yaml]\nnamePrefix: dev-\n")
    (tmp_path / "redis.yaml").write_text((K8S / "base" / "redis.yaml").read_text())
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{tmp_path} (kustomize build): ") and "namePrefix not supported" in out[0]
    assert out[0].endswith("[kustomize]")
    # a build that fails reads nothing: its folder's files are still validated on their own
    assert out[1] == "invalid: 2 documents in 2 sources, 1 kustomize build; 1 error, 0 warnings"


def test_exit_code_2_when_the_crds_are_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--crd-dir", str(tmp_path), str(K8S / "base" / "rayservice-h100.yaml")]) == 2
    assert "KubeRay CRD" in capsys.readouterr().err
    # core kinds need no CRD
    assert main(["validate", "--crd-dir", str(tmp_path), str(K8S / "base" / "redis.yaml")]) == 0


def test_quiet_prints_errors_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}))
    assert main(["validate", "-q", str(f)]) == 0
    assert capsys.readouterr().out == ""


def test_a_raycluster_is_checked_against_its_own_crd(rs: dict[str, Any]) -> None:
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "plain", "namespace": "tandem"}, "spec": copy.deepcopy(_cluster(rs))}
    assert errors(cluster) == []
    cluster["spec"]["workerGroupSpecs"][0]["minReplicas"] = cluster["spec"]["workerGroupSpecs"][0]["maxReplicas"] + 1
    cluster["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = "4"  # no Tandem app here: allowed
    cluster["spec"]["enableInTreeAutoScaling"] = True
    out = errors(cluster)
    assert [line.split(": ")[2] for line in out] == [
        "spec.enableInTreeAutoScaling", "spec.workerGroupSpecs[0].minReplicas"], out
    assert out[0].startswith("m.yaml: document 1 (RayCluster plain): ")
    cluster["apiVersion"] = "ray.io/v2"
    [line] = errors(cluster)
    assert "apiVersion: 'ray.io/v2' is not served by the CRD (served: v1, v1alpha1)" in line


def test_the_head_rule_is_tandem_s_own(rs: dict[str, Any]) -> None:
    _cluster(rs)["headGroupSpec"]["rayStartParams"]["num-cpus"] = "4"
    [line] = errors(rs)
    assert "headGroupSpec.rayStartParams.num-cpus: the head must schedule nothing" in line
    edit_serve(rs, lambda c: c["applications"][0].update(import_path="other.app:build", args={}))
    assert errors(rs) == []  # not a Tandem app: its cluster may schedule work on the head
