"""Items and wanted variants grounded from the user's description (pipelines/domains/support/candidates.py,
the support pack's narrowing, and the Φ chain that reads the named item's product)."""

from __future__ import annotations

import pytest

from pipelines.domains.support.candidates import (
    described_items,
    described_payment_methods,
    described_variants,
    names_payment,
)
from pipelines.grounding import CandidateSet
from tests.doubles import j, w1

from .harnesses import TandemHarness

#: A keyboard held as linear / RGB / full size, and its siblings.
KEYS = {
    "held": {"options": {"switch type": "linear", "backlight": "RGB", "size": "full size"}, "available": True},
    "clicky_rgb_full": {"options": {"switch type": "clicky", "backlight": "RGB", "size": "full size"},
                        "available": True},
    "clicky_none_full": {"options": {"switch type": "clicky", "backlight": "none", "size": "full size"},
                         "available": True},
    "clicky_rgb_80": {"options": {"switch type": "clicky", "backlight": "RGB", "size": "80%"}, "available": True},
    "tactile_gone": {"options": {"switch type": "tactile", "backlight": "RGB", "size": "full size"},
                     "available": False},
}


def test_the_same_one_but_with_the_option_named_is_the_one_described():
    assert described_variants(KEYS, ["held"], ["I want the same keyboard but clicky"]) == ["clicky_rgb_full"]


def test_every_option_restated_picks_the_variant_that_has_them_all():
    text = "change it (switch type linear, backlight RGB, size full size) to switch type clicky, backlight RGB, " \
           "size full size"
    assert described_variants(KEYS, ["held"], [text]) == ["clicky_rgb_full"]


def test_ties_are_all_returned_and_nothing_new_named_is_nothing():
    free = {k: v for k, v in KEYS.items() if k != "held"}
    assert described_variants(free, [], ["a clicky one"]) == ["clicky_rgb_full", "clicky_none_full", "clicky_rgb_80"]
    assert described_variants(KEYS, ["held"], ["the RGB one, full size"]) == []  # only what it has already
    assert described_variants(KEYS, ["held"], ["something else"]) == []
    assert described_variants(KEYS, ["held"], ["tactile please"]) == []  # not available


#: A speaker held as green / no water resistance, and its siblings (a yes-or-no option).
SPEAKERS = {
    "held": {"options": {"color": "green", "water resistance": "no"}, "available": True},
    "green_yes": {"options": {"color": "green", "water resistance": "yes"}, "available": True},
    "red_no": {"options": {"color": "red", "water resistance": "no"}, "available": True},
    "red_yes": {"options": {"color": "red", "water resistance": "yes"}, "available": True},
}


@pytest.mark.parametrize(("text", "expected"), [
    ("the same color but with water resistance", ["green_yes"]),
    ("a water-resistant one, please", ["green_yes"]),  # the "-ance" noun's adjective, hyphenated
    ("one that is water resistant and red", ["red_yes"]),
    ("red, and not water resistant", ["red_no"]),  # negated: the "no" value, never the "yes" one
    ("a red one without water resistance", ["red_no"]),
    ("a red one, non-water-resistant is fine", ["red_no"]),
    ("something that resists water", []),  # the option's name is not said
])
def test_a_yes_or_no_option_is_named_by_its_name_said_or_denied(text, expected):
    assert described_variants(SPEAKERS, ["held"], [text]) == expected


CLOCKS = {
    "held": {"options": {"diameter": "14 inches", "color": "black"}, "available": True},
    "ten_black": {"options": {"diameter": "10 inches", "color": "black"}, "available": True},
    "ten_white": {"options": {"diameter": "10 inches", "color": "white"}, "available": True},
}


def test_an_option_named_by_its_own_name_is_no_comparative():
    # "diameter" ends in -er like "bigger": the option's own name compares nothing (before: read as "a larger
    # diameter", so the 10-inch clock went against it and nothing was described)
    assert described_variants(CLOCKS, ["held"], ["I want the diameter to be 10 inches, in black"]) == ["ten_black"]
    assert described_variants(CLOCKS, ["held"], ["a 10-inch one in white"]) == ["ten_white"]
    # a comparative of a quality still is one: "brighter" is about brightness
    lamps = {"held": {"options": {"brightness": "medium"}, "available": True},
             "low": {"options": {"brightness": "low"}, "available": True},
             "high": {"options": {"brightness": "high"}, "available": True}}
    assert described_variants(lamps, ["held"], ["a brighter one"]) == ["high"]


@pytest.mark.parametrize(("text", "expected"), [
    ("the 20,000 mAh one", ["c20"]),  # a thousands separator
    ("the 20000mAh one", ["c20"]),
    ("the 10,000 mAh one", []),  # what it has: no change
])
def test_a_measure_is_read_with_its_thousands_separator(text, expected):
    chargers = {"held": {"options": {"capacity": "10000mAh"}, "available": True},
                "c20": {"options": {"capacity": "20000mAh"}, "available": True},
                "c5": {"options": {"capacity": "5000mAh"}, "available": True}}
    assert described_variants(chargers, ["held"], [text]) == expected


def test_pieces_and_degrees_are_units():
    sets = {"held": {"options": {"piece count": "2-piece"}, "available": True},
            "four": {"options": {"piece count": "4-piece"}, "available": True}}
    assert described_variants(sets, ["held"], ["the 4 piece set"]) == ["four"]
    cams = {"held": {"options": {"field of view": "110 degrees"}, "available": True},
            "wide": {"options": {"field of view": "130 degrees"}, "available": True}}
    assert described_variants(cams, ["held"], ["the 130° one"]) == ["wide"]


JACKETS = {
    "held": {"options": {"size": "M", "color": "blue"}, "available": True},
    "shirt_s": {"options": {"size": "S", "color": "blue"}, "available": True},
    "shirt_l": {"options": {"size": "L", "color": "blue"}, "available": True},
    "shirt_xl": {"options": {"size": "XL", "color": "blue"}, "available": True},
    "shirt_xs": {"options": {"size": "XS", "color": "blue"}, "available": True},
}


@pytest.mark.parametrize(("text", "expected"), [
    ("a small one", ["shirt_s"]),
    ("in large please", ["shirt_l"]),
    ("the extra large one", ["shirt_xl"]),  # "large" inside "extra large" is not L
    ("an x-large", ["shirt_xl"]),
    ("extra small", ["shirt_xs"]),
    ("the same in medium", []),  # what it has
])
def test_a_letter_size_is_said_in_words(text, expected):
    assert described_variants(JACKETS, ["held"], [text]) == expected


def test_a_size_word_that_is_another_options_value_names_that_value_only():
    helmets = {"held": {"options": {"size": "S", "ventilation": "low"}, "available": True},
               "m_low": {"options": {"size": "M", "ventilation": "low"}, "available": True},
               "s_medium": {"options": {"size": "S", "ventilation": "medium"}, "available": True}}
    assert described_variants(helmets, ["held"], ["medium ventilation please"]) == ["s_medium"]


def test_a_value_said_once_counts_once_though_two_options_have_it():
    shades = {"held": {"options": {"frame": "black", "lens": "green", "material": "metal"}, "available": True},
              "brown_green": {"options": {"frame": "brown", "lens": "green", "material": "plastic"},
                              "available": True},
              "brown_brown": {"options": {"frame": "brown", "lens": "brown", "material": "plastic"},
                              "available": True}}
    # "brown" is one wish: the lens the user did not mention stays as it is (before: brown twice outscored it)
    assert described_variants(shades, ["held"], ["the brown plastic one"]) == ["brown_green"]


@pytest.mark.parametrize(("later", "expected"), [
    ("only the desk lamp", ["l"]),
    ("just the desk lamp", ["l"]),
    ("Only swap the desk lamp.", ["l"]),  # a verb between "only" and the name
    ("I only want to return the desk lamp", ["l"]),
    ("only the desk lamp and the kettle", ["l", "k"]),  # the names said with it are the list
    ("not the lamp, only the kettle", ["k"]),
    ("Just return the desk lamp", ["b", "l", "k"]),  # "just" only right before the name: a filler word otherwise
    ("I just received the desk lamp", ["b", "l", "k"]),
    ("only the desk lamp arrived broken", ["l"]),
])
def test_only_the_items_said_after_only_are_kept(later, expected):
    items = {"b": {"name": "Water Bottle", "product_id": "pb"}, "l": {"name": "Desk Lamp", "product_id": "pl"},
             "k": {"name": "Electric Kettle", "product_id": "pk"}}
    first = "Please swap the water bottle, the kettle and the desk lamp."
    assert described_items(items, [first, later]) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("send back both bookshelves", ["s1", "s2"]),  # -f as -ves
    ("the bookshelfs", ["s1", "s2"]),
    ("my two knives", ["k"]),  # -fe as -ves, by its last word
    ("the spare batteries", ["b"]),  # a consonant's -y as -ies
    ("the battery", ["b"]),
    ("the key trays", ["t"]),  # a vowel's -y takes -s
    ("the traies", []),  # not English: no plural of a vowel's -y
    ("the batterys", []),
])
def test_a_product_is_named_in_the_plural_as_english_spells_it(text, expected):
    items = {"s1": {"name": "Bookshelf", "product_id": "ps"}, "s2": {"name": "Bookshelf", "product_id": "ps"},
             "k": {"name": "Chef Knife", "product_id": "pk"}, "b": {"name": "Battery", "product_id": "pb"},
             "t": {"name": "Key Tray", "product_id": "pt"}}
    assert described_items(items, [text]) == expected


def test_items_are_named_by_their_product_name_as_whole_words():
    items = {"1": {"name": "Mechanical Keyboard", "product_id": "p1"}, "2": {"name": "T-Shirt", "product_id": "p2"}}
    assert described_items(items, ["the mechanical keyboard please"]) == ["1"]
    assert described_items(items, ["my t-shirt and the Mechanical Keyboard"]) == ["1", "2"]
    assert described_items(items, ["a keyboard"]) == ["1"]  # its last word: the only keyboard of the items
    assert described_items(items, ["a board"]) == []  # part of a word is no word


def test_products_are_named_as_loosely_as_customers_write_them():
    from pipelines.domains.support.candidates import names_product

    for text in ("do you have tshirts", "my t shirts", "the T-SHIRT", "two t-shirts"):
        assert names_product("T-Shirt", [text]), text
    assert names_product("Headphones", ["the headphone"]) and names_product("Smart Watch", ["my smartwatch"])
    assert names_product("Glasses", ["my glasses"]) and not names_product("Glasses", ["a glass"])
    assert not names_product("T-Shirt", ["a shirt"])  # the whole name, unless its last word is asked for
    assert names_product("Vacuum Cleaner", ["return the cleaner"], head=True)
    assert not names_product("Yoga Mat", ["the mat"], head=True)  # a last word under four letters
    assert not names_product("Backpack", ["the pack"], head=True)  # a one-word name has no last word apart


