"""Every retail tool: the positive case and each eligibility rule's refusal."""

from __future__ import annotations

import pytest

from pipelines.domains.support import authenticate, build_registry, invoke, precheck
from pipelines.domains.support.generator import FIXTURES, generate_world
from pipelines.domains.support.world import GiftCard, Order, RetailWorld
from pipelines.errors import IneligibleAction, ToolError
from pipelines.tools import ToolContext

ALEX, PRIYA = FIXTURES["alex"], FIXTURES["priya"]
REG = build_registry()
ADDR = {"address1": "9 New Road", "address2": "", "city": "Reno", "state": "NV", "country": "USA", "zip": "89501"}


@pytest.fixture
def world() -> RetailWorld:
    return generate_world(3)


def ctx_for(user_id: str | None, confirmed: bool = True) -> ToolContext:
    ctx = ToolContext(session_id="t", confirmed=confirmed)
    if user_id:
        authenticate(ctx, user_id)
    return ctx


def call(name: str, args: dict, ctx: ToolContext, world: RetailWorld):
    return invoke(REG, name, args, ctx, world)


def refused(name: str, args: dict, ctx: ToolContext, world: RetailWorld) -> str | None:
    out = call(name, args, ctx, world)
    assert not out.observation.ok
    return out.reason


def swap(world: RetailWorld, order: Order, cheaper: bool | None = None) -> tuple[str, str]:
    """An (old item, new available variant of the same product) pair."""
    item = order.items[0]
    options = [v for v in world.products[item.product_id].variants.values()
               if v.available and v.item_id != item.item_id]
    if cheaper is not None:
        options = [v for v in options if (v.price < item.price) == cheaper] or options
    return item.item_id, options[0].item_id


def balance(world: RetailWorld, user_id: str, pm_id: str) -> float:
    pm = world.users[user_id].payment_methods[pm_id]
    assert isinstance(pm, GiftCard)
    return pm.balance


# ---- lookups and authentication ------------------------------------------------------


def test_lookups_find_but_do_not_authenticate(world: RetailWorld) -> None:
    ctx = ctx_for(None)
    out = call("find_user_id_by_email", {"email": ALEX.email.upper()}, ctx, world)
    assert out.observation.result == {"user_id": ALEX.user_id}
    out = call("find_user_id_by_name_zip", {"first_name": "alex", "last_name": "RIVERA", "zip": ALEX.zip}, ctx, world)
    assert out.observation.result == {"user_id": ALEX.user_id}
    assert ctx.authenticated_user_id is None
    assert refused("find_user_id_by_email", {"email": "nobody@example.com"}, ctx, world) == "user_not_found"
    assert refused("find_user_id_by_name_zip", {"first_name": "Alex", "last_name": "Rivera", "zip": "00000"},
                   ctx, world) == "user_not_found"


def test_authenticate_one_user_per_session(world: RetailWorld) -> None:
    ctx = authenticate(ToolContext(), ALEX.user_id, world)
    assert ctx.authenticated_user_id == ALEX.user_id
    authenticate(ctx, ALEX.user_id, world)  # idempotent
    with pytest.raises(IneligibleAction) as exc:
        authenticate(ctx, PRIYA.user_id, world)
    assert exc.value.details["reason"] == "other_user"
    with pytest.raises(ToolError):
        authenticate(ToolContext(), "ghost_0000", world)


# ---- private reads -------------------------------------------------------------------


def test_get_user_details_only_for_the_authenticated_user(world: RetailWorld) -> None:
    assert refused("get_user_details", {"user_id": ALEX.user_id}, ctx_for(None), world) == "not_authenticated"
    assert refused("get_user_details", {"user_id": PRIYA.user_id}, ctx_for(ALEX.user_id), world) == "other_user"
    ctx = ctx_for(ALEX.user_id, confirmed=False)
    out = call("get_user_details", {"user_id": ALEX.user_id}, ctx, world)
    assert out.observation.ok and out.observation.result["email"] == ALEX.email
    assert ALEX.pending_order_id in ctx.observed_ids


