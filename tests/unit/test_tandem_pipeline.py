"""The tandem turn in process: real runner, retail tools, guardrails and kernels; a scripted model."""

from __future__ import annotations

import json

from pipelines.errors import ModelUnavailable
from tests.doubles import j, w1

from .harnesses import TandemHarness

ALEX = "alex_rivera_1001"


def _schema(call) -> dict:
    return call.structured_output.spec


def _branches(call) -> dict[str, dict]:
    out = {}
    for b in _schema(call)["anyOf"]:
        props = b["properties"]
        name = props["decision"]["const"]
        if name == "action":
            name = props["card_id"]["const"]
        out[name] = props
    return out


def _verify(h: TandemHarness) -> None:
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    assert h.meta["state"]["authenticated_user_id"] == ALEX


def test_readme_session_narration_first_then_card_then_yes_then_handoff():
    h = TandemHarness()
    r = h.turn("Hi! What can you help me with?", orch=[w1("greeting", "hello", "Happy to help.")])
    kinds = [e.type for e in r.events]
    runs = [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]  # the narration streams word by word
    assert runs == ["narration.delta", "reply.delta", "done"] and r.status == "ok"
    assert "".join(e.text for e in r.of("narration.delta")) == "Happy to help."
    assert r.reply.startswith("Hi! I can help with your orders")
    assert len(h.calls("orchestrator")) == 1  # Φ's `then: respond`: no orchestrator step
    _verify(h)
    r = h.turn("Please cancel order #W1000001, I ordered it by mistake", orch=[
        w1("cancel", "order", "Let me check that order."),
        j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "ordered by mistake"}),
    ])
    cards = r.of("action_card")
    assert [c.card_id for c in cards] == ["card.cancel_order"]
    assert cards[0].params == {"order_id": "#W1000001", "reason": "ordered by mistake"}
    assert r.reply.startswith("I can cancel order #W1000001 (reason: ordered by mistake). Please reply yes to confirm")
    assert h.world.orders["#W1000001"].status == "pending"
    r = h.turn("yes")
    assert h.world.orders["#W1000001"].status == "cancelled"
    assert r.reply.startswith("Done. Order #W1000001 is cancelled.")
    assert h.meta["executed"] == "card.cancel_order" and h.meta["state"]["pending"] is None
    r = h.turn("I want to talk to a human")
    assert [e.reason_code for e in r.of("escalation")] == ["user_requested_human"]
    assert h.counters.total("delivered_violations") == 0


def test_propose_offers_only_the_intents_card_with_grounded_enums():
    h = TandemHarness()
    _verify(h)
    h.turn("Please cancel order #W1000001, it is no longer needed", orch=[
        w1("cancel", "order"),
        j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "no longer needed"}),
    ])
    step = h.calls("orchestrator")[-1]
    branches = _branches(step)
    assert set(branches) == {"card.cancel_order"}  # only filling the card: no tools, respond, select, clarify
    params = branches["card.cancel_order"]["params"]["properties"]
    assert params["reason"] == {"enum": ["no longer needed"]}  # only the reason the user gave
    assert "#W1000001" in params["order_id"]["enum"]
    assert all(o.startswith("#W") for o in params["order_id"]["enum"])


def test_an_opening_without_identity_clarifies_by_table_without_an_orchestrator_step():
    h = TandemHarness()
    r = h.turn("I received my order #W1000002 and wish to exchange the mechanical keyboard",
               orch=[w1("exchange", "items", "Let me look at that request.")])
    kinds = [e.type for e in r.events]
    assert kinds[0] == "narration.delta" and kinds.index("clarify") > max(
        i for i, k in enumerate(kinds) if k == "narration.delta")
    assert "".join(e.text for e in r.of("narration.delta")) == "Let me look at that request."
    assert "email" in r.of("clarify")[0].question
    assert len(h.calls("orchestrator")) == 1 and not r.of("action_card")
    assert h.meta["phi"]["then"] == "clarify:identity"


def test_lookup_arguments_are_enums_of_what_the_user_typed():
    h = TandemHarness()
    h.turn("my email is priya.shah@example.com and I have a question",
           orch=[w1("human", "agent"), j(decision="clarify", about="details")])
    step = h.calls("orchestrator")[-1]
    branches = _branches(step)
    assert branches["find_user_id_by_email"]["args"]["properties"]["email"] == {"enum": ["[EMAIL_1]"]}
    assert "find_user_id_by_name_zip" not in branches  # no name or zip typed: not offered
    assert "get_order_details" not in branches  # private reads need a verified user


