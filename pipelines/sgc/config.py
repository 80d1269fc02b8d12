"""Strict loading of rule-table configs: pydantic errors become one ConfigError with a path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from pipelines.errors import ConfigError

__all__ = ["TableConfig", "load_model", "error_path"]

M = TypeVar("M", bound=BaseModel)


class TableConfig(BaseModel):
    """Base of every rule-table model: unknown fields are refused, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def error_path(where: str, loc: tuple[Any, ...]) -> str:
    """``where`` plus a pydantic location, dotted (``phi.rows.3.tools.0.tool``)."""
    return ".".join([where, *(str(p) for p in loc)]) if loc else where


def load_model(model: type[M], data: Any, where: str) -> M:
    """Validate ``data`` as ``model``; raise :class:`ConfigError` naming the first bad path.

    ``data`` may already be an instance of ``model`` (returned as is).
    """
    if isinstance(data, model):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}", details={"path": where})
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        first = errors[0]
        path = error_path(where, tuple(first["loc"]))
        listed = [{"path": error_path(where, tuple(e["loc"])), "msg": e["msg"]} for e in errors]
        raise ConfigError(f"{path}: {first['msg']}", details={"path": path, "errors": listed}) from exc
