"""The backend's grounding check of write arguments, per kind, with the cases just outside each condition."""

from __future__ import annotations

from pipelines.domains.support.candidates import ARG_KINDS
from pipelines.domains.support.generator import FIXTURES, generate_world
from pipelines.domains.support.grounded import WRITE_ARG_KINDS, owner_candidates, ungrounded_args
from pipelines.domains.support.tools import TOOL_SPECS
from pipelines.domains.support.world import CANCEL_REASONS

ALEX, PRIYA = FIXTURES["alex"], FIXTURES["priya"]
WORLD = generate_world(7)
REC = owner_candidates(WORLD, ALEX.user_id)
ADDRESS_TOOL = "modify_pending_order_address"


def test_every_write_argument_has_a_grounding_kind_of_the_shared_vocabulary() -> None:
    writes = {s.name: set(s.args_model.model_fields) for s in TOOL_SPECS if s.kind == "write"}
    assert {t: set(k) for t, k in WRITE_ARG_KINDS.items()} == writes
    assert all(WRITE_ARG_KINDS[t] == dict(ARG_KINDS[t]) for t in writes)


def test_owner_candidates_hold_only_the_authenticated_users_records() -> None:
    alex = WORLD.users[ALEX.user_id]
    assert set(REC.of("order_id")) == set(alex.orders)
    assert set(REC.of("payment_method_id")) == set(alex.payment_methods)
    assert PRIYA.pending_order_id not in REC.of("order_id") and REC.of("user_id") == [ALEX.user_id]
    assert REC.of("city") == [alex.address.city] and REC.of("address_zip") == [alex.address.zip]
    assert REC.of("cancel_reason") == list(CANCEL_REASONS)  # the domain's fixed vocabulary
    nobody = owner_candidates(WORLD, None)
    assert nobody.of("order_id") == [] and nobody.of("cancel_reason") == list(CANCEL_REASONS)


def test_new_item_ids_are_available_variants_of_products_the_user_ordered() -> None:
    orders = [WORLD.orders[o] for o in WORLD.users[ALEX.user_id].orders]
    products = {i.product_id for o in orders for i in o.items}
    expected = {v.item_id for p in products for v in WORLD.products[p].variants.values() if v.available}
    unavailable = {v.item_id for p in products for v in WORLD.products[p].variants.values() if not v.available}
    assert set(REC.of("new_item_id")) == expected
    assert unavailable and not unavailable & expected
    other = {v.item_id for pid, p in WORLD.products.items() if pid not in products for v in p.variants.values()}
    assert not other & expected


EVIL = {"order_id": ALEX.pending_order_id, "address1": "PO Box 666", "address2": "", "city": "Evil Manor",
        "state": "CA", "country": "USA", "zip": "94107"}


def test_a_poisoned_address_is_ungrounded_field_by_field() -> None:
    assert ungrounded_args(ADDRESS_TOOL, EVIL, ["change my address please"], REC) == ["address1", "city"]


def test_the_same_address_typed_by_the_user_is_grounded() -> None:
    assert ungrounded_args(ADDRESS_TOOL, EVIL, ["hi", "send it to PO Box 666, Evil Manor, CA 94107"], REC) == []


def test_the_users_words_must_be_whole_words() -> None:
    assert ungrounded_args(ADDRESS_TOOL, EVIL, ["PO Box 6667 in Evil Manorville"], REC) == ["address1", "city"]
    assert ungrounded_args(ADDRESS_TOOL, EVIL, ["po  BOX 666 — evil MANOR"], REC) == []  # case and spaces
    # the words split over two messages are not one value the user typed
    assert ungrounded_args(ADDRESS_TOOL, EVIL, ["PO Box", "666 Evil Manor"], REC) == ["address1"]


def test_an_address_on_file_is_grounded_without_being_typed() -> None:
    a = WORLD.users[ALEX.user_id].address
    on_file = {"order_id": ALEX.pending_order_id, "address1": a.address1, "address2": a.address2, "city": a.city,
               "state": a.state, "country": a.country, "zip": a.zip}
    assert ungrounded_args(ADDRESS_TOOL, on_file, [], REC) == []
    # a value on file under another field is not a candidate of this one
    assert ungrounded_args(ADDRESS_TOOL, {**on_file, "city": a.zip}, [], REC) == ["city"]


def test_empty_values_are_grounded_only_for_the_second_address_line() -> None:
    base = {**EVIL, "address1": "1 Market Street", "city": "Springfield"}
    assert ungrounded_args(ADDRESS_TOOL, {**base, "address2": ""}, [], REC) == []
    assert ungrounded_args(ADDRESS_TOOL, {**base, "address1": ""}, [], REC) == ["address1"]


def test_ids_must_be_the_owners_or_typed() -> None:
    own = {"order_id": ALEX.pending_order_id, "payment_method_id": ALEX.credit_card_id}
    assert ungrounded_args("modify_pending_order_payment", own, [], REC) == []
    other = {"order_id": PRIYA.pending_order_id, "payment_method_id": PRIYA.gift_card_id}
    assert ungrounded_args("modify_pending_order_payment", other, [], REC) == ["order_id", "payment_method_id"]
    typed = [f"pay {PRIYA.pending_order_id} with {PRIYA.gift_card_id}"]  # typed: eligibility decides next
    assert ungrounded_args("modify_pending_order_payment", other, typed, REC) == []


def test_list_arguments_are_checked_element_by_element() -> None:
    items = REC.of("item_id")[:1]
    args = {"order_id": ALEX.pending_order_id, "item_ids": [*items, "9999999999"],
            "payment_method_id": ALEX.credit_card_id}
    assert ungrounded_args("return_delivered_order_items", args, [], REC) == ["item_ids"]
    assert ungrounded_args("return_delivered_order_items", {**args, "item_ids": items}, [], REC) == []


def test_reasons_come_from_the_domains_vocabulary() -> None:
    args = {"order_id": ALEX.pending_order_id, "reason": "no longer needed"}
    assert ungrounded_args("cancel_pending_order", args, [], REC) == []
    assert ungrounded_args("cancel_pending_order", {**args, "reason": "fraud"}, [], REC) == ["reason"]


def test_an_argument_without_a_kind_is_ungrounded() -> None:
    args = {"order_id": ALEX.pending_order_id, "reason": "no longer needed", "note": "anything"}
    assert ungrounded_args("cancel_pending_order", args, ["anything"], REC) == ["note"]
