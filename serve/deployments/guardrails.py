"""``GuardrailsServer``: the pre- and post-guard as a CPU deployment.

The rule table arrives as the config's ``guardrails`` table and can be
replaced live through Ray Serve ``user_config`` (``{"table": {...}}``): a
malformed table is refused with a clear error and the previous one stays.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pipelines.errors import ConfigError
from pipelines.guardrails import LocalGuardrails, PostGuardView, PreGuardResult, SentenceVerdict

__all__ = ["GuardrailsServer"]

logger = logging.getLogger("tandem.guardrails")


class GuardrailsServer:
    def __init__(self, table: dict[str, Any] | str | None = None) -> None:
        self.guard = LocalGuardrails(table)
        logger.info("guardrails ready: table %s", self.guard.version)

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """Live table update; raises (and keeps the old table) when the new one is invalid."""
        table = (user_config or {}).get("table")
        if not table:
            return
        old = self.guard.version
        try:
            self.guard.reload(table)
        except Exception as exc:
            logger.error("guardrail table refused, keeping %s: %s", old, exc)
            raise ConfigError(f"guardrail table refused (keeping {old}): {exc}") from exc
        logger.info("guardrail table %s -> %s", old, self.guard.version)

    async def version(self) -> str:
        return self.guard.version

    async def pre(self, text: str, history: Sequence[str] = ()) -> PreGuardResult:
        return await self.guard.pre(text, list(history))

    async def post(self, sentence: str, view: PostGuardView, context: str = "") -> SentenceVerdict:
        return await self.guard.post(sentence, view, context)
