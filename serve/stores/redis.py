"""Redis session store (production profile): one Lua script per save, so a turn lands whole or not at all.

Keys (``<p>`` is the prefix, default ``tandem``; ``{sid}`` is a hash tag so a
session's keys share a cluster slot)::

    <p>:s:{sid}:turns   LIST    one JSON TurnRecord per turn, index = position (oldest first)
    <p>:s:{sid}:meta    HASH    created_at, updated_at, turn_count, principal (exists ⇔ the session exists)
    <p>:s:{sid}:tids    HASH    turn_id → index (a save with a known turn id overwrites that turn)
    <p>:s:{sid}:idem    HASH    idempotency key → turn_id
    <p>:s:{sid}:vault   STRING  the sealed PII vault (serve.stores.vault)
    <p>:s:{sid}:lease   STRING  the holder of the session's lease (set with PX by the grant script: one turn at a time)
    <p>:s:{sid}:fence   HASH    token, holder: the lease's fencing token and the holder it was granted to
    <p>:state:<key>     STRING  live-state cache entries (JSON, with a TTL)

The save script checks everything that could fail *before* its first write
(the fencing token, the owner, a duplicate turn id, keys of the wrong type, a
corrupt counter):
Redis does not roll a script back, so no check may come after a write. The next
index is read and used inside the script, so concurrent saves from any number
of replicas get unique, dense indices. Every key of a session gets the session
TTL (``PEXPIRE``) on every save. A lease is granted by one script
(:data:`ACQUIRE_SCRIPT`): a new holder raises the session's fencing token by one
(the first one starts from the server's ``TIME`` in milliseconds, so tokens keep
growing after the fence key expires); a save with ``fence`` that is not the
current token stores nothing (:class:`~pipelines.errors.LeaseLost`). Answer metas (``answer.meta`` of W3) are the
``meta`` of the stored records: :meth:`RedisSessionStore.answer_metas`. Every
Redis failure leaves as :class:`~pipelines.errors.StoreUnavailable`.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from typing import TYPE_CHECKING, Any

from pipelines.errors import ConfigError, LeaseLost, NotFound, StoreUnavailable
from pipelines.protocols import TurnRecord
from pipelines.sessions import LOCAL_PRINCIPAL, TurnLoad

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from serve.config import StoreConfig

__all__ = [
    "RedisSessionStore",
    "RedisStoreError",
    "DuplicateTurnError",
    "CorruptSessionError",
    "APPEND_SCRIPT",
    "ACQUIRE_SCRIPT",
]


class RedisStoreError(RuntimeError):
    """A turn could not be stored; nothing of it was written (the runner reports it as StoreUnavailable)."""


class DuplicateTurnError(RedisStoreError):
    """The turn id is already stored (in this or another session)."""


class CorruptSessionError(RedisStoreError):
    """A session key holds something this store did not write (wrong type, bad counter)."""


# KEYS: 1 turns list, 2 session meta hash, 3 turn-id hash, 4 idempotency hash, 5 vault string, 6 fence hash
# ARGV: 1 turn_id, 2 record JSON without "index" (starts with "{"), 3 now, 4 principal ('' = the owner or
#       'local'), 5 idempotency key or '', 6 sealed vault or '', 7 ttl in ms (0 = none), 8 overwrite (1/0),
#       9 fencing token ('' = unfenced)
SAVE_SCRIPT = """
local function kind(key)
  return redis.call('TYPE', key)['ok']
end
local want = {'list', 'hash', 'hash', 'hash', 'string', 'hash'}
for i = 1, 6 do
  local t = kind(KEYS[i])
  if t ~= 'none' and t ~= want[i] then
    return redis.error_reply('CORRUPT_SESSION key ' .. i .. ' holds a ' .. t)
  end
end
if ARGV[9] ~= '' then
  local current = redis.call('HGET', KEYS[6], 'token')
  if current ~= ARGV[9] then
    return redis.error_reply('STALE_FENCE ' .. tostring(current))
  end
end
local count = redis.call('HGET', KEYS[2], 'turn_count')
if count and not tonumber(count) then
  return redis.error_reply('CORRUPT_SESSION turn_count is not a number')
end
local owner = redis.call('HGET', KEYS[2], 'principal')
local principal = ARGV[4]
if principal == '' then
  principal = owner or 'local'
end
if owner and owner ~= principal then
  return redis.error_reply('NOT_OWNER')
