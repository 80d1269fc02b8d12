"""``CoachToolsServer`` (the coach world's typed tools + per-session live state) and
``RuleKernels`` (Φ for W1, W2 grounding / paragraph plans, W3 scheduling) for any domain,
whose tables arrive through Ray Serve ``user_config`` — a redeploy that changes only the
tables reconfigures the live replica; a malformed bundle is refused and the previous
tables stay active.

The tools server speaks the one tool port (``call(name, args, ToolSession) ->
ToolCallResult``); ``serve/adapters.py`` gives the SGC ladder its session-id view.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from pipelines.core.kernels import LocalRuleKernels
from pipelines.core.ports import ToolCallResult, ToolSession
from pipelines.domains import domain_module
from pipelines.domains.coach import generate_coach_world
from pipelines.domains.coach.runner import LocalCoachTools
from serve.config import DomainConfig

__all__ = ["CoachToolsServer", "RuleKernelsServer", "DEFAULT_COACH_USER", "DEFAULT_OPPONENT"]

logger = logging.getLogger("tandem.coach")

DEFAULT_COACH_USER = "u001"
DEFAULT_OPPONENT = "o01"


class CoachToolsServer:
    """Hosts :class:`LocalCoachTools` over the seeded coach world (read-only game data)."""

    def __init__(self, domain_config: dict[str, Any]) -> None:
        cfg = DomainConfig.model_validate(domain_config)
        self.world = generate_coach_world(cfg.seed)
        self.local = LocalCoachTools(self.world)
        logger.info("coach tools ready: %d users, %d opponents (seed %d)",
                    len(self.world.users), len(self.world.opponents), cfg.seed)

    async def ensure_bound(self, session_id: str, user_id: str | None, opponent_id: str | None = None) -> str:
        """Bind a new session to its player (the request's ``user_id``); returns the bound user."""
        s = self.local.sessions.get(session_id)
        if s is not None:
            return s.user_id
        uid = user_id if user_id in self.world.users else DEFAULT_COACH_USER
        self.local.bind(session_id, uid, {"opponent_id": opponent_id or DEFAULT_OPPONENT})
        return uid

    async def set_state(self, session_id: str, values: dict[str, Any]) -> int:
        """Move the live state (e.g. a new opponent); bumps the snapshot version."""
        return self.local.set_state(session_id, values)

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        return await self.local.call(name, args, session)

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        return None  # the coach has no write tools

    async def load_state(self, session_id: str, keys: Sequence[str]) -> Any:
        return await self.local.load_state(session_id, list(keys))

    async def live_facts(self, session_id: str) -> Any:
        return await self.local.live_facts(session_id)


class RuleKernelsServer:
    """Hosts :class:`LocalRuleKernels` for one domain; tables via ``user_config`` (``{"rules": bundle}``)."""

    def __init__(self, domain: str = "coach") -> None:
        self.kernels = LocalRuleKernels.of(domain_module(domain).DomainPack())
        self.last_error: str | None = None
        logger.info("rule kernels ready: tables %s", self.kernels.holder.version)

    def reconfigure(self, user_config: dict[str, Any] | None) -> None:
        """Apply a new rule bundle; a malformed one is refused (logged, kept in ``last_error``)."""
        if not user_config or not user_config.get("rules"):
            return
        outcome = self.kernels.reconfigure(user_config)
        if outcome.applied:
            self.last_error = None
            logger.info("rule tables now %s", outcome.active_version)
        else:
            self.last_error = f"{outcome.error_path or ''}: {outcome.error}"
            logger.error("rule tables refused, keeping %s: %s", outcome.active_version, self.last_error)

    async def info(self) -> dict[str, Any]:
        return {"version": self.kernels.holder.version, "pid": os.getpid(), "last_error": self.last_error}

    async def tables_version(self) -> str:
        return await self.kernels.tables_version()

    async def w1_tables(self) -> Any:
        return await self.kernels.w1_tables()

    async def ground(self, slots: dict[str, Any], facts: dict[str, Any], intent: str) -> dict[str, Any]:
        return await self.kernels.ground(slots, facts, intent)

    async def paragraphs(self, conflicts: list[dict[str, Any]], intent: str,
                         constraints: list[str] | None = None) -> dict[str, Any]:
        return await self.kernels.paragraphs(conflicts, intent, constraints)

    async def schedule(self, session_id: str, prior_metas: list[dict[str, Any]], intent_ctx: dict[str, Any],
                       candidates: list[dict[str, Any]], turn_index: int, *, seed: int | None = None) -> Any:
        return await self.kernels.schedule(session_id, prior_metas, intent_ctx, candidates, turn_index, seed=seed)