def test_a_last_word_two_products_share_names_neither():
    items = {"1": {"name": "Desk Lamp", "product_id": "a"}, "2": {"name": "Floor Lamp", "product_id": "b"},
             "3": {"name": "Vacuum Cleaner", "product_id": "c"}, "4": {"name": "Desk Lamp", "product_id": "a"}}
    assert described_items(items, ["return the lamp and the cleaner"]) == ["3"]
    assert described_items(items, ["the desk lamp"]) == ["1", "4"]  # two of one product: both named
    assert described_items(items, ["the floor lamps"]) == ["2"]


def test_keep_narrows_one_kind_and_its_sources():
    c = CandidateSet()
    c.add_all({"item_id": ["1", "2", "3"], "order_id": ["#W1"]}, "record")
    c.keep("item_id", ["3", "1", "9"])
    assert c.of("item_id") == ["1", "3"] and set(c.sources["item_id"]) == {"1", "3"} and c.of("order_id") == ["#W1"]
    c.keep("absent", ["x"])
    assert not c.has("absent")


DELIVERED = "#W1000002"  # alex's earbuds: blue, 6 hours


def _events(h: TandemHarness, since: int, kind: str) -> list[dict]:
    return [f for k, f in h.sink.events[since:] if k == kind]


EXCHANGE = f"I want to exchange the wireless earbuds from order {DELIVERED} for the same ones in white"


def _exchange(new_item: str, text: str = EXCHANGE + ", paid with my visa card.") -> tuple[TandemHarness, int, object]:
    h = TandemHarness()
    pm = "credit_card_1000001"  # alex's visa
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    n = len(h.sink.events)
    params = {"order_id": DELIVERED, "item_ids": ["8818174143"], "new_item_ids": [new_item], "payment_method_id": pm}
    r = h.turn(text, orch=[w1("exchange", "items", "Let me check that order."),
                           j(decision="action", card_id="card.exchange_items", params=params)])
    return h, n, r


def test_an_exchange_described_in_words_reads_the_product_and_offers_the_described_variant():
    h, n, r = _exchange("0931002516")  # white, 6 hours: the same battery life, the colour named
    assert [(p["tools"], p["then"]) for p in _events(h, n, "tandem.phi")] == [
        (["get_user_details"], "propose"), (["get_order_details"], "propose"), (["get_product_details"], "propose")]
    product = h.world.orders[DELIVERED].items[0].product_id
    held = h.world.orders[DELIVERED].items[0]
    assert h.meta["state"]["items"]["8818174143"] == {"name": "Wireless Earbuds", "product_id": product,
                                                      "order_id": DELIVERED, "options": dict(held.options),
                                                      "price": held.price}
    assert [(c.card_id, c.params["new_item_ids"]) for c in r.of("action_card")] == [
        ("card.exchange_items", ["0931002516"])]


def test_a_payment_method_the_user_did_not_state_is_asked_for():
    h, n, r = _exchange("0931002516", text=EXCHANGE + ".")  # the order's own card is on record, not stated
    assert not r.of("action_card") and h.meta["path"] == "clarify"
    assert _events(h, n, "tandem.step")[-1]["offer"]["clarify"] == ["payment_method"]


def test_an_available_variant_the_user_did_not_describe_is_not_offered():
    h, n, r = _exchange("3198296572")  # black: available, owned product, but not what the user described
    # the one variant the user's words describe (white) is the card's, whatever the model proposed
    assert [c.params["new_item_ids"] for c in r.of("action_card")] == [["0931002516"]]


def test_without_a_described_option_the_wanted_variant_is_asked_for():
    h = TandemHarness()
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    n = len(h.sink.events)
    r = h.turn(f"I want to exchange the wireless earbuds from order {DELIVERED}.",
               orch=[w1("exchange", "items", "Let me check that order.")])
    assert [p["tools"] for p in _events(h, n, "tandem.phi")] == [["get_order_details"], ["get_product_details"]]
    step = _events(h, n, "tandem.step")[-1]
    assert step["offer"]["cards"] == [] and "new_item" in step["offer"]["clarify"]
    assert [e.question for e in r.events if e.type == "clarify"] == ["Which option would you like instead?"]


def test_the_items_of_a_change_are_those_the_user_named():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    records.add_all({"item_id": ["k1", "t1", "c1"]}, "record")
    state = {"authenticated_user_id": "u", "records": records.model_dump(),
             "items": {"k1": {"name": "Mechanical Keyboard", "product_id": "pk", "order_id": "#W1000001"},
                       "t1": {"name": "T-Shirt", "product_id": "pt", "order_id": "#W1000001"},
                       "c1": {"name": "Coffee Maker", "product_id": "pc", "order_id": "#W1000001"}}}
    facts = TurnFacts(session_id="s", user_text="the noisy one is too loud", state=state)
    pack.restore(facts)
    assert facts.candidates.of("item_id") == []  # no product named: which items is asked
    facts = TurnFacts(session_id="s", user_text="the mechanical one is too loud", state=state)
    pack.restore(facts)
    assert facts.candidates.of("item_id") == ["k1"]  # a first word of six letters no other product starts with
    facts = TurnFacts(session_id="s", user_text="the coffee is cold", state=state)
    pack.restore(facts)
    assert facts.candidates.of("item_id") == []  # just outside: a first word of six letters, but not "coffee maker"
    facts = TurnFacts(session_id="s", user_text="the keyboard is too loud", state=state)
    pack.restore(facts)
    assert facts.candidates.of("item_id") == ["k1"]  # the last word of the only product that ends in it
    facts = TurnFacts(session_id="s", user_text="return all the items of order #W1000001", state=state)
    pack.restore(facts)
    assert facts.candidates.of("item_id") == ["k1", "t1", "c1"]  # all of the order, when the user says so
    facts = TurnFacts(session_id="s", user_text="return the mechanical keyboard and the t-shirt", state=state)
    pack.restore(facts)
    assert facts.candidates.of("item_id") == ["k1", "t1"]
    assert pack.snapshot_values(facts)["product_id"] == "pk"  # the first named product not read yet
    read = {**state, "variants": {"pk": {"k9": {"options": {}, "available": True}}}}
    facts = TurnFacts(session_id="s", user_text="return the mechanical keyboard and the t-shirt", state=read)
    pack.restore(facts)
    assert pack.snapshot_values(facts)["product_id"] == "pt"  # then the next one
    read = {**state, "variants": {"pk": {}, "pt": {}}}
    facts = TurnFacts(session_id="s", user_text="return the mechanical keyboard and the t-shirt", state=read)
    assert pack.snapshot_values(facts)["product_id"] == "pt"  # all read: the last named
    facts = TurnFacts(session_id="s", user_text="now the coffee maker",
                      user_texts=["return the mechanical keyboard and the t-shirt"], state=state)
    pack.restore(facts)
    assert pack.snapshot_values(facts)["product_id"] == "pc"  # the newest text that names an item wins


def test_named_items_are_those_of_the_order_in_question():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    records.add_all({"item_id": ["k1", "k2", "t2"]}, "record")
    state = {"authenticated_user_id": "u", "records": records.model_dump(),
             "items": {"k1": {"name": "Mechanical Keyboard", "product_id": "pk", "order_id": "#W1000001"},
                       "k2": {"name": "Mechanical Keyboard", "product_id": "pk", "order_id": "#W1000002"},
                       "t2": {"name": "T-Shirt", "product_id": "pt", "order_id": "#W1000002"}}}
    facts = TurnFacts(session_id="s", user_text="exchange the mechanical keyboard of order #W1000002", state=state)
    pack.restore(facts)
    assert facts.candidates.of("item_id") == ["k2"]  # not the same product in another order
    facts = TurnFacts(session_id="s", user_text="exchange the mechanical keyboard", state=state)
    pack.restore(facts)
    assert facts.candidates.of("item_id") == ["k1", "k2"]  # no order named: both stay
    facts = TurnFacts(session_id="s", user_text="now the t-shirt of order #W1000003 too", state=state)
    pack.restore(facts)
    # an order named but not read yet: no item of another order stands in for its t-shirt
    assert facts.candidates.of("item_id") == [] and "product_id" not in pack.snapshot_values(facts)
    assert pack.snapshot_values(facts)["order_id"] == "#W1000003"  # Φ reads it first


def test_each_wanted_variant_is_paired_with_the_item_of_its_product():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    state = {"authenticated_user_id": "u",
             "items": {"k1": {"name": "Keyboard", "product_id": "pk", "order_id": "#W1"},
                       "t1": {"name": "Thermostat", "product_id": "pt", "order_id": "#W1"}},
             "variants": {"pk": {"k2": {"options": {}, "available": True}},
                          "pt": {"t2": {"options": {}, "available": True}}}}
    facts = TurnFacts(session_id="s", user_text="x", state=state)
    args = {"order_id": "#W1", "item_ids": ["k1", "t1"], "new_item_ids": ["t2", "k2"], "payment_method_id": "p"}
    assert pack.arrange("exchange_delivered_order_items", args, facts)["new_item_ids"] == ["k2", "t2"]
    unknown = {**args, "new_item_ids": ["t2", "zz"]}
    assert pack.arrange("exchange_delivered_order_items", unknown, facts) == unknown  # no pairing: as proposed
    one = {**args, "item_ids": ["k1"], "new_item_ids": ["k2"]}
    assert pack.arrange("exchange_delivered_order_items", one, facts) == one


def test_each_named_items_product_is_read_in_turn():
    h = TandemHarness()
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    n = len(h.sink.events)
    h.turn("I want to exchange the t-shirt and the coffee maker from order #W1000003.",
           orch=[w1("exchange", "items", "Let me check that order.")])
    order = h.world.orders["#W1000003"]
    product = {i.name: i.product_id for i in order.items}
    reads = [(p["tools"], [c["args"] for c in p["calls"]]) for p in _events(h, n, "tandem.phi")]
    assert reads == [(["get_order_details"], [{"order_id": "#W1000003"}]),
                     (["get_product_details"], [{"product_id": product["T-Shirt"]}]),
                     (["get_product_details"], [{"product_id": product["Coffee Maker"]}])]
    assert set(h.meta["state"]["variants"]) == {product["T-Shirt"], product["Coffee Maker"]}


METHODS = {"credit_card_1": {"source": "credit_card", "brand": "visa", "last_four": "4107"},
           "credit_card_2": {"source": "credit_card", "brand": "mastercard", "last_four": "9922"},
           "gift_card_3": {"source": "gift_card"}, "paypal_4": {"source": "paypal"}}


def test_payment_methods_are_described_by_digits_kind_or_brand():
    assert described_payment_methods(METHODS, ["use my credit card ending in 9922"]) == ["credit_card_2"]
    assert described_payment_methods(METHODS, ["refund it to my gift card"]) == ["gift_card_3"]
    assert described_payment_methods(METHODS, ["my PayPal account please"]) == ["paypal_4"]
    assert described_payment_methods(METHODS, ["the visa one"]) == ["credit_card_1"]
    assert described_payment_methods(METHODS, ["charge my credit card"]) == ["credit_card_1", "credit_card_2"]
    assert described_payment_methods(METHODS, ["pay with gift_card_3"]) == ["gift_card_3"]
    assert described_payment_methods(METHODS, ["whatever is fine"]) == []
    assert names_payment(["the card ending in 12"]) and names_payment(["paypal"]) and not names_payment(["hello"])
    # the kinds' abbreviations, in capitals only ("cc" is also a copy line)
    assert described_payment_methods(METHODS, ["put the refund on my GC"]) == ["gift_card_3"]
    assert described_payment_methods(METHODS, ["the CC is fine"]) == ["credit_card_1", "credit_card_2"]
    assert described_payment_methods(METHODS, ["gc"]) == [] and not names_payment(["please cc my wife"])


