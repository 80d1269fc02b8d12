"""Session facts across turns: loading from meta, authentication in code, the confirmation rule."""

from __future__ import annotations

from pipelines.annex.dr.state import SessionFacts, is_affirmative, is_negative, load_facts
from pipelines.core.contract import PendingCard
from pipelines.core.ports import ToolCallResult
from pipelines.protocols import TurnRecord
from pipelines.tools import ToolObservation

LOOKUPS = frozenset({"find_user_id_by_email", "find_user_id_by_name_zip"})
PENDING = PendingCard(card_id="card.cancel_order", title="Cancel order", tool="cancel_pending_order",
                        args={"order_id": "#W1", "reason": "no longer needed"})


def rec(i: int, meta: dict | None = None) -> TurnRecord:
    return TurnRecord(turn_id=f"t{i}", index=i, user_text="x", meta=meta or {})


def ok(tool: str, result: dict, observed: list[str] = ()) -> ToolCallResult:
    return ToolCallResult(observation=ToolObservation(tool=tool, args={}, ok=True, result=result),
                          observed_ids=list(observed))


def test_empty_history_gives_empty_facts() -> None:
    assert load_facts([]) == SessionFacts()


def test_facts_come_from_the_latest_turn_that_stored_them() -> None:
    old = SessionFacts(authenticated_user_id="a_b_1234")
    new = SessionFacts(authenticated_user_id="a_b_1234", observed_ids=["#W1"])
    hist = [rec(0, {"dr": {"facts": old.to_meta()}}), rec(1, {"dr": {"facts": new.to_meta()}}), rec(2)]
    assert load_facts(hist).observed_ids == ["#W1"]


def test_a_pending_action_survives_exactly_one_turn() -> None:
    f = SessionFacts(authenticated_user_id="a_b_1234", pending_action=PENDING)
    assert load_facts([rec(0, {"dr": {"facts": f.to_meta()}})]).pending_action == PENDING
    assert load_facts([rec(0, {"dr": {"facts": f.to_meta()}}), rec(1)]).pending_action is None


def test_corrupt_meta_is_ignored() -> None:
    assert load_facts([rec(0, {"dr": {"facts": {"nope": 1}}})]) == SessionFacts()


def test_a_successful_lookup_authenticates_and_another_user_is_refused() -> None:
    f = SessionFacts()
    assert f.observe("find_user_id_by_email", ok("find_user_id_by_email", {"user_id": "alex_rivera_1001"}), LOOKUPS) is None
    assert f.authenticated_user_id == "alex_rivera_1001" and "alex_rivera_1001" in f.observed_ids
    reason = f.observe("find_user_id_by_name_zip", ok("find_user_id_by_name_zip", {"user_id": "priya_shah_2002"}), LOOKUPS)
    assert reason == "other_user"
    assert f.authenticated_user_id == "alex_rivera_1001" and "priya_shah_2002" not in f.observed_ids


def test_failed_observations_change_nothing() -> None:
    f = SessionFacts()
    bad = ToolCallResult(observation=ToolObservation(tool="find_user_id_by_email", args={}, ok=False))
    assert f.observe("find_user_id_by_email", bad, LOOKUPS) is None and f == SessionFacts()


def test_observe_collects_ids_and_the_users_orders() -> None:
    f = SessionFacts(authenticated_user_id="alex_rivera_1001")
    f.observe("get_user_details", ok("get_user_details", {
        "user_id": "alex_rivera_1001", "orders": ["#W1000001", "#W1000002"],
        "payment_methods": {"credit_card_1000001": {}}}), LOOKUPS)
    assert f.user_order_ids == ["#W1000001", "#W1000002"]
    assert {"#W1000001", "#W1000002", "credit_card_1000001"} <= set(f.observed_ids)


def test_mentions_are_recorded_separately() -> None:
    f = SessionFacts()
    f.mention("what about #W1000003 and w2000001?")
    assert f.mentioned_ids == ["#W1000003", "#W2000001"] and f.observed_ids == []


def test_confirmation_table_is_whole_message_only() -> None:
    table = ("yes", "go ahead", "do it")
    assert is_affirmative("Yes.", table) and is_affirmative(" go  ahead! ", table)
    assert not is_affirmative("yes but not that one", table)
    assert not is_affirmative("I said do it yesterday", table)
    assert is_negative("No!", ("no",))
