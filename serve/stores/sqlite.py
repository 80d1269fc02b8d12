"""SQLite session store (embedded profile): WAL mode, one transaction per save.

Implements :class:`pipelines.sessions.TurnStore`::

    sessions     session_id, principal (owner), created_at, updated_at, turn_count, expires_at
    turns        session_id, idx, turn_id (unique), body (a TurnRecord as JSON)
    leases       session_id, holder, expires_at          (one turn of a session at a time)
    fences       session_id, holder, token, granted_at   (the lease's fencing token: the last grant's)
    idempotency  session_id, key, turn_id                (a retried turn finds its record)
    vaults       session_id, blob                        (the sealed PII vault, see serve.stores.vault)

A save is one ``BEGIN IMMEDIATE`` transaction: the fencing check (a ``fence``
that is not the session's current token raises
:class:`~pipelines.errors.LeaseLost`), the owner check, the turn row (inserted,
or overwritten when its ``turn_id`` is known), the session row, the idempotency
key and the vault land together or not at all. A lease grant to a new holder
raises the session's token by one; the first grant of a session (or one after
its fence row was purged) starts from the store clock in milliseconds, so
tokens keep growing even across a purge. Sessions expire
``ttl_s`` after their last turn: expired sessions read as absent and are purged
lazily by later writes. Every ``sqlite3`` failure leaves as
:class:`~pipelines.errors.StoreUnavailable`.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.errors import LeaseLost, NotFound, StoreUnavailable, TandemError
from pipelines.protocols import TurnRecord
from pipelines.sessions import LOCAL_PRINCIPAL, TurnLoad

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
CREATE TABLE IF NOT EXISTS leases (
    session_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency (
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
);
CREATE TABLE IF NOT EXISTS fences (
    session_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    token INTEGER NOT NULL,
    granted_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS vaults (
    session_id TEXT PRIMARY KEY,
    blob BLOB NOT NULL
);
"""
# Columns added after the first release: old files are migrated in place.
_COLUMNS = {"principal": "TEXT", "expires_at": "REAL"}
_PURGE_BATCH = 64


