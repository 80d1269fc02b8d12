"""The coach pack's tool port in process: the seeded world's typed tools plus per-session live state.

:class:`LocalCoachTools` implements :class:`~pipelines.core.ports.LiveStateTools` (the one tool port,
plus ``load_state`` / ``live_facts``) over a :class:`~pipelines.domains.coach.world.CoachWorld`;
``serve/`` hosts it as the coach's tools deployment. :class:`CoachFacts` is what ``live_facts``
returns: the session user's satisfiable facts (the W2 diff input and the ownership judge's world).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.ports import ToolCallResult, ToolSession
from pipelines.sgc.snapshot import LoadedState
from pipelines.sgc.w2 import LiveFacts
from pipelines.tools import ToolContext, ToolRegistry

from .sessions import SUPPORTED_STYLES, live_facts_for
from .tools import build_registry
from .world import CoachWorld

__all__ = ["CoachFacts", "LocalCoachTools", "DEFAULT_USER", "DEFAULT_OPPONENT"]

#: Who an unbound session plays as, and against, when the request names no known user.
DEFAULT_USER = "u001"
DEFAULT_OPPONENT = "o01"


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

    def bind_user(self, session_id: str, user_id: str | None, opponent_id: str | None = None) -> str:
        """Bind a new session to its player (the request's ``user_id``, else the world's first user); returns the
        bound user. A session already bound keeps its player."""
        s = self.sessions.get(session_id)
        if s is not None and s.user_id is not None:
            return s.user_id
        uid = user_id if user_id in self.world.users else DEFAULT_USER
        self.bind(session_id, uid, {"opponent_id": opponent_id or DEFAULT_OPPONENT})
        return uid

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
