"""Fixed-value tables for the candidates read off the owner's records (expected values written by hand).

``record_candidates`` turns one observation into grounded candidates, only when the record is the
verified owner's; ``owner_candidates`` is the backend's own view of the same records, read from the
world store. A value the user never typed becomes groundable only through these two.
"""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from pipelines.domains.support.candidates import FIXED_CANDIDATES, record_candidates
from pipelines.domains.support.grounded import owner_candidates

ADDR = {"address1": "1 Main St", "address2": "Apt 2", "city": "Reno", "state": "NV", "country": "USA",
        "zip": "89501"}
ADDR_KINDS = {"address1": ["1 Main St"], "address2": ["Apt 2"], "city": ["Reno"], "state": ["NV"],
              "country": ["USA"], "address_zip": ["89501"]}
USER = {"user_id": "u1", "orders": ["#W1", "#W2", "#W1"], "payment_methods": {"pm_a": {}, "pm_b": {}},
        "address": ADDR}
ORDER = {"user_id": "u1", "order_id": "#W1", "address": {**ADDR, "address2": "", "city": "Elko"},
         "items": [{"item_id": "i1", "product_id": "p1"}, {"item_id": "i2", "product_id": "p1"},
                   {"item_id": "i1", "product_id": "p1"}],
         "payment_history": [{"payment_method_id": "pm_b"}, {"payment_method_id": "pm_b"}]}


def test_user_details_of_the_owner():
    assert record_candidates("get_user_details", USER, "u1") == {
        "user_id": ["u1"], "order_id": ["#W1", "#W2"], "payment_method_id": ["pm_a", "pm_b"], **ADDR_KINDS}


def test_order_details_of_the_owner_deduplicated_in_order_seen():
    assert record_candidates("get_order_details", ORDER, "u1") == {
        "order_id": ["#W1"], "item_id": ["i1", "i2"], "product_id": ["p1"],
        "address1": ["1 Main St"], "city": ["Elko"], "state": ["NV"], "country": ["USA"],
        "address_zip": ["89501"],  # an empty address2 is no candidate
        "payment_method_id": ["pm_b"]}


@pytest.mark.parametrize("tool", ["find_user_id_by_email", "find_user_id_by_name_zip"])
def test_a_lookup_that_found_the_owner_grounds_only_the_user_id(tool):
    assert record_candidates(tool, {"user_id": "u1", "email": "x@y.z"}, "u1") == {"user_id": ["u1"]}


@pytest.mark.parametrize("tool, result", [
    ("get_user_details", USER),
    ("get_order_details", ORDER),
    ("find_user_id_by_email", {"user_id": "u1"}),
])
def test_another_users_records_or_no_owner_ground_nothing(tool, result):
    assert record_candidates(tool, {**result, "user_id": "u2"}, "u1") == {}
    assert record_candidates(tool, result, None) == {}


@pytest.mark.parametrize("tool, result", [("get_product_details", {"user_id": "u1", "product_id": "p1"}),
                                          ("get_user_details", {}), ("get_user_details", None)])
def test_world_text_and_empty_results_ground_nothing(tool, result):
    assert record_candidates(tool, result, "u1") == {}


def _world():
    user = NS(user_id="u1", orders=["#W1", "#W9"], payment_methods={"pm_a": {}},
              address=NS(address1="1 Main St", address2="", city="Reno", state="NV", country="USA", zip="89501"))
    order = NS(order_id="#W1", address=NS(address1="9 Side Rd", address2="Unit 4", city="Elko", state="NV",
                                          country="USA", zip="89801"),
               items=[NS(item_id="i1", product_id="p1"), NS(item_id="i2", product_id="p2")])
    products = {"p1": NS(variants={"v1": NS(available=True), "v2": NS(available=False)}),
                "p2": NS(variants={"v3": NS(available=True)})}
    other = NS(user_id="u2", orders=["#W5"], payment_methods={"pm_z": {}}, address=user.address)
    return NS(users={"u1": user, "u2": other}, orders={"#W1": order, "#W5": order}, products=products)


def test_owner_candidates_are_the_owners_records_and_the_fixed_vocabularies():
    c = owner_candidates(_world(), "u1")
    assert c.of("user_id") == ["u1"]
    assert c.of("order_id") == ["#W1"]  # #W9 is not in the world
    assert c.of("item_id") == ["i1", "i2"] and c.of("product_id") == ["p1", "p2"]
    assert c.of("payment_method_id") == ["pm_a"]
    assert c.of("new_item_id") == ["v1", "v3"]  # available variants of products the owner bought
    assert c.of("address1") == ["1 Main St", "9 Side Rd"] and c.of("city") == ["Reno", "Elko"]
    assert c.of("address_zip") == ["89501", "89801"] and c.of("address2") == ["Unit 4"]  # "" is none
    assert "pm_z" not in c.of("payment_method_id") and "#W5" not in c.of("order_id")
    assert all(c.source_of(k, v) == "record" for k in c.kinds() for v in c.of(k))
    for kind, values in FIXED_CANDIDATES.items():
        assert set(values) <= set(c.of(kind))


