"""PII kinds beyond the first four (phones of any region, IBAN, SSN), the vault's email identity,
and the masking of personal fields in event logs."""

from __future__ import annotations

import json

import pytest

from pipelines.guardrails.pii import PII_KINDS, Vault, detect_pii, iban_ok, mask_pii_fields
from tests.doubles import j

from .harnesses import DRHarness as Harness


def found(text: str) -> list[tuple[str, str]]:
    return [(m.kind, m.value) for m in detect_pii(text)]


# ---- phones of any region (phonenumbers) ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("call me on +44 20 7946 0958 tomorrow", "+44 20 7946 0958"),
        ("Berlin office: +49 30 1234567.", "+49 30 1234567"),
        ("Paris +33 1 42 68 53 00", "+33 1 42 68 53 00"),
        ("Tokyo +81 3-1234-5678", "+81 3-1234-5678"),
        ("US (415) 555-0199", "(415) 555-0199"),
    ],
)
def test_phones_of_any_region_are_detected(text: str, value: str) -> None:
    assert found(text) == [("PHONE", value)]


@pytest.mark.parametrize(
    "text",
    [
        "+44 20 7946",  # too short to be a UK number
        "item 1234567890 in blue",  # a bare 10-digit run is an item id, not a phone
        "order #W1000001 and gift_card_1000002",
        "call 555-0134",  # seven digits: not a valid number without an area code
    ],
)
def test_not_phones(text: str) -> None:
    assert [k for k, _ in found(text)] == []


# ---- IBAN (mod-97) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("IBAN DE89 3704 0044 0532 0130 00 please", "DE89 3704 0044 0532 0130 00"),
        ("pay GB82WEST12345698765432.", "GB82WEST12345698765432"),
        ("FR14 2004 1010 0505 0001 3M02 606", "FR14 2004 1010 0505 0001 3M02 606"),
    ],
)
def test_valid_ibans_are_detected(text: str, value: str) -> None:
    assert found(text) == [("IBAN", value)]


def test_an_iban_with_one_wrong_digit_fails_its_checksum() -> None:
    assert iban_ok("DE89370400440532013000")
    assert not iban_ok("DE89370400440532013001")  # last digit changed
    assert not iban_ok("DE88370400440532013000")  # check digits changed
    assert "IBAN" not in [k for k, _ in found("IBAN DE89 3704 0044 0532 0130 01")]
    assert not iban_ok("DE89 3704 0044 05")  # 14 characters: below the shortest IBAN


# ---- US SSN --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("my SSN is 123-45-6789", "123-45-6789"), ("123 45 6789 is mine", "123 45 6789"),
     ("ssn: 123456789", "123456789")],
)
def test_ssns_are_detected(text: str, value: str) -> None:
    assert found(text) == [("SSN", value)]


@pytest.mark.parametrize(
    "text",
    [
        "000-12-3456", "666-12-3456", "900-12-3456",  # area numbers never issued
        "123-00-6789", "123-45-0000",  # zero group / serial
        "123-45 6789",  # mixed separators
        "ticket 123456789",  # nine bare digits without the word SSN
    ],
)
def test_not_ssns(text: str) -> None:
    assert "SSN" not in [k for k, _ in found(text)]


def test_every_kind_has_a_placeholder_and_round_trips() -> None:
    v = Vault()
    text = "SSN 123-45-6789, IBAN GB82WEST12345698765432, phone +49 30 1234567"
    red = v.redact(text)
    assert red == "SSN [SSN_1], IBAN [IBAN_1], phone [PHONE_1]"
    assert v.restore(red) == text and set(PII_KINDS) >= {"SSN", "IBAN", "PHONE"}


# ---- the vault's email identity (issue: a rebuilt vault gave one address two placeholders) ----


def test_a_rebuilt_vault_keeps_one_placeholder_for_a_mixed_case_email() -> None:
    v = Vault()
    assert v.redact("mail Alex.Rivera@Example.com") == "mail [EMAIL_1]"
    rebuilt = Vault.from_entries(v.entries())
    assert rebuilt.redact("Alex.Rivera@Example.com") == "[EMAIL_1]"
    assert rebuilt.redact("alex.rivera@example.com") == "[EMAIL_1]"
    assert rebuilt.ids() == ["[EMAIL_1]"]
    assert rebuilt.redact("other.person@example.com") == "[EMAIL_2]"  # a different address still gets its own


def test_the_dr_model_sees_one_placeholder_for_a_mixed_case_email_across_turns() -> None:
    h = Harness()
    lookup = j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"})
    h.turn("Hi, my email is Alex.Rivera@Example.com", orch=[lookup, j(decision="respond")],
           gen=["Thanks [EMAIL_1], you are verified."])
    assert "Alex.Rivera@Example.com" in h.store.turns["s1"][-1].reply_text  # restored for the user
    h.turn("and my orders?", orch=[j(decision="respond")], gen=["Sure."])
    prompt = [c for role, c in h.models.calls if role == "orchestrator"][-1].messages[1].content
    assert "[EMAIL_1]" in prompt and "[EMAIL_2]" not in prompt


# ---- event logs --------------------------------------------------------------------------


def test_mask_pii_fields_masks_personal_fields_and_keeps_placeholders_and_ids() -> None:
    obj = {"user_id": "alex_rivera_1001", "name": {"first_name": "Alex", "last_name": "Rivera"},
           "address": {"address1": "1 Market Street", "address2": "", "city": "Springfield", "zip": "94107",
                       "state": "CA"},
           "payment_methods": {"credit_card_1": {"last_four": "4107", "brand": "visa"}},
           "args": {"email": "[EMAIL_1]"},
           "raw": json.dumps({"decision": "find_user_id_by_name_zip",
                              "args": {"first_name": "Alex", "last_name": "Rivera", "zip": "94107"}})}
    out = mask_pii_fields(obj)
    text = json.dumps(out)
    for v in ("Alex", "Rivera", "1 Market Street", "Springfield", "94107", "4107"):
        assert v not in text
    assert out["user_id"] == "alex_rivera_1001" and out["address"]["state"] == "CA"
    assert out["address"]["address2"] == "" and out["args"] == {"email": "[EMAIL_1]"}
    assert json.loads(out["raw"])["args"] == {"first_name": "[REDACTED]", "last_name": "[REDACTED]", "zip": "[REDACTED]"}
    assert mask_pii_fields("not json {") == "not json {"


def test_dr_events_hold_no_name_city_zip_or_card_digits() -> None:
    from pipelines.domains.support import FIXTURES

    alex = FIXTURES["alex"]
    h = Harness()
    h.turn(f"Hi, my email is {alex.email}",
           orch=[j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"}),
                 j(decision="get_user_details", args={"user_id": alex.user_id}), j(decision="respond")],
           gen=["Thanks."])
    h.turn(f"status of {alex.pending_order_id}?",
           orch=[j(decision="get_order_details", args={"order_id": alex.pending_order_id}), j(decision="respond")],
           gen=["It is pending."])
    user = h.world.users[alex.user_id]
    log = h.sink.dump()
    secrets = [user.name.first_name, user.name.last_name, user.address.city, user.address.zip, user.email]
    secrets += [pm.last_four for pm in user.payment_methods.values() if hasattr(pm, "last_four")]
    assert [s for s in secrets if s in log] == []
    assert alex.user_id in log and alex.pending_order_id in log  # ids stay: replay and audits need them
