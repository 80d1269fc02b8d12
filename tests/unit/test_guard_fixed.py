"""Fixed-value tables for the pre-guard's limits, the IBAN check and the log masking: every boundary
(at, just under, just over), every refusal's message and details. Expected values are written from
the rules (the configured limits; ISO 13616 for IBANs: 15–34 characters, mod 97 = 1)."""

from __future__ import annotations

import json

import pytest

from pipelines.errors import InvalidInput, PayloadTooLarge
from pipelines.guardrails.config import default_guardrail_config
from pipelines.guardrails.pii import PII_FIELDS, _ibans, iban_ok, mask_pii_fields
from pipelines.guardrails.pre import _check_limits

CFG = default_guardrail_config()  # max_chars 4000, max_lines 100, max_control_ratio 0.02


def _limit_error(text: str) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        _check_limits(text, CFG)
    return info.value


def test_the_configured_limits_are_the_documented_ones() -> None:
    lim = CFG.limits
    assert (lim.max_chars, lim.max_lines, lim.max_control_ratio) == (4000, 100, 0.02)


def test_length_at_and_over_the_limit() -> None:
    _check_limits("a" * 4000, CFG)
    with pytest.raises(PayloadTooLarge) as info:
        _check_limits("a" * 4001, CFG)
    assert info.value.details == {"limit": 4000, "length": 4001}
    assert info.value.message == "text is 4001 characters; the limit is 4000"


def test_lines_at_and_over_the_limit() -> None:
    _check_limits("\n".join(["a"] * 100), CFG)  # 100 lines: allowed
    e = _limit_error("\n".join(["a"] * 101))
    assert (e.message, e.details) == ("text has more than 100 lines", {"limit": 100})


def test_control_characters_at_and_over_the_ratio() -> None:
    _check_limits("\x07\x07" + "a" * 98, CFG)  # 2 of 100: exactly the ratio, allowed
    e = _limit_error("\x07\x07\x07" + "a" * 97)  # 3 of 100
    assert (e.message, e.details) == ("text holds too many control characters", {"count": 3})
    _check_limits("\n\t\r" * 10 + "a" * 70, CFG)  # line breaks and tabs are not counted
    e = _limit_error("\x00" * 3)
    assert e.details == {"count": 3}


def test_a_lone_surrogate_names_its_position() -> None:
    e = _limit_error("ab\ud800c")
    assert (e.message, e.details) == ("text is not valid Unicode (lone surrogate)", {"position": 2})


def _with_check_digits(country: str, bban: str) -> str:
    """An IBAN whose check digits follow ISO 13616: 98 - (BBAN + country + "00" as digits) mod 97."""
    digits = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


@pytest.mark.parametrize(("iban", "ok"), [
    ("GB82 WEST 1234 5698 7654 32", True),      # the standard's example, spaced
    ("GB82WEST12345698765432", True),
    ("gb82 west 1234 5698 7654 32", True),      # case does not matter
    ("DE89 3704 0044 0532 0130 00", True),
    ("NO93 8601 1117 947", True),                # 15 characters: the shortest
    ("GB83 WEST 1234 5698 7654 32", False),     # one check digit off
    ("GB82 WEST 1234 5698 7654 33", False),     # one BBAN digit off
    ("GB82-WEST-1234-5698-7654-32", False),     # only spaces are ignored
    ("82GB WEST 1234 5698 7654 32", False),     # country first
    ("", False),
])
def test_iban_table(iban: str, ok: bool) -> None:
    assert iban_ok(iban) is ok


def test_iban_length_bounds_with_valid_check_digits() -> None:
    for n, ok in ((14, False), (15, True), (34, True), (35, False)):
        iban = _with_check_digits("XX", "1" * (n - 4))
        assert len(iban) == n
        assert iban_ok(iban) is ok, n


def test_an_iban_is_found_by_shortening_to_its_checksum() -> None:
    text = "pay to GB82 WEST 1234 5698 7654 32 1234 today"
    [(a, b)] = list(_ibans(text))
    assert text[a:b] == "GB82 WEST 1234 5698 7654 32"


