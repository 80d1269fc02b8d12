"""The forward contract's membership sets and the closure check, by fixed examples.

Every expected value is written by hand from :mod:`pipelines.core.contract`:
which fields are grounded (everything but the user's request, the clarify
question, turn id, version, locale and fallback), which keys carry money
(``amount``, ``price``, ``balance``, ``total``, ``refund``, ``value``,
``exchange_price_difference``, as substrings), and that only successful
observations count.
"""

from __future__ import annotations

import pytest

from pipelines.core.contract import (
    EligibleAction,
    ForwardContract,
    ObservationRecord,
    Rendering,
    ReturnContract,
    SourceRef,
    build_return,
    check_closure,
)
from pipelines.domains.support.observations import state_from_observation, summarize_result
from pipelines.guardrails.post import PostGuardView, Violation

ORDER = {
    "order_id": "#W1000001", "status": "cancelled",
    "items": [{"name": "T-Shirt", "item_id": "1718002390"}, {"name": "Mug", "item_id": "2718002390"}],
    "payment_history": [
        {"transaction_type": "payment", "amount": 10.25, "payment_method_id": "credit_card_1000001"},
        {"transaction_type": "payment", "amount": 5.5, "payment_method_id": "gift_card_1000002"},
        {"transaction_type": "refund", "amount": 5.5, "payment_method_id": "gift_card_1000002"},
        {"transaction_type": "refund", "amount": 1.25, "payment_method_id": "credit_card_1000001"},
    ],
}


# --- state read off observations --------------------------------------------------------------

def test_state_of_an_order() -> None:
    assert state_from_observation("get_order_details", ORDER) == {
        "order.#W1000001.status": "cancelled",
        "order.#W1000001.items": ["T-Shirt (1718002390)", "Mug (2718002390)"],
        "order.#W1000001.total": 15.75,
        "order.#W1000001.refund": 6.75,
        "order.#W1000001.refund_methods": ["credit_card_1000001", "gift_card_1000002"],
    }


def test_state_of_an_order_without_refunds_items_or_payments() -> None:
    assert state_from_observation("get_order_details", {"order_id": "#W2", "status": "pending"}) == {
        "order.#W2.status": "pending", "order.#W2.items": [], "order.#W2.total": 0,
    }
    paid = {"order_id": "#W3", "status": "pending", "payment_history": [
        {"transaction_type": "payment", "amount": 3.0, "payment_method_id": "paypal_1"}]}
    assert state_from_observation("x", paid) == {"order.#W3.status": "pending", "order.#W3.items": [],
                                                 "order.#W3.total": 3.0}


def test_state_of_a_user_and_of_a_lookup() -> None:
    user = {"user_id": "ana_diaz_1001", "orders": ["#W1", "#W2"],
            "payment_methods": {"paypal_2": {}, "credit_card_1": {}}}
    assert state_from_observation("get_user_details", user) == {
        "user.orders": ["#W1", "#W2"], "user.payment_methods": ["credit_card_1", "paypal_2"]}
    assert state_from_observation("get_user_details", {"user_id": "u", "orders": []}) == {
        "user.orders": [], "user.payment_methods": []}
    assert state_from_observation("find_user_id_by_name_zip", {"user_id": "ana_diaz_1001"}) == {
        "user_id": "ana_diaz_1001"}
    assert state_from_observation("get_user_details", {"user_id": "ana_diaz_1001"}) == {}
    assert state_from_observation("get_order_details", {"order_id": "#W1"}) == {}  # no status
    assert state_from_observation("x", {}) == {}
    assert state_from_observation("x", None) == {}


# --- summaries for prompts ---------------------------------------------------------------------

def test_summaries() -> None:
    assert summarize_result("x", None) == ""
    assert summarize_result("find_user_id_by_email", {"user_id": "u_v_1234"}) == '{"user_id":"u_v_1234"}'
    assert summarize_result("search_help", {"articles": [{"id": "KB-POL-003", "title": "Refunds"},
                                                         {"id": "KB-HOW-001", "title": "Zoë's guide"}]}) == (
        '{"articles":["KB-POL-003: Refunds","KB-HOW-001: Zoë\'s guide"]}')
    assert summarize_result("x", {"ok": True, "name": "Zoë"}) == '{"ok":true,"name":"Zoë"}'


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (23, '{"a":"xxxx","b":"yyyy"}'),   # exactly the length: whole
        (22, '{"a":"xxxx",...}'),          # one short: cut at the last comma
        (11, '{,...}'),                    # no comma inside the cut
    ],
)
def test_summary_limit_cuts_at_a_comma(limit: int, expected: str) -> None:
    assert summarize_result("x", {"a": "xxxx", "b": "yyyy"}, limit=limit) == expected


def test_summary_of_an_order_is_its_state_not_the_raw_result() -> None:
    small = {"order_id": "#W5", "status": "pending", "note": "raw"}
    assert summarize_result("get_order_details", small) == (
        '{"order.#W5.status":"pending","order.#W5.items":[],"order.#W5.total":0}')


