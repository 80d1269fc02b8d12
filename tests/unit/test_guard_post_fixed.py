"""Fixed values for the post-guard's verdicts (each violation with its detail, ids already released in
the context never judged again), the canary windows (half the token, at least 8 characters) and the
context they look back over, the data blocks, and the pre-guard summary's keys."""

from __future__ import annotations

import asyncio

from pipelines.guardrails import LocalGuardrails, canary_token
from pipelines.guardrails.config import default_guardrail_config
from pipelines.guardrails.pii import Vault
from pipelines.guardrails.post import PostGuard, PostGuardView, Violation, _windows, canary_leak
from pipelines.guardrails.pre import as_data, data_block

GUARD = PostGuard(default_guardrail_config())
VIEW = PostGuardView(path="answer", allowed_ids=["#W1000001"], selected_card_id="card.cancel_order",
                     allowed_amounts=[1250], allowed_times=["3 day"], placeholders=["[EMAIL_1]"])


def _kinds(sentence: str, context: str = "") -> list[Violation]:
    return GUARD.check(sentence, VIEW, context).violations


def test_each_violation_names_what_it_refused() -> None:
    assert _kinds("Order #W1000002 is pending.") == [Violation(kind="unknown_order_id", detail="#W1000002")]
    assert _kinds("Use card.return_items now.") == [Violation(kind="action_id", detail="card.return_items")]
    assert _kinds("It costs $15.") == [Violation(kind="unsupported_amount", detail="15.00")]
    assert _kinds("It costs $12.50.") == []
    assert _kinds("It arrives in 5 days.") == [Violation(kind="unsupported_date", detail="5 day")]
    assert _kinds("Write to [EMAIL_2].") == [Violation(kind="unknown_placeholder", detail="[EMAIL_2]")]
    assert _kinds("Order #W1000001 and card.cancel_order, [EMAIL_1], in 3 days.") == []


def test_what_the_context_already_released_is_not_judged_again() -> None:
    # the id was in the released text (judged then); the sentence repeats it
    assert _kinds("That is #W1000002.", context="Order #W1000002 is pending.") == []
    # an id split across the sentence boundary is judged on both together
    assert _kinds("1000002 is pending.", context="Your order #W") == [
        Violation(kind="unknown_order_id", detail="#W1000002")]
    assert GUARD.check("ok.", VIEW, "").replacement == ""
    blocked = GUARD.check("It costs $15.", VIEW, "")
    assert blocked.replacement == default_guardrail_config().post.safe_sentence


def test_canary_windows_are_half_the_token_and_at_least_eight() -> None:
    assert _windows("abcdefghij") == {"abcdefgh", "bcdefghi", "cdefghij"}  # max(8, 11 // 2) = 8
    token = "abcdefghijklmnopqrstu"  # 21 characters: windows of (21 + 1) // 2 = 11
    assert {len(w) for w in _windows(token)} == {11}
    assert len(_windows(token)) == 11 and "klmnopqrstu" in _windows(token)  # the last window included
    assert _windows("abc") == {"abc"}  # shorter than 8: the whole token


def test_canary_leak_looks_back_over_the_context() -> None:
    token = canary_token()
    half = len(token) // 2 + 1
    assert canary_leak(token)
    assert not canary_leak("nothing secret here")
    assert canary_leak(token[half:], context="x " + token[:half])  # split across the boundary
    assert not canary_leak(token[half:][:3], context="")
    assert not canary_leak("", context="")


def test_local_guardrails_post_passes_the_context() -> None:
    g = LocalGuardrails()
    token = canary_token()
    half = len(token) // 2 + 1
    verdict = asyncio.run(g.post(token[half:], VIEW, context=token[:half]))
    assert Violation(kind="canary_leak") in verdict.violations
    assert asyncio.run(g.post("All good.", VIEW)).violations == []


def test_data_blocks_defuse_their_own_tags() -> None:
    assert as_data("a </data> b <DATA x>") == "a [data> b [data x>"
    assert data_block(["one", "two </data>"]) == '<data source="data">\none\ntwo [data>\n</data>'
    assert data_block(["x"], label="tool:get_order_details") == '<data source="tool:get_order_details">\nx\n</data>'


def test_pre_guard_summary_keys() -> None:
    pre = asyncio.run(LocalGuardrails().pre("My email is a@b.co, yes please"))
    assert pre.summary() == {"confirmation": pre.confirmation, "opens_with_no": False, "route": None, "route_rule": None,
                             "blocked": False, "decision": "pass", "hits": [], "pii_found": ["[EMAIL_1]"],
                             "rules_version": default_guardrail_config().version}


def test_vault_restore_and_digest() -> None:
    v = Vault()
    text = v.redact("mail a@b.co")
    assert text == "mail [EMAIL_1]"
    assert v.restore("to [EMAIL_1] and [EMAIL_9]") == "to a@b.co and [EMAIL_9]"  # unknown ones stay
    assert len(v.digest("[EMAIL_1]") or "") == 12 and v.digest("[EMAIL_9]") is None


def test_canary_windows_of_an_even_token() -> None:
    token = "abcdefghijklmnopqrst"  # 20 characters: windows of (20 + 1) // 2 = 10
    assert {len(w) for w in _windows(token)} == {10} and len(_windows(token)) == 11


def test_only_emails_are_keyed_case_blind_in_the_vault() -> None:
    v = Vault()
    assert v.redact("a@b.co and A@B.CO") == "[EMAIL_1] and [EMAIL_1]"
    assert v.redact("ship to 12 Ocean Drive, then 12 OCEAN DRIVE") == \
        "ship to [ADDRESS_1], then [ADDRESS_2]"
