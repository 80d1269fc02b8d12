"""PII never reaches a model call or an emitted event; tools still get the real values."""

from __future__ import annotations

import json

from pipelines.domains.support import FIXTURES
from tests.doubles import j

from .harnesses import DRHarness as Harness

ALEX = FIXTURES["alex"]
SECRETS = [
    ALEX.email,
    "alex.rivera@example.com",
    "+1 415-555-0134",
    "4111 1111 1111 1111",
    "12 Ocean Drive",
    "1 Market Street",  # the user's stored address, seen in get_user_details observations
]


def everything_models_saw(h: Harness) -> str:
    return json.dumps([[m.content for m in call.messages] for _, call in h.models.calls])


def test_pii_stays_out_of_model_calls_and_events_across_a_session() -> None:
    h = Harness()
    h.turn(f"Hi, I'm {ALEX.email}, call me at +1 415-555-0134",
           orch=[j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"}), j(decision="respond")],
           gen=["Thanks, I found your account for [EMAIL_1]."])
    h.turn("show my profile, my card is 4111 1111 1111 1111",
           orch=[j(decision="get_user_details", args={"user_id": ALEX.user_id}), j(decision="respond")],
           gen=["Your profile lists three orders."])
    h.turn("please move my default address to 12 Ocean Drive, Reno NV 89501",
           orch=[j(decision="action", card_id="card.modify_user_address", params={
               "user_id": ALEX.user_id, "address1": "[ADDRESS_1]", "address2": "", "city": "Reno",
               "state": "NV", "country": "USA", "zip": "89501"})],
           gen=["I can change your default address to [ADDRESS_1]. Reply yes to confirm."])
    r = h.turn("yes", gen=["Your default address has been updated."])
    # the tools got the real values
    assert ("find_user_id_by_email", {"email": ALEX.email}) in h.local_tools.calls
    assert h.world.users[ALEX.user_id].address.address1 == "12 Ocean Drive"
    assert h.last_meta["executed"] == "card.modify_user_address" and r.status == "ok"
    # ... but no model call and no event ever saw one
    seen, logged = everything_models_saw(h), h.sink.dump()
    for secret in SECRETS:
        assert secret not in seen, secret
        assert secret not in logged, secret
    assert "[EMAIL_1]" in seen and "[ADDRESS_1]" in logged
    # the placeholders were restored only in what the user received
    first = h.store.turns["s1"][0].reply_text
    assert first == f"Thanks, I found your account for {ALEX.email}."
    assert h.last_meta["facts"]["vault_ids"]  # ids only
    assert ALEX.email not in json.dumps(h.last_meta)


def test_the_action_card_shows_the_user_their_own_values() -> None:
    h = Harness()
    h.turn(f"I am {ALEX.email}", orch=[j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"}),
                                        j(decision="respond")], gen=["Verified."])
    r = h.turn("new default address 12 Ocean Drive, Reno NV 89501", orch=[j(
        decision="action", card_id="card.modify_user_address", params={
            "user_id": ALEX.user_id, "address1": "[ADDRESS_1]", "address2": "", "city": "Reno",
            "state": "NV", "country": "USA", "zip": "89501"})], gen=["Reply yes to confirm."])
    card = r.of("action_card")[0]
    assert card.params["address1"] == "12 Ocean Drive"
    assert h.last_meta["facts"]["pending_action"]["args"]["address1"] == "[ADDRESS_1]"
    assert "12 Ocean Drive" not in h.sink.dump()


def test_a_pending_placeholder_that_no_longer_resolves_is_not_executed() -> None:
    h = Harness()
    h.turn(f"I am {ALEX.email}", orch=[j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"}),
                                        j(decision="respond")], gen=["Verified."])
    h.turn("new default address 12 Ocean Drive, Reno NV 89501", orch=[j(
        decision="action", card_id="card.modify_user_address", params={
            "user_id": ALEX.user_id, "address1": "[ADDRESS_1]", "address2": "", "city": "Reno",
            "state": "NV", "country": "USA", "zip": "89501"})], gen=["Reply yes to confirm."])
    # tamper with the stored history: the earlier text now holds a different address
    turns = h.store.turns["s1"]
    turns[-1] = turns[-1].model_copy(update={"user_text": "new default address 99 Elm Street, Reno"})
    before = h.world.users[ALEX.user_id].address.address1
    r = h.turn("yes", gen=["Sorry."])
    assert r.status == "fallback" and h.last_meta["fallback"]["trigger"] == "inconsistent_observation"
    assert h.world.users[ALEX.user_id].address.address1 == before
