"""Support eligibility by fixed examples: each rule at its boundary, on a hand-built world.

Expected reasons are written from the rules in
:mod:`pipelines.domains.support.eligibility`: a gift card must hold *at least* the
amount (exactly the amount is enough); item ids count with multiplicity; a swap
keeps the product, changes the item and needs an available variant; statuses
are matched exactly.
"""

from __future__ import annotations

import pytest

from pipelines.domains.support import eligibility as el
from pipelines.domains.support.world import (
    Address,
    CreditCard,
    GiftCard,
    Order,
    OrderItem,
    PaymentRecord,
    Product,
    RetailWorld,
    User,
    UserName,
    Variant,
)
from pipelines.errors import IneligibleAction, ToolError
from pipelines.tools import ToolContext

ADDR = Address(address1="1 Main St", address2="", city="Austin", country="USA", state="TX", zip="78701")


def _world() -> RetailWorld:
    lamp = Product(name="Lamp", product_id="P1", variants={
        "1000000001": Variant(item_id="1000000001", options={"color": "red"}, available=True, price=10.00),
        "1000000002": Variant(item_id="1000000002", options={"color": "blue"}, available=True, price=12.50),
        "1000000003": Variant(item_id="1000000003", options={"color": "green"}, available=False, price=9.00),
    })
    mug = Product(name="Mug", product_id="P2", variants={
        "2000000001": Variant(item_id="2000000001", options={"size": "s"}, available=True, price=5.00),
    })
    items = [
        OrderItem(name="Lamp", product_id="P1", item_id="1000000001", price=10.00, options={"color": "red"}),
        OrderItem(name="Lamp", product_id="P1", item_id="1000000001", price=10.00, options={"color": "red"}),
        OrderItem(name="Mug", product_id="P2", item_id="2000000001", price=5.00, options={"size": "s"}),
    ]
    order = Order(order_id="#W0000001", user_id="ana_1", address=ADDR, items=items, status="pending",
                  fulfillments=[], payment_history=[PaymentRecord(transaction_type="payment", amount=25.0,
                                                                  payment_method_id="credit_card_1")])
    other = order.model_copy(update={"order_id": "#W0000002", "user_id": "ben_2"})
    users = {
        "ana_1": User(user_id="ana_1", name=UserName(first_name="Ana", last_name="Diaz"), address=ADDR,
                      email="ana@example.com", orders=["#W0000001"], payment_methods={
                          "credit_card_1": CreditCard(id="credit_card_1", brand="visa", last_four="4242"),
                          "gift_card_1": GiftCard(id="gift_card_1", balance=2.50)}),
        "ben_2": User(user_id="ben_2", name=UserName(first_name="Ben", last_name="Ode"), address=ADDR,
                      email="ben@example.com", orders=["#W0000002"], payment_methods={}),
    }
    return RetailWorld(users=users, orders={"#W0000001": order, "#W0000002": other},
                       products={"P1": lamp, "P2": mug})


@pytest.fixture
def world() -> RetailWorld:
    return _world()


def reason(fn, *args) -> str | None:
    """The refusal's reason code (None when the call passes)."""
    try:
        fn(*args)
    except (IneligibleAction, ToolError) as e:
        assert e.message.endswith(f"[{e.details['reason']}]")
        return e.details["reason"]
    return None


def me(user: str | None = "ana_1", confirmed: bool = False) -> ToolContext:
    return ToolContext(session_id="s", authenticated_user_id=user, confirmed=confirmed)


# --- gift card balance: at least the amount ----------------------------------------------------

@pytest.mark.parametrize(
    ("balance", "amount", "expected"),
    [
        (2.50, 2.50, None),                                # exactly the amount
        (2.50, 2.49, None),                                # more than enough
        (2.49, 2.50, "insufficient_gift_card_balance"),    # one cent short
        (0.00, 0.00, None),                                # nothing to pay
        (0.00, -3.00, None),                               # a refund (negative difference)
        (0.00, 0.01, "insufficient_gift_card_balance"),
    ],
)
def test_gift_card_covers(balance: float, amount: float, expected: str | None) -> None:
    assert reason(el.require_gift_card_covers, GiftCard(id="gift_card_9", balance=balance), amount) == expected


