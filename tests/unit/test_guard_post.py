"""The post-guard: the incremental splitter and each sentence check, positive and negative."""

from __future__ import annotations

import pytest

from pipelines.guardrails import PostGuard, PostGuardView, SentenceSplitter
from pipelines.guardrails.config import default_guardrail_config

GUARD = PostGuard(default_guardrail_config())
VIEW = PostGuardView(
    path="answer",
    allowed_ids=["#W1000001", "alex_rivera_1001", "credit_card_1000001", "1718002390", "KB-POL-003"],
    allowed_amounts=[1500, 23456],
    allowed_times=["5 to 7 business day"],
    placeholders=["[EMAIL_1]"],
)


def kinds(sentence: str, view: PostGuardView = VIEW, context: str = "") -> list[str]:
    return [v.kind for v in GUARD.check(sentence, view, context).violations]


# ---- splitter ----------------------------------------------------------------------


def test_splitter_releases_each_sentence_as_soon_as_it_completes() -> None:
    s = SentenceSplitter()
    got: list[list[str]] = [s.feed(ch) for ch in "Hi there. It costs $15.00 today! Ok"]
    flat = [x for chunk in got for x in chunk]
    assert flat == ["Hi there.", "It costs $15.00 today!"]
    first_at = next(i for i, c in enumerate(got) if c)
    assert first_at == len("Hi there. ") - 1  # released on the space after the period
    assert s.flush() == ["Ok"] and s.flush() == []


def test_splitter_keeps_decimals_ids_and_splits_on_newlines() -> None:
    s = SentenceSplitter()
    assert s.feed("Total 1.50 for #W1000001.\nNext line") == ["Total 1.50 for #W1000001."]
    assert s.flush() == ["Next line"]


# ---- each check --------------------------------------------------------------------


def test_clean_sentence_passes() -> None:
    assert kinds("Order #W1000001 is pending and was paid with credit_card_1000001.") == []
    assert kinds("Your refund of $15 arrives in five to seven business days, see KB-POL-003.") == []


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("Order #W9999999 is yours.", "unknown_order_id"),
        ("Order W2000001 shipped.", "unknown_order_id"),
        ("User priya_shah_2002 asked too.", "unknown_user_id"),
        ("Paid with gift_card_2000002.", "unknown_payment_id"),
        ("Item 9999999999 is in stock.", "unknown_item_id"),
        ("See KB-POL-009 for details.", "unknown_article_id"),
        ("Use card.cancel_order to proceed.", "action_id"),
        ("You will get $20.00 back.", "unsupported_amount"),
        ("A refund of 99 USD is on its way.", "unsupported_amount"),
        ("It arrives within 2 days.", "unsupported_date"),
        ("It will be there by Friday.", "unsupported_date"),
        ("Expect it on March 3rd.", "unsupported_date"),
        ("I'll transfer you to a human agent.", "handoff_without_escalation"),
        ("Let me connect you with a specialist.", "handoff_without_escalation"),
        ("Your order has been cancelled.", "unsupported_completion"),
        ("I've refunded the order.", "unsupported_completion"),
        ("We emailed [EMAIL_2].", "unknown_placeholder"),
    ],
)
def test_each_violation_is_caught(sentence: str, kind: str) -> None:
    assert kind in kinds(sentence)


def test_selected_card_and_escalation_and_executed_write_are_allowed_on_their_path() -> None:
    card = VIEW.model_copy(update={"path": "action_card", "selected_card_id": "card.cancel_order"})
    assert kinds("Reply yes to run card.cancel_order.", card) == []
    assert kinds("Or card.return_items instead.", card) == ["action_id"]
    esc = VIEW.model_copy(update={"path": "escalate"})
    assert kinds("I'll transfer you to a human agent.", esc) == []
    done = VIEW.model_copy(update={"write_executed": True})
    assert kinds("Your order has been cancelled.", done) == []


def test_known_placeholder_is_allowed() -> None:
    assert kinds("We found your account for [EMAIL_1].") == []


def test_obfuscation_is_normalised_before_checking() -> None:
    v = GUARD.check("Order #W\u200b99999\u200b99 and ＄２０.", VIEW)
    assert {x.kind for x in v.violations} == {"unknown_order_id", "unsupported_amount"}
    assert "\u200b" not in v.text


def test_values_cannot_be_smuggled_across_a_sentence_boundary() -> None:
    assert kinds("500 back to you.", context="You get $") == ["unsupported_amount"]
    assert kinds("9999999.", context="Order #W") != []
    assert kinds("It is pending.", context="Order #W1000001 is here.") == []


def test_blocked_verdict_carries_the_safe_replacement() -> None:
    v = GUARD.check("Order #W9999999.", VIEW)
    assert not v.ok and v.replacement == default_guardrail_config().post.safe_sentence
    assert GUARD.check("Fine.", VIEW).replacement == ""
