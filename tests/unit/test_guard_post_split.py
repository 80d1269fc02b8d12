"""A date, amount or id cut by a line break is judged whole (issue: "within 2\\ndays." passed)."""

from __future__ import annotations

import pytest

from pipelines.guardrails import SentenceSplitter
from tests.doubles import j

from .harnesses import DRHarness as Harness


def split(deltas: list[str]) -> list[str]:
    s = SentenceSplitter()
    out = [x for d in deltas for x in s.feed(d)]
    return out + s.flush()


def test_a_bare_line_break_does_not_end_a_sentence() -> None:
    assert split(["It arrives within 2\ndays."]) == ["It arrives within 2\ndays."]
    assert split(["It arrives within 2", "\n", "days. Thanks"]) == ["It arrives within 2\ndays.", "Thanks"]


def test_punctuation_before_a_line_break_still_ends_the_sentence_at_once() -> None:
    s = SentenceSplitter()
    assert s.feed("Your order is pending.\n") == ["Your order is pending."]
    assert s.feed("Anything else?\n\nBye") == ["Anything else?"]
    assert s.flush() == ["Bye"]


@pytest.mark.parametrize(
    ("reply", "withheld"),
    [
        ("It arrives within 2\ndays.", "within 2"),
        ("Expect it\nby Friday.", "Expect it"),
        ("You get $20\n.00 back.", "$20"),
    ],
)
def test_a_promise_cut_by_a_line_break_is_not_delivered_in_part(reply: str, withheld: str) -> None:
    h = Harness()
    r = h.turn("when does it arrive?", orch=[j(decision="respond")], gen=[reply])
    assert withheld not in r.reply
    assert r.reply == "I can only share details that I have verified in this conversation."
    assert h.counters.get("guard", "post.block") == 1


def test_an_allowed_sentence_with_line_breaks_is_delivered_whole() -> None:
    h = Harness()
    r = h.turn("hello", orch=[j(decision="respond")], gen=["Hello,\nhow can I\nhelp you today?"])
    assert r.reply == "Hello,\nhow can I\nhelp you today?"
