"""``tandem k8s validate``: every document of files, folders or stdin, checked strictly.

Per document, by kind:

* ``ray.io`` ``RayService`` / ``RayCluster`` — the KubeRay CRD made strict; its pod
  templates and ``serveService`` again with ``kubernetes-validate --strict``;
  ``serveConfigV2`` as Ray and Tandem read it (:mod:`serve.k8s.serveconfig`); the
  cross-checks (:mod:`serve.k8s.crosscheck`).
* any core kind — ``kubernetes-validate --strict``.
* a kind with no schema — a warning, not an error.

A folder is walked for ``*.yaml`` / ``*.yml``; a folder holding a kustomization
is built (:mod:`serve.k8s.kustomize`) and its output validated instead of the
files it reads. One problem found twice (the CRD and the pod schema agree on a
typo) is reported once.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from pipelines.errors import ConfigError
from serve.k8s.crosscheck import cross_check, redis_durability
from serve.k8s.issues import Issue, JsonPath
from serve.k8s.kustomize import build, find_kustomization
from serve.k8s.schemas import core_issues, crd_issues, crd_served_versions
from serve.k8s.serveconfig import serve_config_issues

__all__ = ["Source", "Report", "validate_documents", "validate_paths", "collect_sources", "default_crd_dir",
           "CRD_FILES"]

CRD_FILES = {"RayService": "ray.io_rayservices.yaml", "RayCluster": "ray.io_rayclusters.yaml"}


def default_crd_dir() -> Path:
    """``$TANDEM_SHARED_DATA/kuberay-crds``, else ``../shared/data/kuberay-crds`` beside the repository."""
    shared = os.environ.get("TANDEM_SHARED_DATA")
    root = Path(shared) if shared else Path(__file__).resolve().parents[3] / "shared" / "data"
    return root / "kuberay-crds"


@dataclasses.dataclass
class Source:
    """Documents from one place: a file, stdin, or a kustomize build."""

    label: str
    documents: list[Any]
    issues: list[Issue] = dataclasses.field(default_factory=list)  # could not read / parse / build


@dataclasses.dataclass
class Report:
    sources: int = 0
    documents: int = 0
    builds: int = 0
    issues: list[Issue] = dataclasses.field(default_factory=list)

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "warning"]

    def summary(self) -> str:
        built = f", {self.builds} kustomize build{'s' * (self.builds != 1)}" if self.builds else ""
        return (f"{'ok' if not self.errors else 'invalid'}: {self.documents} document"
                f"{'s' * (self.documents != 1)} in {self.sources} source{'s' * (self.sources != 1)}{built}; "
                f"{len(self.errors)} error{'s' * (len(self.errors) != 1)}, "
                f"{len(self.warnings)} warning{'s' * (len(self.warnings) != 1)}")


# --- sources --------------------------------------------------------------------


def _parse(label: str, text: str) -> Source:
    try:
        return Source(label, list(yaml.safe_load_all(text)))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return Source(label, [], [Issue((), f"not valid YAML{where}: {getattr(exc, 'problem', exc)}", "yaml")])


def _build(folder: Path) -> tuple[Source, set[Path]]:
    label = f"{folder} (kustomize build)"
    try:
        b = build(folder)
    except ConfigError as exc:
        return Source(label, [], [Issue((), exc.message, "kustomize")]), set()
    return Source(label, list(b.documents)), b.files


def collect_sources(paths: Iterable[str], stdin_text: str | None = None) -> list[Source]:
    """The sources behind ``paths`` (``-`` is ``stdin_text``); kustomize folders are built."""
    sources: list[Source] = []
    plain: list[Path] = []
    consumed: set[Path] = set()
    for arg in paths:
        if arg == "-":
            sources.append(_parse("<stdin>", stdin_text or ""))
            continue
        p = Path(arg)
        if p.is_file() and p.name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
            p = p.parent
        if p.is_dir():
            for folder, dirs, names in os.walk(p):
                dirs.sort()
                here = Path(folder)
                if find_kustomization(here) is not None:
                    src, files = _build(here)
                    sources.append(src)
                    consumed |= files
                plain += [here / n for n in sorted(names) if n.endswith((".yaml", ".yml"))]
        elif p.is_file():
            plain.append(p)
        else:
            sources.append(Source(str(p), [], [Issue((), "no such file or folder", "input")]))
    for f in plain:
        if f.resolve() in consumed or f.name in ("kustomization.yaml", "kustomization.yml"):
            continue
        try:
            sources.append(_parse(str(f), f.read_text()))
        except OSError as exc:
            sources.append(Source(str(f), [], [Issue((), f"cannot read: {exc.strerror}", "input")]))
    return sources


# --- documents ------------------------------------------------------------------


def _pod_templates(doc: Mapping[str, Any]) -> list[tuple[JsonPath, Any]]:
    spec = doc.get("spec") or {}
    cpath: JsonPath = ("spec", "rayClusterConfig") if doc.get("kind") == "RayService" else ("spec",)
    cluster = spec.get("rayClusterConfig") if doc.get("kind") == "RayService" else spec
    if not isinstance(cluster, Mapping):
        return []
    out = []
    head = cluster.get("headGroupSpec")
    if isinstance(head, Mapping) and isinstance(head.get("template"), Mapping):
        out.append(((*cpath, "headGroupSpec", "template"), head["template"]))
    for i, g in enumerate(cluster.get("workerGroupSpecs") or []):
        if isinstance(g, Mapping) and isinstance(g.get("template"), Mapping):
            out.append(((*cpath, "workerGroupSpecs", i, "template"), g["template"]))
    return out


def _ray(doc: Mapping[str, Any], crd_dir: Path, k8s_version: str | None) -> list[Issue]:
    kind = str(doc.get("kind"))
    crd = crd_dir / CRD_FILES[kind]
    if not crd.is_file():
        raise ConfigError(f"the KubeRay CRD {crd} is missing: pass --crd-dir (the folder of ray.io_*.yaml) "
                          "or set TANDEM_SHARED_DATA")
    version = str(doc.get("apiVersion")).rpartition("/")[2]
    served = crd_served_versions(crd)
    if version not in served:
        return [Issue(("apiVersion",), f"{doc.get('apiVersion')!r} is not served by the CRD (served: "
                      f"{', '.join(served)})", "crd")]
    out = crd_issues(doc, crd, version, k8s_version)
    for path, template in _pod_templates(doc):
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "ray"}, "template": dict(template)}
        out += [i.at(path[:-1]) for i in core_issues(pod, k8s_version) or []]
    svc = (doc.get("spec") or {}).get("serveService") if kind == "RayService" else None
    if isinstance(svc, Mapping):
        out += [i.at(("spec", "serveService")) for i in
                core_issues({"apiVersion": "v1", "kind": "Service", **svc}, k8s_version) or []
                if i.path[:1] not in (("apiVersion",), ("kind",))]
    view = None
    if kind == "RayService":
        serve_issues, view = serve_config_issues((doc.get("spec") or {}).get("serveConfigV2"))
        out += [i.at(("spec", "serveConfigV2")) for i in serve_issues]
    return out + cross_check(doc, view)


def _document(doc: Any, crd_dir: Path, k8s_version: str | None) -> list[Issue]:
    if not isinstance(doc, Mapping) or not doc.get("apiVersion") or not doc.get("kind"):
        return [Issue((), "not a Kubernetes object (no apiVersion and kind)", "input")]
    group = str(doc["apiVersion"]).rpartition("/")[0]
    if group == "ray.io" and doc["kind"] in CRD_FILES:
        return _ray(doc, crd_dir, k8s_version)
    if group.startswith("kustomize.config.k8s.io"):
        return [Issue((), "a Kustomization: pass its folder (it is built), or pipe `kustomize build`", "input",
                      severity="warning")]
    issues = core_issues(doc, k8s_version)
    if issues is None:
        return [Issue((), f"no schema for {doc['apiVersion']} {doc['kind']}: not checked", "core",
                      severity="warning")]
    return issues + redis_durability(doc)


def _dedupe(issues: list[Issue]) -> list[Issue]:
    """One problem per path and first clause: the CRD and the pod schema (or Ray and Tandem) agree."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for i in issues:
        key = (i.path, i.message.split(": ", 1)[0])
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out


