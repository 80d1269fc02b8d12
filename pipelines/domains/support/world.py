"""The retail world: pydantic models with the exact shape of tau2-retail's ``db.json``.

A :class:`RetailWorld` holds three dicts (``users``, ``orders``, ``products``)
keyed by id. :meth:`RetailWorld.from_tau2_json` accepts the real tau2 file as
is; :meth:`RetailWorld.to_json` gives it back (optional fields that are unset
are left out, so an untouched world round-trips to the same JSON).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.runner import WriteScope
from pipelines.core.world import RecordWorld

__all__ = [
    "ORDER_STATUSES",
    "CANCEL_REASONS",
    "OrderStatus",
    "CancelReason",
    "UserName",
    "Address",
    "CreditCard",
    "PayPal",
    "GiftCard",
    "PaymentMethod",
    "User",
    "OrderItem",
    "Fulfillment",
    "PaymentRecord",
    "Order",
    "Variant",
    "Product",
    "RetailWorld",
    "load_tau2_world",
]

OrderStatus = Literal[
    "pending",
    "pending (item modified)",
    "processed",
    "delivered",
    "cancelled",
    "exchange requested",
    "return requested",
]
ORDER_STATUSES: tuple[str, ...] = OrderStatus.__args__  # type: ignore[attr-defined]

CancelReason = Literal["no longer needed", "ordered by mistake"]
CANCEL_REASONS: tuple[str, ...] = CancelReason.__args__  # type: ignore[attr-defined]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserName(_Model):
    first_name: str
    last_name: str


class Address(_Model):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class CreditCard(_Model):
    source: Literal["credit_card"] = "credit_card"
    id: str
    brand: str
    last_four: str


class PayPal(_Model):
    source: Literal["paypal"] = "paypal"
    id: str


class GiftCard(_Model):
    source: Literal["gift_card"] = "gift_card"
    id: str
    balance: float


PaymentMethod = Annotated[CreditCard | PayPal | GiftCard, Field(discriminator="source")]


class User(_Model):
    user_id: str
    name: UserName
    address: Address
    email: str
    payment_methods: dict[str, PaymentMethod]
    orders: list[str]


class OrderItem(_Model):
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, str]


class Fulfillment(_Model):
    tracking_id: list[str]
    item_ids: list[str]


class PaymentRecord(_Model):
    transaction_type: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


class Order(_Model):
    order_id: str
    user_id: str
    address: Address
    items: list[OrderItem]
    status: OrderStatus
    fulfillments: list[Fulfillment]
    payment_history: list[PaymentRecord]
    cancel_reason: CancelReason | None = None
    exchange_items: list[str] | None = None
    exchange_new_items: list[str] | None = None
    exchange_payment_method_id: str | None = None
    exchange_price_difference: float | None = None
    return_items: list[str] | None = None
    return_payment_method_id: str | None = None

    def total_paid(self) -> float:
        """Payments minus refunds over the whole payment history, rounded to cents."""
        total = 0.0
        for rec in self.payment_history:
            total += rec.amount if rec.transaction_type == "payment" else -rec.amount
        return round(total, 2)


class Variant(_Model):
    item_id: str
    options: dict[str, str]
    available: bool
    price: float


class Product(_Model):
    name: str
    product_id: str
    variants: dict[str, Variant]


class RetailWorld(RecordWorld):
    """The whole retail state: users, orders and products keyed by id (a :class:`RecordWorld`)."""

    KINDS: ClassVar[dict[str, str]] = {"user": "users", "order": "orders", "product": "products"}

    users: dict[str, User] = Field(default_factory=dict)
    orders: dict[str, Order] = Field(default_factory=dict)
    products: dict[str, Product] = Field(default_factory=dict)

    @classmethod
    def from_tau2_json(cls, data: dict[str, Any]) -> RetailWorld:
        """Validate a tau2-retail ``db.json`` document (already parsed) into a world."""
        return cls.from_json(data)  # type: ignore[no-any-return]

    def write_scope(self, tool: str, args: Mapping[str, Any], user_id: str | None) -> WriteScope:
        """What a write of ``user_id`` may change: their profile and their orders (it creates nothing)."""
        user = self.users.get(user_id) if user_id else None
        if user is None:
            return WriteScope()
        return WriteScope(existing={"user": {user.user_id}, "order": {o for o in user.orders if o in self.orders}})

    def find_variant(self, item_id: str) -> tuple[Product, Variant] | None:
        """The product and variant that own ``item_id``, or ``None``."""
        for product in self.products.values():
            variant = product.variants.get(item_id)
            if variant is not None:
                return product, variant
        return None

    def reference_errors(self) -> list[str]:
        """Broken cross-references (order -> user, user -> order, payment -> method).

        Empty for a consistent world; the generator's output and the real tau2
        data are both checked against this in the tests.
        """
        errors: list[str] = []
        for oid, order in self.orders.items():
            if oid != order.order_id:
                errors.append(f"order key {oid} != order_id {order.order_id}")
            user = self.users.get(order.user_id)
            if user is None:
                errors.append(f"order {oid}: unknown user {order.user_id}")
                continue
            if oid not in user.orders:
                errors.append(f"order {oid}: not listed by user {order.user_id}")
            for rec in order.payment_history:
                if rec.payment_method_id not in user.payment_methods:
                    errors.append(f"order {oid}: unknown payment method {rec.payment_method_id}")
        for uid, user in self.users.items():
            if uid != user.user_id:
                errors.append(f"user key {uid} != user_id {user.user_id}")
            for oid in user.orders:
                if oid not in self.orders:
                    errors.append(f"user {uid}: unknown order {oid}")
        for pid, product in self.products.items():
            if pid != product.product_id:
                errors.append(f"product key {pid} != product_id {product.product_id}")
            for vid, variant in product.variants.items():
                if vid != variant.item_id:
                    errors.append(f"product {pid}: variant key {vid} != item_id {variant.item_id}")
        return errors


def load_tau2_world(path: str | Path) -> RetailWorld:
    """Read and validate a tau2-retail ``db.json`` file."""
    with open(path, encoding="utf-8") as fh:
        return RetailWorld.from_tau2_json(json.load(fh))
