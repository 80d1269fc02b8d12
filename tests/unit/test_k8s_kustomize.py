"""The kustomize layout: the rendered base, the h100 and cpu-dev overlays built and validated.

The overlays are built by :mod:`serve.k8s.kustomize` (the kustomize subset they
use) and the *built output* goes through every validator. Then the builder's own
rules, each against what kustomize does: strategic-merge (maps merge, null
deletes, ``$patch: delete``), JSON6902 with ``test`` guards, images, transformer
order, and the refusals (anything it would build differently).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.errors import ConfigError
from serve.k8s.cli import main
from serve.k8s.kustomize import build
from serve.k8s.render import render_rayservice, render_redis, render_serve_config_patch
from serve.k8s.validate import Source, validate_documents

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
CPU_DEV = ROOT / "configs" / "cpu-dev.yaml"
SHARED = Path(os.environ.get("TANDEM_SHARED_DATA") or ROOT.parent / "shared" / "data")
CRDS = SHARED / "kuberay-crds"


def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs}


def images(doc: Any) -> list[str]:
    if isinstance(doc, dict):
        found = [doc["image"]] if isinstance(doc.get("image"), str) else []
        return found + [i for v in doc.values() for i in images(v)]
    if isinstance(doc, list):
        return [i for v in doc for i in images(v)]
    return []


@pytest.fixture(scope="module")
def overlays() -> dict[str, list[dict[str, Any]]]:
    return {name: build(K8S / "overlays" / name).documents for name in ("h100", "cpu-dev")}


def test_the_base_builds_to_the_rendered_documents() -> None:
    built = build(K8S / "base")
    assert built.documents == render_rayservice(ROOT / "configs" / "h100.yaml") + render_redis()
    assert {p.name for p in built.files} == {"kustomization.yaml", "rayservice-h100.yaml", "redis.yaml"}


@pytest.mark.parametrize("overlay", ["h100", "cpu-dev"])
def test_the_built_overlay_is_strictly_valid(overlays: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    if not (CRDS / "ray.io_rayservices.yaml").is_file():
        pytest.skip(f"KubeRay CRDs not found at {CRDS}")
    docs = overlays[overlay]
    assert [d["kind"] for d in docs] == ["RayService", "Service", "StatefulSet"]
    assert validate_documents(Source(overlay, docs), CRDS) == []


def test_h100_overlay_sets_the_images_and_changes_nothing_else(overlays: dict[str, list[dict[str, Any]]]) -> None:
    base = build(K8S / "base").documents
    built = overlays["h100"]
    rs = by_kind(built)["RayService"]
    head, gpu, cpu = _pod_images(rs)
    assert head == gpu == "registry.example.com/tandem/tandem-serve:0.1.0-ray2.60.0-py311-cu128"
    assert cpu == "registry.example.com/tandem/tandem-serve-cpu:0.1.0-ray2.60.0-py311"
    assert by_kind(built)["StatefulSet"] == by_kind(base)["StatefulSet"]  # redis: not a ray-llm image

    def without_images(doc: Any) -> Any:
        if isinstance(doc, dict):
            return {k: without_images(v) for k, v in doc.items() if k != "image"}
        return [without_images(v) for v in doc] if isinstance(doc, list) else doc

    assert without_images(built) == without_images(base)


def _pod_images(rs: dict[str, Any]) -> list[str]:
    cluster = rs["spec"]["rayClusterConfig"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [g["template"]["spec"]["containers"][0]["image"] for g in groups]


def test_cpu_dev_overlay_is_the_embedded_profile_on_cpus_only(overlays: dict[str, list[dict[str, Any]]]) -> None:
    docs = by_kind(overlays["cpu-dev"])
    rs = docs["RayService"]
    assert yaml.safe_load(rs["spec"]["serveConfigV2"]) == yaml.safe_load(CPU_DEV.read_text())
    profile = yaml.safe_load(CPU_DEV.read_text())["applications"][0]["args"]
    assert {m["source"] for m in profile["models"].values()} == {"embedded"}
    assert rs["metadata"]["labels"]["tandem.dev/profile"] == profile["profile"] == "cpu-dev"
    cluster = rs["spec"]["rayClusterConfig"]
    assert [g["groupName"] for g in cluster["workerGroupSpecs"]] == ["cpu"]
    text = yaml.safe_dump(overlays["cpu-dev"])
    assert "nvidia.com/gpu" not in text and "accelerator_type" not in text
    assert set(_pod_images(rs)) == {"registry.example.com/tandem/tandem-serve-cpu:0.1.0-ray2.60.0-py311"}
    cpu = cluster["workerGroupSpecs"][0]
    assert "resources" not in cpu["rayStartParams"]  # the profile pins nothing to a custom resource
    vols = {v["name"]: v for v in cpu["template"]["spec"]["volumes"]}
    assert vols["model-cache"] == {"name": "model-cache", "emptyDir": {}}
    assert (cpu["minReplicas"], cpu["replicas"], cpu["maxReplicas"]) == (1, 1, 2)
    redis = docs["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]
    assert redis["resources"]["limits"] == {"cpu": "500m", "memory": "1Gi"}


def test_cpu_dev_runs_the_embedded_profile_s_app() -> None:
    from serve.config import load_serve_file

    dev = load_serve_file(CPU_DEV).applications[0].args
    embedded = load_serve_file(ROOT / "configs" / "embedded.yaml").applications[0].args
    for section in ("models", "roles", "pipeline"):
        assert getattr(dev, section) == getattr(embedded, section), section
    # the same pack and world, stored where it outlives a pod (the CPU workers' claimed volume)
    assert dev.domain.model_copy(update={"world_path": None}) == embedded.domain
    assert dev.domain.world_path and dev.domain.world_path.startswith("/var/lib/tandem/")
    # what a cluster needs instead: secrets from the environment, sessions shared by every pod
    assert dev.auth.enabled and dev.auth.api_keys_env and dev.store.kind == "redis" and dev.store.url_env
    assert load_serve_file(CPU_DEV).http_options.host == "0.0.0.0"


def test_cpu_dev_serve_config_patch_is_rendered_from_the_profile(capsys: pytest.CaptureFixture[str]) -> None:
    path = K8S / "overlays" / "cpu-dev" / "serve-config.yaml"
    rel = "k8s/overlays/cpu-dev/serve-config.yaml"
    assert path.read_text() == render_serve_config_patch(CPU_DEV, out_file=rel), (
        f"{rel} is stale: run `tandem k8s render configs/cpu-dev.yaml --serve-config-patch {rel}`")
    assert main(["render", str(CPU_DEV), "--serve-config-patch", str(path), "--check", "--no-validate"]) == 0


# --- the builder's rules ------------------------------------------------------------


def _cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": data}


def _tree(tmp_path: Path, kustomization: dict[str, Any], files: dict[str, Any]) -> Path:
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    for name, content in files.items():
        text = content if isinstance(content, str) else yaml.safe_dump_all(
            content if isinstance(content, list) and content and isinstance(content[0], dict)
            and "apiVersion" in content[0] else [content])
        (tmp_path / name).write_text(text)
    return tmp_path


def test_strategic_merge_maps_merge_null_deletes_and_delete_directive(tmp_path: Path) -> None:
    patch = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns",
                                                                   "labels": {"x": "1"}},
             "data": {"keep": "changed", "drop": None, "new": "n"}}
    delete = {"$patch": "delete", "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "ns"}}
    root = _tree(tmp_path, {"resources": ["cms.yaml"], "patches": [{"path": "p.yaml"}, {"path": "d.yaml"}]},
                 {"cms.yaml": [_cm("a", keep="k", drop="d"), _cm("b")], "p.yaml": patch, "d.yaml": delete})
    [cm] = build(root).documents
    assert cm["data"] == {"keep": "changed", "new": "n"}
    assert cm["metadata"] == {"name": "a", "namespace": "ns", "labels": {"x": "1"}}


def test_a_strategic_merge_patch_without_target_matches_by_id_only(tmp_path: Path) -> None:
    patch = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}  # no namespace
    root = _tree(tmp_path, {"resources": ["cms.yaml"], "patches": [{"path": "p.yaml"}]},
                 {"cms.yaml": [_cm("a")], "p.yaml": patch})
    with pytest.raises(ConfigError, match="matches no resource"):
        build(root)


def test_json6902_with_a_test_guard(tmp_path: Path) -> None:
    ops = [{"op": "test", "path": "/data/k", "value": "v"}, {"op": "replace", "path": "/data/k", "value": "w"},
           {"op": "add", "path": "/data/n", "value": "1"}]
    target = {"kind": "ConfigMap", "name": "a.*"}
    root = _tree(tmp_path, {"resources": ["cms.yaml"], "patches": [{"path": "ops.yaml", "target": target}]},
                 {"cms.yaml": [_cm("a1", k="v"), _cm("a2", k="v"), _cm("b", k="v")], "ops.yaml": ops})
    docs = build(root).documents
    assert [d["data"] for d in docs] == [{"k": "w", "n": "1"}, {"k": "w", "n": "1"}, {"k": "v"}]
    (tmp_path / "cms.yaml").write_text(yaml.safe_dump_all([_cm("a1", k="other")]))
    with pytest.raises(ConfigError, match=r"patches\[0\] \(ops.yaml\)"):
        build(root)  # the guard fails: nothing is patched blindly


def test_images_match_whole_names_and_run_after_patches(tmp_path: Path) -> None:
    def pod(*imgs: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(imgs)]}}

    ops = [{"op": "add", "path": "/spec/initContainers", "value": [{"name": "i", "image": "app:patched"}]}]
    root = _tree(tmp_path, {"resources": ["pod.yaml"],
                            "patches": [{"path": "ops.yaml", "target": {"kind": "Pod"}}],
                            "images": [{"name": "app", "newName": "reg:5000/app", "newTag": "2"},
                                       {"name": "localhost:5000/db", "digest": "sha256:abc"}]},
                 {"pod.yaml": pod("app", "app:1", "app@sha256:0f", "app-extra:1", "localhost:5000/db:7"),
                  "ops.yaml": ops})
    [doc] = build(root).documents
    assert images(doc) == ["reg:5000/app:2", "reg:5000/app:2", "reg:5000/app:2", "app-extra:1",
                           "localhost:5000/db@sha256:abc", "reg:5000/app:2"]


@pytest.mark.parametrize(("kustomization", "files", "message"), [
    ({"resources": ["cms.yaml"], "namePrefix": "dev-"}, {"cms.yaml": _cm("a")}, "namePrefix not supported"),
    ({"resources": ["../outside.yaml"]}, {}, "outside the kustomization's folder"),
    ({"resources": ["https://example.com/x.yaml"]}, {}, "remote resource"),
    ({"resources": ["cms.yaml", "again.yaml"]}, {"cms.yaml": _cm("a"), "again.yaml": _cm("a")}, "two resources"),
    ({"resources": ["cms.yaml"], "patches": [{"path": "p.yaml"}]},
     {"cms.yaml": _cm("a"), "p.yaml": {**_cm("a"), "data": {"l": ["x"]}}}, "use a JSON6902 patch for lists"),
    ({"resources": ["cms.yaml"], "patches": [{"path": "p.yaml"}]},
     {"cms.yaml": _cm("a"), "p.yaml": {**_cm("a"), "$patch": "replace"}}, "directive '\\$patch'"),
    ({"resources": ["cms.yaml"], "patches": [{"path": "ops.yaml"}]},
     {"cms.yaml": _cm("a"), "ops.yaml": [{"op": "remove", "path": "/data"}]}, "needs a target"),
    ({"resources": ["cms.yaml"], "patches": [{"path": "ops.yaml", "target": {"kind": "Secret"}}]},
     {"cms.yaml": _cm("a"), "ops.yaml": [{"op": "remove", "path": "/data"}]}, "matches no resource"),
    ({"resources": ["cms.yaml"], "patches": [{"path": "ops.yaml", "target": {"labelSelector": "a=b"}}]},
     {"cms.yaml": _cm("a"), "ops.yaml": [{"op": "remove", "path": "/data"}]}, "labelSelector not supported"),
])
def test_what_it_would_build_differently_is_refused(tmp_path: Path, kustomization: dict[str, Any],
                                                     files: dict[str, Any], message: str) -> None:
    root = tmp_path / "k"
    root.mkdir()
    (tmp_path / "outside.yaml").write_text(yaml.safe_dump(_cm("o")))
    _tree(root, kustomization, files)
    with pytest.raises(ConfigError, match=message):
        build(root)
