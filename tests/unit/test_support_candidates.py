"""The support pack's grounding: extractors over the user's words, slot proposals, owner records, Φ."""

from __future__ import annotations

import pytest

from pipelines.domains.support.candidates import (
    extract_user_candidates,
    record_candidates,
    slot_candidates,
    variant_candidates,
)
from pipelines.domains.support.labels import cards_for, intent_prior
from pipelines.domains.support.pack import load_support_rule_tables
from pipelines.sgc.phi import phi_lookup
from pipelines.sgc.snapshot import Snapshot


def test_extractors_find_what_the_user_typed():
    c = extract_user_candidates("I'm Yusuf Rossi, zip 19122. Order #W2378156, item 1151293680, email [EMAIL_1].")
    assert c["first_name"] == ["Yusuf"] and c["last_name"] == ["Rossi"] and c["zip"] == ["19122"]
    assert c["order_id"] == ["#W2378156"] and c["item_id"] == ["1151293680"] and c["email"] == ["[EMAIL_1]"]


@pytest.mark.parametrize("text", [
    "I am looking for my order", "Hi, I'm trying to return something", "It costs $19122.50", "order W12345678",
])
def test_extractors_do_not_invent_names_or_zips(text):
    c = extract_user_candidates(text)
    assert "first_name" not in c and "zip" not in c


def test_a_zip_is_five_digits_exactly():
    assert extract_user_candidates("zip 1912")["query"] and "zip" not in extract_user_candidates("zip 1912")
    assert "zip" not in extract_user_candidates("zip 191220")
    assert extract_user_candidates("zip 19122.")["zip"] == ["19122"]


