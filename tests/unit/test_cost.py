"""pipelines.cost: one record per model call, summed per turn, role and purpose; the meter follows the turn."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.cost import CallCost, TurnCost, current, metered, metering, purpose_of, record


def _c(role: str, purpose: str, p: int, cached: int, d: int, engine: float | None, wall: float = 1.0,
       reported: bool = True, queue: float | None = None) -> CallCost:
    return CallCost(role=role, purpose=purpose, prompt_tokens=p, cached_tokens=cached, decode_tokens=d,
                    engine_ms=engine, queue_ms=queue, wall_ms=wall, reported=reported)


def test_block_sums_in_total_per_role_and_per_purpose() -> None:
    cost = TurnCost()
    cost.add(_c("orchestrator", "w1.intent", 300, 256, 2, 40.0, queue=1.5))
    cost.add(_c("orchestrator", "w1.sub_intent", 305, 288, 3, 30.0))
    cost.add(_c("orchestrator", "orchestrator.step", 400, 288, 20, 500.0, queue=0.5))
    cost.add(_c("generator", "generator.reply", 120, 0, 40, None, wall=900.0, reported=False))
    b = cost.block()
    assert (b.calls, b.prompt_tokens, b.cached_prompt_tokens, b.decode_tokens) == (4, 1125, 832, 65)
    assert b.engine_ms == 40.0 + 30.0 + 500.0 + 900.0  # the unreported call counts its wall time
    assert b.queue_ms == 2.0 and b.unreported == 1
    assert list(b.by_role) == ["orchestrator", "generator"]
    o = b.by_role["orchestrator"]
    assert (o.calls, o.prompt_tokens, o.cached_prompt_tokens, o.decode_tokens, o.engine_ms) == (3, 1005, 832, 25, 570.0)
    assert o.tokens == 1030
    assert list(b.by_purpose) == ["w1.intent", "w1.sub_intent", "orchestrator.step", "generator.reply"]
    assert b.by_purpose["generator.reply"].decode_tokens == 40


def test_an_empty_turn_has_a_zero_block() -> None:
    b = TurnCost().block()
    assert (b.calls, b.tokens, b.engine_ms, b.unreported, b.by_role, b.by_purpose) == (0, 0, 0.0, 0, {}, {})


def test_the_engines_time_else_the_callers() -> None:
    assert _c("generator", "g", 1, 0, 1, 12.5, wall=99.0).spent_ms == 12.5
    assert _c("generator", "g", 1, 0, 1, 0.0, wall=99.0).spent_ms == 0.0  # reported zero is the engine's
    assert _c("generator", "g", 1, 0, 1, None, wall=99.0).spent_ms == 99.0


@pytest.mark.parametrize(("role", "purpose", "expected"), [
    ("orchestrator", "", "orchestrator.step"), ("generator", "", "generator.reply"),
    ("slot_extractor", "", "w2.slots"), ("judge", "", "judge"), ("orchestrator", "w1.intent", "w1.intent"),
])
def test_purpose_of(role: str, purpose: str, expected: str) -> None:
    assert purpose_of(role, purpose) == expected


def test_record_outside_a_turn_records_nothing_and_inside_reaches_the_meter() -> None:
    record(_c("generator", "g", 1, 0, 1, 1.0))  # no meter: nothing, no error
    cost = TurnCost()
    with metering(cost):
        assert current() is cost
        record(_c("generator", "g", 1, 0, 1, 1.0))
    assert current() is None and len(cost.calls) == 1


def test_metered_steps_see_the_meter_whichever_task_drives_them_and_tasks_they_start_inherit_it() -> None:
    cost = TurnCost()

    async def pipeline():
        record(_c("orchestrator", "a", 1, 0, 1, 1.0))
        yield 1
        task = asyncio.create_task(_later())  # started in the step: inherits the meter
        yield 2
        await task
        record(_c("generator", "c", 1, 0, 1, 1.0))
        yield 3

    async def _later() -> None:
        await asyncio.sleep(0)
        record(_c("slot_extractor", "b", 1, 0, 1, 1.0))

    async def main() -> list[int]:
        stream = metered(pipeline(), cost)
        out = [await stream.__anext__()]
        out.append(await asyncio.create_task(stream.__anext__()))  # another task drives the next step
        out.append(await asyncio.create_task(stream.__anext__()))
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        assert current() is None  # the driver's own context is left as it was
        return out

    assert asyncio.run(main()) == [1, 2, 3]
    assert [c.purpose for c in cost.calls] == ["a", "b", "c"]


def test_metered_closes_the_pipeline_under_the_meter() -> None:
    cost = TurnCost()

    async def pipeline():
        try:
            yield 1
            yield 2
        finally:  # a call ended by the turn's close still reaches the meter
            record(_c("generator", "closed", 1, 0, 1, None, reported=False))

    async def main() -> None:
        stream = metered(pipeline(), cost)
        assert await stream.__anext__() == 1
        await stream.aclose()

    asyncio.run(main())
    assert [c.purpose for c in cost.calls] == ["closed"]
