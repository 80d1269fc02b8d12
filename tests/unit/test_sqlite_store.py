"""serve.stores.sqlite: the embedded profile's session store (a real SQLite file)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from pipelines.errors import StoreUnavailable
from pipelines.protocols import TurnRecord
from serve.stores.sqlite import SQLiteSessionStore

pytestmark = pytest.mark.timeout(20)


def _rec(turn_id: str, text: str = "hi", **kw) -> TurnRecord:
    return TurnRecord(turn_id=turn_id, index=0, user_text=text, **kw)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteSessionStore:
    return SQLiteSessionStore(tmp_path / "nested" / "dir" / "sessions.db")


def test_roundtrip(store: SQLiteSessionStore) -> None:
    rec = TurnRecord(turn_id="t_1", index=99, user_text="Wo ist … 📦?", reply_text="Unterwegs.", status="fallback",
                     locale="de-DE", user_id="u1", trace_id="ab" * 16, pipeline="prompting",
                     created_at=1700000000.25, meta={"seed": 3, "ids": ["a", "b"], "nested": {"x": None}})

    async def main() -> tuple[bool, list[TurnRecord], bool]:
        before = await store.session_exists("s1")
        await store.append_turn("s1", rec)
        return before, await store.get_history("s1"), await store.session_exists("s1")

    before, history, after = asyncio.run(main())
    assert (before, after) == (False, True)
    assert history == [rec.model_copy(update={"index": 0})]  # the store numbers turns
    assert store.dump("s1") == [history[0].model_dump(mode="json")]


def test_unknown_session_is_empty(store: SQLiteSessionStore) -> None:
    assert asyncio.run(store.get_history("nobody")) == []
    assert asyncio.run(store.get_history("nobody", 3)) == []


def test_ordering_and_limit(store: SQLiteSessionStore) -> None:
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
    assert asyncio.run(store.get_history("s", 0)) == []
    assert len(asyncio.run(store.get_history("s", 100))) == 7
    assert [t.turn_id for t in asyncio.run(store.get_history("other"))] == ["o0"]


def _indices(path: Path, session_id: str) -> tuple[list[int], int]:
    with sqlite3.connect(path) as conn:
        idx = [r[0] for r in conn.execute("SELECT idx FROM turns WHERE session_id=? ORDER BY idx", (session_id,))]
        count = conn.execute("SELECT turn_count FROM sessions WHERE session_id=?", (session_id,)).fetchone()[0]
    return idx, count


def test_dense_indices_under_concurrent_tasks(store: SQLiteSessionStore) -> None:
    n = 40

    async def main() -> None:
        await asyncio.gather(*(store.append_turn("s", _rec(f"t{i}")) for i in range(n)))

    asyncio.run(main())
    idx, count = _indices(store.path, "s")
    assert idx == list(range(n)) and count == n
    assert sorted(t.turn_id for t in asyncio.run(store.get_history("s"))) == sorted(f"t{i}" for i in range(n))


def test_dense_indices_under_concurrent_threads_and_instances(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    stores = [SQLiteSessionStore(path), SQLiteSessionStore(path)]  # like two replicas on one file
    n_threads, per_thread = 6, 10
    start = threading.Barrier(n_threads)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            start.wait()
            s = stores[k % 2]

            async def go() -> None:
                for i in range(per_thread):
                    await s.append_turn("s", _rec(f"t{k}_{i}"))

            asyncio.run(go())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    idx, count = _indices(path, "s")
    total = n_threads * per_thread
    assert idx == list(range(total)) and count == total
    # Each thread's own turns keep their order.
    hist = asyncio.run(stores[0].get_history("s"))
    for k in range(n_threads):
        mine = [t.turn_id for t in hist if t.turn_id.startswith(f"t{k}_")]
        assert mine == [f"t{k}_{i}" for i in range(per_thread)]


def test_failing_append_stores_nothing_and_the_store_keeps_working(store: SQLiteSessionStore) -> None:
    asyncio.run(store.append_turn("s", _rec("dup", "first")))
    with pytest.raises(StoreUnavailable):  # sqlite3.IntegrityError, translated at the store's boundary
        asyncio.run(store.append_turn("s", _rec("dup", "second")))
    with pytest.raises(StoreUnavailable):  # turn ids are unique across sessions too
        asyncio.run(store.append_turn("fresh", _rec("dup", "third")))
    assert [t.user_text for t in asyncio.run(store.get_history("s"))] == ["first"]
    assert asyncio.run(store.session_exists("fresh")) is False  # no half-written session row
    asyncio.run(store.append_turn("s", _rec("next", "second")))
    hist = asyncio.run(store.get_history("s"))
    assert [(t.index, t.user_text) for t in hist] == [(0, "first"), (1, "second")]
    assert _indices(store.path, "s") == ([0, 1], 2)


def test_wal_mode(store: SQLiteSessionStore) -> None:
    asyncio.run(store.append_turn("s", _rec("t")))
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"


def test_persistence_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    first = SQLiteSessionStore(path)
    asyncio.run(first.append_turn("s", _rec("t0", "q0", reply_text="a0")))
    asyncio.run(first.append_turn("s", _rec("t1", "q1", status="failed")))
    second = SQLiteSessionStore(path)
    hist = asyncio.run(second.get_history("s"))
    assert [(t.turn_id, t.index, t.user_text, t.reply_text, t.status) for t in hist] == [
        ("t0", 0, "q0", "a0", "ok"), ("t1", 1, "q1", "", "failed")]
    assert asyncio.run(second.session_exists("s"))
    asyncio.run(second.append_turn("s", _rec("t2")))
    assert [t.index for t in asyncio.run(first.get_history("s"))] == [0, 1, 2]