def validate_documents(source: Source, crd_dir: Path, k8s_version: str | None = None) -> list[Issue]:
    """Every issue of one source's documents, each placed in its source and document."""
    out = [i.located(source.label, None, None, None) for i in source.issues]
    for n, doc in enumerate(source.documents, start=1):
        if doc is None:
            continue  # an empty document between two ---
        meta = doc.get("metadata") if isinstance(doc, Mapping) else None
        kind = str(doc.get("kind")) if isinstance(doc, Mapping) and doc.get("kind") else None
        name = str(meta.get("name")) if isinstance(meta, Mapping) and meta.get("name") else None
        out += [i.located(source.label, n, kind, name) for i in _dedupe(_document(doc, crd_dir, k8s_version))]
    return out


def validate_paths(paths: Iterable[str], *, crd_dir: Path | None = None, k8s_version: str | None = None,
                   stdin_text: str | None = None) -> Report:
    """Validate everything behind ``paths``; :class:`ConfigError` only when the validators cannot run."""
    crd_dir = crd_dir or default_crd_dir()
    report = Report()
    for source in collect_sources(paths, stdin_text):
        report.sources += 1
        report.builds += source.label.endswith("(kustomize build)")
        report.documents += sum(d is not None for d in source.documents)
        report.issues += validate_documents(source, crd_dir, k8s_version)
    return report
