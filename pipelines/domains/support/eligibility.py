"""Eligibility rules of the retail policy, as small pure checks over (context, world).

Every refusal raises :class:`pipelines.errors.IneligibleAction` with a stable
reason code in ``details["reason"]`` (one of :data:`REASONS`); the message ends
with ``[reason]`` too, because a :class:`pipelines.tools.ToolObservation`
keeps only the message. Lookups that find nothing raise
:class:`pipelines.errors.ToolError` with a reason code in the same place.

Authentication is a session fact: the pipeline locates the user (by email or
name + zip) and then calls :func:`authenticate`; the lookup tools never do it
themselves.
"""

from __future__ import annotations

from typing import NoReturn

from pipelines.errors import IneligibleAction, ToolError
from pipelines.tools import ToolContext

from .world import Address, GiftCard, Order, PaymentMethod, Product, RetailWorld, User

__all__ = [
    "REASONS",
    "refuse",
    "not_found",
    "reason_of",
    "authenticate",
    "require_authenticated",
    "require_confirmed",
    "require_user",
    "require_own_order",
    "require_status",
    "require_payment_method",
    "require_items_in_order",
    "require_gift_card_covers",
    "price_difference",
]

REASONS: tuple[str, ...] = (
    "not_authenticated",
    "other_user",
    "not_confirmed",
    "user_not_found",
    "order_not_found",
    "order_not_owned",
    "order_not_pending",
    "order_not_delivered",
    "item_not_in_order",
    "empty_item_list",
    "item_count_mismatch",
    "same_item",
    "variant_not_in_product",
    "variant_unavailable",
    "payment_method_not_found",
    "same_payment_method",
    "same_address",
    "payment_history_not_single",
    "insufficient_gift_card_balance",
    "refund_method_not_allowed",
    "product_not_found",
    "item_not_found",
    "invalid_expression",
    "ungrounded_argument",
)


def refuse(reason: str, message: str, **details: object) -> NoReturn:
    """Raise :class:`IneligibleAction` with ``details["reason"] = reason``."""
    assert reason in REASONS, reason
    raise IneligibleAction(f"{message} [{reason}]", details={"reason": reason, **details})


def not_found(reason: str, message: str, **details: object) -> NoReturn:
    """Raise :class:`ToolError` for a lookup that found nothing."""
    assert reason in REASONS, reason
    raise ToolError(f"{message} [{reason}]", details={"reason": reason, **details})


def reason_of(message: str | None) -> str | None:
    """Recover the reason code from an observation's error message (``... [reason]``)."""
    if not message or not message.endswith("]") or "[" not in message:
        return None
    code = message[message.rindex("[") + 1 : -1]
    return code if code in REASONS else None


def authenticate(ctx: ToolContext, user_id: str, world: RetailWorld | None = None) -> ToolContext:
    """Mark ``user_id`` as the authenticated user of this session (mutates and returns ``ctx``).

    Call it after a lookup tool (email, or name + zip) returned this id. With a
    ``world``, the id must exist. Policy: one user per conversation, so a
    second, different user is refused with ``other_user``.
    """
    if world is not None and user_id not in world.users:
        not_found("user_not_found", f"user {user_id!r} not found")
    if ctx.authenticated_user_id not in (None, user_id):
        refuse("other_user", "another user is already authenticated in this session")
    ctx.authenticated_user_id = user_id
    ctx.observed_ids.add(user_id)
    return ctx


def require_authenticated(ctx: ToolContext) -> str:
    """The authenticated user id, or refuse with ``not_authenticated``."""
    if not ctx.authenticated_user_id:
        refuse("not_authenticated", "the user has not been authenticated in this session")
    return ctx.authenticated_user_id


def require_confirmed(ctx: ToolContext) -> None:
    """Refuse with ``not_confirmed`` unless the user explicitly confirmed this write."""
    if not ctx.confirmed:
        refuse("not_confirmed", "the user has not explicitly confirmed this action")


def require_user(ctx: ToolContext, world: RetailWorld, user_id: str) -> User:
    """The authenticated user, who must be ``user_id`` (``other_user`` otherwise)."""
    me = require_authenticated(ctx)
    if user_id != me:
        refuse("other_user", "requests about another user are not allowed", user_id=user_id)
    user = world.users.get(user_id)
    if user is None:
        refuse("user_not_found", f"user {user_id!r} not found")
    return user


def require_own_order(ctx: ToolContext, world: RetailWorld, order_id: str) -> Order:
    """The order, which must exist and belong to the authenticated user."""
    me = require_authenticated(ctx)
    order = world.orders.get(order_id)
    if order is None:
        refuse("order_not_found", f"order {order_id!r} not found", order_id=order_id)
    if order.user_id != me:
        refuse("order_not_owned", f"order {order_id} does not belong to the authenticated user")
    return order


def require_status(order: Order, allowed: tuple[str, ...], reason: str) -> None:
    """Refuse with ``reason`` unless the order's status is one of ``allowed``."""
    if order.status not in allowed:
        refuse(reason, f"order {order.order_id} has status {order.status!r}", status=order.status)


def require_new_address(current: Address, new: Address) -> None:
    """A change of address must change it: the address it already has is refused (``same_address``)."""
    if current == new:
        refuse("same_address", "the new address is the one already on record")


def require_payment_method(world: RetailWorld, user_id: str, payment_method_id: str) -> PaymentMethod:
    """A payment method of ``user_id`` (``payment_method_not_found`` otherwise)."""
    method = world.users[user_id].payment_methods.get(payment_method_id)
    if method is None:
        refuse("payment_method_not_found", f"payment method {payment_method_id!r} is not the user's")
    return method


def require_items_in_order(order: Order, item_ids: list[str]) -> None:
    """Every id (with multiplicity) must be an item of the order; the list is not empty."""
    if not item_ids:
        refuse("empty_item_list", "no items were given")
    have = [item.item_id for item in order.items]
    for item_id in set(item_ids):
        if item_ids.count(item_id) > have.count(item_id):
            refuse("item_not_in_order", f"item {item_id} is not in order {order.order_id}")


def price_difference(world: RetailWorld, order: Order, item_ids: list[str], new_item_ids: list[str]) -> float:
    """Check an item swap (same product, other available variant) and return new minus old price."""
    require_items_in_order(order, item_ids)
    if len(item_ids) != len(new_item_ids):
        refuse("item_count_mismatch", "item_ids and new_item_ids must have the same length")
    diff = 0.0
    for old_id, new_id in zip(item_ids, new_item_ids, strict=True):
        if old_id == new_id:
            refuse("same_item", f"new item {new_id} is the same as the old one")
        item = next(i for i in order.items if i.item_id == old_id)
        product: Product | None = world.products.get(item.product_id)
        variant = product.variants.get(new_id) if product is not None else None
        if variant is None:
            refuse("variant_not_in_product", f"item {new_id} is not a variant of product {item.product_id}")
        if not variant.available:
            refuse("variant_unavailable", f"item {new_id} is not available")
        diff += variant.price - item.price
    return round(diff, 2)


def require_gift_card_covers(method: PaymentMethod, amount: float) -> None:
    """A gift card used to pay must hold at least ``amount``."""
    if isinstance(method, GiftCard) and amount > 0 and method.balance < amount:
        refuse(
            "insufficient_gift_card_balance",
            f"gift card {method.id} balance {method.balance:.2f} does not cover {amount:.2f}",
        )

