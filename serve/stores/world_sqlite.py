"""SQLite store of a pack's world (embedded profile): WAL mode, atomic writes, a write ledger.

The store knows no domain: a world is rows of ``(kind, id, json)`` in one ``entities`` table, written by
the world itself (:meth:`pipelines.core.runner.World.entity_json`) and read back by the pack's
``from_entities``. Every write runs in one ``BEGIN IMMEDIATE`` transaction: either all the given
entities land or none.

The ``write_ledger`` table makes confirmed writes exactly-once: one row per idempotency key (session,
card, the turn the card was shown in) holding the outcome the tool returned.
:meth:`SQLiteWorldStore.commit_write` upserts the changed entities and inserts the row in the same
transaction, after checking the key inside it — so a key is recorded at most once, a recorded key always
has its entities, and a failed commit leaves neither. A commit with the turn's lease token (``fence``)
is refused — :class:`~pipelines.errors.LeaseLost`, nothing written — when the ledger has already accepted a
higher token for the session (``ledger_fences``: the highest per session, raised in the same transaction). It
implements :class:`pipelines.core.ports.WriteLedger`. stdlib ``sqlite3`` only.

A file written by an earlier version (one ``(id, body)`` table per entity kind, named by the kind's
plural) is read into ``entities`` once, on open, so nothing already stored is lost.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pipelines.core.ports import LedgerEntry, check_fence

__all__ = ["SQLiteWorldStore"]

W = TypeVar("W")
Row = tuple[str, str, str]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entities (kind TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, "
    "PRIMARY KEY (kind, id));\n"
    "CREATE TABLE IF NOT EXISTS write_ledger (key TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
    "tool TEXT NOT NULL, request TEXT NOT NULL, outcome TEXT NOT NULL, created_at REAL NOT NULL);\n"
    "CREATE TABLE IF NOT EXISTS ledger_fences (session_id TEXT PRIMARY KEY, token INTEGER NOT NULL);"
)
_OWN = {"entities", "write_ledger", "ledger_fences"}


def _earlier_kind(table: str, columns: Sequence[str]) -> str | None:
    """The kind an earlier-layout table held (``orders`` → ``order``), or None for any other table."""
    if table in _OWN or table.startswith("sqlite_") or sorted(columns) != ["body", "id"] or len(table) < 2:
        return None
    return table[:-1] if table.endswith("s") else None


class SQLiteWorldStore:
    """Persists a world as entity rows in one SQLite file (several processes may share it)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conn().executescript(_SCHEMA)
        self._import_earlier()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def _import_earlier(self) -> None:
        conn = self._conn()
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        earlier: dict[str, str] = {}
        for table in tables:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info('{table}')")]
            kind = _earlier_kind(table, columns)
            if kind is not None:
                earlier[table] = kind
        if not earlier:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM entities LIMIT 1").fetchone() is None:
                for table in earlier:
                    conn.execute(f"INSERT INTO entities (kind, id, body) SELECT ?, id, body FROM {table}",
                                 (earlier[table],))
            for table in earlier:
                conn.execute(f"DROP TABLE {table}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

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
        """True when no entity is stored."""
        return self._conn().execute("SELECT 1 FROM entities LIMIT 1").fetchone() is None

    def rows(self) -> list[Row]:
        """Every stored entity as ``(kind, id, json)``, in one consistent snapshot."""
        return [(k, i, b) for k, i, b in self._conn().execute("SELECT kind, id, body FROM entities ORDER BY rowid")]

    def load(self, build: Callable[[Iterable[Row]], W]) -> W:
        """The stored world, made by the pack's ``build`` (its ``from_entities``) from the rows."""
        return build(self.rows())

    # -- writes ------------------------------------------------------------------

    def _write(self, rows: Iterable[Row], replace_all: bool) -> None:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if replace_all:
                conn.execute("DELETE FROM entities")
            for kind, key, body in rows:  # serialised inside the transaction: a bad entity rolls it back
                conn.execute("INSERT OR REPLACE INTO entities (kind, id, body) VALUES (?, ?, ?)", (kind, key, body))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def save(self, world: Any) -> None:
        """Replace the stored world with ``world`` (one transaction)."""
        self._write(world.entities(), replace_all=True)

    def save_rows(self, rows: Iterable[Row]) -> None:
        """Upsert the given entity rows atomically: all of them or none."""
        self._write(rows, replace_all=False)

    def save_changed(self, world: Any, changed: Mapping[str, Sequence[str]]) -> None:
        """Persist the entities a tool call changed (kind → ids, as in ``ToolCallResult.changed``)."""
        self._write(_changed_rows(world, changed), replace_all=False)

    def seed_if_empty(self, world: Any) -> bool:
        """Store ``world`` when the store is empty; True when it seeded."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")  # the emptiness check and the seed are one transaction
        try:
            empty = conn.execute("SELECT 1 FROM entities LIMIT 1").fetchone() is None
            if empty:
                for kind, key, body in world.entities():
                    conn.execute("INSERT INTO entities (kind, id, body) VALUES (?, ?, ?)", (kind, key, body))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return empty

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

    def commit_write(self, entry: LedgerEntry | None, world: Any, changed: Mapping[str, Sequence[str]], *,
                     fence: int | None = None) -> LedgerEntry | None:
        """Upsert the changed entities of ``world`` and insert ``entry``, in one transaction.

        Returns the entry already recorded under ``entry.key`` (nothing is written) or ``None`` when this
        call recorded it. With ``fence``, a token lower than the highest this ledger has accepted for
        ``entry.session_id`` raises :class:`~pipelines.errors.LeaseLost` (nothing is written); an accepted one
        becomes that highest. Any failure rolls the whole transaction back and is raised.
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
                if fence is not None:
                    row = conn.execute("SELECT token FROM ledger_fences WHERE session_id = ?",
                                       (entry.session_id,)).fetchone()
                    check_fence(None if row is None else int(row[0]), fence, entry.session_id)
                    conn.execute("INSERT INTO ledger_fences (session_id, token) VALUES (?, ?) ON CONFLICT(session_id)"
                                 " DO UPDATE SET token = MAX(token, excluded.token)", (entry.session_id, fence))
            for kind, key, body in _changed_rows(world, changed):
                conn.execute("INSERT OR REPLACE INTO entities (kind, id, body) VALUES (?, ?, ?)", (kind, key, body))
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

    # -- async wrappers (for Serve deployments) ---------------------------------------

    async def aload(self, build: Callable[[Iterable[Row]], W]) -> W:
        """:meth:`load` in a worker thread."""
        return await asyncio.to_thread(self.load, build)

    async def asave_changed(self, world: Any, changed: Mapping[str, Sequence[str]]) -> None:
        """:meth:`save_changed` in a worker thread (the rows are serialised first, on the caller's thread)."""
        rows = list(_changed_rows(world, changed))
        await asyncio.to_thread(self.save_rows, rows)


def _changed_rows(world: Any, changed: Mapping[str, Sequence[str]]) -> Iterable[Row]:
    for kind, keys in changed.items():
        for key in keys:
            yield kind, key, world.entity_json(kind, key)