end
local known = redis.call('HGET', KEYS[3], ARGV[1])
if known and ARGV[8] ~= '1' then
  return redis.error_reply('DUPLICATE_TURN ' .. ARGV[1])
end
if known and not tonumber(known) then
  return redis.error_reply('CORRUPT_SESSION turn index is not a number')
end
if string.sub(ARGV[2], 1, 1) ~= '{' or string.len(ARGV[2]) < 3 then
  return redis.error_reply('BAD_RECORD the record body is not a JSON object')
end
-- every check passed: the writes below cannot fail
local n
if known then
  n = tonumber(known)
  redis.call('LSET', KEYS[1], n, '{"index":' .. n .. ',' .. string.sub(ARGV[2], 2))
else
  n = redis.call('LLEN', KEYS[1])
  redis.call('RPUSH', KEYS[1], '{"index":' .. n .. ',' .. string.sub(ARGV[2], 2))
  redis.call('HSET', KEYS[3], ARGV[1], n)
  redis.call('HINCRBY', KEYS[2], 'turn_count', 1)
end
redis.call('HSETNX', KEYS[2], 'created_at', ARGV[3])
redis.call('HSET', KEYS[2], 'updated_at', ARGV[3])
redis.call('HSETNX', KEYS[2], 'principal', principal)
if ARGV[5] ~= '' then
  redis.call('HSETNX', KEYS[4], ARGV[5], ARGV[1])
end
if ARGV[6] ~= '' then
  redis.call('SET', KEYS[5], ARGV[6])
end
local ttl = tonumber(ARGV[7])
if ttl and ttl > 0 then
  for i = 1, 6 do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
  end
end
return n
"""

# KEYS: 1 lease string, 2 fence hash; ARGV: 1 holder, 2 lease ttl in ms, 3 session ttl in ms (0 = none).
# The lease for ``holder`` (free, or already its own): its fencing token; 0 while another holder has it.
# A grant to a new holder raises the token by one (the first starts from TIME in ms); a renewal, or the same
# holder again with nobody in between, keeps it. The fence hash outlives the lease (the session's TTL).
ACQUIRE_SCRIPT = """
if redis.call('TYPE', KEYS[2])['ok'] ~= 'none' and redis.call('TYPE', KEYS[2])['ok'] ~= 'hash' then
  return redis.error_reply('CORRUPT_SESSION the fence key is not a hash')
end
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then
  return 0