def test_get_order_details_only_for_own_orders(world: RetailWorld) -> None:
    args = {"order_id": ALEX.pending_order_id}
    assert refused("get_order_details", args, ctx_for(None), world) == "not_authenticated"
    assert refused("get_order_details", args, ctx_for(PRIYA.user_id), world) == "order_not_owned"
    assert refused("get_order_details", {"order_id": "#W0"}, ctx_for(ALEX.user_id), world) == "order_not_found"
    out = call("get_order_details", args, ctx_for(ALEX.user_id, confirmed=False), world)
    assert out.observation.result["status"] == "pending"


# ---- open reads -----------------------------------------------------------------------


def test_catalogue_reads_are_open(world: RetailWorld) -> None:
    ctx = ctx_for(None)
    product = next(iter(world.products.values()))
    item_id = next(iter(product.variants))
    assert call("get_product_details", {"product_id": product.product_id}, ctx, world).observation.ok
    assert call("get_item_details", {"item_id": item_id}, ctx, world).observation.result["item_id"] == item_id
    types = call("list_all_product_types", {}, ctx, world).observation.result["products"]
    assert types[product.name] == product.product_id and list(types) == sorted(types)
    assert refused("get_product_details", {"product_id": item_id}, ctx, world) == "product_not_found"
    assert refused("get_item_details", {"item_id": product.product_id}, ctx, world) == "item_not_found"


def test_calculate_transfer_and_help(world: RetailWorld) -> None:
    ctx = ctx_for(None)
    assert call("calculate", {"expression": "(1.5 + 2) * 3 - 0.005"}, ctx, world).observation.result["value"] == 10.49
    assert refused("calculate", {"expression": "__import__('os')"}, ctx, world) == "invalid_expression"
    assert refused("calculate", {"expression": "1/0"}, ctx, world) == "invalid_expression"
    out = call("transfer_to_human_agents", {"summary": "wants a manager"}, ctx, world)
    assert out.observation.result["transferred"] and out.observation.result["reason_code"] == "out_of_scope"
    out = call("search_help_articles", {"query": "why can't I cancel?"}, ctx, world)
    assert out.observation.result["articles"][0]["kind"] == "policy"


def test_invalid_arguments_are_invalid_input(world: RetailWorld) -> None:
    out = call("cancel_pending_order", {"order_id": ALEX.pending_order_id, "reason": "changed my mind"},
               ctx_for(ALEX.user_id), world)
    assert out.observation.error_code == "invalid_input"
    assert call("get_user_details", {"user": "x"}, ctx_for(ALEX.user_id), world).reason == "invalid_input"


# ---- cancel ---------------------------------------------------------------------------


def test_cancel_refunds_card_and_credits_gift_card(world: RetailWorld) -> None:
    order = world.orders[ALEX.pending_order_id]
    total = order.payment_history[0].amount
    out = call("cancel_pending_order", {"order_id": order.order_id, "reason": "no longer needed"},
               ctx_for(ALEX.user_id), world)
    assert out.observation.ok and out.changed["order"] == [order.order_id]
    assert out.changed["user"] == [ALEX.user_id]
    assert order.status == "cancelled" and order.cancel_reason == "no longer needed"
    assert order.payment_history[-1].model_dump() == {
        "transaction_type": "refund", "amount": total, "payment_method_id": ALEX.credit_card_id}
    # a pending order paid by gift card: the balance is credited at once
    order = world.orders[PRIYA.pending_order_id]
    order.payment_history[0].payment_method_id = PRIYA.gift_card_id
    before = balance(world, PRIYA.user_id, PRIYA.gift_card_id)
    call("cancel_pending_order", {"order_id": order.order_id, "reason": "ordered by mistake"},
         ctx_for(PRIYA.user_id), world)
    assert balance(world, PRIYA.user_id, PRIYA.gift_card_id) == round(before + order.payment_history[0].amount, 2)


