"""The ports through which a turn reaches tools, guardrails and the rule kernels.

``serve/`` hosts the in-process implementations (:class:`pipelines.core.runner.LocalToolRunner`,
:class:`~pipelines.guardrails.LocalGuardrails`, :class:`pipelines.core.kernels.LocalRuleKernels`)
on CPU deployments and passes handles that satisfy :class:`ToolRunner` / :class:`Guardrails` /
:class:`RuleKernels`; tests pass the local objects directly. Every argument and result is a pydantic
model or plain JSON, so the calls cross a process boundary unchanged. Models are reached through
:class:`pipelines.protocols.ModelClient` (roles ``orchestrator``, ``generator``, ``slot_extractor``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from pipelines.errors import LeaseLost
from pipelines.guardrails import PostGuardView, PreGuardResult, SentenceVerdict
from pipelines.sgc.phi import PhiTable
from pipelines.sgc.snapshot import LoadedState
from pipelines.tools import ToolContext, ToolObservation

__all__ = [
    "ConfirmedCard",
    "call_digest",
    "ToolSession",
    "ToolCallResult",
    "write_key",
    "UNGROUNDED",
    "LedgerEntry",
    "WriteLedger",
    "MemoryLedger",
    "check_fence",
    "ToolRunner",
    "Guardrails",
    "W1Tables",
    "RuleKernels",
    "LiveStateTools",
]

#: The refusal reason of a write whose arguments are neither the user's words nor their records.
UNGROUNDED = "ungrounded_argument"


def call_digest(name: str, args: Mapping[str, Any]) -> str:
    """sha256 of a call: the tool and its arguments as sent to the port (placeholders resolved). The write
    ledger records it as the request; a shown card keeps it so the port runs only the write that was shown."""
    return hashlib.sha256(json.dumps([name, dict(args)], sort_keys=True, default=str).encode()).hexdigest()


class ConfirmedCard(BaseModel):
    """The card the user said yes to, as the tool port checks it: its write tool and the digest of its
    arguments (:func:`call_digest`, taken when the card was shown)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    digest: str

    @classmethod
    def of(cls, name: str, args: Mapping[str, Any]) -> ConfirmedCard:
        return cls(tool=name, digest=call_digest(name, args))

    def matches(self, name: str, args: Mapping[str, Any]) -> bool:
        """Whether ``name(args)`` is the call this card shows."""
        return self.tool == name and self.digest == call_digest(name, args)


class ToolSession(BaseModel):
    """The session facts a tool call may rely on (never written by a model).

    A write runs only with ``confirmed``, a ``card`` that is this very call and an ``idempotency_key``
    (:func:`pipelines.core.runner.require_confirmed`); ``fence`` is the turn's lease token, which the
    write ledger's commit checks (a stale one is :class:`~pipelines.errors.LeaseLost`).
    """

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
    card: ConfirmedCard | None = Field(
        None, description="The card the user confirmed: a write runs only when it is this call (tool, args digest).")
    fence: int | None = Field(
        None, description="The turn's session-lease fencing token (the ledger refuses a stale one); None: unfenced.")

    def confirm(self, name: str, args: Mapping[str, Any], idempotency_key: str) -> ToolSession:
        """This session confirmed for exactly ``name(args)`` (the card the user said yes to), under its key."""
        return self.model_copy(update={"confirmed": True, "card": ConfirmedCard.of(name, args),
                                       "idempotency_key": idempotency_key})

    def to_context(self) -> ToolContext:
        return ToolContext(
            session_id=self.session_id,
            authenticated_user_id=self.authenticated_user_id,
            confirmed=self.confirmed,
            observed_ids=set(self.observed_ids),
            locale=self.locale,
            idempotency_key=self.idempotency_key,
        )