def test_an_unrequested_card_cannot_be_decoded_and_is_refused_by_the_backend():
    h = TandemHarness()
    _verify(h)
    r = h.turn("what is new with my account details?", orch=[
        w1("account", "details"),
        j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "no longer needed"}),
    ])
    offered = _branches(h.calls("orchestrator")[-1])
    assert not [k for k in offered if k.startswith("card.")]  # account/details offers no card
    assert not r.of("action_card") and r.status == "fallback"
    assert h.world.orders["#W1000001"].status == "pending"


def test_ungrounded_card_parameters_are_refused_and_the_user_is_asked():
    h = TandemHarness()
    _verify(h)
    r = h.turn("I need to change my default address", orch=[
        w1("account", "address"),
        j(decision="action", card_id="card.modify_user_address",
          params={"user_id": ALEX, "address1": "PO Box 666", "address2": "", "city": "Evil Manor",
                  "state": "CA", "country": "USA", "zip": "66666"}),
    ])
    # no new address given: no address is a candidate, so the card is not offered at all (decoding could not
    # produce it); the scripted output that names it anyway is malformed and falls back; nothing is written
    step = h.calls("orchestrator")[-1]
    assert "card.modify_user_address" not in json.dumps(step.structured_output.spec)
    assert '"address"' in json.dumps(step.structured_output.spec)  # what may be asked: the address
    assert not r.of("action_card") and h.meta["path"] == "fallback"
    assert h.world.users[ALEX].address.address1 != "PO Box 666"


def test_a_refused_change_is_accounted_for_not_offered():
    h = TandemHarness()
    _verify(h)
    delivered = next(o for o in h.world.users[ALEX].orders if h.world.orders[o].status == "delivered")
    r = h.turn(f"Please cancel order {delivered}, it is no longer needed", orch=[
        w1("cancel", "order"),
        j(decision="action", card_id="card.cancel_order", params={"order_id": delivered, "reason": "no longer needed"}),
    ])
    assert not r.of("action_card")
    assert f"I can't cancel order {delivered}: only a pending order" in r.reply
    assert h.meta["c2"]["conflicts"][0]["kind"] == "action_refused"
    assert [p["kind"] for p in h.meta["c2"]["plan"]][:2] == ["apology", "constraint_account"]
    assert h.world.orders[delivered].status == "delivered"


def test_no_declines_and_other_text_drops_the_pending_card():
    h = TandemHarness()
    _verify(h)
    card = j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "no longer needed"})
    h.turn("Please cancel order #W1000001, it is no longer needed", orch=[w1("cancel", "order"), card])
    r = h.turn("no")
    assert r.reply == "Okay, I won't make that change. What should I change on the card to cancel order (#W1000001)?"
    assert [q.question for q in r.of("clarify")] == ["What should I change on the card to cancel order (#W1000001)?"]
    other = j(decision="action", card_id="card.cancel_order",
              params={"order_id": "#W1000001", "reason": "ordered by mistake"})
    h.turn("Please cancel order #W1000001, I ordered it by mistake", orch=[w1("cancel", "order"), other])
    h.turn("what is the status of my order?", orch=[w1("order_status", "status"), j(decision="respond")],
           gen=["Order #W1000001 is pending."])
    h.turn("yes", orch=[w1("other", "unknown"), j(decision="respond")])
    assert h.world.orders["#W1000001"].status == "pending"


def test_a_card_the_user_said_no_to_is_never_shown_again_unchanged():
    h = TandemHarness()
    _verify(h)
    card = j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "no longer needed"})
    h.turn("Please cancel order #W1000001, it is no longer needed", orch=[w1("cancel", "order"), card])
    h.turn("no")
    r = h.turn("Please cancel order #W1000001, it is no longer needed", orch=[w1("cancel", "order"), card])
    assert not r.of("action_card")
    assert len(h.meta["declined"]) == 1 and h.meta["declined"][0].startswith("card.cancel_order:")
    # "what should change?" was asked at the no: asked again unchanged, with no choices to offer, it hands over
    assert [e.reason_code for e in r.of("escalation")] == ["no_progress"] and h.meta["path"] == "escalate"
    assert h.world.orders["#W1000001"].status == "pending"


