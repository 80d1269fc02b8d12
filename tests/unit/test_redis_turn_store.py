"""serve.stores.redis as a TurnStore against a real redis-server: owners, upserts, leases across
replicas, idempotency keys, TTL on every session key, the sealed vault."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis
from cryptography.fernet import Fernet

from pipelines import errors as E
from pipelines.events import ReplyDelta, TurnRequest
from pipelines.protocols import TurnRecord
from pipelines.turn import TurnRunner
from serve.stores.redis import RedisSessionStore
from serve.stores.vault import RedactingStore, VaultCipher
from tests.doubles import HANG, ScriptedPipeline, collect
from tests.fixtures.redis_server import RedisServer, redis_server  # noqa: F401 - pytest fixture

pytestmark = pytest.mark.timeout(30)


def _rec(turn_id: str, text: str = "hi", **kw) -> TurnRecord:
    return TurnRecord(turn_id=turn_id, index=0, user_text=text, **kw)


@pytest.fixture
def prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture
def store(redis_server: RedisServer, prefix: str) -> RedisSessionStore:  # noqa: F811
    return RedisSessionStore(redis_server.url, prefix=prefix, ttl_s=3600)


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    client.close()


def _save(store, sid, rec, principal="alice", **kw):
    return asyncio.run(store.save_turn(sid, rec, principal=principal, **kw))


def test_owner_claim_and_refusal(store: RedisSessionStore) -> None:
    assert asyncio.run(store.owner("s")) is None
    assert _save(store, "s", _rec("t1")).index == 0
    assert asyncio.run(store.owner("s")) == "alice"
    with pytest.raises(E.NotFound):
        _save(store, "s", _rec("t2"), principal="mallory")
    assert [t.turn_id for t in asyncio.run(store.get_history("s"))] == ["t1"]


def test_known_turn_id_is_overwritten_in_place(store: RedisSessionStore, raw: redis.Redis) -> None:
    _save(store, "s", _rec("t1", "a", meta={"checkpoint": True}))
    assert _save(store, "s", _rec("t1", "a", reply_text="done")).index == 0
    _save(store, "s", _rec("t2", "b"))
    hist = asyncio.run(store.get_history("s"))
    assert [(t.index, t.turn_id, t.reply_text, t.meta) for t in hist] == [(0, "t1", "done", {}), (1, "t2", "", {})]
    assert raw.hget(store.meta_key("s"), "turn_count") == "2"


def test_idempotency_and_vault_keys(store: RedisSessionStore) -> None:
    _save(store, "s", _rec("t1", "a"), idempotency_key="k", vault=b"sealed-bytes")
    _save(store, "s", _rec("t2", "b"), idempotency_key="k")  # a key keeps its first turn
    assert asyncio.run(store.find_turn("s", "k")).turn_id == "t1"
    assert asyncio.run(store.find_turn("s", "nope")) is None and asyncio.run(store.find_turn("s2", "k")) is None
    assert asyncio.run(store.get_vault("s")) == b"sealed-bytes"


def test_every_session_key_gets_the_ttl(store: RedisSessionStore, raw: redis.Redis) -> None:
    _save(store, "s", _rec("t1"), idempotency_key="k", vault=b"v")
    for key in (store.turns_key("s"), store.meta_key("s"), store.turn_ids_key("s"), store.idem_key("s"),
                store.vault_key("s")):
        assert 0 < raw.pttl(key) <= 3_600_000, key  # Redis' own clock expires them (EXPIRE)


def test_expired_keys_read_as_no_session(store: RedisSessionStore, raw: redis.Redis) -> None:
    _save(store, "s", _rec("t1"))
    for key in raw.scan_iter(f"{store.prefix}:s:{{s}}:*"):
        raw.delete(key)  # what expiry does
    assert asyncio.run(store.owner("s")) is None and asyncio.run(store.session_exists("s")) is False
    _save(store, "s", _rec("t9"), principal="bob")
    assert asyncio.run(store.owner("s")) == "bob"


def test_leases_across_two_replicas(redis_server: RedisServer, prefix: str) -> None:  # noqa: F811
    a, b = (RedisSessionStore(redis_server.url, prefix=prefix) for _ in range(2))

    async def main() -> list:
        out = [await a.acquire_lease("s", "ta", 30), await a.acquire_lease("s", "ta", 30),
               await b.acquire_lease("s", "tb", 30)]
        await b.release_lease("s", "tb")  # not the holder: nothing happens
        out.append(await b.acquire_lease("s", "tb", 30))
        await a.release_lease("s", "ta")
        out.append(await b.acquire_lease("s", "tb", 30))
        await a.aclose()
        await b.aclose()
        return out

    first, again, refused, still, taken = asyncio.run(main())
    assert first > 0 and again == first  # re-entrant for its holder, with the same fencing token
    assert (refused, still) == (0, 0)
    assert taken == first + 1  # the next holder's token is the next one


def test_a_leases_time_left_is_its_pttl_and_none_without_a_holder(redis_server: RedisServer, prefix: str) -> None:  # noqa: F811
    store = RedisSessionStore(redis_server.url, prefix=prefix)

    async def main() -> list:
        out = [await store.lease_left_s("s")]
        await store.acquire_lease("s", "ta", 30)
        out.append(await store.lease_left_s("s"))
        await store.release_lease("s", "ta")
        out.append(await store.lease_left_s("s"))
        await store.aclose()
        return out

    none, held, released = asyncio.run(main())
    assert none is None and released is None
    assert 29.0 < held <= 30.0  # PTTL in ms, read back as seconds


def test_turns_of_one_session_are_serialized_across_replicas(redis_server: RedisServer, prefix: str) -> None:  # noqa: F811
    first = TurnRunner(ScriptedPipeline([ReplyDelta(text="slow"), HANG]),
                       RedisSessionStore(redis_server.url, prefix=prefix), lock_wait_s=0.1)
    second = TurnRunner(ScriptedPipeline([ReplyDelta(text="x")]),
                        RedisSessionStore(redis_server.url, prefix=prefix), lock_wait_s=0.1)

    async def main() -> list:
        gen = first.run("s", TurnRequest(text="a"), trace_id="a")
        await gen.__anext__()
        busy = await collect(second.run("s", TurnRequest(text="b"), trace_id="b"))
        await gen.aclose()
        after = await collect(second.run("s", TurnRequest(text="c"), trace_id="c"))
        return [busy, after]

    busy, after = asyncio.run(main())
    assert busy[0].code == "session_busy" and after[-1].status == "ok"


def test_the_vault_keeps_values_out_of_redis(store: RedisSessionStore, raw: redis.Redis) -> None:
    safe = RedactingStore(store, VaultCipher(Fernet.generate_key()))
    rec = TurnRecord(turn_id="t1", index=0, user_text="I am ann@example.org, +1 415-555-0134")
    asyncio.run(safe.save_turn("s", rec, principal="alice"))
    dump = " ".join(str(raw.dump(k)) for k in raw.scan_iter(f"{store.prefix}:*"))
    assert "ann@example.org" not in dump and "555-0134" not in dump
    assert asyncio.run(safe.get_history("s"))[0].user_text == rec.user_text


def test_redis_down_is_store_unavailable_everywhere() -> None:
    s = RedisSessionStore("redis://127.0.0.1:1/0", socket_timeout_s=1.0)
    for call in (lambda: s.owner("s"), lambda: s.get_history("s"), lambda: s.acquire_lease("s", "h", 1),
                 lambda: s.save_turn("s", _rec("t"), principal="a"), lambda: s.find_turn("s", "k")):
        with pytest.raises(E.StoreUnavailable):
            asyncio.run(call())