def test_slot_proposals_are_kept_only_when_the_user_wrote_them():
    texts = ["hello, yusuf rossi here, 19122"]
    assert slot_candidates({"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}, texts) == {
        "first_name": ["Yusuf"], "last_name": ["Rossi"], "zip": ["19122"]}
    assert slot_candidates({"first_name": "Sofia", "last_name": "Rossi", "zip": "99999"}, texts) == {
        "last_name": ["Rossi"]}


def test_records_are_read_only_off_the_owners_own_records():
    user = {"user_id": "u1", "orders": ["#W1"], "payment_methods": {"credit_card_1": {}},
            "address": {"address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX",
                        "country": "USA", "zip": "78701"}}
    found = record_candidates("get_user_details", user, "u1")
    assert found["order_id"] == ["#W1"] and found["payment_method_id"] == ["credit_card_1"]
    assert found["address1"] == ["1 Main St"] and found["address_zip"] == ["78701"] and "address2" not in found
    assert record_candidates("get_user_details", user, "someone_else") == {}
    assert record_candidates("get_user_details", user, None) == {}
    assert record_candidates("search_help_articles", {"articles": [{"id": "KB-POL-001"}]}, "u1") == {}


def test_new_items_are_available_variants_of_a_product_the_owner_bought():
    product = {"product_id": "p1", "variants": {"v1": {"available": True}, "v2": {"available": False}}}
    assert variant_candidates(product, ["p1"]) == ["v1"]
    assert variant_candidates(product, ["p2"]) == []


@pytest.mark.parametrize("text, prior", [
    ("Please cancel order #W1", ["cancel"]),
    ("I want to exchange and return two items", ["return", "exchange"]),
    ("Hi! What can you help me with?", ["greeting"]),
    ("Hi, I need to cancel", ["cancel"]),
    ("yes", None),
    # a greeting that carries a fact answers something: any intent (a carried request goes on)
    ("Hi, my email is [EMAIL_1]", None),
    ("hello, yusuf rossi here, 19122", None),
    ("Hi, it's alex@example.com", None),
    ("Hello, I live at [ADDRESS_1]", None),
    ("Thanks, [NAME_1]", ["greeting"]),  # a name alone is no fact: a thanks
    ("Thanks, [NAME_12]", ["greeting"]),
    ("Hi there!", ["greeting"]),
])
def test_intent_prior_from_explicit_cues(text, prior):
    assert intent_prior(text) == prior


def test_cards_are_gated_by_the_perceived_intent():
    assert cards_for("cancel", "order") == ("card.cancel_order",)
    assert cards_for("modify", "address") == ("card.modify_address",)
    assert cards_for("account", "address") == ("card.modify_user_address",)
    assert cards_for("account", "details") == ()
    assert cards_for("greeting", "hello") == ()


TABLES = load_support_rule_tables()


@pytest.mark.parametrize("state, tools, then", [
    ({"user_id": "u", "order_id": "#W1", "email": "[EMAIL_1]"}, ["get_order_details"], "propose"),
    ({"user_id": "u", "email": "[EMAIL_1]"}, ["get_user_details"], "choose"),
    ({"email": "[EMAIL_1]", "first_name": "A", "last_name": "B", "zip": "12345"}, ["find_user_id_by_email"], None),
    ({"first_name": "A", "last_name": "B", "zip": "12345"}, ["find_user_id_by_name_zip"], None),
    ({"first_name": "A", "last_name": "B"}, [], "clarify:identity"),
    ({}, [], "clarify:identity"),
])
def test_phi_alternatives_are_tried_in_order(state, tools, then):
    out = phi_lookup(TABLES.phi, "cancel", "order", Snapshot.of(state))
    assert out.hit and [c.tool for c in out.tools] == tools and out.then == then


def test_phi_fills_lookup_arguments_from_the_snapshot():
    out = phi_lookup(TABLES.phi, "greeting", "hello", Snapshot.of({"email": "[EMAIL_2]"}))
    assert out.tools[0].args == {"email": "[EMAIL_2]"} and out.then == "respond"
    assert phi_lookup(TABLES.phi, "human", "agent", Snapshot.of({})).kind == "miss_unmapped"


@pytest.mark.parametrize("text, intent, allowed", [
    ("Hi! What can you help me with?", "greeting", ["hello"]),  # no cue: the default alone
    ("hello there", "greeting", ["hello"]),
    ("Thanks a lot", "greeting", ["thanks"]),
    ("thank you, bye", "greeting", ["thanks", "bye"]),
    ("Goodbye!", "greeting", ["bye"]),
    ("that's all, see you", "greeting", ["bye"]),
    ("Thanks, [NAME_1]", "greeting", ["thanks"]),
    ("byebye", "greeting", ["hello"]),  # just outside: no word boundary
    ("Please cancel order #W1000001", "cancel", None),  # an intent without cued sub-intents: any
])
def test_sub_intent_prior(text, intent, allowed):
    from pipelines.domains.support.labels import sub_intent_prior

    assert sub_intent_prior(text, intent) == allowed


@pytest.mark.parametrize(("text", "expected"), [
    # an item described in parentheses asks for nothing: the request it answers goes on
    ("It's order #W5490111. It's the Mechanical Keyboard (switch type linear, backlight none, size 80%).", None),
    ("It's the Mechanical Keyboard with switch type linear and size 80%", None),  # "switch type": an option
    ("I'd like to change the T-Shirt (color black, size XXL) to color purple, size S", ["exchange", "modify"]),
    ("I want to switch to a bigger size", ["exchange", "modify"]),  # "switch" the verb still cues
    ("please cancel it (I no longer need it)", ["cancel"]),
    ("(please cancel it)", ["cancel"]),  # a text that is all aside is read whole
])
def test_cues_ignore_asides_in_parentheses_and_the_switch_type_option(text, expected):
    from pipelines.domains.support.labels import intent_prior

    assert intent_prior(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    # someone who moved, or an order going elsewhere, asks for an address change without saying "change"
    ("We relocated last week and the parcel is still going to the old flat", ["modify", "account"]),
    ("Please deliver order #W1 to a different address", ["order_status", "modify", "account"]),
    ("I moved", ["modify", "account"]),
    ("I move boxes for a living", None),  # just outside: no "moved"
    ("I have two credit cards", None),  # methods named, no change asked
    # a replacement, an upgrade: an item changed (exchange once delivered, modify while pending)
    # a replacement asked for decides: the fault named beside it is the reason, a weak cue that adds nothing
    ("could I get a replacement for the cracked mug", ["exchange", "modify"]),
    # an item no longer wanted, or one that arrived broken: cancelled or returned, as the order's state allows
    ("I no longer need the blender", ["cancel", "return"]),
    ("please cancel the blender, I no longer need it", ["cancel"]),  # the verb says what: the reason adds nothing
    ("the fan I got stopped working after a day", ["return", "exchange"]),
    ("I don't want to wait that long", None),  # just outside: wanting to do something, not an item unwanted
    ("please change my home address", ["modify", "account"]),
    # what the account itself holds is a question about the account, never about an order
    ("what's the balance on my gift card?", ["account"]),
    ("how much is left on my card", ["account"]),
    ("they sent a worn pair, I want a new one just like it", ["exchange", "modify"]),
    ("upgrade my headphones to the newest version", ["exchange", "modify"]),
    ("change the lamp to the same one in a warmer colour", ["exchange", "modify"]),
    # an item taken out of an order: cancelled, or the order changed — not a return
    ("can you take the scarf off my order", ["cancel", "modify"]),
    ("please remove the blue mug from my pending order", ["cancel", "modify"]),
    ("remove my old address", None),  # just outside: nothing taken out of an order
    # how a payment was made cues nothing: "the card I paid with" answers a question of the request under way
    ("put it on the card I paid with", None),
    ("How much was I charged for my last order?", None),
])
def test_changes_asked_without_a_verb_of_change(text, expected):
    assert intent_prior(text) == expected


@pytest.mark.parametrize(("text", "intent", "allowed"), [
    ("We relocated, the order must follow us", "modify", ["address"]),
    ("I have a new apartment", "account", ["address"]),
    ("I need a replacement", "modify", ["items"]),
    ("downgrade the laptop in my order to save money", "modify", ["items"]),
])
def test_what_such_a_change_is_about(text, intent, allowed):
    from pipelines.domains.support.labels import sub_intent_prior

    assert sub_intent_prior(text, intent) == allowed


@pytest.mark.parametrize(("text", "expected"), [
    ("I received the kettle and want to change its colour", ["exchange"]),
    ("the kettle arrived; can I change it to a bigger size?", ["order_status", "exchange", "policy"]),
    ("change the size of the kettle in my pending order", ["modify"]),
    ("the kettle has not arrived yet, change its colour please", ["order_status", "modify"]),
    ("I haven't received it, change the colour", ["modify"]),
    ("change the colour of the kettle", ["exchange", "modify"]),  # no word of delivery: the order decides
    ("I received one order and the other is pending; change the colour", ["exchange", "modify"]),  # both
    ("I received it and want to exchange it", ["exchange"]),  # one cue only: nothing to narrow
    ("I received it, please update the shipping address", ["modify"]),  # no item change: address stays modify
    ("the blender was delivered yesterday; I'd like to modify its colour", ["order_status", "exchange"]),
])
def test_a_change_of_an_item_the_user_says_was_delivered_is_an_exchange(text, expected):
    assert intent_prior(text) == expected