def test_a_credit_card_has_no_balance_to_check() -> None:
    assert reason(el.require_gift_card_covers, CreditCard(id="c", brand="visa", last_four="1"), 1e6) is None


def test_gift_card_refusal_states_both_amounts() -> None:
    with pytest.raises(IneligibleAction) as info:
        el.require_gift_card_covers(GiftCard(id="gift_card_9", balance=2.0), 2.5)
    assert info.value.message == ("gift card gift_card_9 balance 2.00 does not cover 2.50 "
                                  "[insufficient_gift_card_balance]")
    assert info.value.details == {"reason": "insufficient_gift_card_balance"}


# --- items with multiplicity --------------------------------------------------------------------

@pytest.mark.parametrize(
    ("item_ids", "expected"),
    [
        (["1000000001"], None),
        (["1000000001", "1000000001"], None),                           # the order holds two
        (["1000000001", "1000000001", "1000000001"], "item_not_in_order"),  # a third is not there
        (["1000000001", "2000000001"], None),
        (["2000000001", "2000000001"], "item_not_in_order"),             # only one mug
        (["9999999999"], "item_not_in_order"),
        ([], "empty_item_list"),
    ],
)
def test_items_in_order(world: RetailWorld, item_ids: list[str], expected: str | None) -> None:
    assert reason(el.require_items_in_order, world.orders["#W0000001"], item_ids) == expected


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, "same_address"),                                   # the address it already has: no change
        ({"address2": "Apt 1"}, None),                          # one line differs: a change
        ({"city": "Dallas"}, None),
        ({"zip": "78702"}, None),
        ({"state": "OK"}, None),
        ({"country": "CA"}, None),
        ({"address1": "2 Main St"}, None),
    ],
)
def test_a_new_address_must_differ_from_the_current_one(change: dict, expected: str | None) -> None:
    assert reason(el.require_new_address, ADDR, ADDR.model_copy(update=change)) == expected


# --- swaps and the price difference --------------------------------------------------------------

@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (["1000000001"], ["1000000002"], 2.50),                       # 12.50 - 10.00
        (["1000000001", "1000000001"], ["1000000002", "1000000002"], 5.00),
        (["1000000001", "1000000001"], ["1000000002", "1000000001"], "same_item"),
        (["1000000001"], ["1000000001"], "same_item"),
        (["1000000001"], ["1000000003"], "variant_unavailable"),
        (["1000000001"], ["2000000001"], "variant_not_in_product"),   # a mug is not a lamp
        (["1000000001"], ["1000000002", "1000000002"], "item_count_mismatch"),
        (["1000000001", "1000000001"], ["1000000002"], "item_count_mismatch"),
        (["1000000001"] * 3, ["1000000002"] * 3, "item_not_in_order"),
        ([], [], "empty_item_list"),
    ],
)
def test_price_difference(world: RetailWorld, old: list[str], new: list[str], expected) -> None:
    order = world.orders["#W0000001"]
    if isinstance(expected, float):
        assert el.price_difference(world, order, old, new) == expected
    else:
        assert reason(el.price_difference, world, order, old, new) == expected


def test_price_difference_negative_and_rounded(world: RetailWorld) -> None:
    lamp = world.products["P1"]
    lamp.variants["1000000002"] = lamp.variants["1000000002"].model_copy(update={"price": 9.99})
    assert el.price_difference(world, world.orders["#W0000001"], ["1000000001"], ["1000000002"]) == -0.01


def test_price_difference_for_an_unknown_product(world: RetailWorld) -> None:
    del world.products["P1"]
    assert reason(el.price_difference, world, world.orders["#W0000001"], ["1000000001"],
                  ["1000000002"]) == "variant_not_in_product"


# --- statuses, matched exactly ---------------------------------------------------------------------

