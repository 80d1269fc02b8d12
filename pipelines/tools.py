"""Typed tools: a registry of pydantic-argument / pydantic-result functions with eligibility.

A domain pack registers its tools here. A tool is ``read`` (looks state up) or
``write`` (changes state); write tools carry the policy as an *eligibility*
check that runs before the handler and raises
:class:`pipelines.errors.IneligibleAction` with a reason code. The registry
turns raw (model-produced) arguments into validated models, runs the tool, and
returns a :class:`ToolObservation` that the orchestration state appends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipelines.errors import IneligibleAction, InvalidInput, ToolError

__all__ = [
    "ToolContext",
    "ToolSpec",
    "ToolObservation",
    "ToolRegistry",
]

A = TypeVar("A", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)
W = TypeVar("W")


class ToolContext(BaseModel):
    """Session facts the eligibility rules read (never written by a model)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = ""
    authenticated_user_id: str | None = None
    confirmed: bool = Field(False, description="The user explicitly confirmed the pending write.")
    observed_ids: set[str] = Field(default_factory=set, description="Entity ids seen in observations this session.")
    locale: str = "en"
    idempotency_key: str | None = Field(
        None, description="A confirmed write's key (the core's write key): a backend service may dedupe on it.")


@dataclass(frozen=True)
class ToolSpec(Generic[A, R, W]):
    """One typed tool over a world of type ``W``."""

    name: str
    description: str
    args_model: type[A]
    result_model: type[R]
    handler: Callable[[A, ToolContext, W], R]
    kind: Literal["read", "write"] = "read"
    eligibility: Callable[[A, ToolContext, W], None] | None = None

    def args_schema(self) -> dict[str, Any]:
        return self.args_model.model_json_schema()


class ToolObservation(BaseModel):
    """What one tool call produced, as the orchestration state and the event log keep it."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    args: dict[str, Any]
    ok: bool
    result: dict[str, Any] | None = None
    error_code: str | None = None
    error_message: str | None = None


@dataclass
class ToolRegistry(Generic[W]):
    """Name → :class:`ToolSpec`, plus validation and dispatch."""

    tools: dict[str, ToolSpec[Any, Any, W]] = field(default_factory=dict)

    def register(self, spec: ToolSpec[Any, Any, W]) -> None:
        if spec.name in self.tools:
            raise ValueError(f"tool {spec.name!r} registered twice")
        self.tools[spec.name] = spec

    def names(self) -> list[str]:
        return sorted(self.tools)

    def get(self, name: str) -> ToolSpec[Any, Any, W]:
        try:
            return self.tools[name]
        except KeyError:
            raise InvalidInput(f"unknown tool {name!r}", details={"tool": name}) from None

    def parse_args(self, name: str, raw: dict[str, Any]) -> BaseModel:
        spec = self.get(name)
        try:
            return spec.args_model.model_validate(raw)
        except ValidationError as exc:
            raise InvalidInput(
                f"invalid arguments for tool {name!r}",
                details={"tool": name, "errors": exc.errors(include_url=False, include_context=False)},
            ) from exc

    def call(self, name: str, raw_args: dict[str, Any], ctx: ToolContext, world: W) -> ToolObservation:
        """Validate, check eligibility, run; every refusal becomes a failed observation."""
        try:
            spec = self.get(name)
            args = self.parse_args(name, raw_args)
            if spec.eligibility is not None:
                spec.eligibility(args, ctx, world)
            result = spec.handler(args, ctx, world)
            return ToolObservation(
                tool=name, args=args.model_dump(mode="json"), ok=True, result=result.model_dump(mode="json")
            )
        except (InvalidInput, IneligibleAction, ToolError) as exc:
            return ToolObservation(
                tool=name, args=dict(raw_args), ok=False, error_code=exc.code, error_message=exc.message
            )
