"""pipelines.turn_input: the text hygiene both edges share (refuse, or remove, decided per character class)."""

from __future__ import annotations

import pytest

from pipelines import errors as E
from pipelines.turn_input import check_idempotency_key, clean_text, parse_turn_request


def _parse(text: str, **kw) -> str:
    return parse_turn_request({"text": text, **kw}, max_text_chars=100).text


@pytest.mark.parametrize("ch", ["\x00", "\x01", "\x1b", "\x7f", "\x85", "\x9f"], ids=repr)
def test_control_characters_are_refused(ch: str) -> None:
    with pytest.raises(E.InvalidInput) as err:
        _parse(f"hi{ch}there")
    assert err.value.http_status == 400 and err.value.details["position"] == 2


@pytest.mark.parametrize("ch", ["\t", "\n", "\r", "\xa0", "\u200b"], ids=repr)
def test_tab_newline_return_and_ordinary_format_characters_stay(ch: str) -> None:
    assert _parse(f"hi{ch}there") == f"hi{ch}there"


@pytest.mark.parametrize("cp", [0xD800, 0xDBFF, 0xDC00, 0xDFFF], ids=hex)
def test_lone_surrogates_are_refused(cp: int) -> None:
    with pytest.raises(E.InvalidInput, match="surrogate"):
        _parse("a" + chr(cp))


@pytest.mark.parametrize("cp", [0xFDD0, 0xFDEF, 0xFFFE, 0xFFFF, 0x1FFFE, 0x10FFFF], ids=hex)
def test_noncharacters_are_refused(cp: int) -> None:
    with pytest.raises(E.InvalidInput, match="noncharacter"):
        _parse("a" + chr(cp))


@pytest.mark.parametrize("cp", [0xFDCF, 0xFDF0, 0xFFFD, 0x1FFFD, 0xD7FF, 0xE000], ids=hex)
def test_just_outside_those_ranges_is_fine(cp: int) -> None:
    assert _parse("a" + chr(cp)) == "a" + chr(cp)


@pytest.mark.parametrize("cp", [0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069], ids=hex)
def test_bidi_embedding_override_and_isolate_controls_are_removed(cp: int) -> None:
    assert _parse(f"pay {chr(cp)}01$ now") == "pay 01$ now"


@pytest.mark.parametrize("cp", [0x200E, 0x200F, 0x061C, 0x2029, 0x2065], ids=hex)
def test_direction_marks_and_neighbours_stay(cp: int) -> None:
    assert _parse(f"a{chr(cp)}b") == f"a{chr(cp)}b"


def test_a_text_of_only_bidi_controls_is_empty_422() -> None:
    with pytest.raises(E.ValidationFailed) as err:
        _parse("\u202e\u2066 ")
    assert err.value.http_status == 422


def test_user_id_gets_the_same_rules() -> None:
    assert parse_turn_request({"text": "hi", "user_id": "u\u202e1"}, max_text_chars=10).user_id == "u1"
    with pytest.raises(E.InvalidInput):
        parse_turn_request({"text": "hi", "user_id": "u\x001"}, max_text_chars=10)


def test_clean_text_names_the_field() -> None:
    with pytest.raises(E.InvalidInput) as err:
        clean_text("\x00", field="user_id")
    assert err.value.details == {"field": "user_id", "position": 0}


def test_validation_messages_with_surrogates_stay_encodable() -> None:
    with pytest.raises(E.ValidationFailed) as err:
        parse_turn_request({"text": "hi", chr(0xD800): 1}, max_text_chars=10)
    err.value.message.encode("utf-8")
    str(err.value.details).encode("utf-8")


@pytest.mark.parametrize(("key", "ok"), [
    (None, True), ("", True), ("k", True), ("a" * 128, True), ("a" * 129, False), ("has space", False),
    ("tab\tkey", False), ("ключ", False), ("~!@#$%^&*()", True),
])
def test_idempotency_keys(key, ok: bool) -> None:
    if ok:
        assert check_idempotency_key(key) == (key or None)
    else:
        with pytest.raises(E.InvalidInput):
            check_idempotency_key(key)
