"""serve.stores.redis: the production session store, against a real ``redis-server``."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator

import pytest
import redis

from pipelines.errors import ConfigError, StoreUnavailable
from pipelines.protocols import TurnRecord
from serve.config import StoreConfig
from serve.stores.redis import (
    CorruptSessionError,
    DuplicateTurnError,
    RedisSessionStore,
)
from tests.fixtures.redis_server import RedisServer, redis_server  # noqa: F401 - pytest fixture

pytestmark = pytest.mark.timeout(30)


def _rec(turn_id: str, text: str = "hi", **kw) -> TurnRecord:
    return TurnRecord(turn_id=turn_id, index=0, user_text=text, **kw)


@pytest.fixture
def store(redis_server: RedisServer) -> RedisSessionStore:  # noqa: F811
    return RedisSessionStore(redis_server.url, prefix=f"t{uuid.uuid4().hex[:8]}")


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    client.close()


def test_roundtrip(store: RedisSessionStore) -> None:
    rec = TurnRecord(turn_id="t_1", index=99, user_text="Wo ist … 📦?", reply_text="Unterwegs.", status="fallback",
                     locale="de-DE", user_id="u1", trace_id="ab" * 16, pipeline="prompting",
                     created_at=1700000000.123456, meta={"seed": 3, "ids": ["a", "b"], "nested": {"x": None},
                                                         "guidance_type": "praise", "w": 0.1 + 0.2})

    async def main() -> tuple[bool, list[TurnRecord], bool, list[dict]]:
        before = await store.session_exists("s1")
        await store.append_turn("s1", rec)
        return (before, await store.get_history("s1"), await store.session_exists("s1"),
                await store.answer_metas("s1"))

    before, history, after, metas = asyncio.run(main())
    assert (before, after) == (False, True)
    assert history == [rec.model_copy(update={"index": 0})]  # the store numbers turns; floats exact
    assert metas == [rec.meta]
    assert asyncio.run(store.dump("s1")) == [history[0].model_dump(mode="json")]


def test_unknown_session_is_empty(store: RedisSessionStore) -> None:
    assert asyncio.run(store.get_history("nobody")) == []
    assert asyncio.run(store.get_history("nobody", 3)) == []
    assert asyncio.run(store.session_exists("nobody")) is False


def test_ordering_and_limit(store: RedisSessionStore) -> None:
    async def main() -> None:
        for i in range(7):
            await store.append_turn("s", _rec(f"t{i}", f"q{i}"))
        await store.append_turn("other", _rec("o0"))

    asyncio.run(main())
    full = asyncio.run(store.get_history("s"))
    assert [t.user_text for t in full] == [f"q{i}" for i in range(7)]
    assert [t.index for t in full] == list(range(7))
    last3 = asyncio.run(store.get_history("s", 3))
    assert [t.user_text for t in last3] == ["q4", "q5", "q6"]  # the last 3, oldest first
    assert [t.index for t in last3] == [4, 5, 6]
    assert asyncio.run(store.get_history("s", 0)) == []
    assert len(asyncio.run(store.get_history("s", 100))) == 7
    assert [t.turn_id for t in asyncio.run(store.get_history("other"))] == ["o0"]


def _check_dense(store: RedisSessionStore, raw: redis.Redis, session_id: str, n: int) -> list[TurnRecord]:
    hist = asyncio.run(store.get_history(session_id))
    assert [t.index for t in hist] == list(range(n))
    assert int(raw.hget(store.meta_key(session_id), "turn_count")) == n
    return hist


def test_dense_indices_under_concurrent_tasks(store: RedisSessionStore, raw: redis.Redis) -> None:
    n = 50

    async def main() -> list[int]:
        return await asyncio.gather(*(store.append_turn_indexed("s", _rec(f"t{i}")) for i in range(n)))

    given = asyncio.run(main())
    assert sorted(given) == list(range(n))  # each append got its own index
    hist = _check_dense(store, raw, "s", n)
    assert sorted(t.turn_id for t in hist) == sorted(f"t{i}" for i in range(n))


def test_dense_indices_under_concurrent_threads_and_instances(
    redis_server: RedisServer, raw: redis.Redis  # noqa: F811
) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    stores = [RedisSessionStore(redis_server.url, prefix=prefix) for _ in range(2)]  # like two replicas
    n_threads, per_thread = 6, 15
    start = threading.Barrier(n_threads)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            start.wait()
            s = stores[k % 2]

            async def go() -> None:
                for i in range(per_thread):
                    await s.append_turn("s", _rec(f"t{k}_{i}"))
                await s.aclose()

            asyncio.run(go())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    hist = _check_dense(stores[0], raw, "s", n_threads * per_thread)
    for k in range(n_threads):  # each writer's own turns keep their order
        mine = [t.turn_id for t in hist if t.turn_id.startswith(f"t{k}_")]
        assert mine == [f"t{k}_{i}" for i in range(per_thread)]


def _snapshot(raw: redis.Redis, prefix: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for key in sorted(raw.scan_iter(f"{prefix}:*")):
        kind = raw.type(key)
        out[key] = {"list": lambda k: raw.lrange(k, 0, -1), "hash": raw.hgetall,
                    "string": raw.get}[kind](key)
    return out


def test_duplicate_turn_id_stores_nothing(store: RedisSessionStore, raw: redis.Redis) -> None:
    asyncio.run(store.append_turn("s", _rec("dup", "first")))
    before = _snapshot(raw, store.prefix)
    with pytest.raises(DuplicateTurnError):
        asyncio.run(store.append_turn("s", _rec("dup", "second")))
    assert _snapshot(raw, store.prefix) == before
    asyncio.run(store.append_turn("s", _rec("next", "second")))
    hist = asyncio.run(store.get_history("s"))
    assert [(t.index, t.user_text) for t in hist] == [(0, "first"), (1, "second")]


def test_failure_mid_append_stores_nothing(store: RedisSessionStore, raw: redis.Redis) -> None:
    """A counter that breaks the last write of the turn: the script refuses before its first write."""
    asyncio.run(store.append_turn("s", _rec("t0", "first")))
    raw.hset(store.meta_key("s"), "turn_count", "not-a-number")
    before = _snapshot(raw, store.prefix)
    with pytest.raises(CorruptSessionError, match="turn_count"):
        asyncio.run(store.append_turn("s", _rec("t1", "second")))
    assert _snapshot(raw, store.prefix) == before  # no turn, no turn id, no counter change
    raw.set(store.turns_key("w"), "a string, not a list")
    with pytest.raises(CorruptSessionError, match="key 1 holds a string"):  # key 1: the turns list
        asyncio.run(store.append_turn("w", _rec("t2")))
    assert raw.hexists(store.turn_ids_key("w"), "t2") is False
    assert asyncio.run(store.session_exists("w")) is False


def test_unserialisable_record_fails_before_anything_is_sent(store: RedisSessionStore, raw: redis.Redis) -> None:
    rec = _rec("t0").model_copy(update={"meta": {"bad": object()}})
    with pytest.raises(Exception):  # noqa: B017 - pydantic's serialisation error
        asyncio.run(store.append_turn("s", rec))
    assert _snapshot(raw, store.prefix) == {}
    asyncio.run(store.append_turn("s", _rec("t0")))  # the store keeps working
    assert [t.index for t in asyncio.run(store.get_history("s"))] == [0]


def test_persistence_across_instances(redis_server: RedisServer) -> None:  # noqa: F811
    prefix = f"t{uuid.uuid4().hex[:8]}"
    first = RedisSessionStore(redis_server.url, prefix=prefix)
    asyncio.run(first.append_turn("s", _rec("t0", "q0", reply_text="a0")))
    asyncio.run(first.append_turn("s", _rec("t1", "q1", status="failed")))
    second = RedisSessionStore(redis_server.url, prefix=prefix)
    hist = asyncio.run(second.get_history("s"))
    assert [(t.turn_id, t.index, t.user_text, t.reply_text, t.status) for t in hist] == [
        ("t0", 0, "q0", "a0", "ok"), ("t1", 1, "q1", "", "failed")]
    asyncio.run(second.append_turn("s", _rec("t2")))
    assert [t.index for t in asyncio.run(first.get_history("s"))] == [0, 1, 2]


def test_live_state_cache(store: RedisSessionStore, raw: redis.Redis) -> None:
    async def main() -> tuple:
        missing = await store.get_state("snap:u1")
        await store.set_state("snap:u1", {"tier": "gold", "ids": [1, 2]}, ttl=120)
        got = await store.get_state("snap:u1")
        await store.set_state("forever", [1])
        return missing, got, await store.get_state("forever"), await store.delete_state("forever")

    missing, got, forever, deleted = asyncio.run(main())
    assert missing is None and got == {"tier": "gold", "ids": [1, 2]} and forever == [1] and deleted
    ttl_ms = raw.pttl(store.state_key("snap:u1"))
    assert 0 < ttl_ms <= 120_000  # expiry is set (Redis' own clock, no timing assertion)
    assert asyncio.run(store.get_state("forever")) is None
    with pytest.raises(ValueError):
        asyncio.run(store.set_state("x", 1, ttl=0))


def test_from_config(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("TANDEM_TEST_REDIS_URL", redis_server.url)
    s = RedisSessionStore.from_config(StoreConfig(kind="redis", url_env="TANDEM_TEST_REDIS_URL", vault_key_env="K"))
    assert s.url == redis_server.url
    assert asyncio.run(s.session_exists("nobody")) is False
    assert RedisSessionStore.from_config(StoreConfig(kind="redis", url=redis_server.url, vault_key_env="K")
                                         ).url == redis_server.url
    monkeypatch.delenv("TANDEM_TEST_REDIS_URL")
    with pytest.raises(ConfigError, match="TANDEM_TEST_REDIS_URL"):
        RedisSessionStore.from_config(StoreConfig(kind="redis", url_env="TANDEM_TEST_REDIS_URL", vault_key_env="K"))
    with pytest.raises(ConfigError, match="not 'redis'"):
        RedisSessionStore.from_config(StoreConfig(kind="sqlite"))
    with pytest.raises(ConfigError, match="redis://"):
        RedisSessionStore.from_config(StoreConfig(kind="redis", url="http://x", vault_key_env="K"))


def test_unreachable_server_raises() -> None:
    # Port 1 on localhost: nothing listens there; the error surfaces, nothing is retried silently.
    s = RedisSessionStore("redis://127.0.0.1:1/0", socket_timeout_s=1.0)
    with pytest.raises(StoreUnavailable) as err:  # redis' ConnectionError, translated at the boundary
        asyncio.run(s.append_turn("s", _rec("t0")))
    assert isinstance(err.value.__cause__, redis.exceptions.ConnectionError)
    with pytest.raises(ValueError):
        RedisSessionStore()  # a URL or a client is needed