def test_mask_pii_fields_table() -> None:
    assert PII_FIELDS == frozenset({"first_name", "last_name", "address1", "address2", "city", "zip",
                                    "last_four", "email"})
    src = {"email": "a@b.co", "city": "Reno", "zip": 89501, "last_four": 4242.0, "order_id": "#W1",
           "address2": "", "first_name": None, "last_name": "[EMAIL_1]", "address1": {"line": "12 Ocean"},
           "items": [{"city": "Reno"}, ("x", {"zip": "1"})]}
    assert mask_pii_fields(src) == {
        "email": "[REDACTED]", "city": "[REDACTED]", "zip": "[REDACTED]", "last_four": "[REDACTED]",
        "order_id": "#W1", "address2": "", "first_name": None, "last_name": "[EMAIL_1]",
        "address1": {"line": "12 Ocean"}, "items": [{"city": "[REDACTED]"}, ["x", {"zip": "[REDACTED]"}]]}
    # only the given fields
    assert mask_pii_fields({"city": "Reno", "note": "x"}, frozenset({"note"})) == {"city": "Reno", "note": "[REDACTED]"}
    assert mask_pii_fields([{"note": "x"}], frozenset({"note"})) == [{"note": "[REDACTED]"}]
    assert mask_pii_fields({"a": {"note": "x"}}, frozenset({"note"})) == {"a": {"note": "[REDACTED]"}}


def test_mask_pii_fields_inside_a_json_string() -> None:
    raw = json.dumps({"decision": "action", "params": {"city": "Zürich", "order_id": "#W1"}})
    assert mask_pii_fields(raw) == '{"decision": "action", "params": {"city": "[REDACTED]", "order_id": "#W1"}}'
    masked = mask_pii_fields(json.dumps({"note": "Zürich", "n": 1}), frozenset({"n"}))
    assert masked == '{"note": "Zürich", "n": "[REDACTED]"}'  # non-ASCII kept as written
    assert mask_pii_fields('{"city": broken') == '{"city": broken'
    assert mask_pii_fields('{"note": "x"}') == '{"note": "x"}'  # no PII field named: unchanged
    assert mask_pii_fields('["city"]') == '["city"]'
    assert mask_pii_fields('{"a": 1, "city": "x"} tail') == '{"a": 1, "city": "x"} tail'


def test_ibans_in_text_are_shortened_group_by_group() -> None:
    from pipelines.guardrails.pii import detect_pii

    valid = _with_check_digits("XX", "1111222233334444")  # 20 characters: five groups of four
    spaced = " ".join(valid[i:i + 4] for i in range(0, 20, 4))
    text = f"IBAN {spaced} 5555 then"
    assert [text[a:b] for a, b in _ibans(text)] == [spaced]
    glued = f"IBAN {valid}555 then"  # no spaces: shortened one character at a time
    assert [glued[a:b] for a, b in _ibans(glued)] == [valid]
    assert [t[a:b] for t in ["iban NO93 8601 1117 947 ok"] for a, b in _ibans(t)] == ["NO93 8601 1117 947"]
    two = "GB82 WEST 1234 5698 7654 32 and DE89 3704 0044 0532 0130 00"
    assert [two[a:b] for a, b in _ibans(two)] == ["GB82 WEST 1234 5698 7654 32", "DE89 3704 0044 0532 0130 00"]
    assert [m.kind for m in detect_pii(two)] == ["IBAN", "IBAN"]


def _luhn(body: str) -> str:
    """``body`` with its Luhn check digit appended (double every second digit from the right)."""
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return body + str((10 - total % 10) % 10)


@pytest.mark.parametrize(("digits", "is_card"), [(12, False), (13, True), (16, True), (19, True), (20, False)])
def test_card_numbers_are_13_to_19_luhn_digits(digits: int, is_card: bool) -> None:
    from pipelines.guardrails.pii import detect_pii, luhn_ok

    number = _luhn("4" + "1" * (digits - 2))
    assert len(number) == digits and luhn_ok(number)
    assert [m.kind for m in detect_pii(f"card {number} thanks")] == (["CARD"] if is_card else [])
    assert not luhn_ok(number[:-1] + str((int(number[-1]) + 1) % 10))
