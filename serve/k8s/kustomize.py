"""``kustomize build`` for the subset of kustomize Tandem's overlays use, in Python.

No kustomize implementation on PyPI builds kustomizations (the packages named
``kustomize`` generate kustomization files or wrap the Go binary), so the
overlays are built here, as kustomize v5 does, for these fields only:

* ``resources`` — files (inside the kustomization's folder) and folders that hold
  a kustomization (built recursively, e.g. ``../../base``), in order; two
  resources with one id (group, kind, namespace, name) are an error.
* ``patches`` — ``path`` or inline ``patch``, with an optional ``target``
  (``group`` / ``version`` / ``kind`` / ``name`` / ``namespace``, each an
  anchored regular expression). A patch that parses as a list is a JSON6902
  patch (RFC 6902 through ``jsonpatch``; ``target`` required); otherwise it is
  a strategic-merge patch, applied to its target or to the resource with its
  own id: maps merge, ``null`` deletes a key, top-level ``$patch: delete``
  deletes the resource. A patch that matches nothing is an error.
* ``images`` — ``name`` → ``newName`` / ``newTag`` / ``digest`` on every
  ``image`` under a ``containers`` or ``initContainers`` list, at any depth
  (kustomize's legacy image filter: custom resources included).

Patches run before images (kustomize's transformer order). Anything else —
another field, a list inside a strategic-merge patch (kustomize merges lists by
keys from OpenAPI schemas), another ``$patch`` directive, a remote resource —
is refused with :class:`~pipelines.errors.ConfigError` rather than built
differently than kustomize would. Pipe a real build instead: ``kustomize build DIR | tandem k8s validate -``.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pipelines.errors import ConfigError

__all__ = ["Build", "build", "find_kustomization", "KUSTOMIZATION_FILES"]

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_SUPPORTED = {"apiVersion", "kind", "resources", "patches", "images"}
_SELECTOR = {"group", "version", "kind", "name", "namespace"}
_IMAGE = {"name", "newName", "newTag", "digest"}
_TAG = r"(:[a-zA-Z0-9_.{}-]*)?(@sha256:[a-zA-Z0-9_.{}-]*)?"


@dataclasses.dataclass
class Build:
    """The documents of a build and every file it read."""

    documents: list[dict[str, Any]]
    files: set[Path]


def find_kustomization(folder: Path) -> Path | None:
    """The kustomization file of ``folder``, or None."""
    for name in KUSTOMIZATION_FILES:
        if (folder / name).is_file():
            return folder / name
    return None


def _read_yaml(path: Path) -> list[Any]:
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _inside(root: Path, rel: str, what: str) -> Path:
    if "://" in rel or rel.startswith("github.com/"):
        raise ConfigError(f"{root}: remote {what} {rel!r} is not supported")
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ConfigError(f"{root}: {what} {rel!r} is outside the kustomization's folder "
                             "(kustomize's load restrictor refuses it)")
    return path


def _id(doc: Mapping[str, Any]) -> tuple[str, str, str, str]:
    group = str(doc.get("apiVersion", "")).rpartition("/")[0]
    meta = doc.get("metadata") or {}
    return group, str(doc.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


def build(folder: str | Path) -> Build:
    """Build the kustomization in ``folder`` (``kustomize build folder``)."""
    root = Path(folder)
    kfile = find_kustomization(root)
    if kfile is None:
        raise ConfigError(f"{root}: no {KUSTOMIZATION_FILES[0]}")
    k = _read_yaml(kfile)
    if len(k) != 1 or not isinstance(k[0], dict):
        raise ConfigError(f"{kfile}: expected one mapping")
    spec = k[0]
    unsupported = sorted(set(spec) - _SUPPORTED)
    if unsupported:
        raise ConfigError(f"{kfile}: {', '.join(unsupported)} not supported by the built-in builder; "
                             f"pipe a real build: kustomize build {root} | tandem k8s validate -")
    files = {kfile.resolve()}
    docs: list[dict[str, Any]] = []
    for rel in spec.get("resources") or []:
        path = (root / rel).resolve()
        if path.is_dir():
            sub = build(path)
            docs += sub.documents
            files |= sub.files
            continue
        path = _inside(root, rel, "resource")
        files.add(path)
        docs += [copy.deepcopy(d) for d in _read_yaml(path)]
    seen: set[tuple[str, str, str, str]] = set()
    for d in docs:
        if not isinstance(d, dict) or "kind" not in d:
            raise ConfigError(f"{kfile}: a resource is not a Kubernetes object: {str(d)[:80]}")
        if _id(d) in seen:
            raise ConfigError(f"{kfile}: two resources with the id {_id(d)}")
        seen.add(_id(d))
    for n, entry in enumerate(spec.get("patches") or []):
        docs = _patch(root, kfile, n, entry, docs, files)
    for entry in spec.get("images") or []:
        _images(kfile, entry, docs)
    return Build(docs, files)


# --- patches --------------------------------------------------------------------


def _select(docs: list[dict[str, Any]], target: Mapping[str, Any], where: str) -> list[int]:
    bad = sorted(set(target) - _SELECTOR)
    if bad:
        raise ConfigError(f"{where}: target field(s) {', '.join(bad)} not supported")
    hits = []
    for i, d in enumerate(docs):
        group, kind, ns, name = _id(d)
        version = str(d.get("apiVersion", "")).rpartition("/")[2]
        have = {"group": group, "version": version, "kind": kind, "namespace": ns, "name": name}
        if all(re.fullmatch(str(v), have[k]) for k, v in target.items()):
            hits.append(i)
    return hits


def _patch(root: Path, kfile: Path, n: int, entry: Mapping[str, Any], docs: list[dict[str, Any]],
           files: set[Path]) -> list[dict[str, Any]]:
    where = f"{kfile}: patches[{n}]"
    extra = sorted(set(entry) - {"path", "patch", "target"})
    if extra:
        raise ConfigError(f"{where}: {', '.join(extra)} not supported")
    if ("path" in entry) == ("patch" in entry):
        raise ConfigError(f"{where}: give exactly one of path and patch")
    if "path" in entry:
        path = _inside(root, entry["path"], "patch")
        files.add(path)
        where = f"{where} ({entry['path']})"
        parsed = _read_yaml(path)
    else:
        parsed = [d for d in yaml.safe_load_all(entry["patch"]) if d is not None]
    if len(parsed) != 1:
        raise ConfigError(f"{where}: expected one patch document, found {len(parsed)}")
    body, target = parsed[0], entry.get("target")
    if isinstance(body, list):
        if not isinstance(target, Mapping):
            raise ConfigError(f"{where}: a JSON6902 patch needs a target")
        return _json6902(docs, body, _select(docs, target, where), where)
    if not isinstance(body, dict):
        raise ConfigError(f"{where}: neither a strategic-merge nor a JSON6902 patch")
    hits = _select(docs, target, where) if isinstance(target, Mapping) else [
        i for i, d in enumerate(docs) if _id(d) == _id(body)]
    if not hits:
        raise ConfigError(f"{where}: matches no resource")
    if body.get("$patch") == "delete":
        return [d for i, d in enumerate(docs) if i not in hits]
    change = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
    meta = {k: v for k, v in (change.pop("metadata", None) or {}).items() if k not in ("name", "namespace")}
    if meta:
        change["metadata"] = meta
    for i in hits:
        _merge(docs[i], change, where, ())
    return docs


def _json6902(docs: list[dict[str, Any]], ops: list[Any], hits: list[int], where: str) -> list[dict[str, Any]]:
    import jsonpatch

    if not hits:
        raise ConfigError(f"{where}: matches no resource")
    try:
        patch = jsonpatch.JsonPatch(ops)
        for i in hits:
            docs[i] = patch.apply(docs[i])
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as exc:
        raise ConfigError(f"{where}: {type(exc).__name__}: {exc}") from exc
    return docs


def _merge(target: dict[str, Any], patch: Mapping[str, Any], where: str, path: tuple[str, ...]) -> None:
    for key, value in patch.items():
        at = ".".join((*path, str(key)))
        if str(key).startswith("$"):
            raise ConfigError(f"{where}: directive {key!r} at {at} not supported")
        if isinstance(value, list) or (isinstance(value, dict) and _has_list(value)):
            raise ConfigError(f"{where}: a list at {at}: kustomize merges lists by schema keys; "
                                 "use a JSON6902 patch for lists")
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            if not isinstance(target.get(key), dict):
                target[key] = {}
            _merge(target[key], value, where, (*path, str(key)))
        else:
            target[key] = value


def _has_list(node: Mapping[str, Any]) -> bool:
    return any(isinstance(v, list) or (isinstance(v, dict) and _has_list(v)) for v in node.values())


# --- images ---------------------------------------------------------------------


def _split(image: str) -> tuple[str, str, str]:
    """name, tag, digest of an image reference (a registry port is part of the name)."""
    name, _, digest = image.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = ""
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest


def _images(kfile: Path, entry: Mapping[str, Any], docs: list[dict[str, Any]]) -> None:
    extra = sorted(set(entry) - _IMAGE)
    if extra or "name" not in entry:
        raise ConfigError(f"{kfile}: images entry {dict(entry)}: needs name; {', '.join(extra)} not supported")
    pattern = re.compile("^" + re.escape(str(entry["name"])) + _TAG + "$")

    def update(image: str) -> str:
        if not pattern.match(image):
            return image
        name, tag, digest = _split(image)
        name = entry.get("newName") or name
        if entry.get("newTag") or entry.get("digest"):
            tag, digest = str(entry.get("newTag") or ""), str(entry.get("digest") or "")
        return name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value)
                if key in ("containers", "initContainers") and isinstance(value, list):
                    for c in value:
                        if isinstance(c, dict) and isinstance(c.get("image"), str):
                            c["image"] = update(c["image"])
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for d in docs:
        if d.get("kind") != "CustomResourceDefinition":
            walk(d)
