"""W1 decoded in segments: the labels alone, then the narration; the tags between them are given, not decoded."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.sgc.w1_grammar import label_grammar
from pipelines.tandem.settings import TandemSettings
from tests.doubles import j, w1

from .harnesses import TandemHarness

SEGMENTS = TandemSettings(w1_segments=True)


def segment(full: str) -> Any:
    """A scripted engine for one segment of ``full`` (the whole W1 text): it continues the call's prefix
    up to the end of the label when the grammar is a label's, else to the end."""
    def answer(call: Any) -> str:
        assert full.startswith(call.prefix), (full, call.prefix)
        rest = full[len(call.prefix):]
        return rest.split("<", 1)[0] if call.structured_output.spec.startswith('start: "') else rest
    return answer


def _w1_calls(h: TandemHarness) -> list[Any]:
    return [c for c in h.calls("orchestrator") if c.structured_output and c.structured_output.kind == "grammar"]


def test_three_calls_each_continue_the_text_so_far_and_the_tags_are_never_decoded():
    h = TandemHarness(settings=SEGMENTS)
    full = w1("greeting", "hello", "Happy to help.")
    r = h.turn("Hi! What can you help me with?", orch=[segment(full)] * 3)
    calls = _w1_calls(h)
    assert [c.prefix for c in calls] == [
        "<INTENT>", "<INTENT>greeting</INTENT><SUB_INTENT>",
        "<INTENT>greeting</INTENT><SUB_INTENT>hello</SUB_INTENT><NARRATION>"]
    assert calls[0].structured_output.spec == label_grammar("intent", _allowed(h))
    assert calls[1].structured_output.spec == 'start: "hello"\n'  # the intent's sub-intents (narrowed by "Hi")
    assert calls[2].structured_output.spec.startswith("start: narration_body ws plan ws")
    assert all(c.priority == SEGMENTS.first_call_priority for c in calls)
    # the same turn as one stream would give
    assert "".join(e.text for e in r.of("narration.delta")) == "Happy to help."
    assert h.meta["c1"] == {"intent": "greeting", "sub_intent": "hello"} and r.reply.startswith("Hi! I can help")


def _allowed(h: TandemHarness) -> list[str]:
    return [f for k, f in h.sink.events if k == "tandem.w1"][-1]["allowed"]


def test_phi_dispatches_before_the_narration_call_starts():
    h = TandemHarness(settings=SEGMENTS)
    h.turn("Hi, my email is alex.rivera@example.com", orch=[segment(w1("greeting", "hello"))] * 3)
    kinds = [k for k, _ in h.sink.events]
    assert kinds.index("tandem.phi") < kinds.index("tandem.w1")
    assert h.meta["state"]["authenticated_user_id"] == "alex_rivera_1001"


def test_a_segmented_turn_runs_the_orchestrator_after_w1_as_usual():
    h = TandemHarness(settings=SEGMENTS)
    h.turn("Hi, my email is alex.rivera@example.com", orch=[segment(w1("greeting", "hello"))] * 3)
    full = w1("cancel", "order", "Let me check that order.")
    r = h.turn("Please cancel order #W1000001, I ordered it by mistake", orch=[segment(full)] * 3 + [
        j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "ordered by mistake"})])
    assert [c.card_id for c in r.of("action_card")] == ["card.cancel_order"]
    step = h.calls("orchestrator")[-1]  # the step continues the W1 text as one assistant message
    assert step.messages[-2].content == full.split("<PLAN>")[0]


def test_a_label_outside_the_grammar_degrades_like_a_broken_stream():
    h = TandemHarness(settings=SEGMENTS)
    r = h.turn("Hi! What can you help me with?", orch=["not_a_label", j(decision="clarify", about="details")])
    assert h.meta["w1_error"] == "invalid_model_output" and h.meta["c1"]["intent"] == "other"
    assert "".join(e.text for e in r.of("narration.delta")) == h.domain.texts.safe_ack
    assert len(_w1_calls(h)) == 1  # nothing decoded after the refused label


def test_one_stream_is_the_default():
    assert TandemSettings().w1_segments is False
    h = TandemHarness()
    h.turn("Hi! What can you help me with?", orch=[w1("greeting", "hello")])
    assert [c.prefix for c in _w1_calls(h)] == ["<INTENT>"]


# -- the narration beside the labels (w1_parallel_narration) ------------------------------------