@pytest.mark.parametrize(("text", "shown", "expected"), [
    ("charge the other card instead", "credit_card_2", ["credit_card_1"]),  # a card of the shown one's kind
    ("use my other credit card", "credit_card_1", ["credit_card_2"]),
    ("the other card, please", "gift_card_3", []),  # one gift card: no other of its kind
    ("my other gift card", "credit_card_1", ["gift_card_3"]),  # the kind said
    ("the other payment method", "paypal_4", ["credit_card_1", "credit_card_2", "gift_card_3"]),  # any: asked
    ("the other card", "paypal_4", ["credit_card_1", "credit_card_2"]),  # not a card shown: the credit cards
    ("the card, please", "credit_card_2", []),  # nothing "other"
    ("the other card", None, []),  # no card shown
    ("the other card", "credit_card_9", []),  # not theirs
    ("I want the other one", "credit_card_2", []),  # "one" may be an item: not a payment method
])
def test_the_other_card_is_every_method_of_its_kind_but_the_one_shown(text, shown, expected):
    from pipelines.domains.support.candidates import other_payment_methods

    assert other_payment_methods(METHODS, text, shown) == expected


def test_the_other_card_after_a_card_is_the_card_it_did_not_show():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    records.add_all({"payment_method_id": list(METHODS)}, "record")
    state = {"authenticated_user_id": "u", "payment_methods": METHODS, "records": records.model_dump(),
             "pending": {"card_id": "card.modify_payment", "title": "t", "tool": "modify_pending_order_payment",
                         "args": {"order_id": "#W1000001", "payment_method_id": "credit_card_2"}}}
    facts = TurnFacts(session_id="s", user_text="No, the other card.", user_texts=["pay with my card",
                                                                                   "No, the other card."], state=state)
    pack.restore(facts)
    assert facts.state["shown_payment"] == "credit_card_2"
    assert facts.candidates.of("payment_method_id") == ["credit_card_1"]
    later = {**facts.state, "pending": None}  # a turn later, the card gone: still told apart from it
    facts = TurnFacts(session_id="s", user_text="the other card", user_texts=["the other card"], state=later)
    pack.restore(facts)
    assert facts.candidates.of("payment_method_id") == ["credit_card_1"]


def _two_item_facts(text: str):
    from pipelines.domain import TurnFacts

    # an order item's id is the id of the variant it holds (as in tau2 retail)
    state = {"authenticated_user_id": "u",
             "items": {"held": {"name": "Mechanical Keyboard", "product_id": "pk", "order_id": "#W1"},
                       "t_held": {"name": "T-Shirt", "product_id": "pt", "order_id": "#W1"},
                       "c1": {"name": "Coffee Maker", "product_id": "pc", "order_id": "#W1"}},
             "variants": {"pk": KEYS,
                          "pt": {"t_held": {"options": {"color": "red", "size": "M", "material": "cotton"},
                                            "available": True},
                                 "t_blue_m": {"options": {"color": "blue", "size": "M", "material": "polyester"},
                                              "available": True},
                                 "t_blue_l": {"options": {"color": "blue", "size": "L", "material": "cotton"},
                                              "available": True}}}}
    return TurnFacts(session_id="s", user_text=text, user_texts=["I want to change items of order #W1"],
                     state=state)


def test_a_request_naming_two_items_is_one_card_for_both():
    from pipelines.domains import load_domain

    pack = load_domain("support")
    facts = _two_item_facts("return the mechanical keyboard and the t-shirt")
    args = {"order_id": "#W1", "item_ids": ["t_held"], "payment_method_id": "p"}
    assert pack.arrange("return_delivered_order_items", args, facts)["item_ids"] == ["held", "t_held"]
    other = {**args, "item_ids": ["c1"]}  # the model proposed an item the user did not name: left to the checks
    assert pack.arrange("return_delivered_order_items", other, facts) == other


def test_an_exchange_takes_every_named_item_whose_change_is_described_by_one_variant():
    from pipelines.domains import load_domain

    pack = load_domain("support")
    facts = _two_item_facts("the mechanical keyboard but clicky, backlight none, and the t-shirt in blue size L")
    args = {"order_id": "#W1", "item_ids": ["held"], "new_item_ids": ["clicky_none_full"], "payment_method_id": "p"}
    out = pack.arrange("modify_pending_order_items", args, facts)
    assert out["item_ids"] == ["held", "t_held"] and out["new_item_ids"] == ["clicky_none_full", "t_blue_l"]
    assert pack.undecided("modify_pending_order_items", out, facts) is None


def test_a_change_tied_between_variants_is_asked_once_not_guessed():
    from pipelines.domains import load_domain

    pack = load_domain("support")
    # blue M polyester and blue L cotton: each names blue and keeps one option of the held red M cotton
    facts = _two_item_facts("change the t-shirt to blue")
    args = {"order_id": "#W1", "item_ids": ["t_held"], "new_item_ids": ["t_blue_l"], "payment_method_id": "p"}
    out = pack.arrange("modify_pending_order_items", args, facts)
    assert out["item_ids"] == ["t_held"]  # kept on the card until it is asked about
    assert pack.undecided("modify_pending_order_items", out, facts) == ("new_item_choose",
                                                                          ["blue / M / polyester", "blue / L / cotton"])
    assert facts.state["asked"] == ["t_held"]
    assert pack.undecided("modify_pending_order_items", out, facts) is None  # asked once: never twice
    # the answer decides it
    facts.user_text = "change the t-shirt to blue, size L"
    assert pack.arrange("modify_pending_order_items", args, facts)["new_item_ids"] == ["t_blue_l"]
    assert pack.undecided("return_delivered_order_items", {"item_ids": ["t_held"]}, facts) is None  # no variant to pick
    assert pack.texts.question("new_item_choose", options="blue / M, blue / L") == \
        "Which one would you like instead: blue / M, blue / L?"


def test_an_item_still_open_after_it_was_asked_is_left_off_a_card_that_has_a_decided_one():
    from pipelines.domains import load_domain

    pack = load_domain("support")
    facts = _two_item_facts("exchange the t-shirt for a blue one and the mechanical keyboard but clicky, backlight "
                            "none")
    args = {"order_id": "#W1", "item_ids": ["held"], "new_item_ids": ["clicky_none_full"], "payment_method_id": "p"}
    out = pack.arrange("exchange_delivered_order_items", args, facts)
    assert out["item_ids"] == ["held", "t_held"]
    assert pack.undecided("exchange_delivered_order_items", out, facts)[0] == "new_item_choose"  # the t-shirt
    facts.user_texts.append(facts.user_text)
    facts.user_text = "just do it"  # the answer decides nothing
    out = pack.arrange("exchange_delivered_order_items", args, facts)
    assert out["item_ids"] == ["held"] and out["new_item_ids"] == ["clicky_none_full"]
    assert pack.undecided("exchange_delivered_order_items", out, facts) is None


def test_a_named_item_whose_change_is_not_described_is_asked_about_by_name_once():
    from pipelines.domains import load_domain

    pack = load_domain("support")
    facts = _two_item_facts("exchange the t-shirt and the mechanical keyboard; the keyboard clicky, backlight none")
    args = {"order_id": "#W1", "item_ids": ["held"], "new_item_ids": ["clicky_none_full"], "payment_method_id": "p"}
    out = pack.arrange("exchange_delivered_order_items", args, facts)
    assert out["item_ids"] == ["held"]  # the t-shirt's change is not described: not on the card
    assert pack.undecided("exchange_delivered_order_items", out, facts) == ("new_item_for", ["T-Shirt"])
    assert pack.texts.question("new_item_for", options="T-Shirt") == "Which option of the T-Shirt would you like instead?"
    assert pack.undecided("exchange_delivered_order_items", out, facts) is None


def test_a_question_about_a_product_of_the_store_is_answered_with_its_count_once_the_user_is_verified():
    h = TandemHarness()
    shirt = next(p for p in h.world.products.values() if p.name == "T-Shirt")
    available = sum(1 for v in shirt.variants.values() if v.available)
    n = len(h.sink.events)
    r = h.turn("Which t-shirt choices do you sell at the moment?", orch=[w1("product", "info", "Let me check.")])
    assert [p["tools"] for p in _events(h, n, "tandem.phi")] == [[]] and h.meta["path"] == "clarify"
    assert "email address" in r.reply  # the policy verifies first
    n = len(h.sink.events)
    r = h.turn("My email is alex.rivera@example.com", orch=[w1("product", "info", "Let me check.")],
               gen=["Would you like to hear about any of them?"])
    reads = [(p["tools"], p.get("then")) for p in _events(h, n, "tandem.phi")]
    assert reads == [(["find_user_id_by_email", "list_all_product_types"], None),
                     (["get_product_details"], "respond")]  # the question asked before the check
    assert _events(h, n, "tandem.phi")[-1]["calls"] == [{"tool": "get_product_details",
                                                          "args": {"product_id": shirt.product_id}}]
    assert h.meta["path"] == "answer"
    assert f"T-Shirt: {available} of its {len(shirt.variants)} options are available right now." in r.reply
    # asked again: the catalogue is known, the product is read again for this turn's answer (and once)
    m = len(h.sink.events)
    r = h.turn("And how many t-shirt options again?", orch=[w1("product", "info", "Let me check.")],
               gen=["Would you like to hear about any of them?"])
    assert [p["tools"] for p in _events(h, m, "tandem.phi")] == [["get_product_details"]]
    assert f"T-Shirt: {available} of its" in r.reply


def test_a_product_the_store_does_not_have_reads_nothing_more():
    h = TandemHarness()
    h.turn("Hi, my email is alex.rivera@example.com", orch=[w1("greeting", "hello", "Let me find your account.")])
    n = len(h.sink.events)
    h.turn("Do you sell surfboards?", orch=[w1("product", "info", "Let me check."), j(decision="respond")])
    assert [p["tools"] for p in _events(h, n, "tandem.phi")] == [["list_all_product_types"]]


BOTTLES = {
    "b500": {"options": {"capacity": "500ml", "material": "glass", "color": "blue"}, "available": True, "price": 20.0},
    "b750": {"options": {"capacity": "750ml", "material": "glass", "color": "blue"}, "available": True, "price": 24.0},
    "b1l": {"options": {"capacity": "1L", "material": "glass", "color": "blue"}, "available": True, "price": 30.0},
    "b1000_steel": {"options": {"capacity": "1000ml", "material": "steel", "color": "blue"}, "available": True,
                    "price": 18.0},
    "b250": {"options": {"capacity": "250ml", "material": "glass", "color": "blue"}, "available": True, "price": 15.0},
    "b2l_gone": {"options": {"capacity": "2 liters", "material": "glass", "color": "blue"}, "available": False,
                 "price": 40.0},
}


