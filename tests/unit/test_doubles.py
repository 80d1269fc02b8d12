"""The shared doubles behave as the tests rely on them."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.protocols import ModelCall
from tests.doubles import HANG, ScriptModels, TurnResult


def test_script_models_log_order() -> None:
    log: list[tuple[str, str]] = []
    m = ScriptModels(log=log)
    m.push("generator", ["a", "b"])

    async def go() -> str:
        return "".join([d async for d in m.stream("generator", ModelCall(messages=[]))])

    assert asyncio.run(go()) == "ab"
    assert log == [("call", "generator"), ("chunk", "generator"), ("chunk", "generator"), ("end", "generator")]


def test_pushed_items_win_over_the_script_and_run_out_loudly() -> None:
    m = ScriptModels(["x", "y"])
    m.push("orchestrator", "pushed-output", RuntimeError("down"))

    async def go(role: str) -> str:
        return "".join([d async for d in m.stream(role, ModelCall(messages=[], prefix="pushed-"))])

    assert asyncio.run(go("orchestrator")) == "output"  # the given prefix is not yielded again
    with pytest.raises(RuntimeError):
        asyncio.run(go("orchestrator"))
    assert asyncio.run(go("orchestrator")) == "xy"  # nothing pushed left: the script
    assert ScriptModels(chunk=2, generator=["abcde"]).scripts["generator"] == ["abcde"]
    with pytest.raises(AssertionError):
        asyncio.run(go_empty())


async def go_empty() -> None:
    async for _ in ScriptModels().stream("generator", ModelCall(messages=[])):
        pass


def test_a_hanging_script_counts_as_closed_when_cancelled() -> None:
    m = ScriptModels(["a", HANG])

    async def go() -> None:
        agen = m.stream("generator", ModelCall(messages=[]))
        assert await agen.__anext__() == "a"
        task = asyncio.ensure_future(agen.__anext__())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await agen.aclose()

    asyncio.run(go())
    assert m.closed == 1


def test_turn_result_tells_client_events_from_logged_ones() -> None:
    from pipelines.events import ReplyDelta

    r = TurnResult([ReplyDelta(text="hi")], [("tandem.step", {"step": 1})])
    assert [e.text for e in r.of("reply.delta")] == ["hi"] and r.of("tandem.step") == [{"step": 1}]
