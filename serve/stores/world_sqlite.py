"""SQLite store of the retail world (embedded profile): WAL mode, atomic writes, a write ledger.

Three tables (``users``, ``orders``, ``products``), each ``id TEXT PRIMARY KEY,
body TEXT`` holding the entity's JSON. Every write runs in one
``BEGIN IMMEDIATE`` transaction: either all the given entities land or none.

The ``write_ledger`` table makes confirmed writes exactly-once: one row per
idempotency key (session, card, the turn the card was shown in) holding the
outcome the tool returned. :meth:`SQLiteWorldStore.commit_write` upserts the
changed entities and inserts the row in the same transaction, after checking
the key inside it — so a key is recorded at most once, a recorded key always
has its entities, and a failed commit leaves neither. It implements
:class:`pipelines.core.ports.WriteLedger`. stdlib ``sqlite3`` only.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from pipelines.core.ports import LedgerEntry
from pipelines.domains.support.world import Order, Product, RetailWorld, User

__all__ = ["SQLiteWorldStore"]

_TABLES = ("users", "orders", "products")
_SCHEMA = "\n".join(
    f"CREATE TABLE IF NOT EXISTS {t} (id TEXT PRIMARY KEY, body TEXT NOT NULL);" for t in _TABLES
) + (
    "\nCREATE TABLE IF NOT EXISTS write_ledger (key TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
    "tool TEXT NOT NULL, request TEXT NOT NULL, outcome TEXT NOT NULL, created_at REAL NOT NULL);"
)


class SQLiteWorldStore:
    """Persists a :class:`RetailWorld` in one SQLite file (several processes may share it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conn().executescript(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def journal_mode(self) -> str:
        """The connection's journal mode (``wal`` once opened)."""
        return str(self._conn().execute("PRAGMA journal_mode").fetchone()[0])

    def close(self) -> None:
        """Close this thread's connection (a later call reopens one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- reads -------------------------------------------------------------------

    def is_empty(self) -> bool:
        """True when no user, order or product is stored."""
        conn = self._conn()
        return all(conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is None for t in _TABLES)

    def load(self) -> RetailWorld:
        """The whole stored world (empty world when nothing is stored)."""
        conn = self._conn()
        conn.execute("BEGIN")  # one consistent snapshot across the three tables
        try:
            users = {i: User.model_validate_json(b) for i, b in conn.execute("SELECT id, body FROM users")}
            orders = {i: Order.model_validate_json(b) for i, b in conn.execute("SELECT id, body FROM orders")}
            products = {
                i: Product.model_validate_json(b) for i, b in conn.execute("SELECT id, body FROM products")
            }
        finally:
            conn.execute("COMMIT")
        return RetailWorld(users=users, orders=orders, products=products)

    # -- writes ------------------------------------------------------------------

    def _write(self, rows: Iterable[tuple[str, str, str]], replace_all: bool) -> None:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if replace_all:
                for table in _TABLES:
                    conn.execute(f"DELETE FROM {table}")
            for table, key, body in rows:
                conn.execute(f"INSERT OR REPLACE INTO {table} (id, body) VALUES (?, ?)", (key, body))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @staticmethod
    def _rows(
        users: Iterable[User], orders: Iterable[Order], products: Iterable[Product]
    ) -> Iterable[tuple[str, str, str]]:
        # A generator: serialisation happens inside the transaction, so a bad entity rolls it back.
        for user in users:
            yield "users", user.user_id, user.model_dump_json(exclude_none=True)
        for order in orders:
            yield "orders", order.order_id, order.model_dump_json(exclude_none=True)
        for product in products:
            yield "products", product.product_id, product.model_dump_json(exclude_none=True)

    def save(self, world: RetailWorld) -> None:
        """Replace the stored world with ``world`` (one transaction)."""
        self._write(
            self._rows(world.users.values(), world.orders.values(), world.products.values()), replace_all=True
        )

    def save_entities(
        self,
        *,
        users: Iterable[User] = (),
        orders: Iterable[Order] = (),
        products: Iterable[Product] = (),
    ) -> None:
        """Upsert the given entities atomically: all of them or none."""
        self._write(self._rows(users, orders, products), replace_all=False)

    def save_changed(self, world: RetailWorld, user_ids: Iterable[str] = (), order_ids: Iterable[str] = ()) -> None:
        """Persist the entities a tool call changed (ids as in ``ToolOutcome.changed_*``)."""
        self.save_entities(
            users=[world.users[u] for u in user_ids], orders=[world.orders[o] for o in order_ids]
        )

    # -- the write ledger ------------------------------------------------------------

    @staticmethod
    def _entry(row: tuple[str, str, str, str, str] | None) -> LedgerEntry | None:
        if row is None:
            return None
        key, session_id, tool, request, outcome = row
        return LedgerEntry.model_validate(
            {"key": key, "session_id": session_id, "tool": tool, "request": request, "outcome": json.loads(outcome)}
        )

    def recorded(self, key: str) -> LedgerEntry | None:
        """The ledger entry of ``key``, or ``None``."""
        row = self._conn().execute(
            "SELECT key, session_id, tool, request, outcome FROM write_ledger WHERE key = ?", (key,)
        ).fetchone()
        return self._entry(row)

    def ledger(self, session_id: str | None = None) -> list[LedgerEntry]:
        """Every ledger entry (of one session), oldest first."""
        sql = "SELECT key, session_id, tool, request, outcome FROM write_ledger"
        params: tuple[str, ...] = ()
        if session_id is not None:
            sql, params = sql + " WHERE session_id = ?", (session_id,)
        rows = self._conn().execute(sql + " ORDER BY created_at, rowid", params).fetchall()
        return [e for e in map(self._entry, rows) if e is not None]

    def commit_write(
        self, entry: LedgerEntry | None, world: RetailWorld, user_ids: list[str], order_ids: list[str]
    ) -> LedgerEntry | None:
        """Upsert the changed entities of ``world`` and insert ``entry``, in one transaction.

        Returns the entry already recorded under ``entry.key`` (nothing is
        written) or ``None`` when this call recorded it. Any failure rolls the
        whole transaction back and is raised.
        """
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if entry is not None:
                prior = self._entry(conn.execute(
                    "SELECT key, session_id, tool, request, outcome FROM write_ledger WHERE key = ?", (entry.key,)
                ).fetchone())
                if prior is not None:
                    conn.execute("ROLLBACK")
                    return prior
            rows = self._rows([world.users[u] for u in user_ids], [world.orders[o] for o in order_ids], ())
            for table, key, body in rows:
                conn.execute(f"INSERT OR REPLACE INTO {table} (id, body) VALUES (?, ?)", (key, body))
            if entry is not None:
                conn.execute(
                    "INSERT INTO write_ledger (key, session_id, tool, request, outcome, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (entry.key, entry.session_id, entry.tool, entry.request,
                     entry.outcome.model_dump_json(), time.time()),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return None

    def seed_if_empty(self, world: RetailWorld) -> bool:
        """Store ``world`` when the store is empty; True when it seeded."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")  # the emptiness check and the seed are one transaction
        try:
            empty = all(conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is None for t in _TABLES)
            if empty:
                for table, key, body in self._rows(
                    world.users.values(), world.orders.values(), world.products.values()
                ):
                    conn.execute(f"INSERT INTO {table} (id, body) VALUES (?, ?)", (key, body))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return empty

    # -- async wrappers (for Serve deployments) ---------------------------------------

    async def aload(self) -> RetailWorld:
        """:meth:`load` in a worker thread."""
        return await asyncio.to_thread(self.load)

    async def asave_changed(
        self, world: RetailWorld, user_ids: Iterable[str] = (), order_ids: Iterable[str] = ()
    ) -> None:
        """:meth:`save_changed` in a worker thread (entities are copied first, on the caller's thread)."""
        users = [world.users[u].model_copy(deep=True) for u in user_ids]
        orders = [world.orders[o].model_copy(deep=True) for o in order_ids]
        await asyncio.to_thread(lambda: self.save_entities(users=users, orders=orders))
