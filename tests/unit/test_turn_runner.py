"""pipelines.turn: the runner's bookkeeping, with scripted doubles (no Ray, no engine)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from pipelines.annex.prompting import PromptingPipeline, PromptingSettings
from pipelines.errors import (
    InvalidInput,
    InvalidModelOutput,
    InvalidSessionId,
    ModelUnavailable,
    PayloadTooLarge,
    PolicyBlocked,
    ValidationFailed,
)
from pipelines.events import (
    ActionCardEvent,
    DoneEvent,
    ErrorEvent,
    NarrationDelta,
    ReplyDelta,
    TurnRequest,
)
from pipelines.protocols import TurnRecord
from pipelines.turn import (
    SESSION_ID_RE,
    TurnRunner,
    new_turn_id,
    parse_turn_request,
    validate_session_id,
)
from tests.doubles import (
    HANG,
    InMemorySessionStore,
    ListEventSink,
    ScriptedModelClient,
    ScriptedPipeline,
    collect,
)

pytestmark = pytest.mark.timeout(10)

REQ = TurnRequest(text="Where is my order?", locale="en", user_id="u1")


def _fake_clock(step: float = 0.01):
    """A monotonic clock that advances ``step`` seconds per reading (deterministic timings)."""
    counter = itertools.count()
    return lambda: next(counter) * step


def _runner(script, *, store=None, sink=None, **kw) -> tuple[TurnRunner, ScriptedModelClient, InMemorySessionStore, ListEventSink]:
    models = ScriptedModelClient(script)
    store = store if store is not None else InMemorySessionStore()
    sink = sink if sink is not None else ListEventSink()
    pipe = PromptingPipeline(models, PromptingSettings(system_prompt="Be brief."))
    kw.setdefault("wall_clock", lambda: 1234.5)
    return TurnRunner(pipe, store, sink=sink, **kw), models, store, sink


def _run(runner: TurnRunner, session_id: str = "s1", req: TurnRequest = REQ, **kw) -> list:
    return asyncio.run(collect(runner.run(session_id, req, trace_id="tr-1", **kw)))


# -- a good turn --------------------------------------------------------------


def test_ok_turn_yields_deltas_then_done_and_stores_one_record() -> None:
    runner, models, store, sink = _runner(["Your ", "", "order ", "ships today."], clock=_fake_clock())
    events = _run(runner, turn_id="t_fixed")
    assert events[:-1] == [ReplyDelta(text="Your "), ReplyDelta(text="order "), ReplyDelta(text="ships today.")]
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert (done.session_id, done.turn_id, done.trace_id, done.status, done.pipeline) == (
        "s1", "t_fixed", "tr-1", "ok", "prompting")
    assert done.timings.first_token_ms is not None and done.timings.first_token_ms > 0
    assert done.timings.end_ms >= done.timings.first_token_ms
    assert "generate" in done.timings.stages
    [rec] = store.records("s1")
    assert rec.turn_id == "t_fixed" and rec.index == 0
    assert (rec.user_text, rec.reply_text, rec.status) == ("Where is my order?", "Your order ships today.", "ok")
    assert (rec.locale, rec.user_id, rec.trace_id, rec.pipeline, rec.created_at) == ("en", "u1", "tr-1", "prompting", 1234.5)
    assert store.append_calls == 1
    assert [r for r, _ in models.calls] == ["generator"]
    assert sink.kinds() == ["turn.start", "stage.generate", "turn.end"]
    assert sink.of("turn.end")[0]["reply_chars"] == len("Your order ships today.")


def test_timings_are_measured_from_received_at() -> None:
    clock = _fake_clock(0.5)
    received_at = clock()  # the ingress reads the clock when the request arrives (0.0)
    runner, *_ = _runner(["a"], clock=clock)
    done = _run(runner, received_at=received_at)[-1]
    assert done.timings.queue_ms == 500.0  # the runner started one tick later
    assert done.timings.first_token_ms > done.timings.queue_ms
    assert done.timings.end_ms > done.timings.first_token_ms


def test_first_token_counts_narration_too_and_done_carries_meta() -> None:
    events_in = [NarrationDelta(text="Let me check. "), ActionCardEvent(card_id="c", title="t"), ReplyDelta(text="Done.")]
    store, sink = InMemorySessionStore(), ListEventSink()
    pipe = ScriptedPipeline(events_in)
    runner = TurnRunner(pipe, store, sink=sink, clock=_fake_clock())
    events = asyncio.run(collect(runner.run("s1", REQ, trace_id="tr")))
    assert events[:-1] == events_in
    assert events[-1].pipeline == "scripted" and events[-1].timings.first_token_ms is not None
    [rec] = store.records("s1")
    assert rec.reply_text == "Done."  # narration is not the reply


def test_turn_without_tokens_has_no_first_token() -> None:
    runner, _, store, _ = _runner([])
    done = _run(runner)[-1]
    assert done.status == "ok" and done.timings.first_token_ms is None
    assert store.records("s1")[0].reply_text == ""


def test_pipeline_status_meta_and_rules_version_reach_the_record_and_done() -> None:
    class Fallback:
        name = "fb"

        async def run(self, ctx):
            ctx.status = "fallback"
            ctx.meta["seed"] = 7
            ctx.rules_version = "r1"
            yield ReplyDelta(text="Sorry.")

    store = InMemorySessionStore()
    events = asyncio.run(collect(TurnRunner(Fallback(), store).run("s1", REQ, trace_id="t")))
    assert events[-1].status == "fallback" and events[-1].rules_version == "r1"
    [rec] = store.records("s1")
    assert rec.status == "fallback" and rec.meta == {"seed": 7}


def test_turn_ids_are_fresh() -> None:
    ids = {new_turn_id() for _ in range(50)}
    assert len(ids) == 50 and all(i.startswith("t_") for i in ids)


# -- failures -------------------------------------------------------------------


def test_tandem_error_mid_stream_becomes_error_event_and_failed_done() -> None:
    runner, _, store, sink = _runner(["Your ord", ModelUnavailable("no replica took the call")])
    events = _run(runner)
    assert events[0] == ReplyDelta(text="Your ord")
    assert events[1] == ErrorEvent(code="model_unavailable", message="no replica took the call", retry_after_s=1.0)
    assert isinstance(events[2], DoneEvent) and events[2].status == "failed"
    assert len(events) == 3
    [rec] = store.records("s1")
    assert (rec.status, rec.user_text, rec.reply_text) == ("failed", "Where is my order?", "Your ord")
    assert sink.of("turn.error") == [{"turn_id": rec.turn_id, "code": "model_unavailable",
                                      "message": "no replica took the call"}]
    assert sink.of("turn.end")[0]["status"] == "failed"


@pytest.mark.parametrize("err", [InvalidModelOutput("bad chunk"), PolicyBlocked("no")], ids=lambda e: e.code)
def test_other_tandem_errors_keep_their_code(err) -> None:
    runner, _, store, _ = _runner([err])
    events = _run(runner)
    assert [e.type for e in events] == ["error", "done"]
    assert events[0].code == err.code and events[-1].status == "failed"
    assert store.records("s1")[0].status == "failed"


def test_failed_turn_keeps_the_user_turn_but_not_the_partial_reply_in_the_next_prompt() -> None:
    store = InMemorySessionStore()
    runner, _, _, _ = _runner(["Half a rep", ModelUnavailable("down")], store=store)
    _run(runner)
    runner2, models2, _, _ = _runner(["Fine."], store=store)
    _run(runner2, req=TurnRequest(text="Hello again"))
    call = models2.calls[0][1]
    assert [(m.role, m.content) for m in call.messages[1:]] == [
        ("user", "Where is my order?"),
        ("user", "Hello again"),
    ]
    assert [r.status for r in store.records("s1")] == ["failed", "ok"]
    assert [r.index for r in store.records("s1")] == [0, 1]


def test_deadline_exceeded_is_model_timeout() -> None:
    runner, models, store, sink = _runner(["Thinking", HANG], deadline_s=0.05)
    events = _run(runner)
    assert [e.type for e in events] == ["reply.delta", "error", "done"]
    assert events[1].code == "model_timeout"
    assert "deadline" in events[1].message
    assert events[2].status == "failed"
    [rec] = store.records("s1")
    assert (rec.status, rec.reply_text) == ("failed", "Thinking")
    assert models.closed == 1  # the model stream was cancelled, not left running
    assert sink.of("turn.error")[0]["code"] == "model_timeout"


def test_cancellation_by_aclose_stores_the_turn_failed_once() -> None:
    runner, _, store, sink = _runner(["Hel", "lo", HANG])

    async def main() -> list:
        gen = runner.run("s1", REQ, trace_id="tr")
        first = await gen.__anext__()
        await gen.aclose()
        await gen.aclose()  # closing twice is harmless
        return [first]

    got = asyncio.run(main())
    assert got == [ReplyDelta(text="Hel")]
    [rec] = store.records("s1")
    assert (rec.status, rec.reply_text) == ("failed", "Hel")
    assert store.append_calls == 1
    assert "turn.cancelled" in sink.kinds() and "turn.end" not in sink.kinds()


def test_cancellation_of_the_consuming_task_stores_the_turn_failed_once() -> None:
    runner, models, store, sink = _runner(["Partial", HANG])
    seen: list = []

    async def consume() -> None:
        async for ev in runner.run("s1", REQ, trace_id="tr"):
            seen.append(ev)

    async def main() -> None:
        task = asyncio.create_task(consume())
        while not seen:
            await asyncio.sleep(0)
        for _ in range(5):
            await asyncio.sleep(0)  # let the model reach HANG
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == [ReplyDelta(text="Partial")]
    [rec] = store.records("s1")
    assert (rec.status, rec.reply_text) == ("failed", "Partial")
    assert store.append_calls == 1
    assert models.closed == 1
    assert sink.kinds().count("turn.cancelled") == 1


def test_cancellation_right_after_the_error_event_still_stores_the_turn() -> None:
    runner, _, store, _ = _runner(["Par", ModelUnavailable("down")])

    async def main() -> None:
        gen = runner.run("s1", REQ, trace_id="tr")
        async for ev in gen:
            if isinstance(ev, ErrorEvent):
                break
        await gen.aclose()

    asyncio.run(main())
    assert [(r.status, r.reply_text) for r in store.records("s1")] == [("failed", "Par")]


def test_unexpected_exception_still_stores_the_turn_as_failed() -> None:
    store = InMemorySessionStore()
    runner = TurnRunner(ScriptedPipeline([ReplyDelta(text="Hm"), RuntimeError("bug")]), store)
    events = asyncio.run(collect(runner.run("s1", REQ, trace_id="tr")))
    assert [e.type for e in events] == ["reply.delta", "error", "done"]
    assert events[1].code == "internal" and "bug" not in events[1].message
    assert events[-1].status == "failed"
    assert [(r.status, r.reply_text) for r in store.records("s1")] == [("failed", "Hm")]


# -- history -------------------------------------------------------------------


def test_history_limit_is_passed_to_the_store_and_reaches_the_prompt() -> None:
    store = InMemorySessionStore()
    store.sessions["s1"] = [
        TurnRecord(turn_id=f"t{i}", index=i, user_text=f"q{i}", reply_text=f"a{i}") for i in range(5)
    ]
    runner, models, _, sink = _runner(["ok"], store=store, max_history_turns=2)
    _run(runner)
    assert store.history_calls == [("s1", 2)]
    contents = [m.content for m in models.calls[0][1].messages[1:]]
    assert contents == ["q3", "a3", "q4", "a4", REQ.text]
    assert sink.of("turn.start")[0]["history_turns"] == 2


def test_sessions_are_separate() -> None:
    store = InMemorySessionStore()
    runner, models, _, _ = _runner(["x"], store=store)
    _run(runner, "a")
    _run(runner, "b")
    assert [len(store.records(s)) for s in ("a", "b")] == [1, 1]
    assert len(models.calls[1][1].messages) == 2  # system + user: nothing from session a


# -- validation -----------------------------------------------------------------


@pytest.mark.parametrize("sid", ["s", "abc-123", "user:42.session_7", "A" * 128, "0"])
def test_valid_session_ids(sid: str) -> None:
    assert validate_session_id(sid) == sid and SESSION_ID_RE.match(sid)


@pytest.mark.parametrize("sid", ["", "-x", "_x", "a b", "a/b", "A" * 129, "é", "\na", None, 5])
def test_invalid_session_ids(sid) -> None:
    with pytest.raises(InvalidSessionId) as ei:
        validate_session_id(sid)
    assert ei.value.http_status == 400 and ei.value.code == "invalid_session_id"
    assert len(ei.value.details["session_id"]) <= 64


@pytest.mark.parametrize("sid", ["abc\n", "A" * 128 + "\n"])
def test_session_id_with_a_trailing_newline_is_rejected(sid: str) -> None:
    with pytest.raises(InvalidSessionId):
        validate_session_id(sid)


def test_parse_turn_request_ok_and_passthrough() -> None:
    req = parse_turn_request({"text": "hi", "locale": "fr"}, max_text_chars=10)
    assert req == TurnRequest(text="hi", locale="fr")
    assert parse_turn_request(req, max_text_chars=10) is req


def test_parse_turn_request_too_long_is_413() -> None:
    with pytest.raises(PayloadTooLarge) as ei:
        parse_turn_request({"text": "x" * 11}, max_text_chars=10)
    assert ei.value.http_status == 413
    assert ei.value.details == {"limit": 10, "length": 11}
    assert parse_turn_request({"text": "x" * 10}, max_text_chars=10).text == "x" * 10
    with pytest.raises(PayloadTooLarge):  # the limit applies to ready-made requests too
        parse_turn_request(TurnRequest(text="y" * 11), max_text_chars=10)


@pytest.mark.parametrize("body", [None, "text", ["text"], 3, b"{}"])
def test_parse_turn_request_non_dict_is_invalid_input(body) -> None:
    with pytest.raises(InvalidInput) as ei:
        parse_turn_request(body, max_text_chars=100)
    assert type(ei.value) is InvalidInput and ei.value.http_status == 400


def test_parse_turn_request_missing_field_is_422_with_paths() -> None:
    with pytest.raises(ValidationFailed) as ei:
        parse_turn_request({"locale": "en"}, max_text_chars=100)
    err = ei.value
    assert err.http_status == 422 and err.code == "validation_error"
    assert [f["field"] for f in err.details["fields"]] == ["text"]
    assert "text" in err.message


def test_parse_turn_request_reports_every_bad_field() -> None:
    with pytest.raises(ValidationFailed) as ei:
        parse_turn_request({"text": " ", "locale": "en_US", "extra": 1}, max_text_chars=100)
    fields = sorted(f["field"] for f in ei.value.details["fields"])
    assert fields == ["extra", "locale", "text"]
    assert all(f["problem"] for f in ei.value.details["fields"])


# -- the turn's cost ------------------------------------------------------------------


class _MeteredModels(ScriptedModelClient):
    """Records each call's cost as the serve-side client does (pipelines.cost.record when the call ends)."""

    async def stream(self, role, call):  # type: ignore[override]
        from pipelines.cost import CallCost, record

        n = 0
        async for d in super().stream(role, call):
            n += 1
            yield d
        record(CallCost(role=role, purpose=call.purpose or "generator.reply", prompt_tokens=50, cached_tokens=32,
                        decode_tokens=n, engine_ms=12.5, wall_ms=20.0))