def test_summary_stringifies_what_json_cannot_hold() -> None:
    import datetime

    assert summarize_result("x", {"when": datetime.date(2025, 1, 31)}) == '{"when":"2025-01-31"}'


def test_summary_cuts_at_the_last_comma() -> None:
    assert summarize_result("x", {"a": "x", "b": "y", "c": "z"}, limit=24) == '{"a":"x","b":"y",...}'


def test_summary_default_limit_is_360() -> None:
    long = {"k": "v" * 400}
    assert summarize_result("x", long) == "{,...}"
    fits = {"k": "v" * (360 - 8)}  # {"k":"…"} is 8 characters around the value
    assert summarize_result("x", fits) == '{"k":"' + "v" * 352 + '"}'
    over = {"k": "v", "m": "w" * (361 - 16)}  # 361 characters: one over
    assert summarize_result("x", over) == '{"k":"v",...}'


# --- membership sets --------------------------------------------------------------------------------

def contract(**kw) -> ForwardContract:
    base = dict(turn_id="t1", task_state="authenticated", selected_path="answer")
    return ForwardContract(**(base | kw))


def test_grounded_fields_give_ids_and_the_others_do_not() -> None:
    c = contract(
        turn_id="#W9000001", locale="W9000002", user_request="what about #W9000003",
        clarify_question="Did you mean #W9000004?",
        selected_entity="#W1000001", clarify_options=["#W1000002"], escalation_reason="#W1000003",
        policy_constraints=["See KB-HOW-002"], placeholders=["ana_diaz_1001"],
        sources=[SourceRef(id="KB-POL-003", title="t", snippet="about credit_card_1000001")],
        user_state={"order.#W1000004.status": "pending", "k": "gift_card_1000002"},
        eligible_actions=[EligibleAction(card_id="card.cancel_order", title="t", tool="cancel_pending_order",
                                         params={"order_id": "#W1000005"}, status="awaiting_confirmation")],
        prior_observations=[ObservationRecord(step=0, tool="t", args={"item": "1718002390"}, ok=False,
                                              result={"x": "paypal_1000003"})],
    )
    assert c.allowed_ids() == {
        "#W1000001", "#W1000002", "#W1000003", "#W1000004", "#W1000005", "KB-HOW-002", "KB-POL-003",
        "ana_diaz_1001", "credit_card_1000001", "gift_card_1000002", "1718002390", "paypal_1000003",
    }
    assert c.action_ids() == {"card.cancel_order"}
    assert not c.write_executed()


def test_w1_and_w3_context_is_not_grounded_but_w2_is() -> None:
    # c1 (perceived intent) and c3 (guidance text) are model-side words; c2 (graded conflicts) is
    # computed from live facts
    c = contract(c1={"intent": "#W9000005"}, c2={"conflicts": ["#W1000007"]}, c3={"text": "#W9000006"})
    assert c.allowed_ids() == {"#W1000007"}


def test_money_keys_and_what_is_not_money() -> None:
    c = contract(
        user_state={"order.#W1.total": 15.75, "count": 3, "flag_refund": True, "price_text": "12.00",
                    "nested": [{"balance": 2.5}, {"exchange_price_difference": -1.0}]},
        prior_observations=[
            ObservationRecord(step=0, tool="t", args={"amount": 99}, ok=True,
                              result={"items": [{"price": 80.5}], "value": 7, "refund": 0.01}),
            ObservationRecord(step=1, tool="t", args={}, ok=False, result={"amount": 55.0}),
        ],
        sources=[SourceRef(id="KB-POL-001", title="t", snippet="A fee of $15 applies.")],
        policy_constraints=["refunds up to 20 USD"],
    )
    # 15.75, 2.5, -1.0 from the state; 80.5, 7, 0.01 from the ok observation; $15 and 20 USD from
    # text. Not: count (not a money key), a bool, a string, the args, the failed observation.
    assert c.allowed_amounts() == {1575, 250, -100, 8050, 700, 1, 1500, 2000}


def test_times_come_from_sources_constraints_and_ok_observations() -> None:
    c = contract(
        sources=[SourceRef(id="KB-POL-003", title="t", snippet="Card refunds take five to seven business days.")],
        policy_constraints=["Returns within 30 days."],
        prior_observations=[
            ObservationRecord(step=0, tool="t", args={}, ok=True, result={"eta": "2025-01-31"}),
            ObservationRecord(step=1, tool="t", args={}, ok=False, result={"eta": "by Friday"}),
            ObservationRecord(step=2, tool="t", args={}, ok=True, result=None),
        ],
        user_request="I need it tomorrow",
    )
    assert c.allowed_times() == {"5 to 7 business day", "30 day", "2025-01-31"}
    assert contract().allowed_times() == set()


