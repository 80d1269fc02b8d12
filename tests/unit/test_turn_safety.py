"""pipelines.turn: owners, serialized turns, idempotent retries, side effects, rejected turns (no Ray)."""

from __future__ import annotations

import asyncio

import pytest

from pipelines import errors as E
from pipelines.events import ActionCardEvent, ErrorEvent, NarrationDelta, ReplyDelta, TurnRequest
from pipelines.turn import SIDE_EFFECT_NOTICE, TurnRunner
from tests.doubles import HANG, InMemorySessionStore, ListEventSink, ScriptedPipeline, collect

pytestmark = pytest.mark.timeout(10)

REQ = TurnRequest(text="cancel my order")


def _run(runner: TurnRunner, sid: str = "s1", **kw) -> list:
    return asyncio.run(collect(runner.run(sid, REQ, trace_id="tr", **kw)))


# -- tenancy --------------------------------------------------------------------------------


def test_first_turn_claims_the_session_for_its_principal() -> None:
    store = InMemorySessionStore()
    runner = TurnRunner(ScriptedPipeline([ReplyDelta(text="ok")]), store)
    assert _run(runner, principal="alice")[-1].status == "ok"
    assert asyncio.run(store.owner("s1")) == "alice"


def test_another_principal_gets_not_found_and_nothing_runs_or_is_stored() -> None:
    store = InMemorySessionStore()
    pipe = ScriptedPipeline([ReplyDelta(text="ok")])
    runner = TurnRunner(pipe, store)
    _run(runner, principal="alice")
    events = _run(runner, principal="mallory")
    assert [e.type for e in events] == ["error", "done"]
    assert events[0].code == "not_found" and events[-1].status == "failed"
    assert len(pipe.contexts) == 1 and len(store.records("s1")) == 1


def test_the_pipeline_sees_the_principal() -> None:
    pipe = ScriptedPipeline([])
    _run(TurnRunner(pipe, InMemorySessionStore()), principal="bob")
    assert pipe.contexts[0].principal == "bob"


# -- idempotency ------------------------------------------------------------------------------


def test_a_retry_with_the_same_key_returns_the_recorded_answer_without_running() -> None:
    store = InMemorySessionStore()
    card = ActionCardEvent(card_id="card.cancel_order", title="Cancel", params={"order_id": "#W1"})
    pipe = ScriptedPipeline([NarrationDelta(text="Let me see. "), card, ReplyDelta(text="Done.")])
    runner = TurnRunner(pipe, store)
    first = _run(runner, idempotency_key="k-1")
    again = _run(runner, idempotency_key="k-1")
    assert len(pipe.contexts) == 1 and len(store.records("s1")) == 1
    assert [e.type for e in again] == ["reply.delta", "action_card", "done"]
    assert again[0].text == "Done." and again[1] == card
    assert again[-1].replayed and not first[-1].replayed
    assert again[-1].turn_id == first[-1].turn_id and again[-1].status == "ok"
    _run(runner, idempotency_key="k-2")  # another key is another turn
    assert len(pipe.contexts) == 2 and len(store.records("s1")) == 2


def test_a_rejected_turn_records_no_key_so_its_retry_runs() -> None:
    store = InMemorySessionStore()
    runner = TurnRunner(ScriptedPipeline([E.Overloaded("queue full")]), store)
    assert _run(runner, idempotency_key="k")[0].code == "overloaded"
    runner.pipeline = ScriptedPipeline([ReplyDelta(text="fine")])
    events = _run(runner, idempotency_key="k")
    assert events[-1].status == "ok" and not events[-1].replayed


# -- rejected vs failed ---------------------------------------------------------------------


@pytest.mark.parametrize("exc", [E.Overloaded("q"), E.RateLimited("r"), E.InvalidInput("too many lines"),
                                 E.SessionBusy("b"), E.PayloadTooLarge("big")], ids=lambda e: e.code)
