"""The guard's live rule table, and ``GuardrailsServer``: the pre- and post-guard as a CPU deployment.

Where the guard runs is ``guardrails.placement`` (``serve/config.py``): in the
ingress's own process (the default: a turn's pre-guard is 0.6 ms of regexes, a
handle hop to another replica costs more than that) or in this deployment.
Either way the table arrives the same way — the bundled one at start, then
Ray Serve ``user_config`` (``{"table": {...}}`` on ``GuardrailsServer``, or
``{"guardrails": {"table": {...}}}`` on ``TandemIngress``) — and a malformed
table is refused with a clear error while the previous one stays active
(:class:`LiveGuardrails`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from pipelines.guardrails import LocalGuardrails, PostGuardView, PreGuardResult, SentenceVerdict

__all__ = ["GuardrailsServer", "LiveGuardrails"]

logger = logging.getLogger("tandem.guardrails")


class LiveGuardrails(LocalGuardrails):
    """The in-process guard whose table a ``user_config`` replaces live; a refused table is kept as
    ``last_error`` and the active one stays (never raises: raising in ``reconfigure`` would fail the
    replica and take the good table down with it)."""

    def __init__(self, table: dict[str, Any] | str | None = None) -> None:
        super().__init__(table)
        self.last_error: str | None = None

    def apply(self, table: Any) -> bool:
        """Swap in ``table`` (a mapping); False (and ``last_error`` set) when it is refused."""
        if not table:
            return False
        old = self.version
        try:
            self.reload(table)
        except Exception as exc:
            name = table.get("version", "?") if isinstance(table, dict) else "?"
            self.last_error = f"refused table {name}: {exc}"
            logger.error("guardrail table refused, keeping %s: %s", old, exc)
            return False
        self.last_error = None
        logger.info("guardrail table %s -> %s", old, self.version)
        return True

    def info(self) -> dict[str, Any]:
        """The active table version, this process's id (reloads keep it) and the last refusal."""
        return {"version": self.version, "pid": os.getpid(), "last_error": self.last_error}


class GuardrailsServer:
    def __init__(self, table: dict[str, Any] | str | None = None) -> None:
        self.guard = LiveGuardrails(table)
        logger.info("guardrails ready: table %s", self.guard.version)

    @property
    def last_error(self) -> str | None:
        return self.guard.last_error

    def reconfigure(self, user_config: dict[str, Any] | None) -> None:
        """Live table update from Ray Serve ``user_config`` (``{"table": {...}}``; see :class:`LiveGuardrails`)."""
        self.guard.apply((user_config or {}).get("table"))

    async def version(self) -> str:
        return self.guard.version

    async def info(self) -> dict[str, Any]:
        """The active table version and this replica's process id (reloads keep the pid)."""
        return self.guard.info()

    async def pre(self, text: str, history: Sequence[str] = ()) -> PreGuardResult:
        return await self.guard.pre(text, list(history))

    async def post(self, sentence: str, view: PostGuardView, context: str = "") -> SentenceVerdict:
        return await self.guard.post(sentence, view, context)
