"""Guardrail building blocks by fixed examples: the Luhn check and time-promise normalisation.

Expected values are computed by hand from the definitions: Luhn doubles every
second digit from the right (a doubled digit over 9 loses 9) and accepts a sum
divisible by 10; a time promise is lower-cased, number words become digits,
dashes become " to ", lead words (within, in, after, under, about, around, the
next) go, and plural units become singular.
"""

from __future__ import annotations

import pytest

from pipelines.guardrails.ids import extract_time_promises
from pipelines.guardrails.pii import luhn_ok


@pytest.mark.parametrize(
    ("digits", "ok"),
    [
        ("4111111111111111", True),
        ("4111111111111112", False),
        ("79927398713", True),
        ("79927398710", False),
        ("0", True),
        ("42", True),   # 2 + (4 * 2 = 8) = 10: a doubled 4 stays 8
        ("59", True),   # 9 + (5 * 2 - 9 = 1) = 10: a doubled 5 loses 9
        ("49", False),  # 9 + 8 = 17
        ("50", False),  # 0 + 1 = 1
        ("18", True),   # 8 + 2 = 10
        ("81", False),  # 1 + 16 - 9 = 8
    ],
)
def test_luhn(digits: str, ok: bool) -> None:
    assert luhn_ok(digits) is ok


@pytest.mark.parametrize(
    ("text", "promises"),
    [
        ("Refunds take five-seven business days.", {"5 to 7 business day"}),
        ("It ships within 3 days.", {"3 day"}),
        ("Expect it in the next two weeks.", {"2 week"}),
        ("Give it a couple of days.", {"2 day"}),
        ("Back by Friday.", {"by friday"}),
        ("Delivered 2025-01-31.", {"2025-01-31"}),
        ("Usually 3–5 days.", {"3 to 5 day"}),
        ("Around 10 minutes.", {"10 minute"}),
        ("Within 24h.", {"24h"}),
        ("About 1 hour or after 2 months.", {"1 hour", "2 month"}),
        ("No promise here.", set()),
    ],
)
def test_time_promises_normalised(text: str, promises: set[str]) -> None:
    assert extract_time_promises(text) == promises
