"""The tandem turn's state: the core's :class:`~pipelines.core.state.TurnState` plus what its steps share."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.core.ports import W1Tables
from pipelines.core.state import TurnState
from pipelines.core.tools import ToolCaller
from pipelines.sgc.phi import PhiTable

if TYPE_CHECKING:
    from .orchestrate import Orchestrator

__all__ = ["TandemState", "META_KEY", "quiet"]

#: Where the turn records itself in ``ctx.meta`` (and reads the session facts back next turn).
META_KEY = "tandem"


def quiet(task: asyncio.Future[Any]) -> asyncio.Future[Any]:
    """``task``, its failure read once done (it is raised where the turn awaits it, or the turn ended first)."""
    task.add_done_callback(lambda f: f.cancelled() or f.exception())
    return task


@dataclass
class TandemState(TurnState):
    """One tandem turn: the core state plus the rule tables on their way, the tool caller and the orchestrator.

    ``tables`` resolves to the W1 tables of the active rules version (fetched beside the pre-guard, only W1's
    labels wait for it); ``phi`` to their Φ table.
    """

    tables: asyncio.Future[W1Tables] | None = None
    phi: asyncio.Future[PhiTable] | None = None
    caller: ToolCaller | None = None
    orch: Orchestrator | None = None

    def record(self, meta: dict[str, Any]) -> None:
        """What the turn records of itself (``ctx.meta["tandem"]``; the pipeline records it so when the turn ends
        and before a checkpoint), by value: its placeholders are its own, never another turn's or the store's (the
        next turn names the values with its own: ``Vault.conceal``)."""
        self.ctx.meta[META_KEY] = self.vault.resolve(meta)

    async def versioned(self) -> None:
        """Wait for the W1 tables; the turn's rules version then names both tables."""
        assert self.tables is not None
        version = f"{self.pre.rules_version}+{(await self.tables).version}"
        self.ctx.rules_version = self.meta["rules_version"] = version
