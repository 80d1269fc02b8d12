"""The ports through which a turn reaches tools, guardrails and the rule kernels.

``serve/`` hosts the in-process implementations (:class:`pipelines.core.runner.LocalToolRunner`,
:class:`~pipelines.guardrails.LocalGuardrails`, :class:`pipelines.core.kernels.LocalRuleKernels`)
on CPU deployments and passes handles that satisfy :class:`ToolRunner` / :class:`Guardrails` /
:class:`RuleKernels`; tests pass the local objects directly. Every argument and result is a pydantic
model or plain JSON, so the calls cross a process boundary unchanged. Models are reached through
:class:`pipelines.protocols.ModelClient` (roles ``orchestrator``, ``generator``, ``slot_extractor``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from pipelines.guardrails import PostGuardView, PreGuardResult, SentenceVerdict
from pipelines.sgc.phi import PhiTable
from pipelines.sgc.snapshot import LoadedState
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
    "W1Tables",
    "RuleKernels",
    "LiveStateTools",
]

#: The refusal reason of a write whose arguments are neither the user's words nor their records.
UNGROUNDED = "ungrounded_argument"


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

    def commit_write(self, entry: LedgerEntry | None, world: Any,
                     changed: Mapping[str, Sequence[str]]) -> LedgerEntry | None:
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

    def commit_write(self, entry: LedgerEntry | None, world: Any,
                     changed: Mapping[str, Sequence[str]]) -> LedgerEntry | None:
        if entry is None:
            return None
        prior = self.entries.get(entry.key)
        if prior is None:
            self.entries[entry.key] = entry
        return prior


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
