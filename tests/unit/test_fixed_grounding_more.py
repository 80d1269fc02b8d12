"""Grounding at its edges: the exact values, defaults and boundaries of the candidate rules.

Pins the support pack's extractors and record candidates (``candidates.py``), the
backend re-check's kind lookup (``grounded.py``), the order-state summary of a
payment history (``observations.py``) and the generic candidate set, decode-time
enums and re-check (``pipelines/grounding.py``): a case on and just outside each
condition, a missing field never becoming a value, and the whole constrained schema.
"""

from __future__ import annotations

import json

import pytest

from pipelines.domains.support import grounded
from pipelines.domains.support.candidates import (
    ARG_KINDS,
    extract_user_candidates,
    record_candidates,
    slot_candidates,
)
from pipelines.domains.support.generator import FIXTURES, generate_world
from pipelines.domains.support.observations import state_from_observation
from pipelines.grounding import CandidateSet, constrain_args, ungrounded

ALEX = FIXTURES["alex"]


def _cands(source: str = "user", **kinds: list[str]) -> CandidateSet:
    c = CandidateSet()
    for kind, values in kinds.items():
        for v in values:
            c.add(kind, v, source)
    return c


# --- extract_user_candidates: names after a cue, the query ---------------------------------------------


@pytest.mark.parametrize(("text", "first", "last"), [
    ("my name is Al Li", "Al", "Li"),                        # two letters is the shortest name
    ("my name is john smith", "John", "Smith"),              # lower case is capitalised
    ("my name is DeShawn McDonald", "DeShawn", "McDonald"),  # mixed case is kept as typed
])
def test_a_cued_name_is_read_with_its_capitalisation_repaired_only_when_all_lower(text, first, last):
    found = extract_user_candidates(text)
    assert found["first_name"] == [first] and found["last_name"] == [last]


def test_the_query_is_the_first_200_characters_of_the_whitespace_collapsed_text():
    assert extract_user_candidates("x" * 250)["query"] == ["x" * 200]
    assert extract_user_candidates("a  b\n c")["query"] == ["a b c"]


# --- slot_candidates: the slot model's proposals ---------------------------------------------------------


def test_a_missing_slot_proposes_nothing_whatever_the_user_typed():
    assert slot_candidates({}, ["XXXX XXXX 12345", "none"]) == {}
    assert slot_candidates({"first_name": None, "last_name": "", "zip": None}, ["XXXX"]) == {}


def test_each_slot_is_checked_on_its_own_name_or_zip_rule():
    texts = ["the Smith 1234 J"]
    # "the" is not a name, "1234" is not a zip: both skipped, the valid last name after them kept
    assert slot_candidates({"first_name": "the", "last_name": "Smith", "zip": "1234"}, texts) == {
        "last_name": ["Smith"]}
    assert slot_candidates({"first_name": "J", "last_name": "Smith"}, texts) == {"last_name": ["Smith"]}
    assert slot_candidates({"first_name": "Al", "zip": "12345"}, ["Al at 12345"]) == {
        "first_name": ["Al"], "zip": ["12345"]}


# --- record_candidates: the owner's records -------------------------------------------------------------


def test_an_order_record_without_ids_adds_no_id_candidates():
    result = {"user_id": "u1", "items": [{"product_id": "p1"}, {"item_id": "i2"}],
              "payment_history": [{"amount": 5}, {"payment_method_id": "pm1"}]}
    assert record_candidates("get_order_details", result, "u1") == {
        "item_id": ["i2"], "product_id": ["p1"], "payment_method_id": ["pm1"]}


def test_only_non_empty_text_fields_of_an_address_on_file_are_candidates():
    result = {"user_id": "u1", "address": {"address1": "1 Main St", "address2": "", "city": 12}}
    assert record_candidates("get_user_details", result, "u1") == {"user_id": ["u1"], "address1": ["1 Main St"]}


# --- grounded: write kinds, owner candidates, the backend re-check ----------------------------------------


def test_a_write_tool_without_grounding_kinds_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(grounded, "ARG_KINDS", {k: v for k, v in ARG_KINDS.items() if k != "cancel_pending_order"})
    with pytest.raises(ValueError, match=r"write tool cancel_pending_order: arguments \['order_id', 'reason'\]"):
        grounded._write_arg_kinds()


def test_an_empty_user_id_is_nobody_even_if_the_world_keys_a_user_by_it():
    world = generate_world(7).clone()
    world.users[""] = world.users[ALEX.user_id]
    assert world.users.get("") is not None
    c = grounded.owner_candidates(world, "")
    assert c.of("user_id") == [] and c.of("order_id") == [] and c.has("cancel_reason")


def test_a_read_tool_is_checked_against_its_own_argument_kinds():
    c = _cands("record", order_id=["#W1"])
    assert grounded.ungrounded_args("get_order_details", {"order_id": "#W1"}, [], c) == []
    assert grounded.ungrounded_args("get_order_details", {"order_id": "#W9"}, ["hi"], c) == ["order_id"]
    assert grounded.ungrounded_args("get_order_details", {"order_id": "#W9"}, ["it is #W9"], c) == []


