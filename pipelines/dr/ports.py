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

import asyncio
import hashlib
import json
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from pipelines.domains.support import invoke as support_invoke
from pipelines.domains.support import precheck as support_precheck
from pipelines.domains.support.grounded import owner_candidates, ungrounded_args
from pipelines.errors import ToolError
from pipelines.guardrails import LocalGuardrails, PostGuardView, PreGuardResult, SentenceVerdict
from pipelines.tools import ToolContext, ToolObservation

__all__ = [
    "ToolSession",
    "ToolCallResult",
    "write_key",
    "UNGROUNDED",
    "LedgerEntry",
    "WriteLedger",
    "MemoryLedger",
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
    user_texts: list[str] = Field(
        default_factory=list, description="The user's own texts in this session (grounding of write arguments)."
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
    replayed: bool = Field(False, description="The recorded outcome of an earlier call with the same key.")


def write_key(session_id: str, card_id: str, turn_id: str) -> str:
    """The idempotency key of a pending card: its session, card and the turn in which it was shown."""
    return json.dumps([session_id, card_id, turn_id], separators=(",", ":"))


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


class LedgerEntry(BaseModel):
    """One recorded write: its key, the request it answered (digest) and its outcome."""

    model_config = ConfigDict(extra="forbid")

    key: str
    session_id: str
    tool: str
    request: str = Field(..., description="sha256 of the tool name and arguments.")
    outcome: ToolCallResult


@runtime_checkable
class WriteLedger(Protocol):
    """Where confirmed writes are recorded, in the same transaction as the entities they change."""

    def recorded(self, key: str) -> LedgerEntry | None:
        """The entry recorded under ``key``, or ``None``."""
        ...

    def commit_write(self, entry: LedgerEntry | None, world: Any, user_ids: list[str], order_ids: list[str]) -> LedgerEntry | None:
        """Persist the changed entities of ``world`` and ``entry`` atomically.

        Returns the entry already recorded under the same key (and writes
        nothing) when another writer got there first, else ``None``. Raises on
        a failed commit, leaving the store unchanged.
        """
        ...


class MemoryLedger:
    """A :class:`WriteLedger` in process memory (tests and the in-process runner without a store)."""

    def __init__(self) -> None:
        self.entries: dict[str, LedgerEntry] = {}

    def recorded(self, key: str) -> LedgerEntry | None:
        return self.entries.get(key)

    def commit_write(self, entry: LedgerEntry | None, world: Any, user_ids: list[str], order_ids: list[str]) -> LedgerEntry | None:
        if entry is None:
            return None
        prior = self.entries.get(entry.key)
        if prior is None:
            self.entries[entry.key] = entry
        return prior


def _digest(name: str, args: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps([name, args], sort_keys=True, default=str).encode()).hexdigest()


class LocalToolRunner:
    """Tools in process over a world object (the support pack's ``RetailWorld``).

    Writes are serialized and run on a fork of the world (the authenticated
    user's profile and orders copied): the changed entities and, for a keyed
    call, the outcome are committed to the ledger in one transaction, and only
    then swapped into the live world. A failed commit raises
    :class:`~pipelines.errors.ToolError` and changes nothing, in memory or on
    disk. A key already in the ledger returns its recorded outcome
    (``replayed=True``) without running anything. Every write argument must be
    grounded (:mod:`pipelines.domains.support.grounded`), checked at precheck
    and again before the write runs.
    """

    def __init__(self, domain: Any, world: Any, *, ledger: WriteLedger | None = None) -> None:
        self.domain = domain
        self.world = world
        self.ledger: WriteLedger = ledger if ledger is not None else MemoryLedger()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._write_lock = asyncio.Lock()

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        """Run ``name`` with the session's facts; writes need ``session.confirmed``."""
        if name in self.domain.write_tools:
            async with self._write_lock:
                return self._write(name, args, session)
        ctx = session.to_context()
        before = set(ctx.observed_ids)
        self.calls.append((name, dict(args)))
        out = support_invoke(self.domain.registry, name, args, ctx, self.world)
        return ToolCallResult(observation=out.observation, reason=out.reason,
                              observed_ids=sorted(ctx.observed_ids - before))

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        """Eligibility as if confirmed, then grounding; the world is not touched."""
        reason = support_precheck(self.domain.registry, name, args, session.to_context(), self.world)
        if reason is None:
            missing = self.ungrounded(name, args, session)
            if missing:
                return f"{UNGROUNDED}:{','.join(missing)}"
        return reason

    def ungrounded(self, name: str, args: dict[str, Any], session: ToolSession) -> list[str]:
        """Arguments of a write that are neither the user's words nor the authenticated user's records."""
        if name not in self.domain.write_tools or not session.authenticated_user_id:
            return []
        candidates = owner_candidates(self.world, session.authenticated_user_id)
        return ungrounded_args(name, args, session.user_texts, candidates)

    def _write(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        # No await inside: once a write starts, cancellation cannot split its commit from its swap.
        key = session.idempotency_key
        request = _digest(name, args)
        if key is not None:
            prior = self.ledger.recorded(key)
            if prior is not None:
                return _replay(prior, request)
        self.calls.append((name, dict(args)))
        ctx = session.to_context()
        before = set(ctx.observed_ids)
        missing = self.ungrounded(name, args, session)
        users: list[str] = []
        orders: list[str] = []
        trial = self.world
        if missing:
            result = _refusal(name, args, UNGROUNDED, f"arguments not grounded in the user's words or records: {missing}")
        else:
            trial = self.world.fork(ctx.authenticated_user_id)
            out = support_invoke(self.domain.registry, name, args, ctx, trial)
            users, orders = list(out.changed_user_ids), list(out.changed_order_ids)
            own_users, own_orders = self.world.forked_ids(ctx.authenticated_user_id)
            if not (set(users) <= own_users and set(orders) <= own_orders):
                raise ToolError(f"write {name!r} changed entities outside the authenticated user's records")
            result = ToolCallResult(observation=out.observation, reason=out.reason, changed_user_ids=users,
                                    changed_order_ids=orders, observed_ids=sorted(ctx.observed_ids - before))
        entry = None if key is None else LedgerEntry(key=key, session_id=session.session_id, tool=name,
                                                      request=request, outcome=result)
        if entry is not None or users or orders:
            try:
                prior = self.ledger.commit_write(entry, trial, users, orders)
            except Exception as exc:
                raise ToolError(f"the write {name!r} could not be recorded; nothing was changed",
                                details={"tool": name, "reason": "commit_failed"}) from exc
            if prior is not None:
                return _replay(prior, request)
        if users or orders:
            self.world.adopt(trial, users, orders)
        return result


UNGROUNDED = "ungrounded_argument"


def _refusal(name: str, args: dict[str, Any], reason: str, message: str) -> ToolCallResult:
    obs = ToolObservation(tool=name, args=dict(args), ok=False, error_code="ineligible_action",
                          error_message=f"{message} [{reason}]")
    return ToolCallResult(observation=obs, reason=reason)


def _replay(prior: LedgerEntry, request: str) -> ToolCallResult:
    if prior.request != request:
        raise ToolError("the idempotency key was already used for a different write",
                        details={"reason": "idempotency_key_reused", "tool": prior.tool})
    return prior.outcome.model_copy(update={"replayed": True})
