"""``ToolsServer``: the configured pack's typed tools, next to its world store — for any pack.

The pack says what it needs (:class:`pipelines.core.domain.Domain`, serving section): a persistent pack's
world lives in the world store (SQLite on the node's disk in the embedded profile), seeded once from
``pack.new_world(seed, dataset)`` and rebuilt from the stored rows on every start; the store is also the
write ledger — a confirmed write commits the entities it changed and its outcome, keyed by the pending
card, in one transaction before the in-memory world changes, and a key already recorded returns its
outcome without running again (:class:`pipelines.core.runner.LocalToolRunner`). A pack that is not
persistent (read-only data) gets a fresh world from its seed. ``pack.tool_runner(world, store)`` is the
tool port hosted here; a pack whose sessions carry live state also answers ``load_state`` /
``live_facts`` / ``bind_user``. The world is the replica's state: the deployment runs one replica (the
store is the source of truth across restarts).

Every call reaches the pack's runner through the core's :class:`~pipelines.core.runner.WriteGate`: a write
tool runs only with a confirmed session whose card is that very call and an idempotency key, whatever runner
the pack returns; anything else is :class:`~pipelines.errors.UnconfirmedWrite` (logged), and the pack never
sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from models.prepare import cache_dir
from pipelines.core.domain import Domain
from pipelines.core.ports import UNGROUNDED, ToolCallResult, ToolSession
from pipelines.core.runner import WriteGate, write_tools_of
from pipelines.domains import load_domain
from pipelines.errors import ToolError, UnconfirmedWrite
from serve.config import DomainConfig
from serve.stores.world_sqlite import SQLiteWorldStore

__all__ = ["ToolsServer", "open_world"]

logger = logging.getLogger("tandem.tools")


def open_world(cfg: DomainConfig, pack: Domain) -> tuple[Any, SQLiteWorldStore | None, str]:
    """The pack's world and its store (``None`` for a pack that is not persistent); returns its origin."""
    if not pack.persistent:
        return pack.new_world(cfg.seed, cfg.dataset), None, f"generated:{cfg.seed}"
    path = Path(cfg.world_path).expanduser() if cfg.world_path else cache_dir() / f"world-{cfg.name}-{cfg.seed}.db"
    store = SQLiteWorldStore(path)
    origin = "store"
    if store.is_empty():
        dataset = Path(cfg.dataset).expanduser() if cfg.dataset else None
        if dataset is not None and not dataset.is_file():
            logger.warning("dataset %s not found; seeding the synthetic world (seed %d)", dataset, cfg.seed)
        store.seed_if_empty(pack.new_world(cfg.seed, str(dataset) if dataset else None))
        origin = f"dataset:{dataset.name}" if dataset is not None and dataset.is_file() else f"generated:{cfg.seed}"
    return store.load(pack.world_from_entities), store, origin


class ToolsServer:
    """Hosts the configured pack's tool port over its world (see module docstring)."""

    def __init__(self, domain_config: dict[str, Any]) -> None:
        cfg = self.cfg = DomainConfig.model_validate(domain_config)
        self.pack = load_domain(cfg.name)
        world, self.store, origin = open_world(cfg, self.pack)
        self.runner = self.pack.tool_runner(world, self.store)
        self.port = WriteGate(self.runner, write_tools_of(self.pack))
        logger.info("tools ready: %s world from %s", cfg.name, origin)

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        try:
            result = await self.port.call(name, args, session)
        except UnconfirmedWrite as exc:
            logger.warning("write %s refused by the tool port: %s (session %s)", name,
                           exc.details.get("reason"), session.session_id)
            raise
        if result.replayed:
            logger.info("write %s replayed from the ledger (session %s)", name, session.session_id)
        elif result.reason == UNGROUNDED:
            logger.warning("write %s refused: ungrounded arguments (session %s)", name, session.session_id)
        return result

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        return await self.runner.precheck(name, args, session)

    def _live(self, method: str) -> Any:
        fn = getattr(self.runner, method, None)
        if fn is None:
            raise ToolError(f"the {self.pack.name} tools keep no live session state ({method})",
                            details={"reason": "no_live_state"})
        return fn

    async def load_state(self, session_id: str, keys: Sequence[str]) -> Any:
        return await self._live("load_state")(session_id, list(keys))

    async def live_facts(self, session_id: str) -> Any:
        return await self._live("live_facts")(session_id)

    async def bind_user(self, session_id: str, user_id: str | None) -> str:
        """Bind a new session to its user (a pack that ``binds_user``); returns the bound user."""
        return self._live("bind_user")(session_id, user_id)

    async def set_state(self, session_id: str, values: dict[str, Any]) -> int:
        """Move a session's live state (tests and operators: a new focus); returns its new version."""
        return self._live("set_state")(session_id, values)

    async def ledger(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """The recorded writes (of one session), oldest first (tests and operators audit with it)."""
        return [] if self.store is None else [e.model_dump(mode="json") for e in self.store.ledger(session_id)]

    async def reset_world(self) -> str:
        """Put the world back to its seed (``domain.resettable`` only: the eval's fresh world per task); the write
        ledger stays. Refused with :class:`ToolError` in any other app. Returns the world's origin."""
        if not self.cfg.resettable:
            raise ToolError("this app's world cannot be reset (domain.resettable is off)",
                            details={"reason": "not_resettable"})
        dataset = Path(self.cfg.dataset).expanduser() if self.cfg.dataset else None
        world = self.pack.new_world(self.cfg.seed, str(dataset) if dataset and dataset.is_file() else None)
        if self.store is not None:
            self.store.save(world)  # one transaction: the stored world is the seed again
        self.runner.world = world
        logger.warning("world reset to its seed (domain.resettable)")
        return f"dataset:{dataset.name}" if dataset is not None and dataset.is_file() else f"generated:{self.cfg.seed}"

    async def entity(self, kind: str, key: str) -> dict[str, Any] | None:
        """Read-only view of one entity of the world (tests and operators check state with it)."""
        import json

        world = getattr(self.runner, "world", None)
        if world is None or not hasattr(world, "has") or not world.has(kind, key):
            return None
        return json.loads(world.entity_json(kind, key))
