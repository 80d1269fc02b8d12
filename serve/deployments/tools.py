"""``ToolsServer``: the support world's typed tools next to the world store.

The replica loads the world from the SQLite world store (seeding it once from
the tau2 ``db.json`` when configured and present, else from the seeded
generator). The store is also the write ledger: a confirmed write commits the
entities it changed and its outcome, keyed by the pending card, in one
transaction before the in-memory world changes; a key already recorded returns
its outcome without running again (:class:`pipelines.core.ports.LocalToolRunner`).
Write arguments are checked for grounding at precheck and before execution.
The world is the replica's state: the deployment runs one replica (the store
is the source of truth across restarts).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from models.prepare import cache_dir
from pipelines.core.ports import UNGROUNDED, ToolCallResult, ToolSession
from pipelines.core.runner import LocalToolRunner
from pipelines.domains.support import build_support_domain, generate_world, load_tau2_world
from serve.config import DomainConfig
from serve.stores.world_sqlite import SQLiteWorldStore

__all__ = ["ToolsServer", "PackToolsServer", "open_world"]

logger = logging.getLogger("tandem.tools")


def open_world(cfg: DomainConfig) -> tuple[Any, SQLiteWorldStore, str]:
    """The world store for ``cfg`` (seeded once) and the loaded world; returns its origin."""
    path = Path(cfg.world_path).expanduser() if cfg.world_path else cache_dir() / f"world-{cfg.name}-{cfg.seed}.db"
    store = SQLiteWorldStore(path)
    origin = "store"
    if store.is_empty():
        tau2 = Path(cfg.tau2_db).expanduser() if cfg.tau2_db else None
        if tau2 is not None and tau2.is_file():
            store.seed_if_empty(load_tau2_world(tau2))
            origin = f"tau2:{tau2.name}"
        else:
            if tau2 is not None:
                logger.warning("tau2 db %s not found; seeding the synthetic world (seed %d)", tau2, cfg.seed)
            store.seed_if_empty(generate_world(cfg.seed))
            origin = f"generated:{cfg.seed}"
    return store.load(), store, origin


class ToolsServer:
    """Hosts :class:`pipelines.core.ports.LocalToolRunner` over the persisted world."""

    def __init__(self, domain_config: dict[str, Any]) -> None:
        cfg = DomainConfig.model_validate(domain_config)
        self.domain = build_support_domain()
        world, self.store, origin = open_world(cfg)
        self.runner = LocalToolRunner(self.domain, world, ledger=self.store)
        logger.info("tools ready: world from %s (%d users, %d orders)", origin, len(world.users), len(world.orders))

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        result = await self.runner.call(name, args, session)
        if result.replayed:
            logger.info("write %s replayed from the ledger (session %s)", name, session.session_id)
        elif result.reason == UNGROUNDED:
            logger.warning("write %s refused: ungrounded arguments (session %s)", name, session.session_id)
        return result

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        return await self.runner.precheck(name, args, session)

    async def ledger(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """The recorded writes (of one session), oldest first (tests and operators audit with it)."""
        return [e.model_dump(mode="json") for e in self.store.ledger(session_id)]

    async def get_order(self, order_id: str) -> dict[str, Any] | None:
        """Read-only view of one order (tests and operators check state with it)."""
        order = self.runner.world.orders.get(order_id)
        return None if order is None else order.model_dump(mode="json")


class PackToolsServer:
    """Hosts a pack's in-memory tools (``make_tools(seed)`` of its module) behind the one tool port."""

    def __init__(self, domain_config: dict[str, Any]) -> None:
        from pipelines.domains import domain_module

        cfg = DomainConfig.model_validate(domain_config)
        self.runner = domain_module(cfg.name).make_tools(cfg.seed)
        logger.info("tools ready: domain %s (seed %d)", cfg.name, cfg.seed)

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        return await self.runner.call(name, args, session)

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        return await self.runner.precheck(name, args, session)