PARALLEL = TandemSettings(w1_segments=True, w1_parallel_narration=True)


def _is_narration(call: Any) -> bool:
    so = call.structured_output
    return so is not None and so.kind == "grammar" and so.spec.startswith("start: SENTENCE")


def beside(full: str) -> Any:
    """A scripted engine for W1 decoded in parallel: the label calls continue ``full`` as segments; the
    narration call (its own prompt, one sentence) answers the narration of ``full``."""
    label = segment(full)

    def answer(call: Any) -> str:
        if _is_narration(call):
            return full.split("<NARRATION>", 1)[1].split("</NARRATION>", 1)[0]
        return label(call)
    return answer


def test_the_narration_call_starts_before_the_labels_and_does_not_read_them():
    from pipelines.sgc.w1_grammar import sentence_grammar
    from pipelines.tandem.prompts import narration_messages

    h = TandemHarness(settings=PARALLEL)
    full = w1("greeting", "hello", "Happy to help.")
    text = "Hi! What can you help me with?"
    r = h.turn(text, orch=[beside(full)] * 3)
    calls = _w1_calls(h)
    assert [c.prefix for c in calls] == [None, "<INTENT>", "<INTENT>greeting</INTENT><SUB_INTENT>"]
    assert calls[0].structured_output.spec == sentence_grammar(PARALLEL.narration_max_chars)
    assert calls[0].messages == narration_messages(text)  # its own short prompt: the request, no label
    assert calls[0].max_tokens == 48
    assert all(c.priority == PARALLEL.first_call_priority for c in calls)
    assert "".join(e.text for e in r.of("narration.delta")) == "Happy to help."
    assert h.meta["c1"] == {"intent": "greeting", "sub_intent": "hello"} and r.reply.startswith("Hi! I can help")


def test_the_orchestrator_reads_the_labels_and_starts_while_the_narration_streams():
    h = TandemHarness(settings=PARALLEL)
    h.turn("Hi, my email is alex.rivera@example.com", orch=[beside(w1("greeting", "hello"))] * 3)
    assert h.meta["state"]["authenticated_user_id"] == "alex_rivera_1001"  # Φ ran on the labels
    log: list[tuple[str, Any]] = []
    play = h.models.stream

    async def stream(role: str, call: Any) -> Any:
        name = "narration" if _is_narration(call) else call.prefix or role
        log.append(("start", name))
        async for part in play(role, call):
            log.append(("chunk", name))
            yield part

    h.models.stream = stream  # type: ignore[method-assign]
    narration = "Let me look into that for you, it will only take a moment or two."
    full = w1("cancel", "order", narration)
    r = h.turn("Please cancel order #W1000001, I ordered it by mistake", orch=[beside(full)] * 3 + [
        j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "ordered by mistake"})])
    assert [c.card_id for c in r.of("action_card")] == ["card.cancel_order"]
    step = h.calls("orchestrator")[-1]  # the labels alone, as the second label call's prefix continued
    assert step.messages[-2].content == "<INTENT>cancel</INTENT><SUB_INTENT>order</SUB_INTENT>"
    last_narration = max(i for i, (k, p) in enumerate(log) if k == "chunk" and p == "narration")
    assert log.index(("start", "orchestrator")) < last_narration  # the step began before the narration ended
    assert "".join(e.text for e in r.of("narration.delta")) == narration
    kinds = [e.type for e in r.events]
    assert max(i for i, k in enumerate(kinds) if k == "narration.delta") < kinds.index("action_card")


def test_a_refused_label_keeps_the_narration_and_degrades_the_labels_only():
    h = TandemHarness(settings=PARALLEL)
    narration = beside(w1("greeting", "hello", "Happy to help."))
    r = h.turn("Hi! What can you help me with?", orch=[narration, "not_a_label", j(decision="clarify", about="details")])
    assert h.meta["w1_error"] == "invalid_model_output" and h.meta["c1"]["intent"] == "other"
    assert "".join(e.text for e in r.of("narration.delta")) == "Happy to help."
    failed = h.sink.of("tandem.w1_failed")
    assert [f["section"] for f in failed] == ["labels"]
    step = h.calls("orchestrator")[-1]  # the orchestrator reads the "other" opening, not a half stream
    assert step.messages[-2].content == "<INTENT>other</INTENT>"