def test_rejecting_errors_store_nothing(exc: E.TandemError) -> None:
    store, sink = InMemorySessionStore(), ListEventSink()
    events = _run(TurnRunner(ScriptedPipeline([NarrationDelta(text="Hm. "), exc]), store, sink=sink))
    assert [e.type for e in events] == ["narration.delta", "error", "done"]
    assert events[1] == ErrorEvent(code=exc.code, message=exc.message, retry_after_s=exc.retry_after_s)
    assert events[-1].status == "failed"
    assert store.records("s1") == [] and store.append_calls == 0
    assert "turn.rejected" in sink.kinds()


@pytest.mark.parametrize("exc", [E.ModelUnavailable("gone"), E.ToolError("t"), E.ModelTimeout("slow"),
                                 E.InvalidModelOutput("x"), E.PolicyBlocked("p")], ids=lambda e: e.code)
def test_failing_errors_store_the_turn_failed(exc: E.TandemError) -> None:
    store = InMemorySessionStore()
    events = _run(TurnRunner(ScriptedPipeline([ReplyDelta(text="Par"), exc]), store))
    assert events[-2].code == exc.code and events[-1].status == "failed"
    assert [(r.status, r.reply_text) for r in store.records("s1")] == [("failed", "Par")]


# -- side effects -----------------------------------------------------------------------------


class WritingPipeline:
    """Executes a 'write', marks it, checkpoints, then fails (or not) while wording the reply."""

    name = "writer"

    def __init__(self, after: list) -> None:
        self.after = after
        self.checkpointed: list[bool] = []

    async def run(self, ctx):
        ctx.meta["dr"] = {"executed": "card.cancel_order"}
        ctx.mark_side_effect("card.cancel_order")
        self.checkpointed.append(await ctx.checkpoint())
        for item in self.after:
            if isinstance(item, BaseException):
                raise item
            yield item


@pytest.mark.parametrize("exc", [E.Overloaded("generator queue full"), E.ModelUnavailable("gone"),
                                 E.ModelTimeout("slow"), RuntimeError("bug")], ids=lambda e: type(e).__name__)
def test_an_error_after_a_side_effect_completes_the_turn_conservatively(exc: BaseException) -> None:
    store, sink = InMemorySessionStore(), ListEventSink()
    pipe = WritingPipeline([exc])
    events = _run(TurnRunner(pipe, store, sink=sink))
    assert pipe.checkpointed == [True]
    assert [e.type for e in events] == ["error", "reply.delta", "done"]
    assert events[1].text == SIDE_EFFECT_NOTICE and events[-1].status == "fallback"
    [rec] = store.records("s1")  # the checkpoint and the final save are one record
    assert rec.status == "fallback" and rec.reply_text == SIDE_EFFECT_NOTICE
    assert rec.meta["side_effects"] == ["card.cancel_order"] and rec.meta["dr"] == {"executed": "card.cancel_order"}
    assert "checkpoint" not in rec.meta
    assert store.append_calls == 2
    assert "turn.conservative" in sink.kinds()


def test_a_checkpoint_is_the_record_until_the_final_save_overwrites_it() -> None:
    store = InMemorySessionStore()
    seen: list = []

    class Peek(WritingPipeline):
        async def run(self, ctx):
            async for ev in super().run(ctx):
                seen.append([r.model_copy() for r in store.records("s1")])
                yield ev

    events = _run(TurnRunner(Peek([ReplyDelta(text="Cancelled.")]), store))
    assert events[-1].status == "ok"
    [[mid]] = seen
    assert mid.meta["checkpoint"] is True and mid.meta["side_effects"] == ["card.cancel_order"]
    [final] = store.records("s1")
    assert final.turn_id == mid.turn_id and final.index == 0 and final.reply_text == "Cancelled."


def test_a_reply_already_sent_is_kept_without_the_notice() -> None:
    store = InMemorySessionStore()
    events = _run(TurnRunner(WritingPipeline([ReplyDelta(text="Cancelled."), E.ModelUnavailable("x")]), store))
    assert [e.type for e in events] == ["reply.delta", "error", "done"]
    assert store.records("s1")[0].reply_text == "Cancelled."