def test_cancel_refusals(world: RetailWorld) -> None:
    args = {"order_id": ALEX.pending_order_id, "reason": "no longer needed"}
    assert refused("cancel_pending_order", args, ctx_for(None), world) == "not_authenticated"
    assert refused("cancel_pending_order", args, ctx_for(PRIYA.user_id), world) == "order_not_owned"
    assert refused("cancel_pending_order", args, ctx_for(ALEX.user_id, confirmed=False), world) == "not_confirmed"
    delivered = {"order_id": ALEX.delivered_order_id, "reason": "no longer needed"}
    assert refused("cancel_pending_order", delivered, ctx_for(ALEX.user_id), world) == "order_not_pending"
    assert world.orders[ALEX.pending_order_id].status == "pending"


# ---- modify items ---------------------------------------------------------------------


def test_modify_items_swaps_and_settles_difference(world: RetailWorld) -> None:
    order = world.orders[PRIYA.pending_order_id]
    old, new = swap(world, order)
    variant = world.find_variant(new)[1]
    diff = round(variant.price - order.items[0].price, 2)
    before = balance(world, PRIYA.user_id, PRIYA.gift_card_id)
    args = {"order_id": order.order_id, "item_ids": [old], "new_item_ids": [new], "payment_method_id": PRIYA.gift_card_id}
    assert call("modify_pending_order_items", args, ctx_for(PRIYA.user_id), world).observation.ok
    assert order.status == "pending (item modified)"
    assert order.items[0].item_id == new and order.items[0].price == variant.price
    assert order.items[0].options == variant.options
    rec = order.payment_history[-1]
    assert rec.amount == abs(diff) and rec.transaction_type == ("payment" if diff > 0 else "refund")
    assert balance(world, PRIYA.user_id, PRIYA.gift_card_id) == round(before - diff, 2)
    # only once: the order is no longer plain pending
    assert refused("modify_pending_order_items", {**args, "item_ids": [new], "new_item_ids": [old]},
                   ctx_for(PRIYA.user_id), world) == "order_not_pending"
    assert refused("cancel_pending_order", {"order_id": order.order_id, "reason": "no longer needed"},
                   ctx_for(PRIYA.user_id), world) == "order_not_pending"


def test_modify_items_refusals(world: RetailWorld) -> None:
    order = world.orders[ALEX.pending_order_id]
    old, new = swap(world, order)
    item = order.items[0]
    product = world.products[item.product_id]
    unavailable = next(v.item_id for v in product.variants.values() if not v.available and v.item_id != old)
    foreign = next(v for p in world.products.values() if p.product_id != item.product_id for v in p.variants.values())
    base = {"order_id": order.order_id, "item_ids": [old], "new_item_ids": [new], "payment_method_id": ALEX.credit_card_id}
    ctx = ctx_for(ALEX.user_id)
    cases = {
        "same_item": {"new_item_ids": [old]},
        "variant_unavailable": {"new_item_ids": [unavailable]},
        "variant_not_in_product": {"new_item_ids": [foreign.item_id]},
        "item_not_in_order": {"item_ids": ["0000000000"]},
        "empty_item_list": {"item_ids": [], "new_item_ids": []},
        "item_count_mismatch": {"new_item_ids": [new, new]},
        "payment_method_not_found": {"payment_method_id": PRIYA.credit_card_id},
    }
    for reason, patch in cases.items():
        assert refused("modify_pending_order_items", {**base, **patch}, ctx, world) == reason, reason
    assert precheck(REG, "modify_pending_order_items", base, ctx_for(ALEX.user_id, confirmed=False), world) is None
    assert refused("modify_pending_order_items", base, ctx_for(ALEX.user_id, confirmed=False), world) == "not_confirmed"
    # the gift card (balance 15) cannot cover a costlier variant
    item.price = 0.01
    gift = {**base, "payment_method_id": ALEX.gift_card_id}
    assert refused("modify_pending_order_items", gift, ctx, world) == "insufficient_gift_card_balance"
    assert order.status == "pending" and order.items[0].item_id == old