end
local token = redis.call('HGET', KEYS[2], 'token')
if not (token and redis.call('HGET', KEYS[2], 'holder') == ARGV[1]) then
  if token then
    token = redis.call('HINCRBY', KEYS[2], 'token', 1)
  else
    local t = redis.call('TIME')
    token = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
    redis.call('HSET', KEYS[2], 'token', token)
  end
  redis.call('HSET', KEYS[2], 'holder', ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local keep = math.max(tonumber(ARGV[2]), tonumber(ARGV[3]))
if tonumber(ARGV[3]) > 0 and redis.call('PTTL', KEYS[2]) < keep then
  redis.call('PEXPIRE', KEYS[2], keep)
end
return tonumber(token)
"""

# KEYS: 1 lease; ARGV: 1 holder.  Delete the lease only if the holder still has it.
RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Kept for the name: append_turn is a save that refuses a known turn id.
APPEND_SCRIPT = SAVE_SCRIPT


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
        ttl_s: float | None = None,
    ) -> None:
        if (url is None) == (client is None):
            raise ValueError("give url or client (exactly one)")
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError("prefix must be non-empty and contain no braces")
        self.url = url
        self.prefix = prefix
        self.socket_timeout_s = socket_timeout_s
        self.ttl_s = ttl_s
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
        return cls(url, prefix=prefix, ttl_s=cfg.ttl_s)

    # -- keys and clients ------------------------------------------------------

    def turns_key(self, session_id: str) -> str:
        """The LIST of a session's turns."""
        return f"{self.prefix}:s:{{{session_id}}}:turns"

    def meta_key(self, session_id: str) -> str:
        """The HASH that marks a session as existing (created_at, updated_at, turn_count)."""
        return f"{self.prefix}:s:{{{session_id}}}:meta"

    def turn_ids_key(self, session_id: str) -> str:
        """The HASH turn id → index of a session's turns."""
        return f"{self.prefix}:s:{{{session_id}}}:tids"

    def idem_key(self, session_id: str) -> str:
        """The HASH idempotency key → turn id."""
        return f"{self.prefix}:s:{{{session_id}}}:idem"

    def vault_key(self, session_id: str) -> str:
        """The STRING holding the session's sealed vault."""
        return f"{self.prefix}:s:{{{session_id}}}:vault"

    def lease_key(self, session_id: str) -> str:
        """The STRING naming the holder of the session's lease."""
        return f"{self.prefix}:s:{{{session_id}}}:lease"

    def fence_key(self, session_id: str) -> str:
        """The HASH holding the session lease's fencing token and the holder it was granted to."""
        return f"{self.prefix}:s:{{{session_id}}}:fence"

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

    def _script(self, name: str) -> Any:
        loop = asyncio.get_running_loop()
        scripts = self._scripts.get(loop)
        if scripts is None:
            c = self.client()
            scripts = {"save": c.register_script(SAVE_SCRIPT), "release": c.register_script(RELEASE_SCRIPT),
                       "acquire": c.register_script(ACQUIRE_SCRIPT)}
            self._scripts[loop] = scripts
        return scripts[name]

    async def aclose(self) -> None:
        """Close the client of the running loop (a given client is left to its owner)."""
        if self._fixed_client is not None:
            return
        loop = asyncio.get_running_loop()
        c = self._clients.pop(loop, None)
        self._scripts.pop(loop, None)
        if c is not None:
            await c.aclose()

    # -- TurnStore -------------------------------------------------------------

    async def _guard(self, coro: Any) -> Any:
        """Await a Redis call; a Redis failure leaves as :class:`StoreUnavailable`."""
        from redis.exceptions import RedisError

        try:
            return await coro
        except RedisError as exc:
            raise StoreUnavailable("the session store (Redis) failed; nothing was written",
                                   details={"reason": type(exc).__name__}) from exc

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        """The session's turns, oldest first (the last ``limit`` when given); [] when unknown."""
        if limit is not None and limit <= 0:
            return []
        start = 0 if limit is None else -limit
        rows = await self._guard(self.client().lrange(self.turns_key(session_id), start, -1))
        return [TurnRecord.model_validate_json(r) for r in rows]

    async def session_exists(self, session_id: str) -> bool:
        """True once a turn of the session has been stored (until it expires)."""
        return bool(await self._guard(self.client().exists(self.meta_key(session_id))))

    async def owner(self, session_id: str) -> str | None:
        """The principal that owns the session, or None."""
        return await self._guard(self.client().hget(self.meta_key(session_id), "principal"))

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        """Store one whole turn atomically, numbered with the session's next index, or nothing."""
        await self.append_turn_indexed(session_id, record)

    async def append_turn_indexed(self, session_id: str, record: TurnRecord) -> int:
        """:meth:`append_turn` (a known turn id is refused), returning the index the store gave the turn."""
        return await self._save(session_id, record, principal="", key=None, vault=None, overwrite=False)

    async def save_turn(self, session_id: str, record: TurnRecord, *, principal: str,
                        idempotency_key: str | None = None, vault: bytes | None = None,
                        fence: int | None = None) -> TurnRecord:
        """Insert or overwrite the turn, claim the session, record the key and the vault: one script, which
        stores nothing (:class:`~pipelines.errors.LeaseLost`) when ``fence`` is not the current lease token."""
        index = await self._save(session_id, record, principal=principal or LOCAL_PRINCIPAL,
                                 key=idempotency_key, vault=vault, overwrite=True, fence=fence)
        return record.model_copy(update={"index": index})

    async def _save(self, session_id: str, record: TurnRecord, *, principal: str, key: str | None,
                    vault: bytes | None, overwrite: bool, fence: int | None = None) -> int:
        from redis.exceptions import ResponseError

        body = record.model_dump_json(exclude={"index"})  # raises before anything is sent
        ttl_ms = 0 if self.ttl_s is None else max(1, int(self.ttl_s * 1000))
        try:
            index = await self._guard(self._script("save")(
                keys=[self.turns_key(session_id), self.meta_key(session_id), self.turn_ids_key(session_id),
                      self.idem_key(session_id), self.vault_key(session_id), self.fence_key(session_id)],
                args=[record.turn_id, body, repr(float(record.created_at)), principal, key or "",
                      vault.decode() if vault else "", ttl_ms, "1" if overwrite else "0",
                      "" if fence is None else str(int(fence))],
            ))
        except StoreUnavailable as exc:
            cause = exc.__cause__
            if not isinstance(cause, ResponseError):
                raise
            msg = str(cause)
            if msg.startswith("STALE_FENCE"):
                current = msg.split(" ", 1)[1] if " " in msg else None
                raise LeaseLost(f"session {session_id!r}: this turn's lease token {fence} is stale (current: "
                                f"{current}); another turn took the session — nothing was stored",
                                details={"session_id": session_id, "fence": fence, "current": current}) from None
            if msg.startswith("NOT_OWNER"):
                raise NotFound(f"no session {session_id!r}", details={"session_id": session_id}) from None
            if msg.startswith("DUPLICATE_TURN"):
                raise DuplicateTurnError(f"turn id {record.turn_id!r} is already stored") from cause
            if msg.startswith("CORRUPT_SESSION"):
                raise CorruptSessionError(f"session {session_id!r}: {msg.split(' ', 1)[1]}") from cause
            raise RedisStoreError(f"session {session_id!r}: {msg}") from cause
        return int(index)

    async def find_turn(self, session_id: str, idempotency_key: str) -> TurnRecord | None:
        """The turn saved with this idempotency key, if any."""
        tid = await self._guard(self.client().hget(self.idem_key(session_id), idempotency_key))
        return None if tid is None else await self._turn_of(session_id, tid)

    async def _turn_of(self, session_id: str, turn_id: str) -> TurnRecord | None:
        """The stored turn with this id, if any."""
        c = self.client()
        idx = await self._guard(c.hget(self.turn_ids_key(session_id), turn_id))
        row = None if idx is None else await self._guard(c.lindex(self.turns_key(session_id), int(idx)))
        return None if row is None else TurnRecord.model_validate_json(row)

    async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> int:
        """One holder per session across every ingress replica (re-entrant for the holder), granted by one
        script: the lease's fencing token, or 0 while another holder has it."""
        ms = max(1, int(ttl_s * 1000))
        session_ms = 0 if self.ttl_s is None else max(1, int(self.ttl_s * 1000))
        token = await self._guard(self._script("acquire")(
            keys=[self.lease_key(session_id), self.fence_key(session_id)], args=[holder, ms, session_ms]))
        return int(token)

    async def release_lease(self, session_id: str, holder: str) -> None:
        """Delete the lease if ``holder`` still has it (compare-and-delete in one script)."""
        await self._guard(self._script("release")(keys=[self.lease_key(session_id)], args=[holder]))

    async def lease_left_s(self, session_id: str) -> float | None:
        """Seconds the session's lease has left (``PTTL``), or None when nobody holds it."""
        ms = await self._guard(self.client().pttl(self.lease_key(session_id)))
        return None if ms is None or int(ms) < 0 else int(ms) / 1000.0

    async def load_turn_sealed(self, session_id: str, idempotency_key: str | None,
                               limit: int | None) -> tuple[TurnLoad, bytes | None]:
        """Owner, history, vault and the key's turn id in one round trip (MULTI: one snapshot); the keyed
        turn's row, when there is one, in a second."""
        pipe = self.client().pipeline(transaction=True)
        pipe.hget(self.meta_key(session_id), "principal")
        pipe.get(self.vault_key(session_id))
        if limit is None or limit > 0:
            pipe.lrange(self.turns_key(session_id), 0 if limit is None else -limit, -1)
        if idempotency_key:
            pipe.hget(self.idem_key(session_id), idempotency_key)
        owner, vault, *rest = await self._guard(pipe.execute())
        rows = rest.pop(0) if limit is None or limit > 0 else []
        tid = rest[0] if idempotency_key else None
        blob = None if vault is None else vault.encode()
        known = None if tid is None else await self._turn_of(session_id, tid)
        if known is not None:
            return TurnLoad(owner, known, []), blob
        return TurnLoad(owner, None, [TurnRecord.model_validate_json(r) for r in rows]), blob

    async def load_turn(self, session_id: str, idempotency_key: str | None, limit: int | None) -> TurnLoad:
        """What a turn reads before it runs (:func:`pipelines.sessions.load_turn`)."""
        return (await self.load_turn_sealed(session_id, idempotency_key, limit))[0]

    async def get_vault(self, session_id: str) -> bytes | None:
        """The session's sealed vault, or None."""
        raw = await self._guard(self.client().get(self.vault_key(session_id)))
        return None if raw is None else raw.encode()

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
