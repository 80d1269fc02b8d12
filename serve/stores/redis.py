"""Redis session store (production profile): one Lua script per turn, so a turn lands whole or not at all.

Keys (``<p>`` is the prefix, default ``tandem``; ``{sid}`` is a hash tag so a
session's keys share a cluster slot)::

    <p>:s:{sid}:turns   LIST    one JSON TurnRecord per turn, index = position (oldest first)
    <p>:s:{sid}:meta    HASH    created_at, updated_at, turn_count  (exists ⇔ the session exists)
    <p>:turn_ids        HASH    turn_id → "<sid>#<index>"  (turn ids are unique across sessions)
    <p>:state:<key>     STRING  live-state cache entries (JSON, with a TTL)

The append script checks everything that could fail *before* its first write
(a duplicate turn id, keys of the wrong type, a corrupt counter): Redis does not
roll a script back, so no check may come after a write. The next index is read
and used inside the script, so concurrent appends from any number of replicas
get unique, dense indices. Answer metas (``answer.meta`` of W3) are the
``meta`` of the stored records: :meth:`RedisSessionStore.answer_metas`.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from typing import TYPE_CHECKING, Any

from pipelines.errors import ConfigError
from pipelines.protocols import TurnRecord

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from serve.config import StoreConfig

__all__ = [
    "RedisSessionStore",
    "RedisStoreError",
    "DuplicateTurnError",
    "CorruptSessionError",
    "APPEND_SCRIPT",
]


class RedisStoreError(RuntimeError):
    """A turn could not be stored; nothing of it was written."""


class DuplicateTurnError(RedisStoreError):
    """The turn id is already stored (in this or another session)."""


class CorruptSessionError(RedisStoreError):
    """A session key holds something this store did not write (wrong type, bad counter)."""


# KEYS: 1 turns list, 2 session meta hash, 3 turn-id hash
# ARGV: 1 turn_id, 2 record JSON without "index" (starts with "{"), 3 created_at, 4 session_id
APPEND_SCRIPT = """
local function kind(key)
  return redis.call('TYPE', key)['ok']
end
local t = kind(KEYS[1])
if t ~= 'none' and t ~= 'list' then
  return redis.error_reply('CORRUPT_SESSION turns key holds a ' .. t)
end
t = kind(KEYS[2])
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('CORRUPT_SESSION meta key holds a ' .. t)
end
t = kind(KEYS[3])
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('CORRUPT_SESSION turn-id key holds a ' .. t)
end
local count = redis.call('HGET', KEYS[2], 'turn_count')
if count and not tonumber(count) then
  return redis.error_reply('CORRUPT_SESSION turn_count is not a number')
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then
  return redis.error_reply('DUPLICATE_TURN ' .. ARGV[1])
end
if string.sub(ARGV[2], 1, 1) ~= '{' or string.len(ARGV[2]) < 3 then
  return redis.error_reply('BAD_RECORD the record body is not a JSON object')
