"""``load_turn``: what a turn reads before it runs (owner, the keyed turn, the history) in one store call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from pipelines.events import TurnRequest
from pipelines.protocols import TurnRecord
from pipelines.sessions import TurnLoad, load_turn
from serve.stores.sqlite import SQLiteSessionStore
from serve.stores.vault import RedactingStore, VaultCipher
from tests.fixtures.redis_server import redis_server  # noqa: F401 - pytest fixture

EMAIL = "Alex.Rivera@example.com"


class Spy:
    """Counts the calls that reach ``inner`` (every attribute that is a coroutine function)."""

    def __init__(self, inner: Any, hide: tuple[str, ...] = ()) -> None:
        self.inner, self.hide, self.calls = inner, hide, []

    def __getattr__(self, name: str) -> Any:
        if name in self.hide:
            raise AttributeError(name)
        attr = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        async def call(*a: Any, **kw: Any) -> Any:
            self.calls.append(name)
            return await attr(*a, **kw)
        return call


def _save(store: Any, sid: str, turn_id: str, user: str, *, key: str | None = None, principal: str = "alice"):
    rec = TurnRecord(turn_id=turn_id, index=0, user_text=user, reply_text=f"re {user}")
    return asyncio.run(store.save_turn(sid, rec, principal=principal, idempotency_key=key))


def _filled(store: Any) -> Any:
    for i in range(4):
        _save(store, "s", f"t{i}", f"turn {i} from {EMAIL}", key="k2" if i == 2 else None)
    return store


def _texts(load: TurnLoad) -> list[str]:
    return [r.user_text for r in load.history]


@pytest.fixture(params=["sqlite", "redacting", "redis", "redacting-redis"])
def store(request, tmp_path: Path) -> Any:
    if request.param.endswith("redis"):
        import uuid

        from serve.stores.redis import RedisSessionStore

        server = request.getfixturevalue("redis_server")
        inner: Any = RedisSessionStore(server.url, prefix=f"t-{uuid.uuid4().hex[:8]}", ttl_s=3600)
    else:
        inner = SQLiteSessionStore(tmp_path / "s.db")
    if not request.param.startswith("redacting"):
        return inner
    return RedactingStore(inner, VaultCipher(Fernet.generate_key()))


def test_an_unknown_session_has_no_owner_no_turn_and_no_history(store):
    assert asyncio.run(store.load_turn("nobody", None, 5)) == TurnLoad(None, None, [])
    assert asyncio.run(store.load_turn("nobody", "k", 5)) == TurnLoad(None, None, [])


def test_the_last_turns_without_a_key(store):
    _filled(store)
    got = asyncio.run(store.load_turn("s", None, 2))
    assert got.owner == "alice" and got.known is None
    assert _texts(got) == [f"turn 2 from {EMAIL}", f"turn 3 from {EMAIL}"]  # the owner reads the values
    assert [r.index for r in got.history] == [2, 3]
    assert len(asyncio.run(store.load_turn("s", None, None)).history) == 4
    assert len(asyncio.run(store.load_turn("s", None, 4)).history) == 4
    assert len(asyncio.run(store.load_turn("s", None, 3)).history) == 3


def test_a_known_key_finds_its_turn_and_reads_no_history(store):
    _filled(store)
    got = asyncio.run(store.load_turn("s", "k2", 2))
    assert got.owner == "alice" and got.known is not None and got.history == []
    assert got.known.turn_id == "t2" and got.known.user_text == f"turn 2 from {EMAIL}"
    other = asyncio.run(store.load_turn("s", "k-unknown", 2))
    assert other.known is None and _texts(other) == _texts(asyncio.run(store.load_turn("s", None, 2)))


def test_an_expired_session_reads_as_unknown(tmp_path: Path):
    now = [1000.0]
    store = SQLiteSessionStore(tmp_path / "s.db", ttl_s=60, clock=lambda: now[0])
    _filled(store)
    assert asyncio.run(store.load_turn("s", "k2", 5)).owner == "alice"
    now[0] += 61
    assert asyncio.run(store.load_turn("s", "k2", 5)) == TurnLoad(None, None, [])


def test_one_call_gives_what_the_three_calls_give(store):
    _filled(store)
    for key in (None, "k2", "nope"):
        for limit in (None, 1, 3):
            one = asyncio.run(store.load_turn("s", key, limit))
            three = asyncio.run(load_turn(Spy(store, hide=("load_turn",)), "s", key, limit))
            assert one == three, (key, limit)


def test_the_redacting_store_reads_once_from_sqlite(tmp_path: Path):
    inner = Spy(SQLiteSessionStore(tmp_path / "s.db"))
    store = _filled(RedactingStore(inner, VaultCipher(Fernet.generate_key())))
    inner.calls.clear()
    got = asyncio.run(load_turn(store, "s", None, 2))
    assert inner.calls == ["load_turn_sealed"] and _texts(got)[0] == f"turn 2 from {EMAIL}"
    inner.calls.clear()
    asyncio.run(load_turn(store, "s", "k2", 2))
    assert inner.calls == ["load_turn_sealed"]


def test_without_a_one_call_read_the_calls_are_made_one_by_one(tmp_path: Path):
    inner = Spy(SQLiteSessionStore(tmp_path / "s.db"), hide=("load_turn_sealed", "load_turn"))
    store = _filled(RedactingStore(inner, VaultCipher(Fernet.generate_key())))
    inner.calls.clear()
    got = asyncio.run(load_turn(store, "s", "k2", 2))
    assert got.known is not None and got.known.user_text == f"turn 2 from {EMAIL}" and got.history == []
    assert inner.calls == ["owner", "find_turn", "get_vault"]
    inner.calls.clear()
    got = asyncio.run(load_turn(store, "s", None, 2))
    assert inner.calls == ["owner", "get_history", "get_vault"] and _texts(got)[1] == f"turn 3 from {EMAIL}"


def test_the_runner_starts_a_turn_with_one_read_and_keeps_tenancy(tmp_path: Path):
    from pipelines.errors import NotFound
    from pipelines.turn import TurnRunner

    class Echo:
        name = "echo"

        async def run(self, ctx):
            from pipelines.events import ReplyDelta

            yield ReplyDelta(text=f"{len(ctx.history)} before")

    store = Spy(SQLiteSessionStore(tmp_path / "s.db"))
    runner = TurnRunner(Echo(), store, max_history_turns=2)

    async def turn(principal: str, key: str | None = None) -> list[Any]:
        return [e async for e in runner.run("s", TurnRequest(text="hi"), trace_id="t", principal=principal,
                                            idempotency_key=key)]

    for _ in range(3):
        asyncio.run(turn("alice"))
    store.calls.clear()
    events = asyncio.run(turn("alice"))
    assert events[0].text == "2 before"  # the window of max_history_turns
    reads = [c for c in store.calls if c not in ("acquire_lease", "release_lease", "save_turn")]
    assert reads == ["load_turn"]
    events = asyncio.run(turn("bob"))
    assert events[0].type == "error" and events[0].code == NotFound.code