class SQLiteSessionStore:
    """The embedded :class:`~pipelines.sessions.TurnStore` on one SQLite file (see module docstring).

    Several processes may share the file (WAL mode, ``busy_timeout_s``).
    ``on_connect`` is called with every new connection (pragmas; fault injection in tests).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        ttl_s: float | None = None,
        busy_timeout_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        on_connect: Callable[[sqlite3.Connection], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ttl_s = ttl_s
        self.busy_timeout_s = busy_timeout_s
        self.clock = clock
        self.on_connect = on_connect
        self._local = threading.local()
        conn = self._conn()
        conn.executescript(_SCHEMA)
        have = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
        for col, kind in _COLUMNS.items():
            if col not in have:
                conn.execute(f"ALTER TABLE sessions ADD COLUMN {col} {kind}")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            if self.on_connect is not None:
                self.on_connect(conn)
            self._local.conn = conn
        return conn

    # -- sync core (run in a thread by the async API) --------------------------

    def _live(self, conn: sqlite3.Connection, session_id: str) -> tuple[str | None, bool]:
        """(owner, exists) of a session that has not expired."""
        row = conn.execute("SELECT principal, expires_at FROM sessions WHERE session_id=?", (session_id,)).fetchone()
        if row is None or (row[1] is not None and row[1] <= self.clock()):
            return None, False
        return row[0], True

    def _history(self, session_id: str, limit: int | None) -> list[TurnRecord]:
        conn = self._conn()
        if not self._live(conn, session_id)[1]:
            return []
        if limit is None:
            rows = conn.execute("SELECT body FROM turns WHERE session_id=? ORDER BY idx", (session_id,)).fetchall()
        else:
            rows = conn.execute(
                "SELECT body FROM (SELECT idx, body FROM turns WHERE session_id=? ORDER BY idx DESC LIMIT ?)"
                " ORDER BY idx",
                (session_id, limit),
            ).fetchall()
        return [TurnRecord.model_validate_json(r[0]) for r in rows]

    def _drop(self, conn: sqlite3.Connection, session_ids: list[str]) -> None:
        for table in ("turns", "idempotency", "vaults", "sessions"):
            conn.executemany(f"DELETE FROM {table} WHERE session_id=?", [(s,) for s in session_ids])

    def _purge(self, conn: sqlite3.Connection, now: float) -> None:
        rows = conn.execute("SELECT session_id FROM sessions WHERE expires_at IS NOT NULL AND expires_at <= ?"
                            " LIMIT ?", (now, _PURGE_BATCH)).fetchall()
        if rows:
            self._drop(conn, [r[0] for r in rows])
        if self.ttl_s is not None:  # fences of sessions idle a whole TTL whose lease has lapsed (tokens restart
            # from the clock, still above any earlier one)
            conn.execute("DELETE FROM fences WHERE rowid IN (SELECT f.rowid FROM fences f LEFT JOIN leases l"
                         " ON l.session_id = f.session_id WHERE f.granted_at <= ? AND"
                         " (l.expires_at IS NULL OR l.expires_at <= ?) LIMIT ?)",
                         (now - self.ttl_s, now, _PURGE_BATCH))

    @staticmethod
    def _check_fence(conn: sqlite3.Connection, session_id: str, fence: int | None) -> None:
        """Inside a save's transaction: a ``fence`` that is not the session's current token is refused."""
        if fence is None:
            return
        row = conn.execute("SELECT token FROM fences WHERE session_id=?", (session_id,)).fetchone()
        if row is None or int(row[0]) != fence:
            current = None if row is None else int(row[0])
            raise LeaseLost(f"session {session_id!r}: this turn's lease token {fence} is stale (current: {current});"
                            " another turn took the session — nothing was stored",
                            details={"session_id": session_id, "fence": fence, "current": current})

    def _save(self, session_id: str, record: TurnRecord, principal: str, key: str | None,
              vault: bytes | None, overwrite: bool = True, fence: int | None = None) -> TurnRecord:
        conn = self._conn()
        now = self.clock()
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._check_fence(conn, session_id, fence)
            self._purge(conn, now)
            owner, exists = self._live(conn, session_id)
            if not exists:
                self._drop(conn, [session_id])  # an expired session's leftovers: start afresh
            if exists and owner not in (None, principal):
                raise NotFound(f"no session {session_id!r}", details={"session_id": session_id})
            row = conn.execute("SELECT idx FROM turns WHERE session_id=? AND turn_id=?",
                               (session_id, record.turn_id)).fetchone()
            expires = None if self.ttl_s is None else now + self.ttl_s
            if row is not None and not overwrite:
                raise sqlite3.IntegrityError(f"turn id {record.turn_id!r} is already stored")
            if row is not None:
                stored = record.model_copy(update={"index": int(row[0])})
                conn.execute("UPDATE turns SET body=? WHERE session_id=? AND turn_id=?",
                             (stored.model_dump_json(), session_id, record.turn_id))
                conn.execute("UPDATE sessions SET updated_at=?, expires_at=? WHERE session_id=?",
                             (now, expires, session_id))
            else:
                nxt = conn.execute("SELECT COALESCE(MAX(idx), -1) + 1 FROM turns WHERE session_id=?",
                                   (session_id,)).fetchone()
                stored = record.model_copy(update={"index": int(nxt[0])})
                conn.execute("INSERT INTO turns (session_id, idx, turn_id, body) VALUES (?, ?, ?, ?)",
                             (session_id, stored.index, stored.turn_id, stored.model_dump_json()))
                conn.execute(
                    "INSERT INTO sessions (session_id, created_at, updated_at, turn_count, principal, expires_at)"
                    " VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(session_id) DO UPDATE SET"
                    " updated_at=excluded.updated_at, turn_count=turn_count+1,"
                    " principal=COALESCE(principal, excluded.principal), expires_at=excluded.expires_at",
                    (session_id, now, now, principal, expires),
                )
            if key:
                conn.execute("INSERT OR IGNORE INTO idempotency (session_id, key, turn_id) VALUES (?, ?, ?)",
                             (session_id, key, record.turn_id))
            if vault is not None:
                conn.execute("INSERT INTO vaults (session_id, blob) VALUES (?, ?) ON CONFLICT(session_id)"
                             " DO UPDATE SET blob=excluded.blob", (session_id, vault))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return stored

    def _find(self, session_id: str, key: str) -> TurnRecord | None:
        conn = self._conn()
        if not self._live(conn, session_id)[1]:
            return None
        row = conn.execute("SELECT t.body FROM idempotency i JOIN turns t ON t.session_id=i.session_id"
                           " AND t.turn_id=i.turn_id WHERE i.session_id=? AND i.key=?", (session_id, key)).fetchone()
        return None if row is None else TurnRecord.model_validate_json(row[0])

    def _acquire(self, session_id: str, holder: str, ttl_s: float) -> int:
        conn = self._conn()
        now = self.clock()
        token = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT holder, expires_at FROM leases WHERE session_id=?", (session_id,)).fetchone()
            if row is None or row[0] == holder or row[1] <= now:
                conn.execute("INSERT INTO leases (session_id, holder, expires_at) VALUES (?, ?, ?)"
                             " ON CONFLICT(session_id) DO UPDATE SET holder=excluded.holder,"
                             " expires_at=excluded.expires_at", (session_id, holder, now + ttl_s))
                last = conn.execute("SELECT holder, token FROM fences WHERE session_id=?", (session_id,)).fetchone()
                if last is not None and last[0] == holder:
                    token = int(last[1])  # a renewal, or the same holder again with nobody in between
                else:
                    token = int(last[1]) + 1 if last is not None else max(1, int(now * 1000))
                conn.execute("INSERT INTO fences (session_id, holder, token, granted_at) VALUES (?, ?, ?, ?)"
                             " ON CONFLICT(session_id) DO UPDATE SET holder=excluded.holder, token=excluded.token,"
                             " granted_at=excluded.granted_at", (session_id, holder, token, now))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return token

    def _lease_left(self, session_id: str) -> float | None:
        row = self._conn().execute("SELECT expires_at FROM leases WHERE session_id=?", (session_id,)).fetchone()
        left = None if row is None else row[0] - self.clock()
        return None if left is None or left <= 0 else left

    def _release(self, session_id: str, holder: str) -> None:
        self._conn().execute("DELETE FROM leases WHERE session_id=? AND holder=?", (session_id, holder))

    def _vault(self, session_id: str) -> bytes | None:
        conn = self._conn()
        if not self._live(conn, session_id)[1]:
            return None
        row = conn.execute("SELECT blob FROM vaults WHERE session_id=?", (session_id,)).fetchone()
        return None if row is None else bytes(row[0])

    def _load(self, session_id: str, key: str | None, limit: int | None) -> tuple[TurnLoad, bytes | None]:
        """Owner, keyed turn, history and sealed vault in one read transaction (one snapshot)."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            owner, exists = self._live(conn, session_id)
            if not exists:
                return TurnLoad(None), None
            known = self._find(session_id, key) if key else None
            history = [] if known is not None else self._history(session_id, limit)
            row = conn.execute("SELECT blob FROM vaults WHERE session_id=?", (session_id,)).fetchone()
            return TurnLoad(owner, known, history), None if row is None else bytes(row[0])
        finally:
            conn.execute("COMMIT")

    async def load_turn(self, session_id: str, idempotency_key: str | None, limit: int | None) -> TurnLoad:
        """What a turn reads before it runs, in one thread hop (:func:`pipelines.sessions.load_turn`)."""
        return (await self._run(self._load, session_id, idempotency_key, limit))[0]

    async def load_turn_sealed(self, session_id: str, idempotency_key: str | None,
                               limit: int | None) -> tuple[TurnLoad, bytes | None]:
        """:meth:`load_turn` plus the session's sealed vault, still one hop (for the redacting store)."""
        return await self._run(self._load, session_id, idempotency_key, limit)

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, *args)
        except TandemError:
            raise
        except sqlite3.Error as exc:
            raise StoreUnavailable("the session store failed; nothing was written",
                                   details={"reason": type(exc).__name__}) from exc

    # -- TurnStore -------------------------------------------------------------

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        """The session's turns, oldest first (the last ``limit`` when given); [] when unknown or expired."""
        return await self._run(self._history, session_id, limit)

    async def session_exists(self, session_id: str) -> bool:
        """True once a turn of the session is stored (and until it expires)."""
        return (await self._run(lambda: self._live(self._conn(), session_id)))[1]

    async def owner(self, session_id: str) -> str | None:
        """The principal owning the session, or None."""
        return (await self._run(lambda: self._live(self._conn(), session_id)))[0]

    async def save_turn(self, session_id: str, record: TurnRecord, *, principal: str,
                        idempotency_key: str | None = None, vault: bytes | None = None,
                        fence: int | None = None) -> TurnRecord:
        """Insert or overwrite the turn, claim the session, record the key and vault: one transaction, refused
        whole (:class:`~pipelines.errors.LeaseLost`) when ``fence`` is not the session's current lease token."""
        return await self._run(self._save, session_id, record, principal, idempotency_key, vault, True, fence)

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        """Append one whole turn (a known turn id is refused) as the session's owner, or ``local``."""
        owner = await self.owner(session_id)
        await self._run(self._save, session_id, record, owner or LOCAL_PRINCIPAL, None, None, False)

    async def find_turn(self, session_id: str, idempotency_key: str) -> TurnRecord | None:
        """The turn saved with this idempotency key, if any."""
        return await self._run(self._find, session_id, idempotency_key)

    async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> int:
        """Take the session's lease unless another live holder has it: its fencing token (0 when refused)."""
        return await self._run(self._acquire, session_id, holder, ttl_s)

    async def release_lease(self, session_id: str, holder: str) -> None:
        """Drop the lease if ``holder`` still has it."""
        await self._run(self._release, session_id, holder)

    async def lease_left_s(self, session_id: str) -> float | None:
        """Seconds the session's lease has left, or None when nobody holds it (or it has lapsed)."""
        return await self._run(self._lease_left, session_id)

    async def get_vault(self, session_id: str) -> bytes | None:
        """The session's sealed vault (opaque bytes), or None."""
        return await self._run(self._vault, session_id)

    def dump(self, session_id: str) -> list[dict]:
        """The raw stored turns (for the CLI and tests)."""
        return [json.loads(r.model_dump_json()) for r in self._history(session_id, None)]