# ---- modify address / payment ---------------------------------------------------------


def test_modify_order_address(world: RetailWorld) -> None:
    args = {"order_id": ALEX.pending_order_id, **ADDR}
    assert refused("modify_pending_order_address", args, ctx_for(ALEX.user_id, confirmed=False), world) == "not_confirmed"
    processed = {**args, "order_id": ALEX.processed_order_id}
    assert refused("modify_pending_order_address", processed, ctx_for(ALEX.user_id), world) == "order_not_pending"
    assert refused("modify_pending_order_address", args, ctx_for(PRIYA.user_id), world) == "order_not_owned"
    assert call("modify_pending_order_address", args, ctx_for(ALEX.user_id), world).observation.ok
    assert world.orders[ALEX.pending_order_id].address.city == "Reno"
    # the address it has now: a write that would change nothing is refused
    assert refused("modify_pending_order_address", args, ctx_for(ALEX.user_id), world) == "same_address"
    assert world.users[ALEX.user_id].address.city != "Reno"


def test_modify_payment_moves_the_charge(world: RetailWorld) -> None:
    order = world.orders[PRIYA.pending_order_id]
    amount = order.payment_history[0].amount
    before = balance(world, PRIYA.user_id, PRIYA.gift_card_id)
    args = {"order_id": order.order_id, "payment_method_id": PRIYA.gift_card_id}
    assert call("modify_pending_order_payment", args, ctx_for(PRIYA.user_id), world).observation.ok
    assert [(r.transaction_type, r.payment_method_id) for r in order.payment_history] == [
        ("payment", PRIYA.credit_card_id), ("payment", PRIYA.gift_card_id), ("refund", PRIYA.credit_card_id)]
    assert balance(world, PRIYA.user_id, PRIYA.gift_card_id) == round(before - amount, 2)
    assert order.status == "pending"
    # a second move: the history is no longer a single payment
    again = {"order_id": order.order_id, "payment_method_id": PRIYA.paypal_id}
    assert refused("modify_pending_order_payment", again, ctx_for(PRIYA.user_id), world) == "payment_history_not_single"


def test_modify_payment_refusals(world: RetailWorld) -> None:
    ctx = ctx_for(ALEX.user_id)
    same = {"order_id": ALEX.pending_order_id, "payment_method_id": ALEX.credit_card_id}
    assert refused("modify_pending_order_payment", same, ctx, world) == "same_payment_method"
    gift = {"order_id": ALEX.pending_order_id, "payment_method_id": ALEX.gift_card_id}
    assert refused("modify_pending_order_payment", gift, ctx, world) == "insufficient_gift_card_balance"
    other = {"order_id": ALEX.pending_order_id, "payment_method_id": PRIYA.paypal_id}
    assert refused("modify_pending_order_payment", other, ctx, world) == "payment_method_not_found"
    assert refused("modify_pending_order_payment", {**gift, "order_id": ALEX.delivered_order_id},
                   ctx, world) == "order_not_pending"
    assert refused("modify_pending_order_payment", gift, ctx_for(ALEX.user_id, confirmed=False),
                   world) == "insufficient_gift_card_balance"  # confirmation is checked last


# ---- return / exchange ----------------------------------------------------------------