@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("pending", None),
        ("pending (item modified)", "order_not_pending"),
        ("processed", "order_not_pending"),
        ("delivered", "order_not_pending"),
        ("cancelled", "order_not_pending"),
    ],
)
def test_pending_status_edges(world: RetailWorld, status: str, expected: str | None) -> None:
    order = world.orders["#W0000001"].model_copy(update={"status": status})
    assert reason(el.require_status, order, ("pending",), "order_not_pending") == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [("delivered", None), ("exchange requested", "order_not_delivered"),
     ("return requested", "order_not_delivered"), ("processed", "order_not_delivered")],
)
def test_delivered_status_edges(world: RetailWorld, status: str, expected: str | None) -> None:
    order = world.orders["#W0000001"].model_copy(update={"status": status})
    assert reason(el.require_status, order, ("delivered",), "order_not_delivered") == expected


def test_status_refusal_carries_the_status(world: RetailWorld) -> None:
    order = world.orders["#W0000001"].model_copy(update={"status": "processed"})
    with pytest.raises(IneligibleAction) as info:
        el.require_status(order, ("pending",), "order_not_pending")
    assert info.value.details == {"reason": "order_not_pending", "status": "processed"}
    assert info.value.message == "order #W0000001 has status 'processed' [order_not_pending]"


# --- who may touch what -------------------------------------------------------------------------------

def test_authentication_rules(world: RetailWorld) -> None:
    assert reason(el.require_authenticated, me(None)) == "not_authenticated"
    assert reason(el.require_authenticated, me("")) == "not_authenticated"
    assert el.require_authenticated(me()) == "ana_1"
    assert reason(el.require_confirmed, me(confirmed=False)) == "not_confirmed"
    assert reason(el.require_confirmed, me(confirmed=True)) is None


def test_authenticate_once_per_session(world: RetailWorld) -> None:
    ctx = me(None)
    assert el.authenticate(ctx, "ana_1", world) is ctx
    assert ctx.authenticated_user_id == "ana_1" and "ana_1" in ctx.observed_ids
    assert el.authenticate(ctx, "ana_1", world).authenticated_user_id == "ana_1"  # the same user again
    assert reason(el.authenticate, ctx, "ben_2", world) == "other_user"
    assert ctx.authenticated_user_id == "ana_1"
    assert reason(el.authenticate, me(None), "nobody", world) == "user_not_found"
    assert el.authenticate(me(None), "nobody").authenticated_user_id == "nobody"  # no world: no check


def test_require_user(world: RetailWorld) -> None:
    assert el.require_user(me(), world, "ana_1").user_id == "ana_1"
    assert reason(el.require_user, me(), world, "ben_2") == "other_user"
    assert reason(el.require_user, me(None), world, "ana_1") == "not_authenticated"
    assert reason(el.require_user, me("ghost"), world, "ghost") == "user_not_found"


def test_require_own_order(world: RetailWorld) -> None:
    assert el.require_own_order(me(), world, "#W0000001").order_id == "#W0000001"
    assert reason(el.require_own_order, me(), world, "#W0000002") == "order_not_owned"
    assert reason(el.require_own_order, me(), world, "#W0000009") == "order_not_found"
    assert reason(el.require_own_order, me(None), world, "#W0000001") == "not_authenticated"


def test_require_payment_method(world: RetailWorld) -> None:
    assert el.require_payment_method(world, "ana_1", "gift_card_1").id == "gift_card_1"
    assert reason(el.require_payment_method, world, "ana_1", "paypal_1") == "payment_method_not_found"
    assert reason(el.require_payment_method, world, "ben_2", "gift_card_1") == "payment_method_not_found"


# --- reasons as data ----------------------------------------------------------------------------------

def test_refuse_and_not_found_raise_their_classes() -> None:
    with pytest.raises(IneligibleAction) as info:
        el.refuse("same_item", "m", item="x")
    assert (info.value.message, info.value.details) == ("m [same_item]", {"reason": "same_item", "item": "x"})
    with pytest.raises(ToolError) as lookup:
        el.not_found("order_not_found", "m")
    assert type(lookup.value) is ToolError and lookup.value.details == {"reason": "order_not_found"}
    with pytest.raises(AssertionError):
        el.refuse("no_such_reason", "m")
    with pytest.raises(AssertionError):
        el.not_found("no_such_reason", "m")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("order #W1 has status 'processed' [order_not_pending]", "order_not_pending"),
        ("x [a] then [same_item]", "same_item"),
        ("[same_item]", "same_item"),
        ("no code here", None),
        ("unknown [not_a_reason]", None),
        ("not at the end [same_item].", None),
        ("missing open same_item]", None),
        ("", None),
        (None, None),
    ],
)
def test_reason_of(message: str | None, expected: str | None) -> None:
    assert el.reason_of(message) == expected