def test_guard_view_by_hand() -> None:
    c = contract(
        selected_path="action_card", placeholders=["[EMAIL_1]"],
        eligible_actions=[EligibleAction(card_id="card.cancel_order", title="t", tool="cancel_pending_order",
                                         params={"order_id": "#W1000001"}, status="executed")],
        user_state={"order.#W1000001.total": 80.5},
        policy_constraints=["Refunds take 3 days."],
    )
    assert c.guard_view() == PostGuardView(
        path="action_card", allowed_ids=["#W1000001"], selected_card_id="card.cancel_order",
        allowed_amounts=[8050], allowed_times=["3 day"], write_executed=True, placeholders=["[EMAIL_1]"],
    )
    answer = c.model_copy(update={"selected_path": "answer"})
    assert answer.guard_view().selected_card_id is None and answer.guard_view().path == "answer"


# --- the return contract and closure -------------------------------------------------------------------

FORWARD = contract(
    locale="de",
    sources=[SourceRef(id="KB-POL-003", title="Refunds", snippet="Refunds of $80.50 are usual.")],
    eligible_actions=[EligibleAction(card_id="card.cancel_order", title="t", tool="cancel_pending_order",
                                     params={"order_id": "#W1000001"}, status="executed")],
    user_state={"order.#W1000001.status": "cancelled", "user_id": "alex_rivera_1001", "n": 3, "empty": ""},
    policy_constraints=["See KB-HOW-002."],
    prior_observations=[ObservationRecord(step=0, tool="t", args={}, ok=True,
                                          result={"payment_method_id": "credit_card_1000001"})],
)


def test_build_return_by_hand() -> None:
    text = ("Order #W1000001 is cancelled: $80.50 goes to credit_card_1000001, see KB-POL-003 "
            "and card.cancel_order.")
    assert build_return(text, FORWARD, card_id="card.cancel_order", sentences=2) == ReturnContract(
        text=text,
        source_refs=["KB-POL-003"],
        entity_refs=["#W1000001", "KB-POL-003", "card.cancel_order", "credit_card_1000001"],
        amounts=[8050],
        action_card_ref="card.cancel_order",
        state_refs=["order.#W1000001.status"],
        rendering=Rendering(locale="de", sentences=2),
    )
    assert build_return("Nothing to say.", FORWARD, card_id=None) == ReturnContract(
        text="Nothing to say.", rendering=Rendering(locale="de", sentences=0))


def test_a_grounded_reply_closes() -> None:
    ret = build_return("Order #W1000001 is cancelled; $80.50 to credit_card_1000001 (KB-POL-003, KB-HOW-002).",
                       FORWARD, card_id="card.cancel_order")
    assert check_closure(ret, FORWARD) == []


@pytest.mark.parametrize(
    ("text", "card_id", "violations"),
    [
        ("See KB-POL-009.", None, [Violation(kind="unknown_article_id", detail="KB-POL-009")]),
        ("Order #W7777777.", None, [Violation(kind="unknown_entity", detail="#W7777777")]),
        ("Use card.return_items.", None, [Violation(kind="action_id", detail="card.return_items")]),
        ("ok", "card.return_items", [Violation(kind="action_id", detail="card.return_items")]),
        ("You get $99.00.", None, [Violation(kind="unsupported_amount", detail="99.00")]),
        ("You get $80.51.", None, [Violation(kind="unsupported_amount", detail="80.51")]),
        ("See KB-POL-009 about #W7777777 and $1.", "card.x",
         [Violation(kind="unknown_article_id", detail="KB-POL-009"),
          Violation(kind="unknown_entity", detail="#W7777777"),
          Violation(kind="action_id", detail="card.x"),
          Violation(kind="unsupported_amount", detail="1.00")]),
    ],
)
def test_closure_violations_by_hand(text: str, card_id: str | None, violations: list[Violation]) -> None:
    assert check_closure(build_return(text, FORWARD, card_id=card_id), FORWARD) == violations


def test_state_refs_must_be_keys_of_the_user_state() -> None:
    ret = build_return("ok", FORWARD, card_id=None)
    assert check_closure(ret.model_copy(update={"state_refs": ["user_id"]}), FORWARD) == []
    assert check_closure(ret.model_copy(update={"state_refs": ["order.#W1.secret"]}), FORWARD) == [
        Violation(kind="unknown_state_key", detail="order.#W1.secret")]


def test_an_article_id_only_in_allowed_ids_counts_as_a_source() -> None:
    # KB-HOW-002 is not a SourceRef but appears in a policy constraint
    ret = ReturnContract(text="x", source_refs=["KB-HOW-002"], entity_refs=["KB-HOW-002", "KB-HOW-777"])
    # KB- entity refs are judged as articles only (never as unknown entities)
    assert check_closure(ret, FORWARD) == []
    assert check_closure(ret.model_copy(update={"source_refs": ["KB-HOW-777"]}), FORWARD) == [
        Violation(kind="unknown_article_id", detail="KB-HOW-777")]