def test_return_to_original_method_or_gift_card(world: RetailWorld) -> None:
    order = world.orders[PRIYA.delivered_order_id]
    items = [i.item_id for i in order.items]
    args = {"order_id": order.order_id, "item_ids": items, "payment_method_id": PRIYA.paypal_id}
    ctx = ctx_for(PRIYA.user_id)
    assert refused("return_delivered_order_items", args, ctx, world) == "refund_method_not_allowed"
    assert refused("return_delivered_order_items", {**args, "item_ids": []}, ctx, world) == "empty_item_list"
    assert refused("return_delivered_order_items", {**args, "item_ids": ["1"]}, ctx, world) == "item_not_in_order"
    pending = {**args, "order_id": PRIYA.pending_order_id, "payment_method_id": PRIYA.credit_card_id}
    assert refused("return_delivered_order_items", pending, ctx, world) == "order_not_delivered"
    gift = {**args, "payment_method_id": PRIYA.gift_card_id}
    assert refused("return_delivered_order_items", gift, ctx_for(PRIYA.user_id, False), world) == "not_confirmed"
    history = list(order.payment_history)
    assert call("return_delivered_order_items", gift, ctx, world).observation.ok
    assert order.status == "return requested" and order.return_items == sorted(items)
    assert order.return_payment_method_id == PRIYA.gift_card_id and order.payment_history == history
    original = {"order_id": ALEX.delivered_order_id, "item_ids": [world.orders[ALEX.delivered_order_id].items[0].item_id],
                "payment_method_id": ALEX.credit_card_id}
    assert call("return_delivered_order_items", original, ctx_for(ALEX.user_id), world).observation.ok


def test_exchange_records_the_request(world: RetailWorld) -> None:
    order = world.orders[ALEX.delivered_order_id]
    old, new = swap(world, order)
    diff = round(world.find_variant(new)[1].price - order.items[0].price, 2)
    args = {"order_id": order.order_id, "item_ids": [old], "new_item_ids": [new], "payment_method_id": ALEX.credit_card_id}
    assert refused("exchange_delivered_order_items", args, ctx_for(ALEX.user_id, False), world) == "not_confirmed"
    assert refused("exchange_delivered_order_items", {**args, "order_id": ALEX.pending_order_id},
                   ctx_for(ALEX.user_id), world) == "order_not_delivered"
    assert refused("exchange_delivered_order_items", {**args, "new_item_ids": [old]},
                   ctx_for(ALEX.user_id), world) == "same_item"
    order.items[0].price = 0.01  # now any variant costs more than the 15.00 gift card holds
    gift = {**args, "payment_method_id": ALEX.gift_card_id}
    assert refused("exchange_delivered_order_items", gift, ctx_for(ALEX.user_id), world) == "insufficient_gift_card_balance"
    order.items[0].price = round(world.find_variant(new)[1].price - diff, 2)
    assert call("exchange_delivered_order_items", args, ctx_for(ALEX.user_id), world).observation.ok
    assert order.status == "exchange requested"
    assert (order.exchange_items, order.exchange_new_items) == ([old], [new])
    assert order.exchange_price_difference == diff and order.exchange_payment_method_id == ALEX.credit_card_id
    assert refused("exchange_delivered_order_items", args, ctx_for(ALEX.user_id), world) == "order_not_delivered"


# ---- profile --------------------------------------------------------------------------


def test_modify_user_address(world: RetailWorld) -> None:
    args = {"user_id": ALEX.user_id, **ADDR}
    assert refused("modify_user_address", args, ctx_for(None), world) == "not_authenticated"
    assert refused("modify_user_address", args, ctx_for(PRIYA.user_id), world) == "other_user"
    assert refused("modify_user_address", args, ctx_for(ALEX.user_id, False), world) == "not_confirmed"
    out = call("modify_user_address", args, ctx_for(ALEX.user_id), world)
    assert out.observation.ok and out.changed == {"user": [ALEX.user_id]}
    assert world.users[ALEX.user_id].address.zip == "89501"
    assert refused("modify_user_address", args, ctx_for(ALEX.user_id), world) == "same_address"  # already it


def test_registry_call_keeps_reason_in_message(world: RetailWorld) -> None:
    obs = REG.call("cancel_pending_order", {"order_id": ALEX.delivered_order_id, "reason": "no longer needed"},
                   ctx_for(ALEX.user_id), world)
    assert obs.error_code == "ineligible_action" and obs.error_message.endswith("[order_not_pending]")
