"""The catalogue of structured action cards for the retail domain.

An action card is what the orchestrator may select as the turn's path: it
names one tool and the parameters that tool needs. The catalogue is
validated at import: card ids are unique, every tool exists, and every
required parameter is a field of that tool's argument model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .tools import TOOL_SPECS

__all__ = ["ActionCard", "ACTION_CARDS", "get_card", "cards_for_tool", "validate_cards"]


class ActionCard(BaseModel):
    """One structured action the assistant can offer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^card\.[a-z_]+$")
    title: str
    tool: str
    kind: Literal["read", "write"]
    required_params: tuple[str, ...]
    requires_confirmation: bool
    intent: str
    description: str


ACTION_CARDS: tuple[ActionCard, ...] = (
    ActionCard(
        id="card.cancel_order", title="Cancel order", tool="cancel_pending_order", kind="write",
        required_params=("order_id", "reason"), requires_confirmation=True, intent="cancel",
        description="Cancel a pending order; the total is refunded to the original payment method(s).",
    ),
    ActionCard(
        id="card.modify_items", title="Change item options", tool="modify_pending_order_items", kind="write",
        required_params=("order_id", "item_ids", "new_item_ids", "payment_method_id"),
        requires_confirmation=True, intent="modify",
        description="Swap items of a pending order for other variants of the same product (only once).",
    ),
    ActionCard(
        id="card.modify_address", title="Change shipping address", tool="modify_pending_order_address",
        kind="write",
        required_params=("order_id", "address1", "address2", "city", "state", "country", "zip"),
        requires_confirmation=True, intent="modify",
        description="Ship a pending order to a different address.",
    ),
    ActionCard(
        id="card.modify_payment", title="Change payment method", tool="modify_pending_order_payment",
        kind="write", required_params=("order_id", "payment_method_id"), requires_confirmation=True,
        intent="modify",
        description="Pay a pending order with another of the user's payment methods; the old one is refunded.",
    ),
    ActionCard(
        id="card.return_items", title="Return items", tool="return_delivered_order_items", kind="write",
        required_params=("order_id", "item_ids", "payment_method_id"), requires_confirmation=True,
        intent="return",
        description="Request a return of delivered items; refund to the original method or a gift card.",
    ),
    ActionCard(
        id="card.exchange_items", title="Exchange items", tool="exchange_delivered_order_items", kind="write",
        required_params=("order_id", "item_ids", "new_item_ids", "payment_method_id"),
        requires_confirmation=True, intent="exchange",
        description="Request an exchange of delivered items for other variants of the same product (once).",
    ),
    ActionCard(
        id="card.modify_user_address", title="Change default address", tool="modify_user_address",
        kind="write",
        required_params=("user_id", "address1", "address2", "city", "state", "country", "zip"),
        requires_confirmation=True, intent="account",
        description="Change the default address on the user's profile.",
    ),
    ActionCard(
        id="card.refund_status", title="Order and refund status", tool="get_order_details", kind="read",
        required_params=("order_id",), requires_confirmation=False, intent="order_status",
        description="Show an order's status and payment history (payments and refunds per method).",
    ),
    ActionCard(
        id="card.transfer_human", title="Talk to a person", tool="transfer_to_human_agents", kind="read",
        required_params=("summary",), requires_confirmation=False, intent="human",
        description="Hand the conversation to a human agent with a summary.",
    ),
)


def validate_cards(cards: tuple[ActionCard, ...]) -> None:
    """Raise ``ValueError`` unless ids are unique and every tool and parameter exists."""
    specs = {s.name: s for s in TOOL_SPECS}
    seen: set[str] = set()
    for card in cards:
        if card.id in seen:
            raise ValueError(f"duplicate card id {card.id}")
        seen.add(card.id)
        spec = specs.get(card.tool)
        if spec is None:
            raise ValueError(f"card {card.id}: unknown tool {card.tool}")
        if spec.kind != card.kind:
            raise ValueError(f"card {card.id}: kind {card.kind} but tool {card.tool} is {spec.kind}")
        missing = set(card.required_params) - set(spec.args_model.model_fields)
        if missing:
            raise ValueError(f"card {card.id}: {sorted(missing)} are not arguments of {card.tool}")
        if card.kind == "write" and not card.requires_confirmation:
            raise ValueError(f"card {card.id}: a write card must require confirmation")


validate_cards(ACTION_CARDS)
_BY_ID = {c.id: c for c in ACTION_CARDS}


def get_card(card_id: str) -> ActionCard | None:
    """The card with this id, or ``None``."""
    return _BY_ID.get(card_id)


def cards_for_tool(tool: str) -> list[ActionCard]:
    """Every card that runs ``tool``."""
    return [c for c in ACTION_CARDS if c.tool == tool]
