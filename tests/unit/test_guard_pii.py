"""PII detection, redaction and the placeholder vault."""

from __future__ import annotations

import pytest

from pipelines.guardrails.pii import Vault, detect_pii, luhn_ok


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("write to Alex.Rivera@example.com today", "EMAIL", "Alex.Rivera@example.com"),
        ("call +1 415-555-0134 please", "PHONE", "+1 415-555-0134"),
        ("call (415) 555-0199", "PHONE", "(415) 555-0199"),
        ("my number is 415.555.0100", "PHONE", "415.555.0100"),
        ("card 4111 1111 1111 1111 expires", "CARD", "4111 1111 1111 1111"),
        ("card 4111-1111-1111-1111", "CARD", "4111-1111-1111-1111"),
        ("I live at 12 Ocean Drive, Reno", "ADDRESS", "12 Ocean Drive"),
    ],
)
def test_detects_each_kind(text: str, kind: str, value: str) -> None:
    found = detect_pii(text)
    assert [(m.kind, m.value) for m in found] == [(kind, value)]


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("ship to 1 Market Street Apt 5.", ["1 Market Street", "Apt 5"]),
        ("send it to 88 Birch Lane, Suite 12, Tulsa", ["88 Birch Lane", "Suite 12"]),
        ("12 Ocean Drive unit 3B please", ["12 Ocean Drive", "unit 3B"]),
        ("12 Ocean Drive, Reno", ["12 Ocean Drive"]),  # a city is no second line
        ("12 Ocean Drive, suite of rooms", ["12 Ocean Drive"]),  # a second line has a number
    ],
)
def test_an_address_second_line_is_a_value_of_its_own(text: str, lines: list[str]) -> None:
    assert [(m.kind, m.value) for m in detect_pii(text)] == [("ADDRESS", x) for x in lines]


@pytest.mark.parametrize(
    "text",
    [
        "order #W1000001 please",
        "item 1234567890 in size M",
        "my zip is 94107",
        "it cost 15.00 dollars",
        "card 4111 1111 1111 1112 (fails Luhn)",
        "product 8310926033 and 2025-01-31",
        "gift_card_1000002 and credit_card_1000001",
    ],
)
def test_ignores_ids_prices_and_non_luhn_numbers(text: str) -> None:
    assert detect_pii(text) == []


def test_luhn() -> None:
    assert luhn_ok("4111111111111111")
    assert not luhn_ok("4111111111111112")


def test_vault_numbers_per_kind_and_reuses_placeholders() -> None:
    v = Vault()
    a = v.redact("mail a@x.com or b@y.org, phone +1 415-555-0134")
    b = v.redact("again A@X.com")
    assert a == "mail [EMAIL_1] or [EMAIL_2], phone [PHONE_1]"
    assert b == "again [EMAIL_1]"
    assert v.ids() == ["[EMAIL_1]", "[EMAIL_2]", "[PHONE_1]"]


def test_redact_is_idempotent_and_restore_round_trips() -> None:
    v = Vault()
    text = "I'm at 12 Ocean Drive, mail a@x.com, card 4111 1111 1111 1111"
    red = v.redact(text)
    assert v.redact(red) == red
    assert v.restore(red) == text


def test_resolve_arguments_and_unresolved() -> None:
    v = Vault()
    v.redact("email alex.rivera@example.com")
    args = {"email": "[EMAIL_1]", "list": ["[EMAIL_1]", "x"], "n": 3}
    assert v.resolve(args) == {"email": "alex.rivera@example.com", "list": ["alex.rivera@example.com", "x"], "n": 3}
    assert v.unresolved({"email": "[EMAIL_2]", "x": ["[PHONE_1]"]}) == ["[EMAIL_2]", "[PHONE_1]"]
    assert v.unresolved(args) == []


def test_from_entries_and_digest_are_stable() -> None:
    v = Vault()
    v.redact("a@x.com")
    w = Vault.from_entries(v.entries())
    assert w.resolve("[EMAIL_1]") == "a@x.com"
    assert w.digest("[EMAIL_1]") == v.digest("[EMAIL_1]") and v.digest("[EMAIL_9]") is None
    assert w.redact("a@x.com and c@z.io") == "[EMAIL_1] and [EMAIL_2]"


def test_redact_obj_covers_nested_values_and_keys() -> None:
    v = Vault()
    out = v.redact_obj({"user": {"email": "a@x.com", "address": ["1 Market Street"]}, "a@x.com": 1})
    assert out == {"user": {"email": "[EMAIL_1]", "address": ["[ADDRESS_1]"]}, "[EMAIL_1]": 1}


def test_conceal_names_known_values_by_their_placeholders() -> None:
    v = Vault.from_entries({"[ADDRESS_1]": "12 Ocean Drive", "[ADDRESS_2]": "Suite 4", "[ADDRESS_3]": "12 Ocean Drive West",
                            "[EMAIL_1]": "a@x.com"})
    facts = {"args": {"address1": "12 Ocean Drive West", "address2": "Suite 4"},  # the longer value wins
             "said": ["ship to 12 Ocean Drive, Suite 4.", "mail a@x.com"], "12 Ocean Drive": 7, "n": 3}
    assert v.conceal(facts) == {"args": {"address1": "[ADDRESS_3]", "address2": "[ADDRESS_2]"},
                                "said": ["ship to [ADDRESS_1], [ADDRESS_2].", "mail [EMAIL_1]"],
                                "12 Ocean Drive": 7, "n": 3}  # dict keys untouched
    assert v.resolve(v.conceal(facts)) == facts  # the inverse of resolve for the values it holds
    # never inside a longer number, word or address: "Suite 44", "112 Ocean Drive", "ba@x.com" are other values
    assert v.conceal(["Suite 44", "112 Ocean Drive", "ba@x.com", "a@x.comx"]) == \
        ["Suite 44", "112 Ocean Drive", "ba@x.com", "a@x.comx"]
    assert Vault().conceal({"a": "12 Ocean Drive"}) == {"a": "12 Ocean Drive"}  # an empty vault changes nothing
    assert Vault.from_entries({"[EMAIL_1]": ""}).conceal(["a b"]) == ["a b"]  # nor one whose only value is empty


def test_adopt_keeps_a_free_placeholder_and_renames_a_taken_one() -> None:
    v = Vault()
    v.redact("I live at 9 Elm Street")  # this turn's own [ADDRESS_1]
    got = v.adopt({"[ADDRESS_1]": "3 Oak Road", "[ADDRESS_2]": "5 Pine Lane", "[ADDRESS_3]": "9 Elm Street",
                   "note": "x"})
    assert got == ["[ADDRESS_2]", "[ADDRESS_3]"]  # 3 Oak Road's id is taken here: the next free one, after the rest
    assert v.entries() == {"[ADDRESS_1]": "9 Elm Street", "[ADDRESS_2]": "5 Pine Lane", "[ADDRESS_3]": "3 Oak Road"}
    assert v.adopt({"[ADDRESS_7]": "5 Pine Lane"}) == []  # a value held already keeps its placeholder