def test_option_values_are_ranked_on_their_scale_with_units_folded():
    from pipelines.domains.support.candidates import option_rank

    assert option_rank("1.5 liters") == (-1, 1500.0) and option_rank("1L") == (-1, 1000.0)
    assert option_rank("1TB SSD") == (-1, 1024.0) and option_rank("256GB") == (-1, 256.0)
    assert option_rank("17-inch") == (-1, 17.0) and option_rank("60W equivalent") == (-1, 60.0)
    assert option_rank("XL")[1] > option_rank("L")[1] and option_rank("S")[0] == option_rank("XXL")[0]
    assert option_rank("high") == (2, 2.0) and option_rank("low") == (2, 0.0)
    assert option_rank("blue") is None and option_rank("") is None


def test_two_values_are_compared_on_the_scale_they_share():
    from pipelines.domains.support.candidates import rank_step

    assert rank_step("medium", "high") == 1.0 and rank_step("medium", "large") == 1.0  # levels; sizes
    assert rank_step("M", "S") == -1.0 and rank_step("500ml", "1.5 liters") == 1000.0
    assert rank_step("medium", "XL") is None and rank_step("blue", "red") is None
    assert rank_step("high", "60W equivalent") is None  # a level and a number: no order between them


def test_a_bigger_one_is_every_larger_capacity_kept_alike_and_never_a_smaller_one():
    # 750ml, 1L and 1000ml steel are larger than 500ml; the glass ones keep two options, steel one: ask which
    assert described_variants(BOTTLES, ["b500"], ["I want a bigger water bottle"]) == ["b750", "b1l"]
    assert described_variants(BOTTLES, ["b500"], ["a smaller one please"]) == ["b250"]
    assert described_variants(BOTTLES, ["b1l"], ["bigger"]) == []  # 2 liters is not available
    assert described_variants(BOTTLES, ["b500"], ["a bigger one in steel"]) == ["b1000_steel"]
    assert described_variants(BOTTLES, ["b500"], ["the 250ml one but bigger"]) == ["b750", "b1l"]  # never smaller
    assert described_variants(BOTTLES, ["b500"], ["one size bigger please"]) == ["b750"]  # one step: the next one
    assert described_variants(BOTTLES, ["b250"], ["slightly bigger"]) == ["b500"]


def test_the_cheapest_one_is_the_lowest_price_and_cheaper_is_any_lower():
    assert described_variants(BOTTLES, ["b750"], ["the cheapest version"]) == ["b250"]
    assert described_variants(BOTTLES, ["b750"], ["something cheaper, same material"]) == ["b500", "b250"]
    assert described_variants(BOTTLES, ["b250"], ["the cheapest one"]) == []  # it is the cheapest already
    no_price = {k: {kk: vv for kk, vv in v.items() if kk != "price"} for k, v in BOTTLES.items()}
    assert described_variants(no_price, ["b750"], ["the cheapest version"]) == []  # no price known: nothing said


#: Mugs: the held large white one and its siblings, each at its own price.
MUGS = {
    "big_white": {"options": {"size": "large", "color": "white"}, "available": True, "price": 12.0},
    "small_white": {"options": {"size": "small", "color": "white"}, "available": True, "price": 10.0},
    "small_black": {"options": {"size": "small", "color": "black"}, "available": True, "price": 8.0},
    "big_black": {"options": {"size": "large", "color": "black"}, "available": True, "price": 11.0},
}


def test_the_cheapest_is_the_lowest_price_whatever_it_keeps_unless_told_what_to_keep():
    # the price decides, not how many options a variant keeps (two siblings keep one option each, at 10 and 11)
    assert described_variants(MUGS, ["big_white"], ["just give me the cheapest one"]) == ["small_black"]
    assert described_variants(MUGS, ["small_black"], ["I will take the priciest mug"]) == ["big_white"]
    # the options said to keep rank first, then the price among them
    assert described_variants(MUGS, ["big_white"], ["the cheapest one in the same size"]) == ["big_black"]
    assert described_variants(MUGS, ["big_white"], ["cheapest, but keep the color the same"]) == ["small_white"]
    assert described_variants(MUGS, ["big_white"], ["the cheapest black one"]) == ["small_black"]
    # no superlative: the variants keeping most of the held one lead, as for any change ("cheaper": any lower)
    assert described_variants(MUGS, ["big_white"], ["something cheaper"]) == ["small_white", "big_black"]
    assert described_variants(MUGS, ["big_white"], ["something cheaper in the same size"]) == [
        "small_white", "big_black"]


def test_the_options_to_keep_are_named_after_same_or_before_the_same():
    from pipelines.domains.support.candidates import kept_options

    opts = ["size", "color", "material", "screen size"]
    assert kept_options(opts, ["keep to exactly the same size and material"]) == {"size", "material"}
    assert kept_options(opts, ["same colors, same screen size"]) == {"color", "screen size"}  # not "size"
    assert kept_options(opts, ["the same size, but a different color"]) == {"size"}  # the list ends at "but"
    assert kept_options(opts, ["same color, size or material"]) == {"color", "size", "material"}
    assert kept_options(opts, ["keep the color the same"]) == {"color"}
    assert kept_options(opts, ["the material to stay the same"]) == {"material"}  # two words between
    assert kept_options(opts, ["the material should stay exactly the same"]) == set()  # three: not read
    assert kept_options(opts, ["with the size unchanged"]) == {"size"}
    assert kept_options(opts, ["to the same address as my order"]) == set()  # no option named
    assert kept_options(opts, ["a different size"]) == set()


def test_a_comparative_about_an_option_the_product_lacks_changes_nothing():
    lamps = {"l_med": {"options": {"brightness": "medium", "color": "white"}, "available": True},
             "l_high": {"options": {"brightness": "high", "color": "white"}, "available": True},
             "l_low": {"options": {"brightness": "low", "color": "white"}, "available": True},
             "l_low_black": {"options": {"brightness": "low", "color": "black"}, "available": True}}
    assert described_variants(lamps, ["l_med"], ["a brighter lamp"]) == ["l_high"]
    assert described_variants(lamps, ["l_med"], ["I would like it less bright"]) == ["l_low"]
    assert described_variants(lamps, ["l_med"], ["a bigger lamp"]) == []  # no size-like option: nothing described
    assert described_variants(lamps, ["l_med"], ["something not as bright, in black"]) == ["l_low_black"]
    assert described_variants(lamps, ["l_med"], ["a more colorful lamp"]) == []  # no option named so: nothing


CAMERAS = {"c24": {"options": {"resolution": "24MP", "zoom": "3x"}, "available": True},
           "c20": {"options": {"resolution": "20MP", "zoom": "3x"}, "available": True},
           "c30": {"options": {"resolution": "30MP", "zoom": "3x"}, "available": True},
           "c18": {"options": {"resolution": "18MP", "zoom": "3x"}, "available": True}}


@pytest.mark.parametrize(("text", "expected"), [
    ("one step down in resolution: a lower resolution, zoom as it is", ["c20"]),  # one step: the nearest below
    ("any lower resolution", ["c20", "c18"]),  # any below: both, asked
    ("a higher resolution", ["c30"]),
    ("greater resolution", ["c30"]),
    ("a lower zoomed-in shot", []),  # "lower" about no option of theirs ("zoomed" is not an option name)
])
def test_higher_and_lower_are_comparatives_of_the_option_they_name(text, expected):
    assert described_variants(CAMERAS, ["c24"], [text]) == expected


PUZZLES = {"p500": {"options": {"pieces": "500", "theme": "art"}, "available": True},
           "p1000": {"options": {"pieces": "1000", "theme": "art"}, "available": True},
           "p1500": {"options": {"pieces": "1500", "theme": "art"}, "available": True},
           "p1500a": {"options": {"pieces": "1500", "theme": "animals"}, "available": True},
           "p2000": {"options": {"pieces": "2000", "theme": "animals"}, "available": True}}


def test_an_amount_more_names_the_value_that_far_from_the_held_one():
    from pipelines.domains.support.candidates import by_amount

    held, wanted = PUZZLES["p500"], PUZZLES["p1500"]
    assert by_amount(held, wanted, ["1000 more pieces please"]) == ["1500"]
    assert by_amount(held, PUZZLES["p1000"], ["1000 more pieces please"]) == []  # 500 more, not 1000
    assert by_amount(PUZZLES["p1500"], PUZZLES["p1000"], ["500 fewer pieces"]) == ["1000"]
    assert by_amount(held, wanted, ["1000 more reviews"]) == []  # no option named so
    assert described_variants(PUZZLES, ["p500"], ["give me 1000 more pieces"]) == ["p1500"]
    assert described_variants(PUZZLES, ["p500"], ["1000 more pieces, with an animal theme"]) == ["p1500a"]


@pytest.mark.parametrize(("value", "text", "expected"), [
    ("animals", "an animal theme", True),
    ("animal", "something with animals", True),
    ("glasses", "the glass one", True),
    ("sneakers", "a sneaker", True),
    ("animals", "animation", False),  # another word
    ("art", "arts", False),  # three letters: too short to tell
    ("20MP", "20MPs", False),  # not a word
])
def test_a_one_word_value_is_said_in_either_number(value, text, expected):
    from pipelines.domains.support.candidates import said_in_number

    assert said_in_number(value, [text]) is expected


def test_restating_the_held_item_names_no_wish():
    shirts = {
        "held": {"options": {"color": "black", "size": "XXL", "material": "cotton", "style": "crew neck"},
                 "available": True},
        "black_xxl_poly_v": {"options": {"color": "black", "size": "XXL", "material": "polyester", "style": "v-neck"},
                             "available": True},
        "black_s_poly_crew": {"options": {"color": "black", "size": "S", "material": "polyester",
                                          "style": "crew neck"}, "available": True},
        "purple_s_poly_v": {"options": {"color": "purple", "size": "S", "material": "polyester", "style": "v-neck"},
                            "available": True},
    }
    text = ("I'd like to change the T-Shirt (color black, size XXL, material cotton, style crew neck) to color "
            "purple, size S, material polyester, style v-neck.")
    assert described_variants(shirts, ["held"], [text]) == ["purple_s_poly_v"]


def test_the_order_the_user_named_is_the_only_order_a_card_may_carry():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    records.add_all({"order_id": ["#W1000001", "#W1000002", "#W1000003"]}, "record")
    state = {"authenticated_user_id": "u", "records": records.model_dump()}
    facts = TurnFacts(session_id="s", user_text="the keyboard please", state=state,
                      user_texts=["I want to exchange an item of order #W1000002"])
    pack.restore(facts)
    assert facts.candidates.of("order_id") == ["#W1000002"]
    facts = TurnFacts(session_id="s", user_text="exchange my keyboard", state=state)
    pack.restore(facts)
    assert facts.candidates.of("order_id") == ["#W1000001", "#W1000002", "#W1000003"]  # none named: all theirs
    facts = TurnFacts(session_id="s", user_text="order #W9999999 please", state=state)
    pack.restore(facts)  # not one of theirs: nothing narrowed here (ownership refuses it elsewhere)
    assert facts.candidates.of("order_id")[:3] == ["#W1000001", "#W1000002", "#W1000003"]


