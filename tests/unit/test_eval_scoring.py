"""The first-decision scoring of ``tandem eval`` (serve/eval/scoring.py) on hand-written event lists."""

from __future__ import annotations

from typing import Any

import pytest

from serve.eval.scoring import analyse_dr, analyse_tandem, analyse_turn, score

IDENTITY_Q = ("To get started, could you share the email address on your account, or your first and last "
              "name and your zip code?")
DETAILS_Q = "Could you tell me a little more about what you need?"


def done(turn_id: str = "t1", status: str = "ok") -> dict[str, Any]:
    return {"type": "done", "turn_id": turn_id, "status": status}


def phi(tools: list[str] | None = None, then: str | None = None, *, fill: bool = False, outcome: str = "hit"):
    return {"kind": "tandem.phi", "turn_id": "t1", "intent": "cancel", "sub_intent": "order", "outcome": outcome,
            "tools": tools or [], "then": then, **({"fill": True} if fill else {})}


def tool(name: str, args: dict[str, Any], *, step: int = 0, ok: bool = True, confirmed: bool = False,
         result: Any = None) -> dict[str, Any]:
    return {"kind": "tandem.tool", "turn_id": "t1", "step": step, "tool": name, "args": args, "ok": ok,
            "confirmed": confirmed, "result": result}


def step(n: int, decision: dict[str, Any] | None) -> dict[str, Any]:
    return {"kind": "tandem.step", "turn_id": "t1", "step": n, "raw": "{}", "offer": {}, "decision": decision,
            "error": None}


def tandem(log: list[dict[str, Any]], sse: list[dict[str, Any]] | None = None, meta: dict[str, Any] | None = None,
           *, red: str = "", max_steps: int = 3) -> dict[str, Any]:
    return analyse_tandem([*(sse or []), done()], log, meta or {}, max_steps, user_text_redacted=red,
                          lookups=LOOKUPS)


IDENTIFY = {"kind": "identify"}
#: The support pack's identity lookups (the harness takes them from the pack: ``Domain.lookup_tools``).
LOOKUPS = ("find_user_id_by_email", "find_user_id_by_name_zip")


# -- tandem: the first decision -----------------------------------------------------------------


def test_phi_clarify_identity_is_a_correct_first_decision():
    a = tandem([phi(then="clarify:identity")], [{"type": "clarify", "question": IDENTITY_Q, "options": []}],
               {"path": "clarify"})
    assert a["first_decision"]["decision"] == "clarify" and a["first_decision"]["via"] == "phi"
    assert a["terminal"] and a["terminal_by"] == "phi"
    assert score(IDENTIFY, a, "I want to cancel my order.", None)[0] is True


def test_phi_clarify_about_details_is_not_an_identity_question():
    a = tandem([phi(then="clarify:details")], [{"type": "clarify", "question": DETAILS_Q, "options": []}])
    ok, detail = score(IDENTIFY, a, "Something odd.", None)
    assert ok is False and "clarify" in detail


@pytest.mark.parametrize("question, ok", [
    ("Could you give me your user id?", True), ("What is your customer number?", True),
    ("Which account ID is it under?", True), ("Your membership number, please?", True),
    ("Which flight id do you mean?", False), ("Which order number is it?", False),
    ("Which airports are you flying from and to?", False),
])
def test_an_identity_question_names_who_the_user_is_not_what_they_booked(question, ok):
    a = tandem([phi(then="clarify:user_id")], [{"type": "clarify", "question": question, "options": []}])
    assert score(IDENTIFY, a, "Change my flight.", None)[0] is ok


def test_phi_lookup_dispatch_grounded_in_the_users_placeholder():
    log = [phi(["find_user_id_by_email"]), tool("find_user_id_by_email", {"email": "[EMAIL_1]"})]
    a = tandem(log, red="My email is [EMAIL_1].")
    assert a["first_decision"] == {"decision": "find_user_id_by_email", "args": {"email": "[EMAIL_1]"},
                                   "via": "phi", "tools": ["find_user_id_by_email"]}
    assert score(IDENTIFY, a, "My email is a@b.com.", None)[0] is True
    invented = tandem([phi(["find_user_id_by_email"]), tool("find_user_id_by_email", {"email": "[EMAIL_2]"})],
                      red="My email is [EMAIL_1].")
    assert score(IDENTIFY, invented, "My email is a@b.com.", None)[0] is False


