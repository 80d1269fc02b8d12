"""Card ids in generated text: written whole or spaced out, never the end of a sentence about a card."""

from __future__ import annotations

import pytest

from pipelines.guardrails.ids import extract_ids


@pytest.mark.parametrize("text, expected", [
    ("I have prepared card.cancel_order for you.", {"card.cancel_order"}),
    ("See card . cancel_order below.", {"card.cancel_order"}),
    ("CARD.Cancel_Order", {"card.cancel_order"}),
    ("card.refund", {"card.refund"}),
    ("You can pay with your gift card. Please confirm.", set()),
    ("Use the card. thanks", set()),  # just outside: spaced out, one word, no underscore
    ("discard.cancel_order", set()),  # no word boundary before "card"
])
def test_card_ids(text: str, expected: set[str]) -> None:
    assert extract_ids(text).get("card", set()) == expected
