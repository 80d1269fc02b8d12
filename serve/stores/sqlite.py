"""SQLite session store (embedded profile): WAL mode, one transaction per turn."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path

from pipelines.protocols import TurnRecord

__all__ = ["SQLiteSessionStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    turn_count INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    turn_id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
"""


class SQLiteSessionStore:
    """Implements :class:`pipelines.protocols.SessionStore` on one SQLite file.

    A turn is written in one ``BEGIN IMMEDIATE`` transaction: the session row and
    the turn row land together or not at all. Several processes may share the
    file (WAL mode, busy timeout).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as conn:
            conn.executescript(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    # -- sync core (run in a thread by the async API) --------------------------

    def _history(self, session_id: str, limit: int | None) -> list[TurnRecord]:
        conn = self._conn()
        if limit is None:
            rows = conn.execute(
                "SELECT body FROM turns WHERE session_id=? ORDER BY idx", (session_id,)
            ).fetchall()
        else:
            rows = conn.execute(
                "SELECT body FROM (SELECT idx, body FROM turns WHERE session_id=? ORDER BY idx DESC LIMIT ?)"
                " ORDER BY idx",
                (session_id, limit),
            ).fetchall()
        return [TurnRecord.model_validate_json(r[0]) for r in rows]

    def _exists(self, session_id: str) -> bool:
        row = self._conn().execute("SELECT 1 FROM sessions WHERE session_id=?", (session_id,)).fetchone()
        return row is not None

    def _append(self, session_id: str, record: TurnRecord) -> TurnRecord:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT COALESCE(MAX(idx), -1) + 1 FROM turns WHERE session_id=?", (session_id,)
            ).fetchone()
            stored = record.model_copy(update={"index": int(row[0])})
            conn.execute(
                "INSERT INTO turns (session_id, idx, turn_id, body) VALUES (?, ?, ?, ?)",
                (session_id, stored.index, stored.turn_id, stored.model_dump_json()),
            )
            conn.execute(
                "INSERT INTO sessions (session_id, created_at, updated_at, turn_count) VALUES (?, ?, ?, 1)"
                " ON CONFLICT(session_id) DO UPDATE SET updated_at=excluded.updated_at,"
                " turn_count=turn_count+1",
                (session_id, stored.created_at, stored.created_at),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return stored

    # -- SessionStore ----------------------------------------------------------

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        return await asyncio.to_thread(self._history, session_id, limit)

    async def session_exists(self, session_id: str) -> bool:
        return await asyncio.to_thread(self._exists, session_id)

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        await asyncio.to_thread(self._append, session_id, record)

    def dump(self, session_id: str) -> list[dict]:
        """The raw stored turns (for the CLI and tests)."""
        return [json.loads(r.model_dump_json()) for r in self._history(session_id, None)]