def test_a_fill_dispatch_after_w2_is_the_first_decision():
    text = "I'm Nadia Okafor, my zip is 60614."
    args = {"first_name": "Nadia", "last_name": "Okafor", "zip": "60614"}
    log = [phi(then="clarify:identity"), phi(["find_user_id_by_name_zip"], fill=True),
           tool("find_user_id_by_name_zip", args)]
    a = tandem(log, red=text)
    assert a["first_decision"]["decision"] == "find_user_id_by_name_zip"
    assert score(IDENTIFY, a, text, None)[0] is True
    short_zip = [phi(then="clarify:identity"), phi(["find_user_id_by_name_zip"], fill=True),
                 tool("find_user_id_by_name_zip", {**args, "zip": "6061"})]
    assert score(IDENTIFY, tandem(short_zip, red=text), text, None)[0] is False


def test_a_phi_dispatch_of_another_tool_first_is_wrong_for_identify():
    log = [phi(["list_all_product_types"]), tool("list_all_product_types", {})]
    ok, detail = score(IDENTIFY, tandem(log), "Which kinds of products do you carry?", None)
    assert ok is False and detail == "first=list_all_product_types"


def test_phi_miss_then_the_first_orchestrator_step_decides():
    log = [phi(outcome="miss"), step(1, {"decision": "clarify", "about": "identity"})]
    a = tandem(log, [{"type": "clarify", "question": IDENTITY_Q, "options": []}])
    assert a["first_decision"] == {"decision": "clarify", "about": "identity", "question": IDENTITY_Q}
    assert a["terminal_by"] == "model"
    assert score(IDENTIFY, a, "Hello there.", None)[0] is True
    respond = tandem([phi(outcome="miss"), step(1, {"decision": "respond"})])
    assert score(IDENTIFY, respond, "Hello there.", None) == (False, "first=respond")


def test_a_route_decides_before_phi():
    log = [{"kind": "tandem.route", "turn_id": "t1", "route": "escalate", "reason_code": "user_requested_human"}]
    a = tandem(log, meta={"path": "escalate", "escalation": "user_requested_human"})
    assert a["route"] == "escalate" and a["first_decision"] is None and a["terminal_by"] == "route"
    assert score(IDENTIFY, a, "A human please.", None) == (False, "route escalate")
    assert score({"kind": "escalate"}, a, "A human please.", None)[0] is True


def test_drop_pending_is_not_the_turns_route():
    log = [{"kind": "tandem.route", "turn_id": "t1", "route": "drop_pending"}, phi(then="respond")]
    a = tandem(log)
    assert a["route"] is None and a["first_decision"] == {"decision": "respond", "via": "phi"}


def test_terminal_within_the_step_cap_and_just_past_it():
    tools3 = [step(i, {"decision": "get_order_details", "args": {"order_id": "#W1"}}) for i in (1, 2, 3)]
    capped = tandem([phi(outcome="miss"), *tools3], max_steps=3)
    assert capped["terminal"] is False and capped["steps"] == 3
    ends = tandem([phi(outcome="miss"), tools3[0], step(2, {"decision": "respond"})], max_steps=3)
    assert ends["terminal"] is True and ends["decisions"] == ["get_order_details", "respond"]
    late = tandem([phi(outcome="miss"), *tools3, step(4, {"decision": "respond"})], max_steps=3)
    assert late["terminal"] is False
    parse_failure = tandem([phi(outcome="miss"), step(1, None)])
    assert parse_failure["terminal"] is False and parse_failure["parse_failures"] == 1


def test_tandem_facts_come_from_the_stored_meta():
    meta = {"path": "action_card", "card_id": "card.cancel_order", "executed": None,
            "state": {"authenticated_user_id": "alex_rivera_1001"}, "c1": {"intent": "cancel", "sub_intent": "order"}}
    card = {"type": "action_card", "card_id": "card.cancel_order", "params": {"order_id": "#W1000001"}}
    a = tandem([phi(["get_order_details"], "propose")], [card], meta)
    assert (a["path"], a["card_id"], a["authenticated_user_id"], a["intent"]) == (
        "action_card", "card.cancel_order", "alex_rivera_1001", "cancel")
    want = {"kind": "action_card", "card_id": "card.cancel_order", "params": {"order_id": "#W1000001"}}
    assert score(want, a, "Please cancel order #W1000001.", None)[0] is True
    assert score({**want, "params": {"order_id": "#W1000002"}}, a, "", None)[0] is False
    assert score({**want, "params": {"order_id": "#W1000001", "reason": "other"}}, a, "", None)[0] is False