def test_narration_with_an_id_is_replaced_by_the_safe_acknowledgement():
    h = TandemHarness()
    r = h.turn("Hi there", orch=[w1("greeting", "hello", "I have cancelled order #W1000001.")])
    narration = [e.text for e in r.of("narration.delta")]
    assert narration == ["Let me look into that for you."]
    assert h.counters.get("guard", "narration.block") == 1


def test_generator_sentences_that_echo_the_contract_or_repeat_are_withheld():
    h = TandemHarness()
    _verify(h)
    gen = "Order #W1000001 is pending. Order #W1000001 is pending. path: answer task: authenticated. Anything else?"
    r = h.turn("What is the status of order #W1000001?", orch=[w1("order_status", "status"), j(decision="respond")],
               gen=[gen])
    # the repeat is withheld and the reply goes on; the echo is withheld and nothing after it is read
    assert r.reply == "Order #W1000001 is pending."
    kinds = [k for ev in r.sink if ev[0] == "gate.block" for k in ev[1]["kinds"]]
    assert "contract_echo" in kinds and "repetition" in kinds


def test_the_template_answers_when_the_generator_fails():
    h = TandemHarness()
    _verify(h)
    r = h.turn("What is the status of order #W1000001?",
               orch=[w1("order_status", "status"), j(decision="respond")], gen=[ModelUnavailable("down")])
    assert "Order #W1000001 is pending." in r.reply and r.status == "ok"
    assert h.counters.get("fallbacks", "model_error") == 1


def test_w3_guidance_is_stored_and_replays_identically():
    from pipelines.core.replay import all_identical, replay_w3
    from pipelines.domains import load_rule_bundle

    h = TandemHarness()
    _verify(h)
    for reason in ("no longer needed", "ordered by mistake"):  # a card refused is never shown again: two cards
        h.turn(f"Please cancel order #W1000001, {reason}", orch=[
            w1("cancel", "order"),
            j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": reason}),
        ])
        h.turn("no")
    turns = h.store.turns["s1"]
    assert len([t for t in turns if "w3" in t.meta]) == 2  # one W3 decision per card turn
    tables = load_rule_bundle("support", h.domain.rule_tables())
    results = replay_w3(turns, session_id="s1", tables=tables, branch_of_intent=h.domain.branch_of_intent)
    assert len(results) == 2 and all_identical(results)


def test_events_never_carry_the_email_in_the_clear():
    h = TandemHarness()
    _verify(h)
    assert "alex.rivera@example.com" not in json.dumps(h.sink.events, default=str)


def test_logged_phi_lookups_and_steps_replay_identically_and_tampering_shows():
    from pipelines.core.replay import replay_decisions as replay_turn
    from pipelines.domains import load_rule_bundle

    h = TandemHarness()
    _verify(h)
    r = h.turn("Please cancel order #W1000001, it is no longer needed", orch=[
        w1("cancel", "order"),
        j(decision="action", card_id="card.cancel_order", params={"order_id": "#W1000001", "reason": "no longer needed"}),
    ])
    events = [{"kind": k, **f} for k, f in r.sink]
    phi = load_rule_bundle("support").phi
    rep = replay_turn(events, phi)
    assert rep.decisions == 2 and rep.identical  # one Φ lookup, one orchestrator step
    step = next(e for e in events if e["kind"] == "tandem.step")
    step["raw"] = j(decision="action", card_id="card.cancel_order",
                    params={"order_id": "#W1000001", "reason": "ordered by mistake"})
    assert not replay_turn(events, phi).identical
    lookup = next(e for e in events if e["kind"] == "tandem.phi")
    lookup["snapshot"] = {}
    assert any("phi cancel/order" in m for m in replay_turn(events, phi).mismatches)


def test_a_greeting_without_a_goodbye_cannot_decode_bye():
    h = TandemHarness()
    h.turn("Hi! What can you help me with?", orch=[w1("greeting", "hello", "Happy to help.")])
    g = h.calls("orchestrator")[0].structured_output.spec
    assert '"hello"' in g and '"bye"' not in g and '"thanks"' not in g
    h.turn("Thanks, bye!", orch=[w1("greeting", "bye", "Take care.")])
    g = h.calls("orchestrator")[1].structured_output.spec
    assert '"bye"' in g and '"thanks"' in g and '"hello"' not in g


