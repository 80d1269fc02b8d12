"""Whole DR sessions through the real TurnRunner with scripted models and the real retail tools."""

from __future__ import annotations

import asyncio

from pipelines.annex.dr import DRPipeline
from pipelines.core.runner import LocalToolRunner
from pipelines.domains.support import FIXTURES
from pipelines.events import TurnRequest
from pipelines.guardrails import LocalGuardrails
from pipelines.turn import TurnContext
from tests.doubles import ListEventSink, ScriptModels, j

from .harnesses import DRHarness as Harness

ALEX = FIXTURES["alex"]
LOOKUP = j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"})
RESPOND = j(decision="respond")
CANCEL = j(decision="action", card_id="card.cancel_order",
           params={"order_id": ALEX.pending_order_id, "reason": "no longer needed"})


def login(h: Harness) -> None:
    h.turn(f"Hi, my email is {ALEX.email}", orch=[LOOKUP, RESPOND], gen=["Thanks, you are verified."])


def look_up(h: Harness, order_id: str = ALEX.pending_order_id) -> None:
    r = h.turn(f"What is the status of order {order_id}?",
               orch=[j(decision="get_order_details", args={"order_id": order_id}), RESPOND],
               gen=[f"Order {order_id} is pending."])
    assert r.status == "ok"


def test_authenticate_look_up_card_confirm_cancel() -> None:
    h = Harness()
    login(h)
    assert h.last_meta["facts"]["authenticated_user_id"] == ALEX.user_id
    look_up(h)
    order = h.world.orders[ALEX.pending_order_id]
    paid = order.total_paid()
    r = h.turn("Please cancel it, I no longer need it", orch=[CANCEL],
               gen=[f"I can cancel order {ALEX.pending_order_id} as no longer needed. Reply yes to confirm."])
    cards = r.of("action_card")
    assert len(cards) == 1 and cards[0].card_id == "card.cancel_order"
    assert cards[0].params == {"order_id": ALEX.pending_order_id, "reason": "no longer needed"}
    assert order.status == "pending"  # nothing changes before the yes
    pending = h.last_meta["facts"]["pending_action"]
    assert pending["tool"] == "cancel_pending_order" and h.last_meta["path"] == "action_card"
    n_orch = h.models.roles().count("orchestrator")
    r = h.turn("yes", gen=[f"Order {ALEX.pending_order_id} has been cancelled. The refund takes five to seven business days."])
    assert h.models.roles().count("orchestrator") == n_orch  # the model does not choose again
    order = h.world.orders[ALEX.pending_order_id]  # a write swaps in the committed entity
    assert order.status == "cancelled" and order.cancel_reason == "no longer needed"
    refund = order.payment_history[-1]
    assert (refund.transaction_type, refund.amount) == ("refund", paid)
    assert r.reply.startswith(f"Order {ALEX.pending_order_id} has been cancelled.")
    assert "five to seven business days" in r.reply
    meta = h.last_meta
    assert meta["executed"] == "card.cancel_order" and meta["changed"]["order"] == [ALEX.pending_order_id]
    assert meta["facts"]["pending_action"] is None and r.status == "ok"
    assert r.of("action_card") == []


def test_my_order_with_several_orders_asks_which_one() -> None:
    h = Harness()
    login(h)
    n_gen = h.models.roles().count("generator")
    r = h.turn("cancel my order, I no longer need it", orch=[
        j(decision="get_user_details", args={"user_id": ALEX.user_id}), CANCEL])
    assert r.of("action_card") == []
    clar = r.of("clarify")
    question = "Which order do you mean: #W1000001, #W1000002, #W1000003?"  # the pack's choose question
    assert len(clar) == 1 and clar[0].question == question
    assert clar[0].options == [ALEX.pending_order_id, ALEX.delivered_order_id, ALEX.processed_order_id]
    assert r.reply == question and h.models.roles().count("generator") == n_gen
    assert h.counters.get("blocked", "ambiguous_entity") == 1
    assert h.last_meta["facts"]["pending_action"] is None


def test_select_null_asks_with_the_candidates() -> None:
    h = Harness()
    login(h)
    r = h.turn("what about my order?", orch=[j(decision="get_user_details", args={"user_id": ALEX.user_id}),
                                              j(decision="select", entity_id=None)])
    assert r.of("clarify")[0].options == [ALEX.pending_order_id, ALEX.delivered_order_id, ALEX.processed_order_id]


def test_model_clarify_question_passes_the_post_guard() -> None:
    h = Harness()
    r = h.turn("help", orch=[j(decision="clarify", question="Is it order #W9999999 or a refund of $50?")])
    assert r.of("clarify")[0].question == "Could you tell me a little more about what you need?"
    r = h.turn("help", orch=[j(decision="clarify", question="What would you like to do with your order?")])
    assert r.of("clarify")[0].question == "What would you like to do with your order?"


def test_cancel_before_authentication_is_refused() -> None:
    h = Harness()
    r = h.turn(f"cancel {ALEX.pending_order_id}, no longer needed", orch=[CANCEL], gen=["Please verify first."])
    assert r.of("action_card") == [] and r.status == "fallback"
    assert h.last_meta["fallback"]["detail"] == "not_authenticated"
    assert h.world.orders[ALEX.pending_order_id].status == "pending"
    # and the action branch is not even offered before login
    spec = h.models.calls[0][1].structured_output.spec
    assert "action" not in [b["properties"]["decision"]["const"] for b in spec["anyOf"]]