def test_every_reason_is_unique_and_snake_case() -> None:
    assert len(el.REASONS) == len(set(el.REASONS)) == 24
    assert all(r.replace("_", "").isalpha() and r.islower() for r in el.REASONS)


# --- the refusal texts (what the orchestrator reads in the observation) ----------------------

def _refusal(fn, *args) -> tuple[str, dict]:
    with pytest.raises((IneligibleAction, ToolError)) as info:
        fn(*args)
    return info.value.message, info.value.details


def test_refusal_messages_and_details(world: RetailWorld) -> None:
    order = world.orders["#W0000001"]
    cases = [
        ((el.require_confirmed, me()), ("the user has not explicitly confirmed this action [not_confirmed]",
                                        {"reason": "not_confirmed"})),
        ((el.require_authenticated, me(None)), ("the user has not been authenticated in this session "
                                                "[not_authenticated]", {"reason": "not_authenticated"})),
        ((el.require_user, me(), world, "ben_2"), ("requests about another user are not allowed [other_user]",
                                                  {"reason": "other_user", "user_id": "ben_2"})),
        ((el.require_user, me("ghost"), world, "ghost"), ("user 'ghost' not found [user_not_found]",
                                                         {"reason": "user_not_found"})),
        ((el.require_own_order, me(), world, "#W9"), ("order '#W9' not found [order_not_found]",
                                                      {"reason": "order_not_found", "order_id": "#W9"})),
        ((el.require_own_order, me(), world, "#W0000002"), (
            "order #W0000002 does not belong to the authenticated user [order_not_owned]",
            {"reason": "order_not_owned"})),
        ((el.require_payment_method, world, "ana_1", "paypal_1"), (
            "payment method 'paypal_1' is not the user's [payment_method_not_found]",
            {"reason": "payment_method_not_found"})),
        ((el.require_items_in_order, order, []), ("no items were given [empty_item_list]",
                                                  {"reason": "empty_item_list"})),
        ((el.require_items_in_order, order, ["9"]), ("item 9 is not in order #W0000001 [item_not_in_order]",
                                                     {"reason": "item_not_in_order"})),
        ((el.price_difference, world, order, ["1000000001"], []), (
            "item_ids and new_item_ids must have the same length [item_count_mismatch]",
            {"reason": "item_count_mismatch"})),
        ((el.price_difference, world, order, ["1000000001"], ["1000000001"]), (
            "new item 1000000001 is the same as the old one [same_item]", {"reason": "same_item"})),
        ((el.price_difference, world, order, ["1000000001"], ["2000000001"]), (
            "item 2000000001 is not a variant of product P1 [variant_not_in_product]",
            {"reason": "variant_not_in_product"})),
        ((el.price_difference, world, order, ["1000000001"], ["1000000003"]), (
            "item 1000000003 is not available [variant_unavailable]", {"reason": "variant_unavailable"})),
        ((el.authenticate, me(None), "nobody", world), ("user 'nobody' not found [user_not_found]",
                                                        {"reason": "user_not_found"})),
        ((el.authenticate, me("ana_1"), "ben_2"), (
            "another user is already authenticated in this session [other_user]", {"reason": "other_user"})),
    ]
    for (fn, *args), expected in cases:
        assert _refusal(fn, *args) == expected, fn.__name__


def test_price_difference_rounds_to_cents(world: RetailWorld) -> None:
    lamp = world.products["P1"]
    lamp.variants["1000000002"] = lamp.variants["1000000002"].model_copy(update={"price": 10.0049})
    assert el.price_difference(world, world.orders["#W0000001"], ["1000000001"], ["1000000002"]) == 0.0


def test_nothing_to_pay_skips_even_a_negative_balance() -> None:
    assert reason(el.require_gift_card_covers, GiftCard(id="gift_card_9", balance=-1.0), 0.0) is None
