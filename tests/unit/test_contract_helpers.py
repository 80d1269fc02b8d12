"""The contract module's small helpers, pinned value by value: ``compact`` (what an observation may
weigh in a prompt), ``task_state`` (where a task stands after a turn) and what the closure treats as
grounded (never the narration: it is what the user was told, not evidence)."""

from __future__ import annotations

import pytest

from pipelines.core.contract import EligibleAction, ForwardContract, compact, task_state

# -- compact -------------------------------------------------------------------------------------


def test_compact_cuts_lists_to_max_items_and_strings_to_max_chars_at_every_depth() -> None:
    value = {"a": [1, 2, 3], "b": "abcdef", "c": {"d": ["wxyz", ["uvwx", "st"]], "e": 7}}
    assert compact(value, 2, 3) == {"a": [1, 2], "b": "abc", "c": {"d": ["wxy", ["uvw", "st"]], "e": 7}}


@pytest.mark.parametrize(("value", "items", "chars", "want"), [
    ([1, 2, 3], 3, 5, [1, 2, 3]),          # exactly max_items: kept
    ([1, 2, 3], 2, 5, [1, 2]),             # one over: cut
    ([1, 2, 3], 0, 5, []),
    ((1, 2, 3), 2, 5, [1, 2]),             # a tuple comes back a list
    ("abc", 1, 3, "abc"),                  # exactly max_chars: kept
    ("abcd", 1, 3, "abc"),                 # one over: cut
    (12345, 1, 1, 12345),                  # numbers are not strings
    (None, 1, 1, None),
    (["abcdef"], 5, 2, ["ab"]),            # max_chars reaches into lists
    ({"k": "abcdef"}, 5, 2, {"k": "ab"}),  # and into dicts
    ({"k": [1, 2, 3]}, 1, 9, {"k": [1]}),  # max_items into dicts
    ([[1, 2, 3]], 2, 9, [[1, 2]]),         # and into lists
])
def test_compact_boundaries(value, items, chars, want) -> None:
    assert compact(value, items, chars) == want


def test_compact_strings_default_to_200_characters() -> None:
    assert compact("y" * 200, 5) == "y" * 200
    assert compact("y" * 201, 5) == "y" * 200
    assert compact({"k": ["y" * 201]}, 5) == {"k": ["y" * 200]}


def test_compact_keeps_the_keys() -> None:
    assert list(compact({"z": 1, "a": 2}, 1, 1)) == ["z", "a"]


# -- task_state ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "executed", "verified", "blocked", "want"), [
    ("fallback", False, False, True, "blocked"),           # refused by the pre-guard
    ("fallback", False, True, True, "blocked"),
    ("answer", False, True, True, "authenticated"),        # blocked only counts on the fallback path
    ("fallback", False, True, False, "authenticated"),     # a fallback that was not a block
    ("fallback", False, False, False, "unauthenticated"),
    ("escalate", True, True, False, "escalated"),          # escalation wins over an executed write
    ("escalate", False, False, True, "escalated"),
    ("answer", True, False, False, "action_executed"),
    ("action_card", True, True, False, "action_executed"),  # executed wins over a card shown
    ("action_card", False, True, False, "awaiting_confirmation"),
    ("action_card", False, False, False, "awaiting_confirmation"),
    ("clarify", False, True, False, "authenticated"),
    ("clarify", False, False, False, "unauthenticated"),
])
def test_task_state_table(path, executed, verified, blocked, want) -> None:
    assert task_state(path, executed=executed, verified=verified, blocked=blocked) == want


def test_task_state_is_not_blocked_by_default() -> None:
    assert task_state("fallback", executed=False, verified=False) == "unauthenticated"


# -- grounded parts ------------------------------------------------------------------------------


def _contract(**kw) -> ForwardContract:
    base = dict(turn_id="t1", task_state="authenticated", selected_path="answer", user_request="hello",
                eligible_actions=[EligibleAction(card_id="card.cancel_order", title="Cancel order",
                                                 tool="cancel_pending_order", params={"order_id": "#W1000001"},
                                                 status="awaiting_confirmation")])
    return ForwardContract(**(base | kw))


def test_the_narration_is_not_evidence_for_the_closure() -> None:
    told = _contract(narration="I'll look at #W2222222 for you.")
    assert "#W2222222" not in told.allowed_ids()
    assert "#W1000001" in told.allowed_ids()  # the card's parameters are