end
-- every check passed: the writes below cannot fail
local n = redis.call('LLEN', KEYS[1])
local body = '{"index":' .. n .. ',' .. string.sub(ARGV[2], 2)
redis.call('RPUSH', KEYS[1], body)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4] .. '#' .. n)
redis.call('HSETNX', KEYS[2], 'created_at', ARGV[3])
redis.call('HSET', KEYS[2], 'updated_at', ARGV[3])
redis.call('HINCRBY', KEYS[2], 'turn_count', 1)
return n
"""


class RedisSessionStore:
    """Implements :class:`pipelines.protocols.SessionStore` on Redis (``redis.asyncio``).

    Give either a ``url`` (``redis://[:password@]host:port/db``) or a ready
    ``client``. With a URL the store opens one client per event loop (a Ray
    Serve replica has one; tests may run several loops one after another).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: aioredis.Redis | None = None,
        prefix: str = "tandem",
        socket_timeout_s: float = 5.0,
    ) -> None:
        if (url is None) == (client is None):
            raise ValueError("give url or client (exactly one)")
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError("prefix must be non-empty and contain no braces")
        self.url = url
        self.prefix = prefix
        self.socket_timeout_s = socket_timeout_s
        self._fixed_client = client
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._scripts: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_config(cls, cfg: StoreConfig, *, prefix: str = "tandem") -> RedisSessionStore:
        """The store for a ``kind: redis`` :class:`~serve.config.StoreConfig` (``url`` or ``url_env``)."""
        if cfg.kind != "redis":
            raise ConfigError(f"store.kind is {cfg.kind!r}, not 'redis'")
        url = cfg.url
        if not url and cfg.url_env:
            url = os.environ.get(cfg.url_env, "").strip()
            if not url:
                raise ConfigError(f"store.url_env names {cfg.url_env!r}, which is not set or empty")
        if not url:
            raise ConfigError("a redis store needs url or url_env")
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError("store url must start with redis://, rediss:// or unix://")
        return cls(url, prefix=prefix)

    # -- keys and clients ------------------------------------------------------

    def turns_key(self, session_id: str) -> str:
        """The LIST of a session's turns."""
        return f"{self.prefix}:s:{{{session_id}}}:turns"

    def meta_key(self, session_id: str) -> str:
        """The HASH that marks a session as existing (created_at, updated_at, turn_count)."""
        return f"{self.prefix}:s:{{{session_id}}}:meta"

    @property
    def turn_ids_key(self) -> str:
        """The HASH of every stored turn id."""
        return f"{self.prefix}:turn_ids"

    def state_key(self, key: str) -> str:
        """The STRING holding one live-state cache entry."""
        return f"{self.prefix}:state:{key}"

    def client(self) -> aioredis.Redis:
        """The client for the running event loop."""
        if self._fixed_client is not None:
            return self._fixed_client
        import redis.asyncio as aioredis

        loop = asyncio.get_running_loop()
        c = self._clients.get(loop)
        if c is None:
            c = aioredis.Redis.from_url(
                self.url,
                decode_responses=True,
                socket_timeout=self.socket_timeout_s,
                socket_connect_timeout=self.socket_timeout_s,
                health_check_interval=30,
            )
            self._clients[loop] = c
        return c

    def _append_script(self) -> Any:
        loop = asyncio.get_running_loop()
        script = self._scripts.get(loop)
        if script is None:
            script = self.client().register_script(APPEND_SCRIPT)
            self._scripts[loop] = script
        return script

    async def aclose(self) -> None:
        """Close the client of the running loop (a given client is left to its owner)."""
        if self._fixed_client is not None:
            return
        loop = asyncio.get_running_loop()
        c = self._clients.pop(loop, None)
        self._scripts.pop(loop, None)
        if c is not None:
            await c.aclose()

    # -- SessionStore ----------------------------------------------------------

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        """The session's turns, oldest first (the last ``limit`` when given); [] when unknown."""
        if limit is not None and limit <= 0:
            return []
        start = 0 if limit is None else -limit
        rows = await self.client().lrange(self.turns_key(session_id), start, -1)
        return [TurnRecord.model_validate_json(r) for r in rows]

    async def session_exists(self, session_id: str) -> bool:
        """True once a turn of the session has been stored."""
        return bool(await self.client().exists(self.meta_key(session_id)))

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        """Store one whole turn atomically, numbered with the session's next index, or nothing."""
        await self.append_turn_indexed(session_id, record)

    async def append_turn_indexed(self, session_id: str, record: TurnRecord) -> int:
        """:meth:`append_turn`, returning the index the store gave the turn."""
        from redis.exceptions import ResponseError

        body = record.model_dump_json(exclude={"index"})  # raises before anything is sent
        try:
            index = await self._append_script()(
                keys=[self.turns_key(session_id), self.meta_key(session_id), self.turn_ids_key],
                args=[record.turn_id, body, repr(float(record.created_at)), session_id],
            )
        except ResponseError as exc:
            msg = str(exc)
            if msg.startswith("DUPLICATE_TURN"):
                raise DuplicateTurnError(f"turn id {record.turn_id!r} is already stored") from exc
            if msg.startswith("CORRUPT_SESSION"):
                raise CorruptSessionError(f"session {session_id!r}: {msg.split(' ', 1)[1]}") from exc
            raise RedisStoreError(f"session {session_id!r}: {msg}") from exc
        return int(index)

    # -- answer metas and live state -------------------------------------------

    async def answer_metas(self, session_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The ``answer.meta`` of the session's turns (the stored records' ``meta``), oldest first."""
        return [t.meta for t in await self.get_history(session_id, limit)]

    async def get_state(self, key: str) -> Any | None:
        """A live-state cache entry (JSON-decoded), or None when absent or expired."""
        raw = await self.client().get(self.state_key(key))
        return None if raw is None else json.loads(raw)

    async def set_state(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Cache a JSON-serialisable value, expiring after ``ttl`` seconds when given."""
        data = json.dumps(value, separators=(",", ":"), sort_keys=True)
        if ttl is not None:
            if ttl <= 0:
                raise ValueError("ttl must be > 0 seconds")
            await self.client().set(self.state_key(key), data, px=max(1, int(ttl * 1000)))
        else:
            await self.client().set(self.state_key(key), data)

    async def delete_state(self, key: str) -> bool:
        """Drop a cache entry; True when it existed."""
        return bool(await self.client().delete(self.state_key(key)))

    async def dump(self, session_id: str) -> list[dict[str, Any]]:
        """The raw stored turns (for the CLI and tests)."""
        return [json.loads(r.model_dump_json()) for r in await self.get_history(session_id)]