class ToolCallResult(BaseModel):
    """One tool call's observation, refusal reason, changed entities and newly observed ids."""

    model_config = ConfigDict(extra="forbid")

    observation: ToolObservation
    reason: str | None = None
    changed: dict[str, list[str]] = Field(
        default_factory=dict, description="What a write changed: entity kind -> ids (the store persists these).")
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

    def commit_write(self, entry: LedgerEntry | None, world: Any, changed: Mapping[str, Sequence[str]], *,
                     fence: int | None = None) -> LedgerEntry | None:
        """Persist the changed entities of ``world`` and ``entry`` atomically.

        Returns the entry already recorded under the same key (and writes
        nothing) when another writer got there first, else ``None``. Raises on
        a failed commit, leaving the store unchanged. With ``fence`` (the turn's
        lease token) it raises :class:`~pipelines.errors.LeaseLost` and writes
        nothing when the ledger has already accepted a higher token for
        ``entry.session_id``; else it keeps ``fence`` as that session's highest.
        """
        ...


class MemoryLedger:
    """A :class:`WriteLedger` in process memory (tests and the in-process runner without a store)."""

    def __init__(self) -> None:
        self.entries: dict[str, LedgerEntry] = {}
        self.fences: dict[str, int] = {}

    def recorded(self, key: str) -> LedgerEntry | None:
        return self.entries.get(key)

    def commit_write(self, entry: LedgerEntry | None, world: Any, changed: Mapping[str, Sequence[str]], *,
                     fence: int | None = None) -> LedgerEntry | None:
        if entry is None:
            return None
        prior = self.entries.get(entry.key)
        if prior is not None:
            return prior
        check_fence(self.fences.get(entry.session_id), fence, entry.session_id)
        if fence is not None:
            self.fences[entry.session_id] = fence
        self.entries[entry.key] = entry
        return None


def check_fence(highest: int | None, fence: int | None, session_id: str) -> None:
    """Raise :class:`~pipelines.errors.LeaseLost` when ``fence`` is lower than the ``highest`` token a ledger has
    accepted for the session (``None``: unfenced call, or none accepted yet)."""
    if fence is not None and highest is not None and fence < highest:
        raise LeaseLost(f"session {session_id!r}: the write's lease token {fence} is stale (the ledger has {highest}); "
                        "another turn holds the session — nothing was written",
                        details={"fence": fence, "current": highest, "session_id": session_id})


class W1Tables(BaseModel):
    """What W1 needs from the kernels: Φ, the labels and the tool names, under one version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = Field(..., description="The rules bundle version (``RuleTables.version``).")
    phi: PhiTable
    labels: dict[str, list[str]]
    tools: list[str]


@runtime_checkable
class RuleKernels(Protocol):
    """The deterministic kernels over the active rule tables (a CPU deployment in ``serve/``)."""

    async def tables_version(self) -> str:
        """The active rules bundle version (stamped on each turn as ``rules_version``)."""
        ...

    async def w1_tables(self) -> W1Tables:
        """Φ, labels and tool names of the active bundle (cache them by version)."""
        ...

    async def ground(self, slots: dict[str, Any], facts: dict[str, Any], intent: str) -> dict[str, Any]:
        """W2 over slots and live facts: ``GroundingResult.model_dump(mode="json")`` (repairs, conflicts, Ψ, plan)."""
        ...

    async def paragraphs(self, conflicts: list[dict[str, Any]], intent: str,
                         constraints: list[str] | None = None) -> dict[str, Any]:
        """W2 for a domain that found its own conflicts: ``ParagraphResult.model_dump(mode="json")``."""
        ...

    async def schedule(self, session_id: str, prior_metas: list[dict[str, Any]], intent_ctx: dict[str, Any],
                       candidates: list[dict[str, Any]], turn_index: int, *,
                       seed: int | None = None) -> tuple[str | None, dict[str, Any]]:
        """W3 for one turn: ``(pick, AnswerMeta JSON)``; ``seed`` defaults to the session id's seed."""
        ...


@runtime_checkable
class LiveStateTools(ToolRunner, Protocol):
    """The tool port of a pack whose sessions carry live state (the coach: the user played, their focus)."""

    async def load_state(self, session_id: str, keys: Sequence[str]) -> LoadedState:
        """The values of those snapshot ``keys`` the session has, and the live-state version read
        (``keys=[]`` is a cheap version probe)."""
        ...

    async def live_facts(self, session_id: str) -> Any:
        """The session user's satisfiable facts (a pydantic model or its JSON; the pack's own shape)."""
        ...