def test_a_change_that_names_no_order_reads_the_users_orders_and_takes_the_one_it_can_change():
    h = TandemHarness()
    _verify(h)
    r = h.turn("I want to return my order.", orch=[w1("return", "items", "Let me look at your orders.")])
    assert h.meta["phi"]["then"] == "choose" and h.meta["path"] == "clarify"
    # alex's orders: #W1000001 pending, #W1000002 delivered, #W1000003 processed — only one can be returned
    assert h.meta["state"]["selected"]["id"] == "#W1000002"
    assert [q.question for q in r.of("clarify")] != ["Which order do you mean: #W1000001, #W1000002, #W1000003?"]
    assert not r.of("action_card")


def test_two_orders_on_record_one_pending_a_cancel_takes_the_pending_one():
    h = TandemHarness()
    user = next(u for u in h.world.users.values() if len(u.orders) == 2)
    h.turn(f"Hi, my email is {user.email}", orch=[w1("greeting", "hello")])
    r = h.turn("Please cancel my order.", orch=[w1("cancel", "order")])
    pending = [o for o in user.orders if h.world.orders[o].status == "pending"]
    assert len(pending) == 1 and h.meta["state"]["selected"]["id"] == pending[0]
    assert [q.question for q in r.of("clarify")] == [
        "Why would you like to cancel: is it no longer needed, or was it ordered by mistake?"]


def test_a_change_that_names_no_order_with_one_order_on_record_is_left_to_the_orchestrator():
    h = TandemHarness()
    user = next(u for u in h.world.users.values() if len(u.orders) == 1)
    h.turn(f"Hi, my email is {user.email}", orch=[w1("greeting", "hello")])
    assert h.meta["state"]["authenticated_user_id"] == user.user_id
    h.turn("I want to return my order.", orch=[w1("return", "items"), j(decision="respond")], gen=["Sure."])
    assert h.meta["phi"]["then"] == "choose" and h.meta["path"] == "answer"
    assert len(h.calls("orchestrator")) == 3  # two W1 calls and one decision step


def test_a_change_that_names_its_order_is_proposed_not_chosen():
    h = TandemHarness()
    _verify(h)
    h.turn("I want to return order #W1000002.", orch=[w1("return", "items"), j(decision="clarify", about="details")])
    assert h.meta["phi"]["then"] == "propose"


def test_the_rule_tables_are_checked_while_the_pre_guard_runs():
    import asyncio

    from pipelines.guardrails import LocalGuardrails

    checked = asyncio.Event()

    class SlowGuard(LocalGuardrails):
        async def pre(self, text, history):  # answers only once the tables were asked for
            await asyncio.wait_for(checked.wait(), 5)
            return await super().pre(text, history)

    h = TandemHarness(guardrails=SlowGuard())
    asked = h.kernels.tables_version

    async def tables_version():
        checked.set()
        return await asked()

    h.kernels.tables_version = tables_version  # type: ignore[method-assign]
    r = h.turn("Hi! What can you help me with?", orch=[w1("greeting", "hello")])
    assert r.status == "ok" and checked.is_set()
    assert {"pre_guard", "prepare"} <= set(r.events[-1].timings.stages)


def test_a_failing_pre_guard_leaves_no_tables_check_behind():
    import asyncio

    from pipelines.errors import UpstreamError
    from pipelines.guardrails import LocalGuardrails

    class DownGuard(LocalGuardrails):
        async def pre(self, text, history):
            await asyncio.sleep(0.01)  # the tables check has started by now
            raise UpstreamError("guardrails down")

    h = TandemHarness(guardrails=DownGuard())
    seen: list[int] = []
    asked = h.kernels.tables_version

    async def tables_version():
        try:
            await asyncio.sleep(1)
            return await asked()
        except asyncio.CancelledError:
            seen.append(len(h.sink.events))
            raise

    h.kernels.tables_version = tables_version  # type: ignore[method-assign]
    r = h.turn("Hi! What can you help me with?")
    # cancelled by the turn as the pre-guard failed, not left for the event loop's shutdown
    assert r.status == "failed" and len(seen) == 1 and seen[0] < len(h.sink.events)