def test_every_argument_of_an_unknown_tool_is_ungrounded():
    assert grounded.ungrounded_args("no_such_tool", {"x": "1", "y": "2"}, ["1 2"], CandidateSet()) == ["x", "y"]
    assert grounded.ungrounded_args("no_such_tool", {}, [], CandidateSet()) == []


# --- state_from_observation: an order's money ----------------------------------------------------------


def test_an_orders_total_and_refund_are_rounded_to_cents_and_refunds_name_their_methods():
    result = {"order_id": "#W1", "status": "returned", "payment_history": [
        {"transaction_type": "payment", "amount": 10.004, "payment_method_id": "pm_a"},
        {"transaction_type": "refund", "amount": 3.336, "payment_method_id": "pm_b"},
    ]}
    out = state_from_observation("get_order_details", result)
    assert out["order.#W1.total"] == 10.0 and out["order.#W1.refund"] == 3.34
    assert out["order.#W1.refund_methods"] == ["pm_b"]


# --- CandidateSet: merging and sources ------------------------------------------------------------------


def test_a_merged_value_without_a_recorded_source_counts_as_the_users():
    base = _cands("record", order_id=["#W1"])
    other = CandidateSet(values={"order_id": ["#W2"], "zip": ["12345", "54321"]}, sources={"zip": {"12345": "record"}})
    m = base.merged(other)
    assert m.of("order_id") == ["#W1", "#W2"]
    assert m.source_of("order_id", "#W1") == "record" and m.source_of("order_id", "#W2") == "user"
    assert m.source_of("zip", "12345") == "record" and m.source_of("zip", "54321") == "user"


def test_the_source_of_an_unknown_kind_or_value_is_none():
    c = _cands("record", zip=["12345"])
    assert c.source_of("email", "a") is None and c.source_of("zip", "99999") is None


# --- constrain_args: the decode-time schema --------------------------------------------------------------


def test_a_schema_without_properties_becomes_an_empty_closed_object():
    assert constrain_args({"type": "object"}, {}, CandidateSet()) == {
        "type": "object", "properties": {}, "required": [], "additionalProperties": False}


def test_a_kind_for_an_absent_argument_does_not_stop_the_later_ones():
    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}}
    out = constrain_args(schema, {"ghost": "email", "order_id": "order_id"}, _cands(order_id=["#W1"]))
    assert out["properties"] == {"order_id": {"enum": ["#W1"]}}


def test_an_optional_argument_without_candidates_is_dropped_and_the_later_ones_still_constrained():
    schema = {"type": "object", "properties": {"note": {"type": "string"}, "order_id": {"type": "string"}},
              "required": ["order_id"]}
    out = constrain_args(schema, {"note": "query", "order_id": "order_id"}, _cands(order_id=["#W1"]))
    assert out["properties"] == {"order_id": {"enum": ["#W1"]}} and out["required"] == ["order_id"]


@pytest.mark.parametrize(("n", "max_items"), [(3, 3), (4, 4), (5, 4)])  # at most four items per array
def test_an_array_argument_takes_at_most_four_items(n, max_items):
    schema = {"type": "object", "properties": {"item_ids": {"type": "array", "items": {"type": "string"}}}}
    ids = [str(1000000000 + i) for i in range(n)]
    out = constrain_args(schema, {"item_ids": "item_id"}, _cands(item_id=ids))
    assert out["properties"]["item_ids"] == {"type": "array", "items": {"enum": ids}, "minItems": 1,
                                             "maxItems": max_items}


def test_the_constrained_schema_keeps_other_keys_and_ends_with_its_four_own_keys_in_order():
    # the shape a pydantic model gives (properties first); the schema's JSON text goes to the decoder
    schema = {"properties": {"order_id": {"type": "string"}, "limit": {"type": "integer"}},
              "required": ["order_id"], "title": "Args", "type": "object"}
    out = constrain_args(schema, {"order_id": "order_id"}, _cands(order_id=["#W1"]))
    assert json.dumps(out) == json.dumps({
        "title": "Args", "type": "object",
        "properties": {"order_id": {"enum": ["#W1"]}, "limit": {"type": "integer"}},
        "required": ["order_id"], "additionalProperties": False})
    bare = constrain_args({"properties": {}}, {}, CandidateSet())
    assert bare == {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


# --- ungrounded: the backend re-check --------------------------------------------------------------------


def test_a_blank_optional_item_does_not_hide_the_items_after_it():
    c = _cands(address2=["Apt 1"])
    assert ungrounded({"a2": ["", "Apt 9", "apt 1"]}, {"a2": "address2"}, c, optional_empty=["a2"]) == [("a2", "Apt 9")]
    assert ungrounded({"a2": ""}, {"a2": "address2"}, c) == [("a2", "")]  # blank allowed only where named