def test_action_on_an_order_only_mentioned_not_observed_is_refused() -> None:
    h = Harness()
    login(h)
    r = h.turn(f"cancel {ALEX.pending_order_id}", orch=[CANCEL], gen=["I need to look it up first."])
    assert r.of("action_card") == [] and h.last_meta["fallback"]["trigger"] == "inconsistent_observation"


def test_unconfirmed_cancel_is_never_executed() -> None:
    h = Harness()
    login(h)
    look_up(h)
    h.turn("cancel it please, no longer needed", orch=[CANCEL], gen=["Reply yes to confirm."])
    r = h.turn("hmm, how long does a refund take?", orch=[RESPOND], gen=["Refunds take five to seven business days."])
    assert h.world.orders[ALEX.pending_order_id].status == "pending"
    assert any(f["route"] == "drop_pending" for k, f in r.sink if k == "dr.route")
    h.turn("yes", orch=[RESPOND], gen=["Okay."])  # the card is gone: a late yes changes nothing
    assert h.world.orders[ALEX.pending_order_id].status == "pending"
    assert [c for c, _ in h.local_tools.calls].count("cancel_pending_order") == 0


def test_a_qualified_yes_is_not_a_confirmation() -> None:
    h = Harness()
    login(h)
    look_up(h)
    h.turn("cancel it please, no longer needed", orch=[CANCEL], gen=["Reply yes to confirm."])
    h.turn("yes but make the reason ordered by mistake", orch=[RESPOND], gen=["Okay."])
    assert h.world.orders[ALEX.pending_order_id].status == "pending"


def test_confirmed_action_that_became_ineligible_falls_back() -> None:
    h = Harness()
    login(h)
    look_up(h)
    h.turn("cancel it please, no longer needed", orch=[CANCEL], gen=["Reply yes to confirm."])
    h.world.orders[ALEX.pending_order_id].status = "processed"  # changed behind our back
    r = h.turn("yes", gen=["I could not cancel it."])
    assert r.status == "fallback" and h.last_meta["fallback"]["detail"] == "order_not_pending"


def test_explicit_human_request_escalates_without_any_model() -> None:
    h = Harness()
    r = h.turn("I want to talk to a human")
    assert [e.type for e in r.events] == ["escalation", "reply.delta", "done"]
    assert r.of("escalation")[0].reason_code == "user_requested_human"
    assert r.reply == "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."
    assert h.models.calls == []
    assert [c for c, _ in h.local_tools.calls] == ["transfer_to_human_agents"]
    assert h.counters.get("escalations", "user_requested_human") == 1 and h.last_meta["escalation"] == "user_requested_human"


def test_human_request_drops_a_pending_action() -> None:
    h = Harness()
    login(h)
    look_up(h)
    h.turn("cancel it, no longer needed", orch=[CANCEL], gen=["Reply yes to confirm."])
    h.turn("actually let me speak to a real person")
    assert h.last_meta["facts"]["pending_action"] is None


def test_model_escalation_uses_its_reason_code() -> None:
    h = Harness()
    r = h.turn("can you sell me a car?", orch=[j(decision="escalate", reason_code="out_of_scope")])
    assert r.of("escalation")[0].reason_code == "out_of_scope" and "generator" not in h.models.roles()


def test_first_sentence_is_released_before_the_generator_finishes() -> None:
    h = Harness()
    received: list[str] = []
    seen_at_second: list[list[str]] = []

    async def gen_stream(role, call, _orig=h.models.stream):
        if role != "generator":
            async for d in _orig(role, call):
                yield d
            return
        yield "Order status is "
        yield "pending. "
        seen_at_second.append(list(received))
        yield "Anything else?"

    h.models.stream = gen_stream  # type: ignore[method-assign]
    h.models.push("orchestrator", RESPOND)

    async def go() -> None:
        async for e in h.runner.run("s9", TurnRequest(text="hi"), trace_id="t"):
            if e.type == "reply.delta":
                received.append(e.text)

    asyncio.run(go())
    assert seen_at_second == [["Order status is pending."]]
    assert received == ["Order status is pending.", " Anything else?"]


def test_pipeline_runs_directly_on_a_turn_context() -> None:
    h = Harness()
    models = ScriptModels(orchestrator=[RESPOND], generator=["Hello there."])
    p = DRPipeline(h.domain, models, LocalToolRunner(h.domain, h.world), LocalGuardrails())
    sink = ListEventSink()
    ctx = TurnContext("s", "t", "tr", TurnRequest(text="hello"), [], sink)

    async def go() -> list:
        return [e async for e in p.run(ctx)]

    events = asyncio.run(go())
    assert [e.type for e in events] == ["reply.delta"] and ctx.status == "ok"
    assert ctx.meta["dr"]["path"] == "answer" and ctx.rules_version == LocalGuardrails().version
    assert {"pre_guard", "orchestrate", "generate"} <= set(ctx.stage_ms)
    assert [k for k, _ in sink.events][:2] == ["dr.pre_guard", "dr.start"]
    assert sink.of("contract.forward")[0]["contract"]["selected_path"] == "answer"
    assert p.name == "dr"


def test_oversized_text_is_a_typed_error_event() -> None:
    h = Harness()
    r = h.turn("x" * 5000)
    assert [e.type for e in r.events] == ["error", "done"] and r.events[0].code == "payload_too_large"
    assert h.models.calls == []
