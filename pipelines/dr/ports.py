"""The ports through which the DR turn reaches tools and guardrails, and their in-process implementations.

``serve/`` hosts :class:`LocalToolRunner` and
:class:`~pipelines.guardrails.LocalGuardrails` on CPU deployments and passes
handles that satisfy :class:`ToolRunner` / :class:`Guardrails`; tests pass
the local objects directly. Every argument and result is a pydantic model or
plain JSON, so the calls cross a process boundary unchanged. Models are
reached through :class:`pipelines.protocols.ModelClient` (roles
``orchestrator`` and ``generator``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from pipelines.domains.support import invoke as support_invoke
from pipelines.domains.support import precheck as support_precheck
from pipelines.guardrails import LocalGuardrails, PostGuardView, PreGuardResult, SentenceVerdict
from pipelines.tools import ToolContext, ToolObservation

__all__ = [
    "ToolSession",
    "ToolCallResult",
    "ToolRunner",
    "Guardrails",
    "LocalToolRunner",
    "LocalGuardrails",
]


class ToolSession(BaseModel):
    """The session facts a tool call may rely on (never written by a model)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = ""
    authenticated_user_id: str | None = None
    observed_ids: list[str] = Field(default_factory=list)
    confirmed: bool = False
    locale: str = "en"
    idempotency_key: str | None = Field(
        None, description="A confirmed write's key (session, card, the turn that showed it): executed at most once."
    )

    def to_context(self) -> ToolContext:
        return ToolContext(
            session_id=self.session_id,
            authenticated_user_id=self.authenticated_user_id,
            confirmed=self.confirmed,
            observed_ids=set(self.observed_ids),
            locale=self.locale,
        )


class ToolCallResult(BaseModel):
    """One tool call's observation, refusal reason, changed entities and newly observed ids."""

    model_config = ConfigDict(extra="forbid")

    observation: ToolObservation
    reason: str | None = None
    changed_user_ids: list[str] = Field(default_factory=list)
    changed_order_ids: list[str] = Field(default_factory=list)
    observed_ids: list[str] = Field(default_factory=list)


@runtime_checkable
class ToolRunner(Protocol):
    """Runs the domain's typed tools against the live world."""

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        """Validate, check eligibility and run one tool; a refusal is a failed observation.

        Raises :class:`pipelines.errors.ToolTimeout` past the deadline and
        :class:`pipelines.errors.ToolError` when the runner itself fails.
        """
        ...

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        """``None`` when the call would be eligible once the user confirms, else the reason code."""
        ...


@runtime_checkable
class Guardrails(Protocol):
    """The pre- and post-guard (see :class:`pipelines.guardrails.LocalGuardrails`)."""

    @property
    def version(self) -> str:
        """The rule table's version (stamped on each turn)."""
        ...

    async def pre(self, text: str, history: Sequence[str] = ()) -> PreGuardResult:
        """Check and redact the user's text; raises typed errors for limit violations."""
        ...

    async def post(self, sentence: str, view: PostGuardView, context: str = "") -> SentenceVerdict:
        """Judge one reply sentence; ``context`` is the tail of the text already released."""
        ...


ChangeHook = Callable[[Any, list[str], list[str]], Any]


class LocalToolRunner:
    """Tools in process over a world object (the support pack's ``RetailWorld``).

    ``on_change(world, user_ids, order_ids)`` is called after a successful
    write, so a store can persist exactly the entities that changed.
    """

    def __init__(self, domain: Any, world: Any, *, on_change: ChangeHook | None = None) -> None:
        self.domain = domain
        self.world = world
        self.on_change = on_change
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        """Run ``name`` with the session's facts; writes need ``session.confirmed``."""
        ctx = session.to_context()
        before = set(ctx.observed_ids)
        self.calls.append((name, dict(args)))
        out = support_invoke(self.domain.registry, name, args, ctx, self.world)
        if out.changed_user_ids or out.changed_order_ids:
            if self.on_change is not None:
                self.on_change(self.world, out.changed_user_ids, out.changed_order_ids)
        return ToolCallResult(
            observation=out.observation,
            reason=out.reason,
            changed_user_ids=out.changed_user_ids,
            changed_order_ids=out.changed_order_ids,
            observed_ids=sorted(ctx.observed_ids - before),
        )

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        """Eligibility as if confirmed; the world is not touched."""
        return support_precheck(self.domain.registry, name, args, session.to_context(), self.world)
