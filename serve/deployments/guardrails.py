"""``GuardrailsServer``: the pre- and post-guard as a CPU deployment.

The rule table arrives as the config's ``guardrails`` table and can be
replaced live through Ray Serve ``user_config`` (``{"table": {...}}``): a
malformed table is refused with a clear error and the previous one stays.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pipelines.guardrails import LocalGuardrails, PostGuardView, PreGuardResult, SentenceVerdict

__all__ = ["GuardrailsServer"]

logger = logging.getLogger("tandem.guardrails")


class GuardrailsServer:
    def __init__(self, table: dict[str, Any] | str | None = None) -> None:
        self.guard = LocalGuardrails(table)
        self.last_error: str | None = None
        logger.info("guardrails ready: table %s", self.guard.version)

    def reconfigure(self, user_config: dict[str, Any] | None) -> None:
        """Live table update from Ray Serve ``user_config`` (``{"table": {...}}``).

        A malformed table is refused: the error is logged and kept in ``last_error``
        (see :meth:`info`) and the previous table stays active. It does not raise:
        raising would fail the replica and take the good table down with it.
        """
        table = (user_config or {}).get("table")
        if not table:
            return
        old = self.guard.version
        try:
            self.guard.reload(table)
        except Exception as exc:
            self.last_error = f"refused table {table.get('version', '?') if isinstance(table, dict) else '?'}: {exc}"
            logger.error("guardrail table refused, keeping %s: %s", old, exc)
            return
        self.last_error = None
        logger.info("guardrail table %s -> %s", old, self.guard.version)

    async def version(self) -> str:
        return self.guard.version

    async def info(self) -> dict[str, Any]:
        """The active table version and this replica's process id (reloads keep the pid)."""
        import os

        return {"version": self.guard.version, "pid": os.getpid(), "last_error": self.last_error}

    async def pre(self, text: str, history: Sequence[str] = ()) -> PreGuardResult:
        return await self.guard.pre(text, list(history))

    async def post(self, sentence: str, view: PostGuardView, context: str = "") -> SentenceVerdict:
        return await self.guard.post(sentence, view, context)