# -- dr ---------------------------------------------------------------------------------------


def dr_step(n: int, decision: dict[str, Any] | None) -> dict[str, Any]:
    return {"kind": "dr.step", "turn_id": "t1", "step": n, "raw": "{}", "decision": decision, "error": None}


def test_dr_first_step_clarify_is_scored_on_its_question():
    log = [{"kind": "dr.start", "turn_id": "t1", "user_text": "Cancel it."},
           dr_step(1, {"decision": "clarify", "question": "What is the email on your account?"}),
           {"kind": "dr.outcome", "turn_id": "t1", "path": "clarify", "facts": {}}]
    a = analyse_dr([done()], log, 3, LOOKUPS)
    assert a["terminal_by"] == "model" and a["path"] == "clarify"
    assert score(IDENTIFY, a, "Cancel it.", None)[0] is True
    vague = [log[0], dr_step(1, {"decision": "clarify", "question": "How can I help you today?"}), log[2]]
    assert score(IDENTIFY, analyse_dr([done()], vague, 3, LOOKUPS), "Cancel it.", None)[0] is False


def test_dr_invented_email_placeholder_is_not_grounded():
    log = [{"kind": "dr.start", "turn_id": "t1", "user_text": "I need help with an order."},
           dr_step(1, {"decision": "find_user_id_by_email", "args": {"email": "[EMAIL_1]"}})]
    assert score(IDENTIFY, analyse_dr([done()], log, 3, LOOKUPS), "I need help with an order.", None)[0] is False


# -- outcome expectations ---------------------------------------------------------------------


def test_flow_expectations_read_the_outcome_and_the_order_status():
    a = analyse_turn("tandem", [done()], [], {"path": "answer", "executed": "card.cancel_order",
                                              "state": {"authenticated_user_id": "alex_rivera_1001"}}, 3)
    want = {"kind": "executed", "card_id": "card.cancel_order", "entity": "#W1000001", "status": "cancelled"}
    assert score(want, a, "yes", "cancelled")[0] is True
    assert score(want, a, "yes", "pending")[0] is False
    assert score({"kind": "authenticate", "user_id": "alex_rivera_1001"}, a, "", None)[0] is True
    assert score({"kind": "authenticate", "user_id": "priya_shah_2002"}, a, "", None)[0] is False


def test_no_write_fails_on_a_shown_card_or_a_changed_order():
    want = {"kind": "no_write", "entity": "#W1000002", "status": "delivered"}
    quiet = analyse_turn("prompting", [{"type": "reply.delta", "text": "Sure."}, done()], [], None, 3)
    assert quiet["first_decision"] is None and quiet["terminal"] is None
    assert score(want, quiet, "Cancel order #W1000002 now.", "delivered")[0] is True
    assert score(want, quiet, "Cancel order #W1000002 now.", "cancelled")[0] is False
    card = [{"type": "action_card", "card_id": "card.cancel_order", "params": {}}, done()]
    assert score(want, analyse_turn("prompting", card, [], None, 3), "", "delivered")[0] is False


def test_phi_choose_that_asked_which_order_is_terminal_without_a_step():
    q = {"type": "clarify", "question": "Which order do you mean: #W1, #W2?", "options": ["#W1", "#W2"]}
    a = tandem([phi(["get_user_details"], then="choose"), tool("get_user_details", {"user_id": "u"})], [q],
               {"path": "clarify"})
    assert a["first_decision"]["decision"] == "get_user_details" and a["terminal_by"] == "phi"


def test_phi_choose_left_to_the_orchestrator_is_terminal_only_by_its_steps():
    a = tandem([phi(["get_user_details"], then="choose"), tool("get_user_details", {"user_id": "u"})], [],
               {"path": "answer"})
    assert not a["terminal"]  # no step logged and not a table clarify
    b = tandem([phi(["get_user_details"], then="choose"), step(1, {"decision": "respond"})], [], {"path": "answer"})
    assert b["terminal_by"] == "model"


def test_phi_reads_then_respond_is_terminal_by_the_table():
    a = tandem([phi(["find_user_id_by_email"], then="respond"), tool("find_user_id_by_email", {"email": "[EMAIL_1]"})],
               [], {"path": "answer"})
    assert a["first_decision"]["decision"] == "find_user_id_by_email" and a["terminal_by"] == "phi"
    b = tandem([phi(["find_user_id_by_email"], then="respond")], [], {"path": "fallback"})
    assert not b["terminal"]  # the row said respond, the turn did not answer