@pytest.mark.parametrize(("texts", "expected"), [
    (["return all the items of order #W1000001"], True),
    (["I want to return everything"], True),
    (["everything, please"], True),
    (["send back everything unrelated to my old hobby"], False),
    (["everything connected to the printer"], False),
    (["all the things except the lamp"], False),
    (["everything that is not broken"], False),
    (["everything related to my old hobby"], False),
    (["everything but the kettle"], False),
    (["everything other than the shoes"], False),
    (["all the things except the lamp", "actually, all the items"], True),  # one unnarrowed ask
    (["return the lamp"], False),
    (["return every item of order #W1000001"], True),
    (["each item, please"], True),
    (["every single item in my order"], True),
    (["every item I like"], False),
])
def test_all_the_items_is_every_item_only_when_nothing_narrows_it(texts, expected):
    from pipelines.domains.support.pack import says_all_items

    assert says_all_items(texts) is expected


ORDER3 = {"l": {"name": "Desk Lamp", "product_id": "pl"}, "k": {"name": "Electric Kettle", "product_id": "pk"},
          "b": {"name": "Water Bottle", "product_id": "pb"}}


@pytest.mark.parametrize(("texts", "expected"), [
    (["return everything except the kettle"], (0, ["l", "b"])),
    (["all the items in the order but the kettle and the water bottle"], (0, ["l"])),
    (["all but the lamp"], (0, ["k", "b"])),
    (["every item apart from the desk lamp, please"], (0, ["k", "b"])),
    (["all of them other than the bottle"], (0, ["l", "k"])),
    (["everything, except for the kettle"], (0, ["l", "b"])),
    (["hello", "everything aside from the lamp"], (1, ["k", "b"])),  # the newest text that says it
    (["everything but the lamp", "everything except the kettle"], (1, ["l", "b"])),
    (["everything, but only if it is refunded to my card"], None),  # the exception names nothing of theirs
    (["everything except the lamp, the kettle and the bottle"], None),  # nothing left: no such request
    (["return the kettle, not the lamp"], None),  # no "all"
    (["Everything is broken. But the kettle is fine."], None),  # another sentence
    (["everything unrelated to my old hobby"], None),
    # "the rest": every item but those the words before it speak of, in its text, else in the texts before it
    (["keep the lamp and send back the rest"], (0, ["k", "b"])),
    (["the kettle stays; the other items go back"], (0, ["l", "b"])),
    (["swap the kettle and the lamp", "and return all the remaining things"], (1, ["b"])),
    (["not the bottle", "everything else can go"], (1, ["l", "k"])),
    (["return everything else"], None),  # nothing named before it
    (["the lamp, the kettle and the bottle, the rest is fine"], None),  # nothing left
    (["I will use the lamp for the rest of the week"], None),  # a rest of time
])
def test_every_item_but_an_exception_keeps_all_the_others(texts, expected):
    from pipelines.domains.support.pack import all_but

    assert all_but(ORDER3, texts) == expected


def test_every_item_but_one_is_the_card_s_items_until_a_later_text_names_some():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    records.add_all({"order_id": ["#W1000001"], "item_id": ["l", "k", "b"]}, "record")
    items = {i: {**info, "order_id": "#W1000001"} for i, info in ORDER3.items()}
    state = {"authenticated_user_id": "u", "records": records.model_dump(), "items": items,
             "orders": {"#W1000001": {"status": "delivered", "items": ["Desk Lamp", "Electric Kettle", "Water Bottle"],
                                      "paid_with": "p"}}}
    for texts, expected in ((["Return everything in order #W1000001 except the kettle."], ["l", "b"]),
                            (["Return everything in order #W1000001 but the kettle."], ["l", "b"]),  # not the kettle
                            (["Return everything in order #W1000001 except the kettle.", "Only the lamp."], ["l"]),
                            (["Return everything except the kettle."], [])):  # no order in question yet: found first
        facts = TurnFacts(session_id="s", user_text=texts[-1], user_texts=texts, state=state)
        pack.restore(facts)
        pack.snapshot_values(facts)
        assert facts.candidates.of("item_id") == expected, texts


SHIRTS = {
    "a": {"options": {"color": "black", "size": "XXL", "material": "cotton", "style": "crew neck"}, "available": True},
    "b": {"options": {"color": "blue", "size": "S", "material": "cotton", "style": "v-neck"}, "available": True},
    "c": {"options": {"color": "purple", "size": "S", "material": "polyester", "style": "v-neck"}, "available": True},
    "d": {"options": {"color": "black", "size": "XXL", "material": "polyester", "style": "v-neck"}, "available": True},
    "e": {"options": {"color": "purple", "size": "XXL", "material": "polyester", "style": "v-neck"},
          "available": True},
}
FIRST_CHANGE = ("I'd like to change the T-Shirt (color black, size XXL, material cotton, style crew neck) to color "
                "purple, size S, material polyester, style v-neck.")


def test_the_description_that_ends_first_in_a_change_is_what_the_user_had():
    from pipelines.domains.support.candidates import described_as_had

    assert described_as_had(SHIRTS, "a", [FIRST_CHANGE]) is True  # "(black, XXL, cotton, crew neck) to ..."
    assert described_as_had(SHIRTS, "c", [FIRST_CHANGE]) is False  # the wish: described after it
    assert described_as_had(SHIRTS, "a", ["my black XXL cotton crew neck one"]) is False  # alone: neither
    assert described_as_had(SHIRTS, "a", ["black, XXL, cotton", "to purple, S, polyester, v-neck"]) is False
    assert described_as_had(SHIRTS, "a", ["black XXL cotton to purple S polyester v-neck"]) is False  # not whole
    assert described_as_had({"a": {"options": {"color": "black"}}, "b": {"options": {"color": "blue"}}}, "a",
                            ["black to blue"]) is False  # one value is no description
    assert described_as_had(SHIRTS, "zz", [FIRST_CHANGE]) is False


def test_what_the_user_has_in_another_order_names_no_wish_for_this_item():
    # "b" is held in the second order; the text described "a" (held in the first order) and the wish "c"
    # without it, black, XXL and crew neck read as wishes: a three-way tie, none of them the wish
    assert described_variants(SHIRTS, ["b"], [FIRST_CHANGE]) == ["a", "d", "e"]
    assert described_variants(SHIRTS, ["b"], [FIRST_CHANGE], described=["a"]) == ["c"]
    # described values are no wish but never kept ones: "e" (XXL of "a") keeps less of "b" than "c" does
    assert described_variants(SHIRTS, ["b"], ["purple, polyester please"], described=["a"]) == ["c"]
    assert described_variants(SHIRTS, ["b"], ["black and XXL please"], described=["a"]) == []  # only theirs: none


def test_a_second_orders_change_reads_past_the_first_orders_description():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    # the first order read again after its change: it holds "c" now, beside "a" as first read
    state = {"authenticated_user_id": "u",
             "items": {"a": {"name": "T-Shirt", "product_id": "pt", "order_id": "#W1000001"},
                       "c": {"name": "T-Shirt", "product_id": "pt", "order_id": "#W1000001"},
                       "b": {"name": "T-Shirt", "product_id": "pt", "order_id": "#W1000002"}},
             "variants": {"pt": SHIRTS}}
    args = {"order_id": "#W1000002", "item_ids": ["b"], "new_item_ids": ["d"], "payment_method_id": "p"}
    second = "I'd like to change items in order #W1000002."
    restated = ("I'd like to change the T-Shirt (color blue, size S, material cotton, style v-neck) to color purple, "
                "size S, material polyester, style v-neck.")
    for text, before in ((second, [FIRST_CHANGE, "yes"]), (restated, [FIRST_CHANGE, "yes", second])):
        facts = TurnFacts(session_id="s", user_text=text, user_texts=before, state=state)
        assert pack.arrange("modify_pending_order_items", args, facts)["new_item_ids"] == ["c"], text
        assert pack.undecided("modify_pending_order_items", {**args, "new_item_ids": ["c"]}, facts) is None
        records = CandidateSet()
        records.add_all({"item_id": ["a", "b", "c"], "new_item_id": list(SHIRTS)}, "record")
        facts = TurnFacts(session_id="s", user_text=text, user_texts=before,
                          state={**state, "records": records.model_dump()})
        pack.restore(facts)  # the card's candidates say the same: the wish alone, for the second order's item
        assert facts.candidates.of("item_id") == ["b"] and facts.candidates.of("new_item_id") == ["c"], text


def test_the_newest_text_that_names_a_payment_method_decides():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    records.add_all({"payment_method_id": list(METHODS)}, "record")  # the user's methods, as read
    state = {"authenticated_user_id": "u", "payment_methods": METHODS, "records": records.model_dump()}

    def named(text: str, before: list[str]) -> list[str]:
        facts = TurnFacts(session_id="s", user_text=text, user_texts=before, state=state)
        pack.restore(facts)
        return facts.candidates.of("payment_method_id")

    assert named("Please use my PayPal account.", ["use my credit card ending in 9922"]) == ["paypal_4"]
    assert named("yes", ["use my credit card ending in 9922"]) == ["credit_card_2"]  # nothing newer names one
    assert named("refund it to my gift card or PayPal", []) == ["gift_card_3", "paypal_4"]  # one text, both
    assert named("hello", []) == []


def test_a_refusal_the_user_can_mend_by_another_payment_method_asks_for_it():
    from pipelines.domain import ForwardContract
    from pipelines.domains import load_domain

    pack = load_domain("support")
    contract = ForwardContract.model_construct(user_state={"order.#W1.status": "delivered"})
    line = pack.refusal_line({"entity": "#W1", "reason": "refund_method_not_allowed"}, "Return items", contract)
    assert line == ("I can't return items for order #W1: the refund can only go to the original payment method "
                    "or a gift card: which should it go to?")
    for reason in ("same_payment_method", "payment_method_not_found", "insufficient_gift_card_balance"):
        assert pack.refusal_line({"entity": "#W1", "reason": reason}, "Change payment", contract).endswith("?")
    line = pack.refusal_line({"entity": "#W1", "reason": "order_not_pending"}, "Cancel order", contract)
    assert line == ("I can't cancel order #W1: only a pending order can be changed or cancelled, and "
                    "this one is delivered.")
    contract = ForwardContract.model_construct(user_state={"order.#W1.status": "pending (item modified)"})
    line = pack.refusal_line({"entity": "#W1", "reason": "order_not_pending"}, "Change shipping address", contract)
    assert line == ("I can't change shipping address for order #W1: only a pending order can be changed or "
                    "cancelled, and this one is no longer open to changes: its items were already changed once.")


