"""The strict schema validators: KubeRay CRDs made strict, and ``kubernetes-validate --strict``.

* :func:`strict_crd_schema` — a KubeRay CRD's ``openAPIV3Schema`` made strict
  (``shared/data/README.md``): the CRDs never forbid unknown fields (the API
  server prunes them silently), so a typo passes a plain schema check.
* :func:`core_validator` — the JSON schema ``kubernetes-validate --strict`` uses
  for a core kind (the same files, the same Draft 2020-12 validator), kept to
  report *every* error rather than the first.
* :func:`schema_issues` — a validator's errors as :class:`~serve.k8s.issues.Issue`
  with the offending key or value, and for an unknown key the closest field the
  schema allows.

:func:`validate_against_crd` and :func:`validate_core` return ``path: message``
lines (the tests' interface).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from pipelines.errors import ConfigError
from serve.k8s.issues import Issue, did_you_mean, json_path, short

__all__ = [
    "strict_crd_schema",
    "crd_validator",
    "crd_served_versions",
    "core_validator",
    "schema_issues",
    "crd_issues",
    "core_issues",
    "validate_against_crd",
    "validate_core",
    "latest_kubernetes_version",
]

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _walk_schemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk_schemas(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk_schemas(v)


def strict_crd_schema(crd_path: str | Path, version: str = "v1") -> dict[str, Any]:
    """The CRD's ``openAPIV3Schema`` made strict (``shared/data/README.md``).

    Every object with ``properties`` and no ``x-kubernetes-preserve-unknown-fields``
    gets ``additionalProperties: false``; ``required`` entries that carry a
    ``default`` are dropped (the API server fills them); ``int32``/``int64``
    integers get their range as ``minimum``/``maximum``.
    """
    crd = _load_crd(str(crd_path))
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    if version not in versions:
        raise ConfigError(f"{crd_path}: no version {version!r} (has {sorted(versions)})")
    schema = copy.deepcopy(versions[version]["schema"]["openAPIV3Schema"])
    for node in _walk_schemas(schema):
        props = node.get("properties")
        if isinstance(props, dict) and not node.get("x-kubernetes-preserve-unknown-fields"):
            node.setdefault("additionalProperties", False)
            if "required" in node:
                node["required"] = [r for r in node["required"]
                                    if not (isinstance(props.get(r), dict) and "default" in props[r])]
                if not node["required"]:
                    del node["required"]
        if node.get("type") == "integer" and node.get("format") in _INT_RANGES:
            lo, hi = _INT_RANGES[node["format"]]
            node["minimum"] = max(node.get("minimum", lo), lo)
            node["maximum"] = min(node.get("maximum", hi), hi)
    return schema


@functools.lru_cache(maxsize=8)
def _load_crd(path: str) -> dict[str, Any]:
    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def crd_served_versions(crd_path: str | Path) -> list[str]:
    """The API versions a CRD serves (``v1`` for KubeRay's RayService and RayCluster)."""
    return [v["name"] for v in _load_crd(str(crd_path))["spec"]["versions"] if v.get("served", True)]


@functools.lru_cache(maxsize=8)
def crd_validator(crd_path: str, version: str = "v1") -> Any:
    """A cached Draft 7 validator of the strict CRD schema (building one is the slow part)."""
    import jsonschema

    return jsonschema.Draft7Validator(strict_crd_schema(crd_path, version))


def latest_kubernetes_version() -> str:
    """The newest Kubernetes version kubernetes-validate has schemas for."""
    from kubernetes_validate.utils import latest_version

    return latest_version()


@functools.lru_cache(maxsize=64)
def core_validator(api_version: str, kind: str, k8s_version: str | None = None) -> Any | None:
    """The strict validator ``kubernetes-validate`` builds for a kind, or None if it has no schema."""
    import jsonschema
    from kubernetes_validate.utils import all_versions, major_minor, schema_contents
    from referencing import Registry, Resource

    wanted = major_minor((k8s_version or latest_kubernetes_version()).removeprefix("v"))
    candidates = [v for v in all_versions() if major_minor(v) <= wanted]
    if not candidates:
        raise ConfigError(f"kubernetes-validate has no schemas for Kubernetes {wanted}")
    schema_dir = f"v{candidates[-1]}-local-strict"
    # rbac.authorization.k8s.io/v1 -> rbac-v1, as kubernetes-validate names its files
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = schema_contents(f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{api}.json", wanted)
    except FileNotFoundError:
        return None
    defs = schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", wanted)
    registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _unknown_keys(error: Any) -> list[str]:
    props = error.schema.get("properties") or {}
    patterns = list((error.schema.get("patternProperties") or {}).keys())
    return [k for k in error.instance
            if k not in props and not any(re.search(p, k) for p in patterns)]


def schema_issues(validator: Any, doc: Any, check: str) -> list[Issue]:
    """Every error of ``validator`` on ``doc`` as issues; an unknown key gets a "did you mean"."""
    from jsonschema.exceptions import best_match

    out: list[Issue] = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path]):
        path = tuple(err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, Mapping):
            allowed = list((err.schema.get("properties") or {}).keys())
            for key in _unknown_keys(err):
                out.append(Issue((*path, key), f"unknown field {key!r}", check,
                                 suggestion=did_you_mean(key, allowed)))
            continue
        if err.validator in ("anyOf", "oneOf") and err.context:
            err = best_match(err.context)  # the most specific branch
            path = tuple(err.absolute_path) or path
        if err.validator == "enum" and isinstance(err.instance, str):
            options = [str(v) for v in err.validator_value]
            out.append(Issue(path, f"{short(err.instance)} is not one of {short(options, 160)}", check,
                             suggestion=did_you_mean(err.instance, options)))
            continue
        out.append(Issue(path, _message(err), check))
    return out


