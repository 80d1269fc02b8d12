"""``RuleKernels``: the deterministic kernels (Φ for W1, W2's paragraph plans, W3's scheduling) of the
configured pack; the rule tables start as the pack's and arrive live through Ray Serve ``user_config``
(``{"rules": bundle}``; a malformed one is refused and the active one kept)."""

from __future__ import annotations

import logging
import os
from typing import Any

from pipelines.core.kernels import LocalRuleKernels
from pipelines.domains import load_domain

__all__ = ["RuleKernelsServer"]

logger = logging.getLogger("tandem.kernels")


class RuleKernelsServer:
    """Hosts :class:`LocalRuleKernels` for one domain; tables via ``user_config`` (``{"rules": bundle}``)."""

    def __init__(self, domain: str) -> None:
        self.kernels = LocalRuleKernels.of(load_domain(domain))
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
