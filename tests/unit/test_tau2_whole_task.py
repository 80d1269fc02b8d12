"""A whole task, played in process against the tau2 retail world: the instructed user, the tandem turn over the
support pack (with the rule-following model double of ``tests/tau2_offline.py``), tau2's database check. The
tasks are written for this test, on a customer of the shared world no train task involves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tau2_offline import FirstChoiceModel, first_decision, play_task

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "tau2-retail"
pytestmark = pytest.mark.skipif(not (DATA / "db.json").is_file(), reason="the shared tau2 retail world is absent")
ORDER, HELD, WANTED = "#W4556683", "7533802601", "2439754078"


def _task(reason: str, actions: list[dict], known: str = "You are Fatima Wilson, zip code 78746.") -> dict:
    return {"id": "own-1", "user_scenario": {"instructions": {
        "reason_for_call": reason, "known_info": known, "unknown_info": "", "task_instructions": ""}},
        "evaluation_criteria": {"actions": actions}}


@pytest.fixture(scope="module")
def db() -> dict:
    return json.loads((DATA / "db.json").read_text())


def test_an_exchange_described_in_words_is_found_filled_read_back_and_done(db):
    want = {"order_id": ORDER, "item_ids": [HELD], "new_item_ids": [WANTED], "payment_method_id": "paypal_7685859"}
    task = _task("You want to trade the green water bottle you received for the 1000ml red one. Any price "
                 "difference goes on your PayPal.",
                 [{"name": "exchange_delivered_order_items", "arguments": want}])
    rec = play_task("support", task, db, DATA / "db.json", perception="oracle")
    assert rec["passed"] is True and rec["ended"] == "done"
    assert (rec["actions_matched"], rec["cards_refused"], rec["repeated_asks"]) == (1, 0, 0)
    assert rec["first_card_ok"] is True and rec["readback_missing"] == 0
    card_turn = next(t for t in rec["log"] if t["cards"])
    assert "the Water Bottle (500ml, stainless steel, green) for one that is 1000ml, stainless steel, red" in \
        card_turn["assistant"]  # what it changes, in words
    assert "your PayPal account" in card_turn["assistant"]


def test_a_request_the_world_cannot_meet_is_never_written_and_never_loops(db):
    # a 2000ml bottle does not exist: no card can carry it, the turn asks, then hands over — nothing written
    want = {"order_id": ORDER, "item_ids": [HELD], "new_item_ids": ["0000000000"], "payment_method_id": "paypal_7685859"}
    task = _task("You want to trade the green water bottle you received for a 2000ml one in gold.",
                 [{"name": "exchange_delivered_order_items", "arguments": want}])
    rec = play_task("support", task, db, DATA / "db.json", perception="oracle")
    # the expected write cannot run either, so the world is unchanged on both sides: the check passes on nothing
    assert rec["passed"] is True and rec["actions_matched"] == 0 and not any(t["cards"] for t in rec["log"])
    assert rec["ended"] in ("escalated", "stuck") and rec["user_turns"] < 12
    assert rec["repeated_asks"] == 0 and rec["reoffered_after_no"] == 0


def test_the_model_double_follows_the_constraints_it_is_given():
    schema = {"anyOf": [{"type": "object", "properties": {"decision": {"const": "respond"}}},
                        {"type": "object", "properties": {"decision": {"const": "action"}, "card_id": {"const": "c"},
                                                          "params": {"type": "object", "properties": {
                                                              "ids": {"type": "array", "items": {"enum": ["a", "b"]}}}}}}]}
    assert first_decision(schema) == {"decision": "action", "card_id": "c", "params": {"ids": ["a"]}}
    assert FirstChoiceModel()._text("orchestrator", type("C", (), {  # a label grammar: its first label
        "structured_output": type("S", (), {"kind": "grammar", "spec": 'start: "cancel" | "return"\n'})()})()) == \
        "cancel"


def test_a_card_confirmed_turns_later_runs_through_the_redacting_store(db):
    # the harness keeps the session as the app does (a redacting store numbers values its own way): the card's
    # address, shown on one turn, is the address written on the turn that says yes, and a no is never re-offered
    new = {"address1": "55 Birch Lane", "address2": "", "city": "Portland", "state": "OR", "country": "USA",
           "zip": "97201"}
    task = _task("You have moved to 55 Birch Lane, Portland, OR 97201, USA. You want the default address of your "
                 "account and the address of your pending order both changed to it.",
                 [{"name": "modify_user_address", "arguments": {"user_id": "fatima_wilson_6873", **new}},
                  {"name": "modify_pending_order_address", "arguments": {"order_id": "#W1443906", **new}}])
    rec = play_task("support", task, db, DATA / "db.json", perception="oracle")
    assert (rec["passed"], rec["actions_matched"], rec["reoffered_after_no"]) == (True, 2, 0)