def _message(err: Any) -> str:
    if isinstance(err.instance, dict | list) and err.validator not in ("required", "additionalProperties"):
        # jsonschema prints the whole instance: name the rule and the size instead
        kind = "an object" if isinstance(err.instance, dict) else f"a list of {len(err.instance)}"
        if err.validator == "type":
            return f"expected {err.validator_value!r}, got {kind}"
        return f"{kind} fails {err.validator!r}: {short(err.validator_value, 120)}"
    text = str(err.message)
    return text if len(text) <= 240 else text[:237] + "..."


def crd_issues(doc: Mapping[str, Any], crd_path: str | Path, version: str = "v1",
               k8s_version: str | None = None) -> list[Issue]:
    """A custom resource against its strict CRD; ``metadata`` checked as a core ObjectMeta."""
    out = schema_issues(crd_validator(str(crd_path), version), dict(doc), "crd")
    meta = doc.get("metadata")
    if isinstance(meta, Mapping):
        out += core_issues({"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta)}, k8s_version) or []
    return out


def core_issues(doc: Mapping[str, Any], k8s_version: str | None = None) -> list[Issue] | None:
    """A core-kind document, ``kubernetes-validate --strict``; None when it has no schema for the kind."""
    validator = core_validator(str(doc.get("apiVersion")), str(doc.get("kind")), k8s_version)
    if validator is None:
        return None
    return schema_issues(validator, dict(doc), "core")


def _lines(issues: list[Issue]) -> list[str]:
    return [f"{json_path(i.path) or '<root>'}: {i.message}" for i in issues]


def validate_against_crd(doc: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Every violation of a strict CRD schema, as ``path: message`` lines ([] when valid).

    ``metadata`` (a bare object in CRDs) is checked as a core ObjectMeta with
    ``kubernetes-validate --strict``.
    """
    import jsonschema

    issues = schema_issues(jsonschema.Draft7Validator(dict(schema)), dict(doc), "crd")
    meta = doc.get("metadata")
    if isinstance(meta, Mapping):
        issues += core_issues({"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta)}) or []
    return _lines(issues)


def validate_core(doc: Mapping[str, Any], k8s_version: str | None = None) -> list[str]:
    """``kubernetes-validate --strict`` on one core-kind document; [] when valid."""
    issues = core_issues(doc, k8s_version)
    if issues is None:
        raise ConfigError(f"kubernetes-validate has no schema for {doc.get('apiVersion')} {doc.get('kind')}")
    return _lines(issues)