def test_a_failed_narration_call_gives_the_safe_acknowledgement_and_keeps_the_labels():
    from pipelines.errors import UpstreamError

    h = TandemHarness(settings=PARALLEL)
    label = segment(w1("greeting", "hello"))
    r = h.turn("Hi, my email is alex.rivera@example.com",
               orch=[UpstreamError("engine down"), label, label, j(decision="respond")])
    assert "".join(e.text for e in r.of("narration.delta")) == h.domain.texts.safe_ack
    assert h.meta["w1_error"] is None and h.meta["c1"] == {"intent": "greeting", "sub_intent": "hello"}
    assert h.meta["state"]["authenticated_user_id"] == "alex_rivera_1001"
    assert [f["section"] for f in h.sink.of("tandem.w1_failed")] == ["narration"]


@pytest.mark.parametrize(("release", "streamed"), [
    # the default: words go out while the sentence is written (no violation can grow from any of them)
    ({}, True),
    # hold 20 words behind the model: the 7-word sentence goes out whole at its close
    ({"narration_hold_words": 20}, False),
])
def test_the_narration_release_setting_decides_how_far_behind_the_model_words_go_out(release, streamed):
    settings = TandemSettings(w1_segments=True, w1_parallel_narration=True, **release)
    h = TandemHarness(settings=settings)
    sentence = "Let me look into that for you."
    r = h.turn("Hi! What can you help me with?", orch=[beside(w1("greeting", "hello", sentence))] * 3)
    deltas = [e.text for e in r.of("narration.delta")]
    assert "".join(deltas) == sentence
    # the engine double sends 7 characters a chunk: both complete words of the first go out with it
    assert (deltas[0] == "Let me ") if streamed else (deltas == [sentence])


def test_parallel_narration_needs_the_labels_in_segments():
    import pydantic
    import pytest

    with pytest.raises(pydantic.ValidationError, match="needs w1_segments"):
        TandemSettings(w1_parallel_narration=True)
    assert TandemSettings().w1_parallel_narration is False


@pytest.mark.parametrize(("text", "ok"), [
    ("I'll check the status of your order.", True),
    ("One moment!", True),
    ("Is that all?", True),
    ("A" + "b" * 117 + ".", True),      # 119 characters
    ("A" + "b" * 118 + ".", True),      # 120: exactly narration_max_chars
    ("A" + "b" * 119 + ".", False),     # 121 characters
    (" I'll check.", False),            # no leading space
    ("I'll check", False),              # an end mark closes it
    ("I'll check. Then more.", False),  # one sentence only
    ("Two\nlines.", False),
    ("I'll <check>.", False),
])
def test_the_narration_is_one_sentence(text: str, ok: bool) -> None:
    import lark

    from pipelines.sgc.w1_grammar import sentence_grammar

    parser = lark.Lark(sentence_grammar(120))
    if ok:
        parser.parse(text)
    else:
        with pytest.raises(lark.exceptions.LarkError):
            parser.parse(text)


def test_the_narration_prompt_is_the_request_after_fixed_examples() -> None:
    from pipelines.guardrails import canary_token
    from pipelines.tandem.prompts import narration_messages

    a, b = narration_messages("Where is my order #W1000001?"), narration_messages("Hi")
    assert [m.role for m in a] == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert a[:-1] == b[:-1]  # a fixed head: the engine's prefix cache holds it across turns and sessions
    assert a[-1].content == "Where is my order #W1000001?"
    assert canary_token() in a[0].content and "one short sentence" in a[0].content


@pytest.mark.parametrize(("narration", "delivered"), [
    # the subject goes out with the first chunk; the promise after it is refused and the domain ends it
    ("I'll cancel your order right away.", "I'll look into that for you."),
    # no promise follows: the sentence goes out as the model wrote it
    ("I'll see what I can do.", "I'll see what I can do."),
])
def test_a_narration_opening_with_i_will_goes_out_at_once_and_a_promise_after_it_is_ended_safely(
        narration, delivered):
    h = TandemHarness(settings=PARALLEL)
    r = h.turn("Hi! What can you help me with?", orch=[beside(w1("greeting", "hello", narration))] * 3)
    deltas = [e.text for e in r.of("narration.delta")]
    assert deltas[0] == "I'll " and "".join(deltas) == delivered
    assert h.domain.texts.narration_completion == "look into that for you."


