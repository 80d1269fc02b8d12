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