def test_a_stated_order_of_preference_breaks_a_tie():
    from pipelines.domains.support.candidates import preferred

    lamps = {"v_ac": {"options": {"power": "AC adapter", "brightness": "low"}, "available": True},
             "v_bat": {"options": {"power": "battery", "brightness": "low"}, "available": True},
             "v_usb": {"options": {"power": "USB", "brightness": "low"}, "available": True}}
    assert preferred(lamps, ["v_ac", "v_bat"], ["something dim; ideally battery, otherwise AC adapter"]) == ["v_bat"]
    assert preferred(lamps, ["v_ac", "v_usb"], ["I prefer USB over AC adapter"]) == ["v_usb"]
    assert preferred(lamps, ["v_ac", "v_bat"], ["I prefer something cheap"]) == []  # names neither: no order
    assert preferred(lamps, ["v_ac", "v_bat"], ["battery or AC adapter, whichever"]) == []  # no preference stated
    held = {**lamps, "held": {"options": {"power": "USB", "brightness": "high"}, "available": True}}
    # battery and AC adapter are both named beside "low" (the USB one keeps the held power): the order decides
    assert described_variants(held, ["held"], ["a dimmer lamp, low brightness; ideally battery over AC adapter"]) \
        == ["v_bat"]


def _refund_facts(named: list[str]):
    from pipelines.domain import TurnFacts

    c = CandidateSet()
    c.add_all({"payment_method_id": named}, "user")
    state = {"authenticated_user_id": "u", "payment_methods": METHODS,
             "orders": {"#W1": {"status": "delivered", "paid_with": "paypal_4"}}}
    return TurnFacts(session_id="s", user_text="x", state=state, candidates=c)


@pytest.mark.parametrize("named, proposed, expected", [
    # the policy: a refund goes to the original method (paypal_4) or a gift card
    (["credit_card_1", "gift_card_3"], "credit_card_1", "gift_card_3"),  # the one named that may take it
    (["credit_card_1", "paypal_4"], "credit_card_1", "paypal_4"),  # the original, named
    (["credit_card_1", "gift_card_3"], "gift_card_3", "gift_card_3"),  # allowed as proposed: kept
    (["credit_card_1"], "credit_card_1", "credit_card_1"),  # one named: the precheck refuses it, not this
    (["credit_card_1", "credit_card_2"], "credit_card_1", "credit_card_1"),  # none may: left to the precheck
    (["gift_card_3", "paypal_4", "credit_card_1"], "credit_card_1", "credit_card_1"),  # two may: not ours to pick
    (["credit_card_1", "gift_card_3"], "credit_card_9", "credit_card_9"),  # not one the user named: left as is
])
def test_a_refund_goes_to_the_one_named_method_the_policy_allows(named, proposed, expected):
    from pipelines.domains import load_domain

    pack = load_domain("support")
    args = {"order_id": "#W1", "item_ids": ["i1"], "payment_method_id": proposed}
    assert pack.arrange("return_delivered_order_items", args, _refund_facts(named))["payment_method_id"] == expected
    # only a return's refund: an exchange's price difference may be paid with any method
    exchange = {**args, "new_item_ids": ["i2"]}
    assert pack.arrange("exchange_delivered_order_items", exchange, _refund_facts(named)) == exchange


def _after_a_write(queue: list[str]):
    """A session whose first request (the tea kettle of #W1, found by what it holds) a confirmed write has
    just done; ``queue``: orders of the same request still to do."""
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    records.add_all({"item_id": ["k1"], "order_id": ["#W1", "#W2"]}, "record")
    state = {"authenticated_user_id": "u", "records": records.model_dump(),
             "items": {"k1": {"name": "Tea Kettle", "product_id": "ps", "order_id": "#W1"}},
             "orders": {"#W1": {"status": "delivered", "items": ["Tea Kettle"], "paid_with": "p"}},
             "variants": {"ps": {"k1": {"options": {"capacity": "1.5 L"}, "available": True},
                                 "k2": {"options": {"capacity": "1 L"}, "available": True}}},
             "selected": {"id": "#W1", "at": 0, "queue": queue}}
    said = ["Can I swap my tea kettle? A smaller one would suit me.", "yes"]
    facts = TurnFacts(session_id="s", user_text=said[-1], user_texts=said, state=state)
    pack.restore(facts)
    pack.observe("exchange_delivered_order_items", {"order_id": "#W1", "status": "exchange requested"}, True, facts)
    return pack, said, facts.state


def test_a_request_done_by_a_write_lends_nothing_to_the_next_one():
    from pipelines.domain import TurnFacts

    pack, said, state = _after_a_write([])
    assert state["request_from"] == 2 and state["selected"] is None  # the next text starts the next request
    text = "Also, the patio umbrella that came last week needs swapping."
    facts = TurnFacts(session_id="s", user_text=text, user_texts=[*said, text], state=state)
    pack.restore(facts)
    values = pack.snapshot_values(facts)
    # the kettle, its order and its smaller variant were the done request's: none is the umbrella's
    assert "product_id" not in values and "order_id" not in values
    assert facts.candidates.of("item_id") == [] and facts.candidates.of("new_item_id") == []
    again = "The tea kettle again: the 1.5 L one, please."  # named anew, it is this request's
    facts = TurnFacts(session_id="s", user_text=again, user_texts=[*said, again], state=state)
    pack.restore(facts)
    assert pack.snapshot_values(facts)["product_id"] == "ps" and facts.candidates.of("item_id") == ["k1"]


def test_a_write_with_orders_of_its_request_still_queued_keeps_the_request_open():
    from pipelines.domain import TurnFacts

    pack, said, state = _after_a_write(["#W2"])
    assert state["request_from"] == 0 and state["selected"]["id"] == "#W2"  # the same request, its next order
    facts = TurnFacts(session_id="s", user_text="ok", user_texts=[*said, "ok"], state=state)
    pack.restore(facts)
    assert pack.snapshot_values(facts)["order_id"] == "#W2"


@pytest.mark.parametrize(("text", "expected"), [
    ("Ship #W2000002 to the same address as order #W1000001, please.", ["#W1000001"]),
    ("For #W2000002, use the address of my order #W1000001.", ["#W1000001"]),
    ("Change the address of #W2000002 to the shipping address of order #W1000001.", ["#W1000001"]),
    ("Send #W2000002 to the same place as #W1000001.", ["#W1000001"]),
    ("Ship it like the one for order #W1000001.", ["#W1000001"]),
    ("I'd like to change the shipping address of order #W2000002.", []),  # the address to change
    ("I would like order #W2000002 sent elsewhere.", []),
    ("Cancel #W2000002 and #W1000001.", []),  # two orders to change: neither is where an address comes from
    ("The same as before, please.", []),
])
def test_an_order_named_as_where_an_address_comes_from_is_a_reference(text, expected):
    from pipelines.domains.support.pack import referenced_orders

    assert referenced_orders(text) == expected


def test_an_address_given_as_another_orders_is_that_orders_whole_address_on_the_order_in_question():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    home = {"address1": "4 Elm Row", "address2": "Apt 2", "city": "Reno", "state": "NV", "country": "USA",
            "zip": "89501"}
    there = {"address1": "9 Pine Court", "address2": "", "city": "Salem", "state": "OR", "country": "USA",
             "zip": "97301"}
    records.add_all({"order_id": ["#W1000001", "#W2000002"], "address1": ["4 Elm Row", "9 Pine Court"],
                     "address2": ["Apt 2"], "city": ["Reno", "Salem"], "state": ["NV", "OR"], "country": ["USA"],
                     "address_zip": ["89501", "97301"]}, "record")
    state = {"authenticated_user_id": "u", "records": records.model_dump(), "addresses": [home, there],
             "orders": {"#W1000001": {"status": "pending", "items": [], "paid_with": "p", "address": there},
                        "#W2000002": {"status": "pending", "items": [], "paid_with": "p", "address": home}}}
    text = "For order #W2000002, change the address to be the same as order #W1000001."
    facts = TurnFacts(session_id="s", user_text=text, user_texts=[text], state=state)
    pack.restore(facts)
    pack.snapshot_values(facts)
    c = facts.candidates
    assert c.of("order_id") == ["#W2000002"]  # the order to change, not the one the address comes from
    assert (c.of("address1"), c.of("address2"), c.of("city"), c.of("address_zip")) == (
        ["9 Pine Court"], [], ["Salem"], ["97301"])  # #W1000001's address as a whole, its empty line empty
    unread = "For order #W2000002, change the address to be the same as order #W3000003."  # not read: no address yet
    facts = TurnFacts(session_id="s", user_text=unread, user_texts=[unread], state=state)
    pack.restore(facts)
    pack.snapshot_values(facts)
    assert facts.candidates.of("address1") == [] and facts.candidates.of("order_id") == ["#W2000002"]


def test_a_one_word_compound_is_named_by_its_head_when_no_other_item_ends_in_it():
    items = {"1": {"name": "Wristwatch", "product_id": "w"}, "2": {"name": "Bookshelf", "product_id": "b"},
             "3": {"name": "Backpack", "product_id": "p"}}
    assert described_items(items, ["change my watch for a black dial"]) == ["1"]  # wrist-watch: a watch
    assert described_items(items, ["the shelf, 4 foot"]) == ["2"]
    assert described_items(items, ["my pack"]) == []  # a head under five letters names nothing
    assert described_items(items, ["the twatch"]) == ["1"]  # any tail of five letters or more after three
    assert described_items(items, ["the wrist"]) == []  # the first part is no head
    both = {**items, "4": {"name": "Smart Watch", "product_id": "s"}}
    assert described_items(both, ["my watch"]) == []  # two products end in "watch": neither is named by it
    assert described_items(both, ["my smart watch"]) == ["4"]


def test_a_city_is_also_said_by_its_common_short_name():
    from pipelines.domains.support.candidates import said_as

    assert said_as("city", "New York") == ["NYC", "N.Y.C.", "New York City"]
    assert said_as("city", "Reno") == [] and said_as("state", "NY") == ["new york"]