def _logged(h: TandemHarness, hold: dict[str, Any] | None = None, pause_s: float = 0.0) -> list[tuple[str, str]]:
    """Record when each W1 call starts and sends a chunk; ``hold`` maps a call name to an event it awaits
    before its first chunk; the narration pauses ``pause_s`` after each chunk (time for the labels to start)."""
    import asyncio

    log: list[tuple[str, str]] = []
    play = h.models.stream

    async def stream(role: str, call: Any) -> Any:
        name = "narration" if _is_narration(call) else "label" if call.prefix else role
        log.append(("start", name))
        if hold and name in hold:
            await hold[name].wait()
        async for part in play(role, call):
            log.append(("chunk", name))
            yield part
            if name == "narration" and pause_s:
                await asyncio.sleep(pause_s)

    h.models.stream = stream  # type: ignore[method-assign]
    return log


def test_without_a_lead_the_labels_start_before_the_narrations_first_word():
    h = TandemHarness(settings=PARALLEL)
    log = _logged(h)
    h.turn("Hi! What can you help me with?", orch=[beside(w1("greeting", "hello", "Happy to help."))] * 3)
    assert log.index(("start", "label")) < log.index(("chunk", "narration"))


def test_with_a_lead_the_labels_start_after_the_narrations_first_word_went_out():
    h = TandemHarness(settings=PARALLEL.model_copy(update={"w1_narration_lead_ms": 2000.0}))
    log = _logged(h, pause_s=0.05)
    narration = "Absolutely, happy to help."  # 7 characters a chunk: no word is complete in the first
    r = h.turn("Hi, my email is alex.rivera@example.com", orch=[beside(w1("greeting", "hello", narration))] * 3
               + [j(decision="respond")])
    assert log[:3] == [("start", "narration"), ("chunk", "narration"), ("chunk", "narration")]
    assert log[3] == ("start", "label")  # when "Absolutely, " went out with the second chunk, not before
    assert h.meta["c1"] == {"intent": "greeting", "sub_intent": "hello"}
    assert h.meta["state"]["authenticated_user_id"] == "alex_rivera_1001"  # Φ ran on the labels
    assert "".join(e.text for e in r.of("narration.delta")) == narration


def test_a_narration_slower_than_the_lead_does_not_hold_the_labels_back():
    import asyncio

    h = TandemHarness(settings=PARALLEL.model_copy(update={"w1_narration_lead_ms": 1.0}))
    labels_done = asyncio.Event()
    log = _logged(h, hold={"narration": labels_done})
    play = beside(w1("greeting", "hello", "Happy to help."))
    seen = []

    def answer(call: Any) -> str:  # the sub-intent label call releases the narration
        if call.prefix and "<SUB_INTENT>" in call.prefix:
            seen.append(call.prefix)
            labels_done.set()
        return play(call)

    r = h.turn("Hi! What can you help me with?", orch=[answer] * 3 + [j(decision="respond")])
    assert log.index(("start", "label")) < log.index(("chunk", "narration"))  # the lead ran out first
    assert h.meta["c1"] == {"intent": "greeting", "sub_intent": "hello"} and seen
    assert "".join(e.text for e in r.of("narration.delta")) == "Happy to help."


def test_with_a_lead_a_failed_narration_lets_the_labels_start_at_once():
    from pipelines.errors import UpstreamError

    h = TandemHarness(settings=PARALLEL.model_copy(update={"w1_narration_lead_ms": 2000.0}))
    label = segment(w1("greeting", "hello"))
    r = h.turn("Hi, my email is alex.rivera@example.com",
               orch=[UpstreamError("engine down"), label, label, j(decision="respond")])
    assert "".join(e.text for e in r.of("narration.delta")) == h.domain.texts.safe_ack
    assert h.meta["c1"] == {"intent": "greeting", "sub_intent": "hello"}
    assert h.meta["state"]["authenticated_user_id"] == "alex_rivera_1001"


def test_the_lead_is_bounded():
    import pydantic

    assert TandemSettings().w1_narration_lead_ms == 0.0
    TandemSettings(w1_narration_lead_ms=2000.0)
    with pytest.raises(pydantic.ValidationError):
        TandemSettings(w1_narration_lead_ms=2000.5)
    with pytest.raises(pydantic.ValidationError):
        TandemSettings(w1_narration_lead_ms=-0.5)


def tokens(full: str, parts: list[str]) -> Any:
    """Like :func:`beside`, with the narration call answering in the engine's tokens ``parts``."""
    label = beside(full)
    return lambda call: list(parts) if _is_narration(call) else label(call)


