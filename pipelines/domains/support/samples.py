"""The support pack's sample writes: one eligible, grounded call of each write tool on a retail world, for
``tandem domain check`` (:meth:`pipelines.core.domain.Domain.sample_writes`).

Each is found on the world itself (a pending order to cancel or change, a delivered one to return or exchange,
a variant of the same product for an exchange, a payment method of the user's), and kept only when the pack's
own precheck and grounding re-check pass — the user's words hold the ids they would type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipelines.core.domain import SampleWrite
from pipelines.tools import ToolContext

from .world import Order, RetailWorld

__all__ = ["sample_writes"]


#: A new address, as a user types it (the sample changes the address on file to it).
NEW_ADDRESS = {"address1": "12 Oak Road", "address2": "Suite 4", "city": "Austin", "state": "TX", "country": "USA",
               "zip": "73301"}
MOVED = "Please use my new address: 12 Oak Road, Suite 4, Austin, TX 73301, USA."


def _swap(world: RetailWorld, order: Order) -> tuple[str, str, str] | None:
    """An item of the order, another available variant of its product, and how the user describes that one."""
    for item in order.items:
        product = world.products.get(item.product_id)
        for vid, variant in (product.variants.items() if product else ()):
            if vid != item.item_id and variant.available:
                return item.item_id, vid, " ".join(variant.options.values())
    return None


def _calls(world: RetailWorld) -> Iterator[tuple[str, dict[str, Any], str, str]]:
    """``(tool, args, user id, what the user says)`` candidates, in the world's order."""
    for user in list(world.users.values())[:40]:
        uid = user.user_id
        pay = sorted(user.payment_methods)
        yield "modify_user_address", {"user_id": uid, **NEW_ADDRESS}, uid, f"I am {uid}. {MOVED}"
        for oid in user.orders:
            order = world.orders.get(oid)
            if order is None:
                continue
            said = f"It is about order {oid}."
            original = order.payment_history[0].payment_method_id if order.payment_history else (pay or [""])[0]
            if order.status == "pending":
                yield "cancel_pending_order", {"order_id": oid, "reason": "no longer needed"}, uid, said
                yield "modify_pending_order_address", {"order_id": oid, **NEW_ADDRESS}, uid, f"{said} {MOVED}"
                for other in pay:
                    if other != original:
                        yield ("modify_pending_order_payment", {"order_id": oid, "payment_method_id": other}, uid,
                               f"{said} Pay with {other}.")
                swap = _swap(world, order)
                if swap:
                    args = {"order_id": oid, "item_ids": [swap[0]], "new_item_ids": [swap[1]],
                            "payment_method_id": original}
                    yield ("modify_pending_order_items", args, uid,
                           f"{said} Item {swap[0]} to the {swap[2]} one, paid with {original}.")
            if order.status == "delivered" and order.items:
                item = order.items[0].item_id
                yield ("return_delivered_order_items", {"order_id": oid, "item_ids": [item],
                                                        "payment_method_id": original}, uid,
                       f"{said} Item {item}, refund to {original}.")
                swap = _swap(world, order)
                if swap:
                    args = {"order_id": oid, "item_ids": [swap[0]], "new_item_ids": [swap[1]],
                            "payment_method_id": original}
                    yield ("exchange_delivered_order_items", args, uid,
                           f"{said} Item {swap[0]} to the {swap[2]} one, paid with {original}.")


def sample_writes(pack: Any, world: RetailWorld) -> list[SampleWrite]:
    """One call per write tool that the pack's precheck and grounding re-check accept."""
    found: dict[str, SampleWrite] = {}
    for tool, args, uid, said in _calls(world):
        if tool in found:
            continue
        ctx = ToolContext(session_id="sample", authenticated_user_id=uid, observed_ids=set())
        if pack.precheck(tool, args, ctx, world) is None and not pack.ungrounded(tool, args, [said], world, uid):
            found[tool] = SampleWrite(tool=tool, args=args, user_id=uid, user_texts=(said,))
        if len(found) == len(pack.write_tools):
            break
    return [found[t] for t in sorted(found)]
