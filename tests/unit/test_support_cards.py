"""The retail action cards: the catalogue pinned by hand, and each validation rule."""

from __future__ import annotations

import pytest

from pipelines.domains.support.cards import ACTION_CARDS, cards_for_tool, get_card, validate_cards

# id -> (tool, kind, confirmation, intent, required params), from the catalogue's rules: every
# write needs confirmation; reads do not.
EXPECTED = {
    "card.cancel_order": ("cancel_pending_order", "write", True, "cancel", ("order_id", "reason")),
    "card.modify_items": ("modify_pending_order_items", "write", True, "modify",
                          ("order_id", "item_ids", "new_item_ids", "payment_method_id")),
    "card.modify_address": ("modify_pending_order_address", "write", True, "modify",
                            ("order_id", "address1", "address2", "city", "state", "country", "zip")),
    "card.modify_payment": ("modify_pending_order_payment", "write", True, "modify",
                            ("order_id", "payment_method_id")),
    "card.return_items": ("return_delivered_order_items", "write", True, "return",
                          ("order_id", "item_ids", "payment_method_id")),
    "card.exchange_items": ("exchange_delivered_order_items", "write", True, "exchange",
                            ("order_id", "item_ids", "new_item_ids", "payment_method_id")),
    "card.modify_user_address": ("modify_user_address", "write", True, "account",
                                 ("user_id", "address1", "address2", "city", "state", "country", "zip")),
    "card.refund_status": ("get_order_details", "read", False, "order_status", ("order_id",)),
    "card.transfer_human": ("transfer_to_human_agents", "read", False, "human", ("summary",)),
}


def test_catalogue_pinned() -> None:
    assert [c.id for c in ACTION_CARDS] == list(EXPECTED)
    for card in ACTION_CARDS:
        assert (card.tool, card.kind, card.requires_confirmation, card.intent, card.required_params) == EXPECTED[card.id]


def test_lookups() -> None:
    for card in ACTION_CARDS:
        assert get_card(card.id) is card
    assert get_card("card.nope") is None
    assert cards_for_tool("cancel_pending_order") == [get_card("card.cancel_order")]
    assert cards_for_tool("no_such_tool") == []


def test_the_catalogue_validates() -> None:
    assert validate_cards(ACTION_CARDS) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tool": "nope"}, "card card.cancel_order: unknown tool nope"),
        ({"kind": "read", "requires_confirmation": False}, "card card.cancel_order: kind read but tool cancel_pending_order is write"),
        ({"required_params": ("order_id", "colour")},
         "card card.cancel_order: ['colour'] are not arguments of cancel_pending_order"),
        ({"requires_confirmation": False}, "card card.cancel_order: a write card must require confirmation"),
    ],
)
def test_each_validation_rule(change: dict, message: str) -> None:
    bad = ACTION_CARDS[0].model_copy(update=change)
    with pytest.raises(ValueError) as info:
        validate_cards((bad,))
    assert str(info.value) == message


def test_duplicate_ids_refused() -> None:
    with pytest.raises(ValueError) as info:
        validate_cards((ACTION_CARDS[0], ACTION_CARDS[1], ACTION_CARDS[0]))
    assert str(info.value) == "duplicate card id card.cancel_order"


def test_a_read_card_may_skip_confirmation_and_order_does_not_matter() -> None:
    assert validate_cards(tuple(reversed(ACTION_CARDS))) is None
    status = get_card("card.refund_status")
    assert validate_cards((status.model_copy(update={"requires_confirmation": True}),)) is None
