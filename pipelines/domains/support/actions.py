"""Tools over the authenticated user's own data: user/order reads and every write.

Each write tool is a pair: ``check_<tool>`` (the eligibility rule, pure; it
returns what the handler needs) and ``<tool>`` (the handler, which re-runs
the check and then mutates the world). Semantics follow policy.md and tau2:

* cancel: ``pending`` only; status -> ``cancelled``; each payment method is
  refunded its net amount; a gift card is credited at once.
* modify items: ``pending`` only, once; same product, other available variant;
  the price difference is a payment (or refund) on the given method; a gift
  card is debited (or credited) at once; status -> ``pending (item modified)``.
* modify address / payment: ``pending`` only (not after an item change,
  per policy); payment: exactly one prior payment, a different method, a gift
  card must cover the total; the old method is refunded.
* return: ``delivered`` only; refund to the original method or a gift card;
  status -> ``return requested``; the refund itself is settled when the items
  come back, so no payment record is written now (as tau2).
* exchange: ``delivered`` only; same product, other available variant; a gift
  card must cover a positive difference; status -> ``exchange requested``.
"""

from __future__ import annotations

from pipelines.tools import ToolContext

from . import eligibility as el
from .schemas import (
    CancelArgs,
    ItemSwapArgs,
    OrderAddressArgs,
    OrderIdArgs,
    OrderPaymentArgs,
    ReturnArgs,
    UserAddressArgs,
    UserIdArgs,
)
from .world import GiftCard, Order, PaymentMethod, PaymentRecord, RetailWorld, User

__all__ = [
    "check_get_user_details",
    "get_user_details",
    "check_get_order_details",
    "get_order_details",
    "check_cancel_pending_order",
    "cancel_pending_order",
    "check_modify_pending_order_items",
    "modify_pending_order_items",
    "check_modify_pending_order_address",
    "modify_pending_order_address",
    "check_modify_pending_order_payment",
    "modify_pending_order_payment",
    "check_return_delivered_order_items",
    "return_delivered_order_items",
    "check_exchange_delivered_order_items",
    "exchange_delivered_order_items",
    "check_modify_user_address",
    "modify_user_address",
]

_PENDING = ("pending",)
_DELIVERED = ("delivered",)


def _credit(method: PaymentMethod, amount: float) -> None:
    if isinstance(method, GiftCard):
        method.balance = round(method.balance + amount, 2)


# ---- private reads -----------------------------------------------------------------


def check_get_user_details(args: UserIdArgs, ctx: ToolContext, world: RetailWorld) -> User:
    """Only the authenticated user's own profile can be read."""
    return el.require_user(ctx, world, args.user_id)


def get_user_details(args: UserIdArgs, ctx: ToolContext, world: RetailWorld) -> User:
    """The authenticated user's profile: address, payment methods, order ids."""
    user = check_get_user_details(args, ctx, world)
    ctx.observed_ids.update(user.orders)
    ctx.observed_ids.update(user.payment_methods)
    return user