def test_an_address_named_by_the_citys_short_name_is_that_whole_address():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    ny = {"address1": "7 Birch Lane", "address2": "Floor 3", "city": "New York", "state": "NY", "country": "USA",
          "zip": "10002"}
    home = {"address1": "4 Elm Row", "address2": "", "city": "Reno", "state": "NV", "country": "USA", "zip": "89501"}
    records = CandidateSet()
    records.add_all({"order_id": ["#W1000001"], "address1": ["7 Birch Lane", "4 Elm Row"], "address2": ["Floor 3"],
                     "city": ["New York", "Reno"], "state": ["NY", "NV"], "country": ["USA"],
                     "address_zip": ["10002", "89501"]}, "record")
    state = {"authenticated_user_id": "u", "records": records.model_dump(), "addresses": [home, ny],
             "orders": {"#W1000001": {"status": "pending", "items": [], "paid_with": "p", "address": home}}}
    for text, expected in (("Ship order #W1000001 to the flat in NYC.", ["7 Birch Lane"]),
                           ("Ship order #W1000001 to the flat in NC.", [])):  # no city of theirs: none
        facts = TurnFacts(session_id="s", user_text=text, user_texts=[text], state=state)
        pack.restore(facts)
        pack.snapshot_values(facts)
        assert facts.candidates.of("address1") == expected, text
    said = ["I moved back to Reno for a while.", "Not there after all: ship order #W1000001 to the flat in NYC."]
    facts = TurnFacts(session_id="s", user_text=said[-1], user_texts=said, state=state)
    pack.restore(facts)
    pack.snapshot_values(facts)
    assert facts.candidates.of("address1") == ["7 Birch Lane"]  # the newest text that names a city decides
    both = "Ship order #W1000001 to NYC or Reno, whichever."
    facts = TurnFacts(session_id="s", user_text=both, user_texts=[both], state=state)
    pack.restore(facts)
    pack.snapshot_values(facts)
    assert facts.candidates.of("address1") == ["7 Birch Lane"]  # it ships to Reno now: NYC is the one change
    boston = {"address1": "2 Oak Way", "address2": "", "city": "Boston", "state": "MA", "country": "USA",
              "zip": "02108"}
    records.add_all({"address1": ["2 Oak Way"], "city": ["Boston"], "state": ["MA"], "address_zip": ["02108"]},
                    "record")
    state = {**state, "records": records.model_dump(), "addresses": [home, ny, boston]}
    both = "Ship order #W1000001 to NYC or Boston, whichever."
    facts = TurnFacts(session_id="s", user_text=both, user_texts=[both], state=state)
    pack.restore(facts)
    pack.snapshot_values(facts)
    assert facts.candidates.of("address1") == []  # two new cities of theirs in one text: neither


def _daughter_state(pending: dict | None = None) -> dict:
    """A profile in Denver, an order (#W1000001, a tablet) shipped to the daughter in Chicago, one order unread."""
    home = {"address1": "5 Lake Drive", "address2": "Suite 2", "city": "Denver", "state": "CO", "country": "USA",
            "zip": "80239"}
    hers = {"address1": "8 Maple Road", "address2": "", "city": "Chicago", "state": "IL", "country": "USA",
            "zip": "60621"}
    records = CandidateSet()
    records.add_all({"order_id": ["#W1000001", "#W2000002"], "address1": ["5 Lake Drive", "8 Maple Road"],
                     "address2": ["Suite 2"], "city": ["Denver", "Chicago"], "state": ["CO", "IL"],
                     "country": ["USA"], "address_zip": ["80239", "60621"], "user_id": ["u"]}, "record")
    return {"authenticated_user_id": "u", "records": records.model_dump(), "addresses": [home, hers],
            "profile_address": home, "pending": pending,
            "items": {"1": {"name": "Tablet", "product_id": "t", "order_id": "#W1000001", "options": {}}},
            "orders": {"#W1000001": {"status": "pending", "items": ["Tablet"], "paid_with": "p", "address": hers}}}


def test_a_new_address_is_never_the_one_the_change_replaces():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    said = "Make my default address my daughter's: my home is Denver and hers is Chicago."
    facts = TurnFacts(session_id="s", user_text=said, user_texts=[said], state=_daughter_state())
    pack.restore(facts)  # the request not read yet, no order in question: the profile's is the one replaced
    assert facts.candidates.of("address1") == ["8 Maple Road"]
    facts.intent, facts.sub_intent = "account", "address"
    pack.settle_intent("account", "address", facts)
    assert facts.candidates.of("address1") == ["8 Maple Road"]  # Denver is the profile's now: no change
    assert pack.choices("address", facts) == ["8 Maple Road, Chicago, IL, 60621, USA"]
    assert pack.choice_reads("address", facts) == [("get_order_details", {"order_id": "#W2000002"})]
    tablet = "Also, the tablet I ordered: is it still pending? " + said
    facts = TurnFacts(session_id="s", user_text=tablet, user_texts=[tablet], state=_daughter_state())
    facts.intent = "modify"  # a change of the tablet's order: it ships to Chicago, so Denver is the new one
    pack.settle_intent("modify", "address", facts)
    assert facts.candidates.of("address1") == ["5 Lake Drive"]
    assert pack.choices("address", facts) == ["5 Lake Drive, Suite 2, Denver, CO, 80239, USA"]
    facts.intent = "account"  # the same words, the profile's address changed: Chicago
    pack.settle_intent("account", "address", facts)
    assert facts.candidates.of("address1") == ["8 Maple Road"]


def test_the_card_awaiting_a_yes_says_which_address_it_replaces_before_the_request_is_read():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    texts = ["Make my default address my daughter's: my home is Denver and hers is Chicago.",
             "And is the tablet I ordered still pending?"]  # the tablet's order is in question now
    for tool, args, expected in (
            ("modify_user_address", {"user_id": "u"}, ["8 Maple Road"]),  # the profile's (Denver) is replaced
            ("modify_pending_order_address", {"order_id": "#W1000001"}, ["5 Lake Drive"]),  # the order's (Chicago)
            (None, {}, ["5 Lake Drive"])):  # no card: the order in question's
        pending = {"card_id": "c", "title": "t", "tool": tool, "args": args} if tool else None
        facts = TurnFacts(session_id="s", user_text=texts[-1], user_texts=texts, state=_daughter_state(pending))
        pack.restore(facts)
        assert facts.candidates.of("address1") == expected, tool


@pytest.mark.parametrize(("text", "expected"), [
    ("send back the tea tray I received with the desk lamp", ["t"]),  # the lamp says which order: not returned
    ("the tea tray that came along with my desk lamp", ["t"]),
    ("the tea tray I got together with the desk lamp", ["t"]),
    ("send back the tea tray with the desk lamp", ["t", "l"]),  # "with" alone adds it
    ("send back the tea tray and the desk lamp I got with it", ["t", "l"]),
    ("the desk lamp I ordered with the tea tray, and the tea tray too", ["t", "l"]),  # named again after
])
def test_an_item_named_to_say_where_another_came_from_is_not_itself_named(text, expected):
    items = {"t": {"name": "Tea Tray", "product_id": "pt"}, "l": {"name": "Desk Lamp", "product_id": "pl"}}
    assert described_items(items, [text]) == expected


def test_its_item_is_the_one_item_of_the_order_in_question_and_no_item_of_an_order_with_two():
    """An order that holds one item: that item, unless the words point at another order or name a product."""
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    records.add_all({"order_id": ["#W1000001", "#W2000002"], "item_id": ["u1", "t1", "l1"]}, "record")
    state = {"authenticated_user_id": "u", "records": records.model_dump(),
             "items": {"u1": {"name": "Umbrella", "product_id": "pu", "order_id": "#W1000001"},
                       "t1": {"name": "Tea Tray", "product_id": "pt", "order_id": "#W2000002"},
                       "l1": {"name": "Desk Lamp", "product_id": "pl", "order_id": "#W2000002"}},
             "orders": {"#W1000001": {"status": "pending", "items": ["Umbrella"], "paid_with": "p"},
                        "#W2000002": {"status": "pending", "items": ["Tea Tray", "Desk Lamp"], "paid_with": "p"}}}
    for text, expected in (("For order #W1000001, change its item to a red one.", ["u1"]),
                           ("For order #W2000002, change its item to a red one.", []),  # two: which is asked
                           ("For order #W1000001, the item in my other order should be red.", []),  # not its own
                           ("For order #W1000001, change the one in my previous order.", []),  # another order
                           ("For order #W1000001, make it red.", ["u1"])):  # no product named: its one item
        facts = TurnFacts(session_id="s", user_text=text, user_texts=[text], state=state)
        pack.restore(facts)
        pack.snapshot_values(facts)
        assert facts.candidates.of("item_id") == expected, text


def _two_tablets(texts: list[str], selected: dict | None = None):
    from pipelines.domain import TurnFacts

    records = CandidateSet()
    records.add_all({"order_id": ["#W1000001", "#W2000002"], "item_id": ["t1", "t2", "l1"]}, "record")
    items = {"t1": {"name": "Tablet", "product_id": "pt", "order_id": "#W1000001", "price": 100.0},
             "l1": {"name": "Desk Lamp", "product_id": "pl", "order_id": "#W1000001", "price": 900.0},
             "t2": {"name": "Tablet", "product_id": "pt", "order_id": "#W2000002", "price": 300.0}}
    orders = {"#W1000001": {"status": "delivered", "items": ["Tablet", "Desk Lamp"], "paid_with": "p"},
              "#W2000002": {"status": "delivered", "items": ["Tablet"], "paid_with": "p"}}
    state = {"authenticated_user_id": "u", "records": records.model_dump(), "items": items, "orders": orders,
             "selected": selected}
    return TurnFacts(session_id="s", user_text=texts[-1], user_texts=texts, state=state)


@pytest.mark.parametrize(("texts", "expected"), [
    (["two tablets came", "send back whichever is more expensive"], ["#W2000002"]),
    (["two tablets came", "send back whichever is cheaper"], ["#W1000001"]),
    (["two tablets came", "whichever is cheaper", "no wait, the pricier tablet"], ["#W2000002"]),  # the newest text says
    (["two tablets came", "return one of them"], ["#W1000001", "#W2000002"]),  # no price: both, asked
    (["send back the more expensive lamp"], ["#W1000001"]),  # one order holds it: nothing to compare
])
def test_the_more_expensive_one_is_the_order_of_the_priciest_item_named(texts, expected):
    from pipelines.domains import load_domain

    pack = load_domain("support")
    facts = _two_tablets(texts)
    assert pack.pick_records("return", ["#W1000001", "#W2000002"], facts) == expected


def test_a_later_text_that_picks_another_order_by_price_overrides_the_order_found_before():
    from pipelines.domains import load_domain

    pack = load_domain("support")
    texts = ["two tablets came", "send back whichever is cheaper"]
    facts = _two_tablets(texts, selected={"id": "#W1000001", "at": 1, "queue": []})
    pack.restore(facts)
    assert facts.candidates.of("order_id") == ["#W1000001"]  # found for "the cheaper one"
    facts = _two_tablets([*texts, "No. I changed my mind: whichever is more expensive."],
                         selected={"id": "#W1000001", "at": 1, "queue": []})
    pack.restore(facts)
    assert facts.candidates.of("order_id") == ["#W2000002"]
    facts = _two_tablets([*texts, "No. Refund it to my card."], selected={"id": "#W1000001", "at": 1, "queue": []})
    pack.restore(facts)
    assert facts.candidates.of("order_id") == ["#W1000001"]  # no price said: the order found stays


def _two_tablets_with_options(texts: list[str], selected: dict | None = None):
    facts = _two_tablets(texts, selected)
    facts.state["items"]["t1"]["options"] = {"storage": "64GB", "color": "black", "screen": "10-inch"}
    facts.state["items"]["t2"]["options"] = {"storage": "128GB", "color": "black", "screen": "10-inch"}
    return facts


