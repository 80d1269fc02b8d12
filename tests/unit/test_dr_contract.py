"""Forward / return contracts and reference closure."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipelines.core.contract import (
    EligibleAction,
    ForwardContract,
    ObservationRecord,
    SourceRef,
    build_return,
    check_closure,
)
from pipelines.core.fallback import fallback
from pipelines.domains.support.observations import state_from_observation

ORDER = {
    "order_id": "#W1000001", "user_id": "alex_rivera_1001", "status": "cancelled",
    "items": [{"name": "T-Shirt", "item_id": "1718002390", "price": 80.5}],
    "payment_history": [
        {"transaction_type": "payment", "amount": 80.5, "payment_method_id": "credit_card_1000001"},
        {"transaction_type": "refund", "amount": 80.5, "payment_method_id": "credit_card_1000001"},
    ],
}


def fc(**kw) -> ForwardContract:
    base = dict(
        turn_id="t1", task_state="action_executed", selected_path="answer",
        user_request="cancel #W7777777 for me",
        eligible_actions=[EligibleAction(card_id="card.cancel_order", title="Cancel order", tool="cancel_pending_order",
                                         params={"order_id": "#W1000001"}, status="executed")],
        sources=[SourceRef(id="KB-POL-003", title="Refunds", snippet="Card refunds take five to seven business days.")],
        user_state={"authenticated_user_id": "alex_rivera_1001", **state_from_observation("cancel_pending_order", ORDER)},
        prior_observations=[ObservationRecord(step=0, tool="cancel_pending_order", args={"order_id": "#W1000001"},
                                              ok=True, result=ORDER)],
    )
    return ForwardContract(**(base | kw))


def test_contract_is_strict() -> None:
    with pytest.raises(ValidationError):
        ForwardContract(turn_id="t", task_state="authenticated", selected_path="answer", surprise=1)
    with pytest.raises(ValidationError):
        ForwardContract(turn_id="t", task_state="authenticated", selected_path="new_path")


def test_membership_sets_come_from_structured_parts_only() -> None:
    c = fc()
    assert {"#W1000001", "alex_rivera_1001", "1718002390", "credit_card_1000001", "KB-POL-003"} <= c.allowed_ids()
    assert "#W7777777" not in c.allowed_ids()  # typed by the user, never observed
    assert 8050 in c.allowed_amounts()
    assert "5 to 7 business day" in c.allowed_times()
    assert c.write_executed()


def test_state_from_observation_reads_status_total_and_refund() -> None:
    s = state_from_observation("get_order_details", ORDER)
    assert s["order.#W1000001.status"] == "cancelled"
    assert s["order.#W1000001.total"] == 80.5 and s["order.#W1000001.refund"] == 80.5
    assert state_from_observation("find_user_id_by_email", {"user_id": "u_v_1234"}) == {"user_id": "u_v_1234"}
    assert state_from_observation("x", None) == {}


def test_closure_holds_for_a_grounded_reply() -> None:
    c = fc()
    ret = build_return("Order #W1000001 is cancelled; $80.50 goes back to credit_card_1000001 (KB-POL-003).", c,
                       card_id=None)
    assert ret.source_refs == ["KB-POL-003"] and ret.amounts == [8050]
    assert "order.#W1000001.status" in ret.state_refs
    assert check_closure(ret, c) == []


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Order #W7777777 is cancelled.", "unknown_entity"),
        ("See KB-POL-009.", "unknown_article_id"),
        ("Use card.return_items next.", "action_id"),
        ("You get $99.00 back.", "unsupported_amount"),
    ],
)
def test_closure_violations(text: str, kind: str) -> None:
    c = fc()
    assert kind in [v.kind for v in check_closure(build_return(text, c, card_id=None), c)]


def test_an_action_card_ref_must_be_an_eligible_action() -> None:
    c = fc(eligible_actions=[])
    assert [v.kind for v in check_closure(build_return("ok", c, card_id="card.cancel_order"), c)] == ["action_id"]
    ret = build_return("ok", c, card_id=None).model_copy(update={"state_refs": ["order.#W1.secret"]})
    assert [v.kind for v in check_closure(ret, c)] == ["unknown_state_key"]


def test_guard_view_follows_the_path() -> None:
    card = fc(selected_path="action_card", eligible_actions=[EligibleAction(
        card_id="card.cancel_order", title="Cancel order", tool="cancel_pending_order",
        params={"order_id": "#W1000001"}, status="awaiting_confirmation")])
    view = card.guard_view()
    assert view.selected_card_id == "card.cancel_order" and not view.write_executed
    assert fc().guard_view().selected_card_id is None


def test_fallback_detail_does_not_widen_the_allowed_ids() -> None:
    c = fc(selected_path="fallback", fallback=fallback("inconsistent_observation", "unobserved_entity: #W5555555"))
    assert "#W5555555" not in c.allowed_ids()