def check_get_order_details(args: OrderIdArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Only orders of the authenticated user can be read."""
    return el.require_own_order(ctx, world, args.order_id)


def get_order_details(args: OrderIdArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Status, items, fulfillments and payment history of one of the user's orders."""
    order = check_get_order_details(args, ctx, world)
    ctx.observed_ids.add(order.order_id)
    ctx.observed_ids.update(i.item_id for i in order.items)
    return order


# ---- pending orders ----------------------------------------------------------------


def check_cancel_pending_order(args: CancelArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Own order, status ``pending``, confirmed (the reason is typed by the args model)."""
    order = el.require_own_order(ctx, world, args.order_id)
    el.require_status(order, _PENDING, "order_not_pending")
    el.require_confirmed(ctx)
    return order


def cancel_pending_order(args: CancelArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Cancel; refund each payment method its net amount (gift cards credited at once)."""
    order = check_cancel_pending_order(args, ctx, world)
    user = world.users[order.user_id]
    net: dict[str, float] = {}
    for rec in order.payment_history:
        sign = 1.0 if rec.transaction_type == "payment" else -1.0
        net[rec.payment_method_id] = net.get(rec.payment_method_id, 0.0) + sign * rec.amount
    for pm_id, amount in net.items():
        amount = round(amount, 2)
        if amount <= 0:
            continue
        order.payment_history.append(
            PaymentRecord(transaction_type="refund", amount=amount, payment_method_id=pm_id)
        )
        if pm_id in user.payment_methods:
            _credit(user.payment_methods[pm_id], amount)
    order.status = "cancelled"
    order.cancel_reason = args.reason
    return order


def check_modify_pending_order_items(
    args: ItemSwapArgs, ctx: ToolContext, world: RetailWorld
) -> tuple[Order, PaymentMethod, float]:
    """Own ``pending`` order, valid swaps, the user's method (gift card covers), confirmed."""
    order = el.require_own_order(ctx, world, args.order_id)
    el.require_status(order, _PENDING, "order_not_pending")
    diff = el.price_difference(world, order, args.item_ids, args.new_item_ids)
    method = el.require_payment_method(world, order.user_id, args.payment_method_id)
    el.require_gift_card_covers(method, diff)
    el.require_confirmed(ctx)
    return order, method, diff


def modify_pending_order_items(args: ItemSwapArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Swap item variants; settle the difference; status -> ``pending (item modified)``."""
    order, method, diff = check_modify_pending_order_items(args, ctx, world)
    if diff != 0:
        order.payment_history.append(
            PaymentRecord(
                transaction_type="payment" if diff > 0 else "refund",
                amount=abs(diff),
                payment_method_id=args.payment_method_id,
            )
        )
        _credit(method, -diff)
    for old_id, new_id in zip(args.item_ids, args.new_item_ids, strict=True):
        item = next(i for i in order.items if i.item_id == old_id)
        variant = world.products[item.product_id].variants[new_id]
        item.item_id = new_id
        item.price = variant.price
        item.options = dict(variant.options)
    order.status = "pending (item modified)"
    return order


def check_modify_pending_order_address(args: OrderAddressArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Own ``pending`` order, to another address than its own, confirmed."""
    order = el.require_own_order(ctx, world, args.order_id)
    el.require_status(order, _PENDING, "order_not_pending")
    el.require_new_address(order.address, args.to_address())
    el.require_confirmed(ctx)
    return order


def modify_pending_order_address(args: OrderAddressArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Replace the order's shipping address."""
    order = check_modify_pending_order_address(args, ctx, world)
    order.address = args.to_address()
    return order


def check_modify_pending_order_payment(
    args: OrderPaymentArgs, ctx: ToolContext, world: RetailWorld
) -> tuple[Order, PaymentMethod]:
    """Own ``pending`` order paid once, a different method of the user's, gift card covers, confirmed."""
    order = el.require_own_order(ctx, world, args.order_id)
    el.require_status(order, _PENDING, "order_not_pending")
    method = el.require_payment_method(world, order.user_id, args.payment_method_id)
    history = order.payment_history
    if len(history) != 1 or history[0].transaction_type != "payment":
        el.refuse("payment_history_not_single", "the order must have exactly one payment")
    if history[0].payment_method_id == args.payment_method_id:
        el.refuse("same_payment_method", "the new payment method must differ from the current one")
    el.require_gift_card_covers(method, history[0].amount)
    el.require_confirmed(ctx)
    return order, method


def modify_pending_order_payment(args: OrderPaymentArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Pay with the new method, refund the old one (gift cards settle at once)."""
    order, method = check_modify_pending_order_payment(args, ctx, world)
    old = order.payment_history[0]
    order.payment_history.append(
        PaymentRecord(transaction_type="payment", amount=old.amount, payment_method_id=args.payment_method_id)
    )
    order.payment_history.append(
        PaymentRecord(transaction_type="refund", amount=old.amount, payment_method_id=old.payment_method_id)
    )
    _credit(method, -old.amount)
    old_method = world.users[order.user_id].payment_methods.get(old.payment_method_id)
    if old_method is not None:
        _credit(old_method, old.amount)
    return order


# ---- delivered orders --------------------------------------------------------------


def check_return_delivered_order_items(args: ReturnArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Own ``delivered`` order, items in it, refund to the original method or a gift card, confirmed."""
    order = el.require_own_order(ctx, world, args.order_id)
    el.require_status(order, _DELIVERED, "order_not_delivered")
    el.require_items_in_order(order, args.item_ids)
    method = el.require_payment_method(world, order.user_id, args.payment_method_id)
    original = order.payment_history[0].payment_method_id if order.payment_history else None
    if not isinstance(method, GiftCard) and args.payment_method_id != original:
        el.refuse("refund_method_not_allowed", "refunds go to the original payment method or a gift card")
    el.require_confirmed(ctx)
    return order


def return_delivered_order_items(args: ReturnArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Status -> ``return requested``; record the items and the refund method."""
    order = check_return_delivered_order_items(args, ctx, world)
    order.status = "return requested"
    order.return_items = sorted(args.item_ids)
    order.return_payment_method_id = args.payment_method_id
    return order


def check_exchange_delivered_order_items(
    args: ItemSwapArgs, ctx: ToolContext, world: RetailWorld
) -> tuple[Order, float]:
    """Own ``delivered`` order, valid swaps, the user's method (gift card covers), confirmed."""
    order = el.require_own_order(ctx, world, args.order_id)
    el.require_status(order, _DELIVERED, "order_not_delivered")
    diff = el.price_difference(world, order, args.item_ids, args.new_item_ids)
    method = el.require_payment_method(world, order.user_id, args.payment_method_id)
    el.require_gift_card_covers(method, diff)
    el.require_confirmed(ctx)
    return order, diff


def exchange_delivered_order_items(args: ItemSwapArgs, ctx: ToolContext, world: RetailWorld) -> Order:
    """Status -> ``exchange requested``; record items, new items, method and difference."""
    order, diff = check_exchange_delivered_order_items(args, ctx, world)
    order.status = "exchange requested"
    order.exchange_items = sorted(args.item_ids)
    order.exchange_new_items = sorted(args.new_item_ids)
    order.exchange_payment_method_id = args.payment_method_id
    order.exchange_price_difference = diff
    return order


# ---- profile -----------------------------------------------------------------------


def check_modify_user_address(args: UserAddressArgs, ctx: ToolContext, world: RetailWorld) -> User:
    """Only the authenticated user's own default address, changed, confirmed."""
    user = el.require_user(ctx, world, args.user_id)
    el.require_new_address(user.address, args.to_address())
    el.require_confirmed(ctx)
    return user


def modify_user_address(args: UserAddressArgs, ctx: ToolContext, world: RetailWorld) -> User:
    """Replace the user's default address (existing orders keep theirs)."""
    user = check_modify_user_address(args, ctx, world)
    user.address = args.to_address()
    return user
