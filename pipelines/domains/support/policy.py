"""The support pack's policy lines: what the forward contract states about the change on offer.

The generator may repeat these (they are part of the contract, so their delays
and amounts pass the post-guard); each write tool has its own lines.
"""

from __future__ import annotations

__all__ = ["GENERAL_CONSTRAINTS", "POLICY_CONSTRAINTS", "policy_lines"]

GENERAL_CONSTRAINTS: tuple[str, ...] = (
    "Act only for the verified user of this conversation.",
    "Every change needs the user's explicit yes first.",
)
POLICY_CONSTRAINTS: dict[str, tuple[str, ...]] = {
    "cancel_pending_order": (
        "Only pending orders can be cancelled; reason: no longer needed or ordered by mistake.",
        "Gift card refunds are immediate; other refunds take five to seven business days.",
    ),
    "modify_pending_order_items": (
        "Only pending orders can be modified, and item options only once.",
    ),
    "modify_pending_order_address": ("Only pending orders can get a new shipping address.",),
    "modify_pending_order_payment": (
        "A gift card must cover the order total; the old method is refunded (gift card at once, "
        "otherwise five to seven business days).",
    ),
    "return_delivered_order_items": (
        "Only delivered orders can be returned; the refund goes to the original method or a gift card.",
        "The user receives an email with return instructions.",
    ),
    "exchange_delivered_order_items": (
        "Only delivered orders can be exchanged, once, for the same product.",
        "The user receives an email with return instructions.",
    ),
    "modify_user_address": ("Existing orders keep their shipping address.",),
}


def policy_lines(tool: str | None) -> tuple[str, ...]:
    """The policy lines of a write tool, then the general ones."""
    return POLICY_CONSTRAINTS.get(tool or "", ()) + GENERAL_CONSTRAINTS
