"""``serveConfigV2`` read as Ray reads it, strictly, and as Tandem reads its own application.

1. Ray's ``ServeDeploySchema`` made strict: every key Ray would drop silently is an
   error (:func:`models.validate.strict_unknown_keys`), then Ray's own validation.
2. Every application whose ``import_path`` is Tandem's builder: its ``args`` through
   :func:`serve.config.parse_app_config` (the strict ``AppConfig``) and its
   ``deployments:`` entries (live rule tables) through ``serve.config``'s
   ``DeploymentUserConfig`` — the same parsers ``tandem check-config`` uses.

Pydantic errors become :class:`~serve.k8s.issues.Issue` with the path of the key,
the offending value, and the closest allowed key or literal. Paths are relative to
the Serve config; the caller puts ``spec.serveConfigV2`` before them.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from pipelines.errors import ConfigError
from serve.k8s.issues import Issue, JsonPath, did_you_mean, short

__all__ = ["ServeView", "TANDEM_IMPORT_PATH", "serve_config_issues", "pydantic_issues", "allowed_keys"]

TANDEM_IMPORT_PATH = "serve.app:build_app"


@dataclasses.dataclass(frozen=True)
class ServeView:
    """What the cross-checks need from a valid Serve config."""

    http_port: int
    grpc_port: int
    grpc_servicers: tuple[str, ...]
    proxy_location: str
    apps: tuple[tuple[int, Any], ...]  # (application index, AppConfig) of every valid Tandem app


# --- pydantic errors → issues -----------------------------------------------------


def _members(ann: Any) -> list[Any]:
    """The alternatives of an annotation (Optional / Union / Annotated unwrapped)."""
    origin = get_origin(ann)
    if origin is typing.Annotated:
        return _members(get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in get_args(ann) for m in _members(a)]
    return [ann]


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _field_names(model: type[BaseModel]) -> list[str]:
    return [*model.model_fields, *(f.alias for f in model.model_fields.values() if f.alias)]


def _step(ann: Any, part: str | int) -> tuple[Any, bool]:
    """The annotation one ``loc`` step below ``ann``, and whether the step was a union tag.

    A step is a field, a dict value or a list item (in the document too), or the
    tag pydantic puts in the loc of a discriminated union (not in the document).
    """
    for m in _members(ann):
        if _is_model(m):
            for name, f in m.model_fields.items():
                if part in (name, f.alias):
                    return f.annotation, False
        origin = get_origin(m)
        if origin in (dict, collections.abc.Mapping) and isinstance(part, str) and get_args(m):
            return get_args(m)[1], False
        if origin in (list, tuple, collections.abc.Sequence) and isinstance(part, int) and get_args(m):
            return get_args(m)[0], False
    for m in _members(ann):
        if _is_model(m) and (part == m.__name__ or any(
                part in get_args(f.annotation) for f in m.model_fields.values()
                if get_origin(f.annotation) is typing.Literal)):
            return m, True
    return None, False


def _resolve(root: type[BaseModel], loc: JsonPath) -> tuple[JsonPath, Any]:
    """The document path of a pydantic ``loc`` (union tags dropped) and the annotation it ends at."""
    ann: Any = root
    path: list[str | int] = []
    for n, part in enumerate(loc):
        if ann is None:
            return (*path, *loc[n:]), None
        ann, tag = _step(ann, part)
        if not tag:
            path.append(part)
    return tuple(path), ann


def allowed_keys(root: type[BaseModel], loc: JsonPath) -> list[str]:
    """The keys the model at ``loc`` below ``root`` accepts ([] when the loc leads elsewhere)."""
    ann = _resolve(root, loc)[1]
    return [k for m in _members(ann) if _is_model(m) for k in _field_names(m)] if ann is not None else []


def pydantic_issues(exc: ValidationError, root: type[BaseModel], prefix: JsonPath, check: str) -> list[Issue]:
    """Each error of a pydantic validation as an issue under ``prefix``."""
    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        path, _ = _resolve(root, loc)
        value, ctx = err.get("input"), err.get("ctx") or {}
        if err["type"] == "extra_forbidden":
            key = str(loc[-1])
            out.append(Issue((*prefix, *path), f"unknown field {key!r}", check,
                             suggestion=did_you_mean(key, allowed_keys(root, loc[:-1]))))
            continue
        message, suggestion = err["msg"], None
        if err["type"] in ("literal_error", "enum") and isinstance(value, str):
            suggestion = did_you_mean(value, re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
        if err["type"] == "union_tag_invalid":  # a discriminated union: the tag's own key is the place
            path = (*path, str(ctx.get("discriminator", "")).strip("'"))
            suggestion = did_you_mean(str(ctx.get("tag")), re.findall(r"'([^']*)'", str(ctx.get("expected_tags"))))
        elif err["type"] != "missing" and not isinstance(value, dict | list):
            message += f" (got {short(value)})"
        out.append(Issue((*prefix, *path), message, check, suggestion=suggestion))
    return out


# --- the Serve config ---------------------------------------------------------------


def serve_config_issues(text: Any) -> tuple[list[Issue], ServeView | None]:
    """Every problem of one ``serveConfigV2`` value, and its view when Ray accepts it."""
    from ray.serve.schema import ServeDeploySchema

    from models.validate import strict_unknown_keys

    if not isinstance(text, str):
        return [], None  # the CRD check reports the type
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        return [Issue((), f"not valid YAML{where}: {getattr(exc, 'problem', exc)}", "serve")], None
    if not isinstance(data, Mapping):
        return [Issue((), f"must be a mapping (a Serve config), got {short(data)}", "serve")], None
    issues = [Issue((*u.path, u.key), f"unknown field {u.key!r}", "serve",
                    suggestion=did_you_mean(u.key, u.allowed))
              for u in strict_unknown_keys(ServeDeploySchema, data)]
    schema = None
    try:
        schema = ServeDeploySchema.model_validate(dict(data))
    except ValidationError as exc:
        issues += [i for i in pydantic_issues(exc, ServeDeploySchema, (), "serve")
                   if not i.message.startswith("unknown field")]
    apps: list[tuple[int, Any]] = []
    for i, app in enumerate(data.get("applications") or []):
        if isinstance(app, Mapping) and app.get("import_path") == TANDEM_IMPORT_PATH:
            app_issues, cfg = _tandem_app(app, ("applications", i))
            issues += app_issues
            if cfg is not None:
                apps.append((i, cfg))
    view = None
    if schema is not None:
        view = ServeView(
            http_port=schema.http_options.port,
            grpc_port=schema.grpc_options.port,
            grpc_servicers=tuple(schema.grpc_options.grpc_servicer_functions),
            proxy_location=getattr(schema.proxy_location, "value", str(schema.proxy_location)),
            apps=tuple(apps),
        )
    return issues, view


def _tandem_app(app: Mapping[str, Any], where: JsonPath) -> tuple[list[Issue], Any]:
    """Tandem's own reading of one application: its args and its live rule tables."""
    from serve.config import AppConfig, DeploymentUserConfig, parse_app_config

    issues: list[Issue] = []
    cfg = None
    try:
        cfg = parse_app_config(app.get("args") or {})
    except ConfigError as exc:
        if isinstance(exc.__cause__, ValidationError):
            issues += pydantic_issues(exc.__cause__, AppConfig, (*where, "args"), "tandem")
        else:
            issues.append(Issue((*where, "args"), exc.message, "tandem"))
    for j, entry in enumerate(app.get("deployments") or []):
        try:
            DeploymentUserConfig.model_validate(entry)
        except ValidationError as exc:
            for issue in pydantic_issues(exc, DeploymentUserConfig, (*where, "deployments", j), "tandem"):
                if issue.message.startswith("unknown field") and not issue.suggestion:
                    issue = dataclasses.replace(issue, message=issue.message + (
                        ": a Tandem app's deployments entries carry live rule tables only (name, "
                        "user_config); deployment options belong in args"))
                issues.append(issue)
    return issues, cfg