def test_the_done_events_cost_block_and_the_logged_calls_come_from_the_model_client() -> None:
    models = _MeteredModels(["Your ", "order."])
    sink = ListEventSink()
    runner = TurnRunner(PromptingPipeline(models, PromptingSettings(system_prompt="Be brief.")),
                        InMemorySessionStore(), sink=sink)
    done = _run(runner)[-1]
    cost = done.timings.cost
    assert cost is not None
    assert (cost.calls, cost.prompt_tokens, cost.cached_prompt_tokens, cost.decode_tokens, cost.engine_ms) == (
        1, 50, 32, 2, 12.5)
    assert list(cost.by_role) == ["generator"] and list(cost.by_purpose) == ["generator.reply"]
    [end] = sink.of("turn.end")
    assert end["timings"]["cost"]["calls"] == 1
    assert [c["purpose"] for c in end["model_calls"]] == ["generator.reply"]
    assert end["model_calls"][0]["cached_tokens"] == 32


def test_a_turn_without_model_calls_has_a_zero_cost_and_a_refused_one_none() -> None:
    runner, *_ = _runner([])
    done = _run(runner)[-1]
    assert done.timings.cost is not None and done.timings.cost.calls == 0  # the double records nothing
    refused = _run(runner, principal="someone-else")[-1]  # another principal's session: refused before it ran
    assert refused.status == "failed" and refused.timings.cost is None
