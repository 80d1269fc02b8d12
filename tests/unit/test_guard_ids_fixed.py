"""Fixed values for the id extraction every guard relies on (canonical forms per kind, the text
normalisation before it, the strings walked out of arguments, amounts in cents) and for the mid-guard's
violations with their details. Expected values are written from the rules in ``ids.py`` / ``mid.py``."""

from __future__ import annotations

from decimal import Decimal

import pytest

from pipelines.errors import InvalidInput
from pipelines.guardrails.ids import (
    all_ids,
    amount_cents,
    extract_ids,
    extract_time_promises,
    normalize_text,
    walk_strings,
)
from pipelines.guardrails.mid import (
    check_args,
    check_consistency,
    check_placeholders,
    check_tool_choice,
)
from pipelines.guardrails.pii import Vault
from pipelines.guardrails.post import Violation


@pytest.mark.parametrize(("text", "expected"), [
    ("order # W 1000001 please", {"order": {"#W1000001"}}),        # spaces inside are dropped
    ("order w1000001", {"order": {"#W1000001"}}),                  # the letter is always upper case
    ("see card. cancel_order", {"card": {"card.cancel_order"}}),
    ("CARD.CANCEL_ORDER", {"card": {"card.cancel_order"}}),
    ("Alex_Rivera_1001", {"user": {"alex_rivera_1001"}}),
    ("pay with Credit_Card_4242", {"payment": {"credit_card_4242"}}),
    ("kb - how - 12", {"article": {"KB-HOW-12"}}),
    ("item 1234567890", {"item": {"1234567890"}}),
    ("nothing here", {}),
])
def test_canonical_ids_by_kind(text: str, expected: dict[str, set[str]]) -> None:
    assert extract_ids(text) == expected


def test_all_ids_of_an_empty_text() -> None:
    assert all_ids("") == set() and all_ids("#W1000001 and card.cancel_order") == {"#W1000001", "card.cancel_order"}


def test_normalize_text_table() -> None:
    assert normalize_text("a\u200bb") == "ab"                 # zero-width removed
    assert normalize_text("a\x07b\x00c") == "abc"             # control characters (category C) removed
    assert normalize_text("a\nb\tc") == "a\nb c"              # line breaks kept, tabs collapsed with spaces
    assert normalize_text("a  \t  b") == "a b"
    assert normalize_text("ｃａｒｄ") == "card"                # NFKC
    assert normalize_text("\u00e9t\u00e9") == "\u00e9t\u00e9"  # letters (category L) kept


def test_walk_strings_table() -> None:
    obj = {"a": [1, 2.5, True, None, "x"], "b": {"c": ("y",)}}
    assert sorted(walk_strings(obj)) == sorted(["a", "1", "2.5", "x", "b", "c", "y"])
    assert walk_strings(None) == [] and walk_strings(False) == []


@pytest.mark.parametrize(("value", "cents"), [
    ("1,234.50", 123450), (12, 1200), ("0.005", 0), (Decimal("2.5"), 250), ("abc", None), ("inf", None),
    ("nan", None), ("1,5", 1500),
])
def test_amount_cents_table(value, cents) -> None:
    assert amount_cents(value) == cents


def test_time_promises_are_normalised() -> None:
    assert extract_time_promises("It arrives in twenty   days") == {"20 day"}  # words as digits, spaces collapsed
    assert extract_time_promises("within fourteen days") == {"14 day"}
    assert extract_time_promises("two - three weeks") == {"2 to 3 week"}
    assert extract_time_promises("on 2026-12-01") == {"2026-12-01"}


def test_mid_guard_violations_name_what_they_refused() -> None:
    assert check_tool_choice("cancel_pending_order", {"get_order_details"}, {"cancel_pending_order"}) == \
        Violation(kind="write_outside_action_path", detail="cancel_pending_order")
    assert check_tool_choice("get_user_details", {"get_order_details"}, set()) == \
        Violation(kind="tool_not_eligible", detail="get_user_details")
    assert check_tool_choice("get_order_details", {"get_order_details"}, set()) is None

    class Registry:
        def parse_args(self, name, args):
            raise InvalidInput("order_id: field required " + "x" * 300)

    model, v = check_args(Registry(), "get_order_details", {})
    assert model is None and v == Violation(kind="invalid_args",
                                            detail=("get_order_details: order_id: field required " + "x" * 300)[:200])

    class Plain:
        def parse_args(self, name, args):
            raise KeyError("nope")

    assert check_args(Plain(), "t", {})[1] == Violation(kind="invalid_args", detail="t: 'nope'")

    vault = Vault()
    vault.redact("mail me at a@b.co")
    assert check_placeholders({"email": "[EMAIL_1]"}, vault) is None
    assert check_placeholders({"a": "[EMAIL_2]", "b": ["[PHONE_1]"]}, vault) == \
        Violation(kind="unresolved_placeholder", detail="[EMAIL_2],[PHONE_1]")

    args = {"order_id": "#W1000002", "note": "also #W1000001"}
    assert check_consistency(args, observed_ids={"#W1000001"}) == Violation(kind="unobserved_entity", detail="#W1000002")
    assert check_consistency(args, observed_ids={"#W1000001"}, mentioned_ids={"#W1000002"}) is None
    assert check_consistency({"order_id": "#W1000001 #W1000002"}, observed_ids={"#W1000001", "#W1000002"}) is None
    assert check_consistency({"user_id": "bob_1"}, observed_ids=(), authenticated_user_id="alex_1") == \
        Violation(kind="other_user", detail="bob_1")
    assert check_consistency({"user_id": "alex_1"}, observed_ids=(), authenticated_user_id="alex_1") is None