@pytest.mark.parametrize(("parts", "first", "delivered"), [
    # the subject goes out token by token while it is being written, joined without a gap
    (["I", "'ll", " check", " your", " order", "."], "I", "I'll check your order."),
    # it turned into a claim: nothing of it went out but "I", which the domain's ending completes
    (["I", "'ve", " cancelled", " it", "."], "I", "I'll look into that for you."),
    # it turned into a promise after the whole subject went out
    (["We", " will", " refund", " you", "."], "We", "We will look into that for you."),
    # not a subject: held until the word is complete
    (["Sure", ",", " one", " moment", "."], "Sure, ", "Sure, one moment."),
])
def test_a_narration_opening_with_a_subject_goes_out_from_its_first_token(parts, first, delivered):
    h = TandemHarness(settings=PARALLEL)
    r = h.turn("Hi! What can you help me with?",
               orch=[tokens(w1("greeting", "hello", "".join(parts)), parts)] * 3)
    deltas = [e.text for e in r.of("narration.delta")]
    assert deltas[0] == first and "".join(deltas) == delivered
    assert h.meta["narration"] == delivered


def _held_tables(h: TandemHarness, release: Any, delay_s: float = 0.0):
    """Make the rule kernels' version check answer only once ``release`` is set (or fail after 2 s)."""
    import asyncio

    asked = h.kernels.tables_version

    async def tables_version():
        await asyncio.wait_for(release.wait(), 2)
        await asyncio.sleep(delay_s)
        return await asked()

    h.kernels.tables_version = tables_version  # type: ignore[method-assign]


def test_the_first_narration_token_does_not_wait_for_the_rule_tables():
    """Only W1's labels (and Φ on their close) need the tables: the kernels' version check may still be on its
    way when the narration's first word reaches the client; the turn's rules version then names both tables."""
    import asyncio

    from pipelines.events import TurnRequest

    h = TandemHarness(settings=PARALLEL)
    h.models.push("orchestrator", *[beside(w1("greeting", "hello", "Happy to help."))] * 3)

    async def go() -> tuple[list, list[str]]:
        release = asyncio.Event()
        _held_tables(h, release)
        events, seen_before = [], []
        async for ev in h.runner.run("s1", TurnRequest(text="Hi! What can you help me with?"), trace_id="tr",
                                     turn_id="t1"):
            if ev.type == "narration.delta" and not release.is_set():
                seen_before.append(ev.text)
                release.set()  # the tables arrive only now
            events.append(ev)
        return events, seen_before

    events, before = asyncio.run(go())
    assert before and events[-1].status == "ok"
    version = f"{h.pipeline.guardrails.version}+{h.kernels.holder.active.version}"
    assert events[-1].rules_version == version and h.meta["rules_version"] == version


def test_turns_decided_without_w1_record_both_table_versions():
    """A handoff, and a confirmed write (its record is written before the reply), with the tables late."""
    import asyncio

    h = TandemHarness(settings=PARALLEL)
    version = f"{h.pipeline.guardrails.version}+{h.kernels.holder.active.version}"
    h.turn("Hi, my email is alex.rivera@example.com", orch=[beside(w1("greeting", "hello"))] * 3)
    h.turn("Please cancel order #W1000001, it is no longer needed", orch=[
        *[beside(w1("cancel", "order"))] * 3,
        j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "no longer needed"}),
    ])
    assert h.store.turns["s1"][-1].meta["tandem"]["state"]["pending"]["card_id"] == "card.cancel_order"
    release = asyncio.Event()
    release.set()
    _held_tables(h, release, delay_s=0.05)
    saved: list[str] = []
    save = h.runner.store.save_turn

    async def save_turn(session_id, record, **kw):  # the checkpoint after the write, then the final record
        saved.append(record.meta["tandem"]["rules_version"])
        return await save(session_id, record, **kw)

    h.runner.store.save_turn = save_turn  # type: ignore[method-assign]
    r = h.turn("yes")
    assert h.world.orders["#W1000001"].status == "cancelled" and h.meta["executed"] == "card.cancel_order"
    assert saved == [version, version]
    assert r.events[-1].rules_version == version and h.meta["rules_version"] == version
    r = h.turn("I want to talk to a human agent please.")
    assert [e.reason_code for e in r.of("escalation")] == ["user_requested_human"]
    assert r.events[-1].rules_version == version and h.meta["rules_version"] == version