@pytest.mark.parametrize("user_id", [None, "", "nobody"])
def test_no_owner_has_only_the_fixed_vocabularies(user_id):
    c = owner_candidates(_world(), user_id)
    assert sorted(c.kinds()) == sorted(k for k, v in FIXED_CANDIDATES.items() if v)


def test_the_slot_schema_is_bounded_and_closed():
    from pipelines.domains.support.candidates import slot_schema

    short = {"type": "string", "maxLength": 24}
    assert slot_schema() == {
        "type": "object",
        "properties": {"first_name": short, "last_name": short, "zip": {"type": "string", "maxLength": 5}},
        "required": ["first_name", "last_name", "zip"],
        "additionalProperties": False,
    }


TEXT = ("My name is Yusuf Rossi, zip 19122. Email [EMAIL_1]. Order #W2378156 item 1008292230 "
        "ship to [ADDRESS_1], Austin, TX, USA. Refund $12.50 please.")


def test_every_kind_the_user_typed():
    from pipelines.domains.support.candidates import extract_user_candidates

    assert extract_user_candidates(TEXT) == {
        "email": ["[EMAIL_1]"],
        "order_id": ["#W2378156"],
        "item_id": ["1008292230"], "product_id": ["1008292230"], "new_item_id": ["1008292230"],
        "zip": ["19122"], "address_zip": ["19122"],
        "first_name": ["Yusuf"], "last_name": ["Rossi"],
        "address1": ["[ADDRESS_1]"],
        "city": ["Austin"], "state": ["TX"], "country": ["USA"],
        "amount": ["12.50"],
        "query": [TEXT],
    }


@pytest.mark.parametrize("text, kind, values", [
    ("zip 1912", "zip", None),                 # four digits: no zip
    ("zip 191223", "zip", None),               # six digits: no zip
    ("call 19122.5", "zip", None),             # a decimal is no zip
    ("item 100829223", "item_id", None),       # nine digits: no item id
    ("ship to Austin, ZZ", "state", None),     # not a US state
    ("ship it to the United States", "country", ["USA"]),
    ("send it to us", "country", None),        # the pronoun is not the country
    ("the order   is\n late", "query", ["the order is late"]),
])
def test_just_outside_each_extractor(text, kind, values):
    from pipelines.domains.support.candidates import extract_user_candidates

    assert extract_user_candidates(text).get(kind) == values


def test_every_write_tool_and_only_write_tools_have_grounding_kinds():
    from pipelines.domains.support import grounded
    from pipelines.domains.support.tools import TOOL_SPECS

    writes = {s.name for s in TOOL_SPECS if s.kind == "write"}
    table = grounded._write_arg_kinds()
    assert set(table) == writes and table == grounded.WRITE_ARG_KINDS
    for spec in TOOL_SPECS:
        if spec.kind == "write":
            assert set(table[spec.name]) >= set(spec.args_model.model_fields)


def test_a_write_argument_without_a_kind_is_refused_at_import(monkeypatch):
    from pipelines.domains.support import grounded
    from pipelines.domains.support.candidates import ARG_KINDS

    kinds = dict(ARG_KINDS)
    kinds["cancel_pending_order"] = {"order_id": "order_id"}  # "reason" left without a kind
    monkeypatch.setattr(grounded, "ARG_KINDS", kinds)
    with pytest.raises(ValueError, match=r"write tool cancel_pending_order: arguments \['reason'\] have no "
                                         r"grounding kind"):
        grounded._write_arg_kinds()


def test_merged_keeps_both_sets_and_each_values_first_source():
    from pipelines.grounding import CandidateSet

    a, b = CandidateSet(), CandidateSet()
    a.add("order_id", "#W1", "record")
    b.add("order_id", "#w1", "user")   # the same value, normalised: a's source stays
    b.add("order_id", "#W2", "user")
    b.add("zip", "89501", "record")
    m = a.merged(b)
    assert m.of("order_id") == ["#W1", "#W2"] and m.of("zip") == ["89501"]
    assert (m.source_of("order_id", "#W1"), m.source_of("order_id", "#W2"), m.source_of("zip", "89501")) == (
        "record", "user", "record")
    assert a.of("order_id") == ["#W1"] and "zip" not in a.kinds()  # a itself unchanged
