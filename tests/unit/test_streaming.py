"""serve.streaming: heartbeats while a turn is silent, without timing thresholds (the turn waits for them)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import serve.ingress as ingress_mod
from pipelines.events import ReplyDelta
from serve.streaming import HEARTBEAT, SSE_HEARTBEAT, sse_frame, with_heartbeats
from tests.unit.edge_app import auth, harness, sse_events, stored_turns

pytestmark = pytest.mark.timeout(120)


def test_heartbeats_flow_while_the_source_is_silent_and_stop_with_it() -> None:
    beats = asyncio.Event

    async def main() -> list:
        two = beats()
        seen: list = []

        async def silent():
            yield "first"
            await two.wait()  # silent until the consumer has seen two heartbeats
            yield "second"

        async for item in with_heartbeats(silent(), 0.001):
            seen.append(item)
            if seen.count(HEARTBEAT) == 2:
                two.set()
        return seen

    seen = asyncio.run(main())
    assert seen[0] == "first" and seen[-1] == "second"
    assert seen[1:-1].count(HEARTBEAT) >= 2 and set(seen[1:-1]) == {HEARTBEAT}


def test_an_error_of_the_source_reaches_the_consumer() -> None:
    async def bad():
        yield 1
        raise ValueError("boom")

    async def main() -> list:
        got = []
        async for x in with_heartbeats(bad(), 10):
            got.append(x)
        return got

    with pytest.raises(ValueError):
        asyncio.run(main())


def test_closing_the_consumer_cancels_the_source() -> None:
    closed: list[str] = []

    async def endless():
        try:
            while True:
                yield "x"
                await asyncio.sleep(0)
        finally:
            closed.append("source closed")

    async def main() -> None:
        gen = with_heartbeats(endless(), 10)
        assert await gen.__anext__() == "x"
        await gen.aclose()

    asyncio.run(main())
    assert closed == ["source closed"]


def test_sse_frame_of_a_heartbeat_is_a_comment() -> None:
    assert sse_frame(HEARTBEAT) == SSE_HEARTBEAT == ": keep-alive\n\n"
    assert sse_frame(ReplyDelta(text="a")).startswith("event: reply.delta\ndata: ")


def test_a_silent_turn_is_held_open_past_two_heartbeats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = {"beats": 0}
    real = ingress_mod.sse_frame

    def counting(ev):
        frame = real(ev)
        count["beats"] += frame == SSE_HEARTBEAT
        return frame

    monkeypatch.setattr(ingress_mod, "sse_frame", counting)

    class Silent:
        name = "silent"

        async def run(self, ctx):
            while count["beats"] < 2:  # silent until two heartbeats went out
                await asyncio.sleep(0.001)
            yield ReplyDelta(text="Finally.")

    with harness(tmp_path, ingress={"sse_heartbeat_s": 0.005}) as h:
        h.ingress.runner.pipeline = Silent()

        async def go():
            async with h.client() as c:
                return await c.post("/v1/sessions/hb1/turns", json={"text": "hi"},
                                    headers={**auth("alice"), "accept": "text/event-stream"})

        r = asyncio.run(go())
    assert r.status_code == 200
    head = r.text.split("event: ")[0]
    assert head.count(SSE_HEARTBEAT) >= 2  # two beats before the first event
    evs = sse_events(r.text)
    assert [e["type"] for e in evs] == ["reply.delta", "done"] and evs[-1]["status"] == "ok"
    assert [t["reply_text"] for t in stored_turns(tmp_path, "hb1")] == ["Finally."]


def test_the_buffer_between_the_turn_and_a_slow_consumer_is_bounded() -> None:
    made: list[int] = []

    async def eager():
        for i in range(1000):  # never awaits: an unbounded buffer would take all 1000 at once
            made.append(i)
            yield i

    async def main() -> list[int]:
        gen = with_heartbeats(eager(), 10, buffer=3)
        got = [await gen.__anext__()]
        for _ in range(50):  # the consumer stalls; the turn's task runs as far as it can
            await asyncio.sleep(0)
        seen_while_stalled = len(made)
        got += [x async for x in gen]
        return [seen_while_stalled, got]

    seen_while_stalled, got = asyncio.run(main())
    assert got == list(range(1000))  # nothing lost, in order
    assert seen_while_stalled <= 3 + 2  # the buffer, the one read, the one waiting to be put


def _refusing():
    from pipelines.errors import Overloaded

    class Refusing:
        name = "refusing"

        async def run(self, ctx):
            raise Overloaded("the model queue is full")
            yield  # an async generator

    return Refusing()


@pytest.mark.parametrize(("window", "status"), [(30.0, 503), (0.0, 200)])
def test_a_refusal_is_the_status_within_the_window_and_an_error_event_after_it(
        tmp_path: Path, window: float, status: int) -> None:
    with harness(tmp_path, ingress={"sse_refusal_window_s": window}) as h:
        h.ingress.runner.pipeline = _refusing()

        async def go():
            async with h.client() as c:
                return await c.post("/v1/sessions/rf1/turns", json={"text": "hi"},
                                    headers={**auth("alice"), "accept": "text/event-stream"})

        r = asyncio.run(go())
    assert r.status_code == status
    if status == 503:
        assert r.json()["error"]["code"] == "overloaded" and r.headers["retry-after"] == "1"
    else:  # the headers went out (a heartbeat) before the refusal: it is the stream's error event
        assert r.text.startswith(SSE_HEARTBEAT)
        evs = sse_events(r.text)
        assert [e["type"] for e in evs] == ["error", "done"]
        assert evs[0]["code"] == "overloaded" and evs[-1]["status"] == "failed"
    assert stored_turns(tmp_path, "rf1") == []  # refused: nothing stored either way