@pytest.mark.parametrize(("texts", "expected"), [
    (["two tablets came", "it is the 128GB one"], ["#W2000002"]),
    (["two tablets came", "the one with 64 GB storage"], ["#W1000001"]),  # the measure in other spellings
    (["two tablets came", "the black one"], ["#W1000001", "#W2000002"]),  # both black: nothing told apart
    (["two tablets came", "the 10 inch black one"], ["#W1000001", "#W2000002"]),  # tied at two values each
    (["two tablets came", "it is the 128GB one", "the 128GB one"], ["#W2000002"]),  # said again: the same
    (["two tablets came", "the 256GB one"], ["#W1000001", "#W2000002"]),  # neither has it
])
def test_an_answer_naming_what_an_item_is_picks_its_order(texts, expected):
    from pipelines.domains import load_domain

    pack = load_domain("support")
    facts = _two_tablets_with_options(texts)
    assert pack.pick_records("return", ["#W1000001", "#W2000002"], facts) == expected


@pytest.mark.parametrize(("texts", "expected"), [
    (["two tablets came", "in fact there are two tablets to send back"], True),  # each order's tablet
    (["please return both tablets"], True),
    (["both of my tablets should go back"], True),
    (["two tablets got here and I only want one"], False),  # one of them
    (["return one of the two tablets"], False),
    (["which of the two tablets is cheaper?"], False),
    (["both desk lamps"], False),  # one order holds it: nothing counted across orders
    (["two weeks ago my tablet broke"], False),  # the count is of something else
])
def test_a_count_of_a_product_held_in_several_orders_asks_for_each(texts, expected):
    from pipelines.domains import load_domain

    pack = load_domain("support")
    assert pack.asks_for_all(_two_tablets(texts)) is expected


def test_the_request_s_first_text_names_what_is_wanted_not_which_order():
    from pipelines.domains.support.pack import SupportState, _by_item_options

    state = SupportState.model_validate(_two_tablets_with_options(["x"]).state)
    first = "swap one of my two tablets for the 128GB one"
    assert _by_item_options(state, [first], first) is None  # "128GB" is what they want, not which tablet they have
    assert _by_item_options(state, ["two tablets came", "the 128GB one"], "the 128GB one") == "#W2000002"  # an answer
    assert _by_item_options(state, ["my desk lamp", "the 128GB one"], "the 128GB one") is None  # no tablet named before


def test_the_order_in_question_follows_an_answer_naming_what_its_item_is():
    from pipelines.domains import load_domain

    pack = load_domain("support")
    facts = _two_tablets_with_options(["two tablets came, I want to return one", "It is the 64GB one."])
    pack.restore(facts)
    assert facts.candidates.of("order_id") == ["#W1000001"]
    facts = _two_tablets_with_options(["two tablets came, I want to return one", "It is the black one."])
    pack.restore(facts)
    assert facts.candidates.of("order_id") == ["#W1000001", "#W2000002"]  # nothing told apart: still both


@pytest.mark.parametrize(("text", "done", "expected"), [
    ("Ship my pending order to the new address, and switch its item to the red colour.",
     ["modify_pending_order_address"], True),  # the item change is still open
    ("Ship my pending order to the new address, and switch its item to the red colour.",
     ["modify_pending_order_address", "modify_pending_order_items"], False),  # both made
    ("Ship my pending order to the new address.", ["modify_pending_order_address"], False),  # nothing more
    ("Switch its item to the red colour.", ["modify_pending_order_address"], False),  # not this write's text
    ("The lamp came broken: exchange it or send it back.", ["return_delivered_order_items"], False),  # alternatives
])
def test_a_text_that_asks_for_another_part_of_the_order_stays_open_after_one_write(text, done, expected):
    from pipelines.domains.support.pack import _asks_more

    assert _asks_more(text, done) is expected


def test_the_product_of_an_order_s_one_item_is_read_for_its_change():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    records = CandidateSet()
    records.add_all({"order_id": ["#W1000001"], "item_id": ["u1"]}, "record")
    state = {"authenticated_user_id": "u", "records": records.model_dump(),
             "items": {"u1": {"name": "Umbrella", "product_id": "pu", "order_id": "#W1000001"}},
             "orders": {"#W1000001": {"status": "pending", "items": ["Umbrella"], "paid_with": "p"}}}
    text = "For order #W1000001, switch it to the red colour."
    facts = TurnFacts(session_id="s", user_text=text, user_texts=[text], state=state)
    pack.restore(facts)
    from pipelines.domains.support.pack import _named_product

    assert _named_product(facts, pack.state_of(facts)) == "pu"
    read = {**state, "variants": {"pu": {"v": {"options": {"color": "red"}, "available": True}}}}
    facts = TurnFacts(session_id="s", user_text=text, user_texts=[text], state=read)
    assert _named_product(facts, pack.state_of(facts)) == "pu"  # read already: still the one in question


def test_a_write_leaves_its_request_open_while_its_text_asks_for_another_part():
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")
    texts = ["hello", "Ship my pending order to the new address, and switch its item to the red colour.", "Yes."]
    state = {"authenticated_user_id": "u", "request_from": 1}
    facts = TurnFacts(session_id="s", user_text=texts[-1], user_texts=texts, state=state)
    result = {"order_id": "#W1000001", "user_id": "u", "status": "pending", "items": []}
    pack.observe("modify_pending_order_address", result, True, facts)
    st = pack.state_of(facts)
    assert (st.request_from, st.request_done) == (1, ["modify_pending_order_address"])  # the item change is open
    pack.observe("modify_pending_order_items", result, True, facts)
    st = pack.state_of(facts)
    assert (st.request_from, st.request_done) == (3, [])  # both done: the next text starts the next request
    facts = TurnFacts(session_id="s", user_text=texts[-1], user_texts=texts, state=state)
    pack.observe("modify_pending_order_items", result, False, facts)  # a failed write changes nothing
    assert pack.state_of(facts).request_from == 1


def test_an_order_the_policy_refuses_passes_the_request_on_to_the_next():
    """"all my pending orders": a card on one of them the precheck refuses moves the request to the next order (the
    same refusal is not met again); a refusal of another order, or of the last one, moves nothing."""
    from pipelines.domain import TurnFacts
    from pipelines.domains import load_domain

    pack = load_domain("support")

    def facts(queue: list[str]) -> TurnFacts:
        return TurnFacts(session_id="s", user_text="x", user_texts=["x"],
                         state={"authenticated_user_id": "u", "selected": {"id": "#W1", "at": 0, "queue": queue}})

    f = facts(["#W2", "#W3"])
    pack.refused("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"}, "order_not_pending", f)
    assert f.state["selected"] == {"id": "#W2", "at": 0, "queue": ["#W3"]}
    f = facts(["#W2"])
    pack.refused("cancel_pending_order", {"order_id": "#W9", "reason": "no longer needed"}, "order_not_pending", f)
    assert f.state["selected"] == {"id": "#W1", "at": 0, "queue": ["#W2"]}
    f = facts([])
    pack.refused("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"}, "order_not_pending", f)
    assert f.state["selected"] == {"id": "#W1", "at": 0, "queue": []}


def _three_orders(texts: list[str], selected: dict | None = None):
    """Three delivered orders: #W1000001 a desk lamp and a mug, #W2000002 a tablet, #W3000003 hiking boots."""
    from pipelines.domain import TurnFacts

    records = CandidateSet()
    records.add_all({"order_id": ["#W1000001", "#W2000002", "#W3000003"], "item_id": ["l1", "m1", "t2", "b3"]},
                    "record")
    items = {"l1": {"name": "Desk Lamp", "product_id": "pl", "order_id": "#W1000001", "price": 90.0},
             "m1": {"name": "Coffee Mug", "product_id": "pm", "order_id": "#W1000001", "price": 12.0},
             "t2": {"name": "Tablet", "product_id": "pt", "order_id": "#W2000002", "price": 300.0},
             "b3": {"name": "Hiking Boots", "product_id": "pb", "order_id": "#W3000003", "price": 150.0}}
    orders = {"#W1000001": {"status": "delivered", "items": ["Desk Lamp", "Coffee Mug"], "paid_with": "p"},
              "#W2000002": {"status": "delivered", "items": ["Tablet"], "paid_with": "p"},
              "#W3000003": {"status": "delivered", "items": ["Hiking Boots"], "paid_with": "p"}}
    state = {"authenticated_user_id": "u", "records": records.model_dump(), "items": items, "orders": orders,
             "selected": selected}
    return TurnFacts(session_id="s", user_text=texts[-1], user_texts=texts, state=state)


ALL3 = ["#W1000001", "#W2000002", "#W3000003"]


@pytest.mark.parametrize(("texts", "expected"), [
    (["please return all my orders"], ALL3),
    (["please return all my orders", "apart from the hiking boots"], ALL3[:2]),
    (["please return all my orders except for the boots, I love them"], ALL3[:2]),
    (["send back every order but not the tablet or the boots"], ALL3[:1]),
    (["please return all my orders other than the one with the lamp"], ALL3[1:]),
    (["please return all my orders", "except the sofa"], ALL3),  # nothing of theirs named: nothing left out
    (["please return all my orders", "except everything"], ALL3),  # every order left out: the request as said
])
def test_an_exception_to_all_orders_leaves_out_the_orders_it_names(texts, expected):
    from pipelines.domains import load_domain

    assert load_domain("support").pick_records("return", ALL3, _three_orders(texts)) == expected


def test_an_exception_names_orders_only_of_a_request_for_all_orders():
    from pipelines.domains.support.pack import SupportState, excepted_orders

    state = SupportState.model_validate(_three_orders(["x"]).state)
    assert excepted_orders(state, ["return every order except the boots"]) == {"#W3000003"}
    assert excepted_orders(state, ["return the lamp order except the coffee mug"]) == set()  # one order's items
    assert excepted_orders(state, ["return all my orders", "the boots were great, but not the tablet"]) == {
        "#W2000002"}


def test_an_exception_said_later_is_never_the_order_in_question_and_leaves_the_queue():
    from pipelines.domains import load_domain
    from pipelines.domains.support.pack import SupportState, _order_in_question

    texts = ["please return all my orders", "oh, except the hiking boots; I could swap those for hiking boots in black"]
    facts = _three_orders(texts, selected={"id": "#W3000003", "at": 0, "queue": ["#W1000001", "#W2000002"]})
    load_domain("support").restore(facts)
    assert facts.state["selected"] == {"id": "#W1000001", "at": 0, "queue": ["#W2000002"]}
    assert _order_in_question(facts, SupportState.model_validate(facts.state)) == "#W1000001"
    facts = _three_orders(texts[:1], selected={"id": "#W3000003", "at": 0, "queue": ["#W1000001"]})
    load_domain("support").restore(facts)
    assert facts.state["selected"]["id"] == "#W3000003"  # no exception: the order found stays


def test_each_order_of_all_orders_is_whole():
    from pipelines.domains.support.pack import SupportState, _named_items

    facts = _three_orders(["please return all my orders"], selected={"id": "#W1000001", "at": 0, "queue": []})
    assert sorted(_named_items(facts, SupportState.model_validate(facts.state))) == ["l1", "m1"]
    facts = _three_orders(["of all my orders, please return the coffee mug"], selected={"id": "#W1000001", "at": 0, "queue": []})
    assert _named_items(facts, SupportState.model_validate(facts.state)) == ["m1"]
