"""The ports through which the SGC turn reaches the coach tools and the rule kernels, and in-process implementations.

``serve/`` hosts :class:`LocalCoachTools` and :class:`LocalRuleKernels` on CPU
deployments (the kernels' rule tables arrive through Ray Serve ``user_config``:
:meth:`LocalRuleKernels.reconfigure`) and passes handles that satisfy
:class:`CoachTools` / :class:`RuleKernels`; tests pass the local objects
directly. Every argument and result is a pydantic model or plain JSON, so the
calls cross a process boundary unchanged.

W1 itself (the streaming parser and Φ lookup) runs inside the turn, next to the
model stream; it fetches the Φ table and labels once per rules version through
:meth:`RuleKernels.w1_tables`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from pipelines.domains.coach import (
    BRANCH_OF_INTENT,
    INTENT_LABELS,
    TOOL_NAMES,
    build_registry,
    live_facts_for,
)
from pipelines.domains.coach.sessions import SUPPORTED_STYLES
from pipelines.domains.coach.world import CoachWorld
from pipelines.dr.ports import ToolCallResult, ToolSession
from pipelines.sgc.phi import PhiTable
from pipelines.sgc.snapshot import LoadedState
from pipelines.sgc.tables import ReloadOutcome, RuleTablesHolder
from pipelines.sgc.w2 import LiveFacts, QuerySlots, ground, plan_conflicts
from pipelines.tools import ToolContext, ToolRegistry

from .w3_kernel import ScheduleResult, decide_w3

__all__ = [
    "W1Tables",
    "CoachFacts",
    "CoachTools",
    "RuleKernels",
    "LocalCoachTools",
    "LocalRuleKernels",
    "ToolsStateLoader",
]


class W1Tables(BaseModel):
    """What the in-turn W1 step needs from the kernels: Φ, the labels and the tool names, under one version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = Field(..., description="The rules bundle version (``RuleTables.version``).")
    phi: PhiTable
    labels: dict[str, list[str]]
    tools: list[str]


class CoachFacts(BaseModel):
    """The satisfiable live facts of a session's user (W2 diff input, post-guard ownership check)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: str | None = None
    facts: LiveFacts = Field(default_factory=LiveFacts)
    known_skills: frozenset[str] = frozenset()

    def owned_species(self) -> set[str]:
        return {e.name for e in self.facts.owned}

    def owned_skills(self) -> set[str]:
        return {s for e in self.facts.owned for s in e.skills}


@runtime_checkable
class CoachTools(Protocol):
    """The coach's typed tools behind the one tool port (:class:`pipelines.dr.ports.ToolRunner`), and
    the live session state (a CPU deployment in ``serve/``)."""

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        """Validate, check eligibility and run one tool as the session's user; refusals are failed observations."""
        ...

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        """Always ``None``: the coach has no write tools."""
        ...

    async def load_state(self, session_id: str, keys: Sequence[str]) -> LoadedState:
        """The values of those snapshot ``keys`` the session has, and the live-state version read.

        ``keys=[]`` is a cheap version probe.
        """
        ...

    async def live_facts(self, session_id: str) -> CoachFacts:
        """The session user's satisfiable facts (owned creatures, known species / skills / opponents, styles)."""
        ...


@runtime_checkable
class RuleKernels(Protocol):
    """The deterministic SGC kernels over the active rule tables (a CPU deployment in ``serve/``)."""

    async def tables_version(self) -> str:
        """The active rules bundle version (stamped on each turn as ``rules_version``)."""
        ...

    async def w1_tables(self) -> W1Tables:
        """Φ, labels and tool names of the active bundle (cache them by version)."""
        ...

    async def ground(self, slots: dict[str, Any], facts: dict[str, Any], intent: str) -> dict[str, Any]:
        """W2 for one turn: ``GroundingResult.model_dump(mode="json")`` (repairs, conflicts, Ψ, plan)."""
        ...

    async def schedule(
        self,
        session_id: str,
        prior_metas: list[dict[str, Any]],
        intent_ctx: dict[str, Any],
        candidates: list[dict[str, Any]],
        turn_index: int,
        *,
        seed: int | None = None,
    ) -> tuple[str | None, dict[str, Any]]:
        """W3 for one turn: ``(pick, AnswerMeta JSON)``; ``seed`` defaults to the session id's seed."""
        ...

    async def paragraphs(self, conflicts: list[dict[str, Any]], intent: str,
                         constraints: list[str] | None = None) -> dict[str, Any]:
        """W2 for a domain that found its own conflicts: ``ParagraphResult.model_dump(mode="json")``."""
        ...


@dataclass
class _Session:
    user_id: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    version: int = 1