def test_checkpoint_without_a_runner_is_a_no_op() -> None:
    from pipelines.turn import TurnContext

    ctx = TurnContext("s", "t", "tr", REQ, [], ListEventSink())
    assert asyncio.run(ctx.checkpoint()) is False
    ctx.mark_side_effect("w")
    assert ctx.side_effects == ["w"] and ctx.meta["side_effects"] == ["w"]


# -- serialization --------------------------------------------------------------------------


def test_a_second_concurrent_turn_gets_session_busy_after_its_wait() -> None:
    store = InMemorySessionStore()
    runner = TurnRunner(ScriptedPipeline([ReplyDelta(text="slow"), HANG]), store, lock_wait_s=0.05, deadline_s=5)

    async def main() -> list:
        first = runner.run("s1", REQ, trace_id="a")
        assert (await first.__anext__()).text == "slow"  # holds the session
        second = await collect(runner.run("s1", REQ, trace_id="b"))
        other = await runner.start("s2", REQ, trace_id="c")  # another session is not blocked
        await other.aclose()
        await first.aclose()
        return second

    second = asyncio.run(main())
    assert [e.type for e in second] == ["error", "done"]
    assert second[0].code == "session_busy" and second[0].retry_after_s == 1.0
    assert [r.status for r in store.records("s1")] == ["failed"]  # only the first (cancelled) turn


def test_a_waiting_turn_runs_when_the_first_finishes() -> None:
    store = InMemorySessionStore()
    gate = asyncio.Event

    class Gated:
        name = "gated"

        def __init__(self) -> None:
            self.release = None
            self.order: list[str] = []

        async def run(self, ctx):
            self.order.append(ctx.trace_id + ":start")
            if ctx.trace_id == "a":
                await self.release.wait()
            yield ReplyDelta(text=ctx.trace_id)
            self.order.append(ctx.trace_id + ":end")

    pipe = Gated()
    runner = TurnRunner(pipe, store, lock_wait_s=5, deadline_s=5)

    async def main() -> None:
        pipe.release = gate()
        a = asyncio.create_task(collect(runner.run("s1", REQ, trace_id="a")))
        await asyncio.sleep(0.01)
        b = asyncio.create_task(collect(runner.run("s1", REQ, trace_id="b")))
        await asyncio.sleep(0.01)
        pipe.release.set()
        await asyncio.gather(a, b)

    asyncio.run(main())
    assert pipe.order == ["a:start", "a:end", "b:start", "b:end"]
    assert [r.reply_text for r in store.records("s1")] == ["a", "b"]
    assert store.leases == {}


def test_a_lease_held_elsewhere_is_busy() -> None:
    store = InMemorySessionStore(leases={"s1": "another-replica"})
    events = _run(TurnRunner(ScriptedPipeline([]), store, lock_wait_s=0.05))
    assert events[0].code == "session_busy"


# -- the deadline covers loading and saving ----------------------------------------------------


class SlowStore(InMemorySessionStore):
    async def get_history(self, session_id, limit=None):
        await asyncio.Event().wait()


def test_the_deadline_covers_the_history_load() -> None:
    events = _run(TurnRunner(ScriptedPipeline([]), SlowStore(), deadline_s=0.05))
    assert [e.type for e in events] == ["error", "done"] and events[0].code == "model_timeout"


def test_a_store_that_fails_at_save_gives_a_typed_error_and_done() -> None:
    store = InMemorySessionStore(fail_appends=OSError("disk gone"))
    events = _run(TurnRunner(ScriptedPipeline([ReplyDelta(text="Hi")]), store))
    assert [e.type for e in events] == ["reply.delta", "error", "done"]
    assert events[1].code == "store_unavailable" and events[1].retry_after_s == 1.0
    assert events[-1].status == "failed" and store.records("s1") == []


def test_a_store_that_hangs_at_save_is_bounded_by_the_grace() -> None:
    class Hang(InMemorySessionStore):
        async def save_turn(self, *a, **k):
            await asyncio.Event().wait()

    runner = TurnRunner(ScriptedPipeline([ReplyDelta(text="Hi")]), Hang(), deadline_s=0.05, save_grace_s=0.05)
    events = _run(runner)
    assert events[-2].code == "store_unavailable" and events[-1].status == "failed"
