"""What a text refers to: entity ids, money amounts and time promises, by deterministic regexes.

The post-guard and the contract's closure check both read text through these
functions, so "an id the reply mentions" means the same thing in both places.

* :func:`normalize_text` — NFKC, zero-width and control characters removed,
  runs of spaces collapsed: an adversarial ``#W\u200b123`` is seen as ``#W123``.
* :func:`extract_ids` — ``{kind: {id, ...}}`` for orders (``#W1234567``, also
  without ``#``), users (``first_last_1234``), payment methods, items (10
  digits), help articles (``KB-POL-001``) and action cards (``card.cancel_order``).
* :func:`extract_amounts` — money amounts (``$15``, ``15.00 USD``) as cents.
* :func:`extract_time_promises` — dates and delays (``within 3 days``,
  ``5 to 7 business days``, ``by Friday``, ``2025-01-31``), normalised so that
  ``five-seven business days`` and ``5 to 7 business days`` compare equal.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = [
    "ID_KINDS",
    "normalize_text",
    "extract_ids",
    "all_ids",
    "extract_amounts",
    "amount_cents",
    "extract_time_promises",
    "walk_strings",
    "VALUE_PATTERNS",
]

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"), None)

ID_PATTERNS: dict[str, re.Pattern[str]] = {
    "order": re.compile(r"#\s*W\s*\d{3,}\b|\bW\d{3,}\b", re.IGNORECASE),
    # card.<snake_case>: written whole, or spaced out when the name is snake_case ("card . cancel_order");
    # a sentence that ends in "card." is not an id ("your gift card. Please confirm")
    "card": re.compile(r"\bcard\.[a-z_]+\b|\bcard\s*\.\s*[a-z]+_[a-z_]+\b", re.IGNORECASE),
    "article": re.compile(r"\bKB\s*-\s*(?:POL|HOW)\s*-\s*\d+\b", re.IGNORECASE),
    "payment": re.compile(r"\b(?:credit_card|gift_card|paypal)_\d+\b", re.IGNORECASE),
    "user": re.compile(r"\b(?!(?:credit_card|gift_card)_)[a-z]+_[a-z]+_\d{3,}\b", re.IGNORECASE),
    "item": re.compile(r"(?<![\d.,$])\b\d{8,12}\b(?![.,]\d)"),
}
ID_KINDS: tuple[str, ...] = tuple(ID_PATTERNS)

_MONEY = re.compile(
    r"(?:(?:\$|usd\s?|us\$)\s?(?P<a>\d[\d,]*(?:\.\d+)?))"
    r"|(?:(?P<b>\d[\d,]*(?:\.\d+)?)\s?(?:usd|dollars?|bucks|\$))",
    re.IGNORECASE,
)
_NUMBER_WORDS = {
    "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fourteen": "14",
    "fifteen": "15", "twenty": "20", "thirty": "30", "a couple of": "2", "a few": "3",
}
_NUM = r"(?:\d+|" + "|".join(sorted(map(re.escape, _NUMBER_WORDS), key=len, reverse=True)) + r")"
_UNIT = r"(?:business\s+|working\s+|calendar\s+)?(?:days?|weeks?|hours?|months?|minutes?)"
_WEEKDAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTHS = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_TIME = re.compile(
    "|".join(
        [
            rf"\b{_NUM}\s*(?:to|-|–|—|or)\s*{_NUM}\s+{_UNIT}\b",
            rf"\b(?:within|in|after|under|about|around)\s+(?:the\s+next\s+)?{_NUM}\s+{_UNIT}\b",
            rf"\b{_NUM}\s+{_UNIT}\b",
            r"\b\d{4}-\d{1,2}-\d{1,2}\b",
            r"\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b",
            rf"\b{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b",
            rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}\b",
            rf"\b(?:by|on|until|before|next|this)\s+{_WEEKDAYS}\b",
            r"\b(?:tomorrow|tonight|next\s+week|end\s+of\s+(?:the\s+)?(?:day|week|month))\b",
            r"\b(?:24|48|72)\s*h\b",
        ]
    ),
    re.IGNORECASE,
)


def normalize_text(text: str) -> str:
    """NFKC, zero-width and control characters removed, horizontal whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH)
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c)[0] != "C")
    return re.sub(r"[ \t]+", " ", text)


def _canonical(kind: str, raw: str) -> str:
    s = re.sub(r"\s+", "", raw)
    if kind == "order":
        return "#W" + s.lstrip("#")[1:]
    if kind in ("card", "user", "payment"):
        return s.lower()
    if kind == "article":
        return s.upper()
    return s


def extract_ids(text: str) -> dict[str, set[str]]:
    """Canonical ids by kind (orders always with ``#W``); kinds with no hit are left out."""
    text = normalize_text(text)
    out: dict[str, set[str]] = {}
    for kind, pattern in ID_PATTERNS.items():
        found = {_canonical(kind, m.group(0)) for m in pattern.finditer(text)}
        if found:
            out[kind] = found
    return out


def all_ids(text: str) -> set[str]:
    """Every canonical id in ``text``, whatever its kind."""
    return set().union(*extract_ids(text).values()) if text else set()


def amount_cents(value: Any) -> int | None:
    """A number (or numeric string with optional commas) as integer cents; ``None`` if not a number."""
    try:
        dec = Decimal(str(value).replace(",", ""))
    except (InvalidOperation, ValueError):
        return None
    if not dec.is_finite():
        return None
    return int((dec * 100).to_integral_value())


def extract_amounts(text: str) -> set[int]:
    """Money amounts written in ``text``, in cents (``$15`` and ``15.00 USD`` are both 1500)."""
    out: set[int] = set()
    for m in _MONEY.finditer(normalize_text(text)):
        cents = amount_cents(m.group("a") or m.group("b"))
        if cents is not None:
            out.add(cents)
    return out


# Every pattern whose match is an id, an amount or a date (what a judge may look for as it forms).
VALUE_PATTERNS: tuple[re.Pattern[str], ...] = (*ID_PATTERNS.values(), _MONEY, _TIME)


def _norm_promise(raw: str) -> str:
    s = raw.lower()
    if re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", s):
        return s
    for word, digit in sorted(_NUMBER_WORDS.items(), key=lambda kv: -len(kv[0])):
        s = re.sub(rf"\b{word}\b", digit, s)
    s = re.sub(r"\s*(?:-|–|—)\s*", " to ", s)
    s = re.sub(r"\b(?:within|in|after|under|about|around|the next)\s+", "", s)
    s = re.sub(r"\b(day|week|hour|month|minute)s\b", r"\1", s)
    return re.sub(r"\s+", " ", s).strip()


def extract_time_promises(text: str) -> set[str]:
    """Dates and delays in ``text``, normalised (number words as digits, ranges as ``a to b``)."""
    return {_norm_promise(m.group(0)) for m in _TIME.finditer(normalize_text(text))}


def walk_strings(obj: Any) -> list[str]:
    """Every string (and stringified number) inside a JSON-like value, keys included."""
    out: list[str] = []
    stack = [obj]
    while stack:
        cur = stack.pop()
        if isinstance(cur, str):
            out.append(cur)
        elif isinstance(cur, bool) or cur is None:
            continue
        elif isinstance(cur, int | float):
            out.append(str(cur))
        elif isinstance(cur, dict):
            for k, v in cur.items():
                out.append(str(k))
                stack.append(v)
        elif isinstance(cur, list | tuple | set | frozenset):
            stack.extend(cur)
    return out