class LocalCoachTools:
    """The coach tools in process over a :class:`CoachWorld`, with per-session live state.

    A session is bound to its user with :meth:`bind`; :meth:`set_state` moves the
    live state on (a new focus, a level-up), bumping its version unless given.
    """

    def __init__(self, world: CoachWorld, *, registry: ToolRegistry[CoachWorld] | None = None) -> None:
        self.world = world
        self.registry = registry or build_registry()
        self.sessions: dict[str, _Session] = {}
        self.calls: list[tuple[str, dict[str, Any], str]] = []

    def bind(self, session_id: str, user_id: str, values: Mapping[str, Any] | None = None, *,
             version: int = 1) -> None:
        """Open (or rebind) a session for ``user_id`` with its initial state values."""
        vals = {"user_id": user_id, **dict(values or {})}
        self.sessions[session_id] = _Session(user_id=user_id, values=vals, version=version)

    def set_state(self, session_id: str, values: Mapping[str, Any], *, version: int | None = None) -> int:
        """Replace the session's state values; returns the new live version."""
        s = self.sessions.setdefault(session_id, _Session())
        s.values = dict(values)
        s.user_id = s.values.get("user_id", s.user_id)
        s.version = s.version + 1 if version is None else version
        return s.version

    def _ctx(self, session_id: str) -> ToolContext:
        s = self.sessions.get(session_id)
        return ToolContext(session_id=session_id, authenticated_user_id=s.user_id if s else None)

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        self.calls.append((name, dict(args), session.session_id))
        obs = self.registry.call(name, dict(args), self._ctx(session.session_id), self.world)
        return ToolCallResult(observation=obs, reason=obs.error_code)

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        return None

    async def load_state(self, session_id: str, keys: Sequence[str]) -> LoadedState:
        s = self.sessions.get(session_id)
        if s is None:
            return LoadedState(version=0, values={})
        return LoadedState(version=s.version, values={k: s.values[k] for k in keys if k in s.values})

    async def live_facts(self, session_id: str) -> CoachFacts:
        s = self.sessions.get(session_id)
        known_skills = frozenset(self.world.skills)
        if s is None or s.user_id not in self.world.users:
            opponents = {o.name for o in self.world.opponents.values()} | set(self.world.opponents)
            facts = LiveFacts(known_entities=frozenset(self.world.species), known_opponents=frozenset(opponents),
                              supported_styles=SUPPORTED_STYLES)
            return CoachFacts(facts=facts, known_skills=known_skills)
        return CoachFacts(user_id=s.user_id, facts=live_facts_for(self.world, s.user_id), known_skills=known_skills)


class ToolsStateLoader:
    """Adapts :meth:`CoachTools.load_state` to the W1 :class:`~pipelines.sgc.snapshot.StateLoader` protocol."""

    def __init__(self, tools: CoachTools) -> None:
        self.tools = tools

    async def load(self, session_id: str, keys: Sequence[str]) -> LoadedState:
        out = await self.tools.load_state(session_id, list(keys))
        return out if isinstance(out, LoadedState) else LoadedState.model_validate(out)


class LocalRuleKernels:
    """W2 grounding and W3 scheduling over a :class:`RuleTablesHolder` (hot-reloadable)."""

    def __init__(
        self,
        holder: RuleTablesHolder,
        *,
        labels: Mapping[str, Collection[str]] = INTENT_LABELS,
        tools: Collection[str] = TOOL_NAMES,
        branch_of_intent: Mapping[str, str] = BRANCH_OF_INTENT,
        max_paragraphs: int | None = None,
    ) -> None:
        self.holder = holder
        self.labels = {k: list(v) for k, v in labels.items()}
        self.tool_names = sorted(tools)
        self.branch_of_intent = dict(branch_of_intent)
        self.max_paragraphs = max_paragraphs

    def reconfigure(self, user_config: Mapping[str, Any]) -> ReloadOutcome:
        """Ray Serve ``user_config`` hook: ``{"rules": {...bundle...}}`` or the bundle itself."""
        data = user_config.get("rules", user_config)
        return self.holder.reload(data)

    async def tables_version(self) -> str:
        return self.holder.version

    async def w1_tables(self) -> W1Tables:
        t = self.holder.active
        return W1Tables(version=t.version, phi=t.phi, labels=self.labels, tools=self.tool_names)

    async def ground(self, slots: dict[str, Any], facts: dict[str, Any], intent: str) -> dict[str, Any]:
        t = self.holder.active
        result = ground(QuerySlots.model_validate(slots), LiveFacts.model_validate(facts), intent,
                        psi_table=t.psi, tiers=t.tiers, max_paragraphs=self.max_paragraphs)
        return result.model_dump(mode="json")

    async def paragraphs(self, conflicts: list[dict[str, Any]], intent: str,
                         constraints: list[str] | None = None) -> dict[str, Any]:
        t = self.holder.active
        res = plan_conflicts(conflicts, intent, psi_table=t.psi, tiers=t.tiers, constraints=constraints or (),
                             max_paragraphs=self.max_paragraphs)
        return res.model_dump(mode="json")

    async def schedule(
        self,
        session_id: str,
        prior_metas: list[dict[str, Any]],
        intent_ctx: dict[str, Any],
        candidates: list[dict[str, Any]],
        turn_index: int,
        *,
        seed: int | None = None,
    ) -> tuple[str | None, dict[str, Any]]:
        res: ScheduleResult = decide_w3(
            self.holder.active, self.branch_of_intent, session_id, prior_metas, intent_ctx, candidates,
            turn_index, seed=seed,
        )
        return res.pick, res.meta.model_dump(mode="json")
