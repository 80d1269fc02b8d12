"""The tandem turn on the airline pack, end to end in process (scripted models, the real tool port over the
tau2-airline world): the user id is read, a cancellation card is offered with grounded values, and the yes
runs it once."""

import pytest
from tandem_airline.data import default_data_dir
from tandem_airline.pack import AirlinePack

from pipelines.domain import LocalToolRunner

harnesses = pytest.importorskip("tests.unit.harnesses", reason="run from the Tandem repository root")
doubles = pytest.importorskip("tests.doubles")
pytestmark = pytest.mark.skipif(not (default_data_dir() / "db.json").is_file(),
                                reason="tau2-airline data not found (set TANDEM_AIRLINE_DIR)")


def _session():
    pack = AirlinePack()
    tools = LocalToolRunner(pack, pack.new_world(0))
    h = harnesses.TandemHarness("airline", tools=tools)
    h.turn("Hi, my user id is chen_jackson_3290", orch=[doubles.w1("greeting", "hello", "Let me find your profile.")],
           gen=["Hello, how can I help with your trip?"])
    assert h.meta["state"]["user_id"] == "chen_jackson_3290", h.meta
    return h, tools


def _cancel(h, text: str, rid: str, reason: str, lead: str = "Let me check that reservation."):
    """One turn: the user's text, perceived as a cancellation, and the model proposing ``rid`` for ``reason``."""
    return h.turn(text, orch=[doubles.w1("cancel", "reservation", lead),
                              doubles.j(decision="action", card_id="card.cancel_reservation",
                                        params={"reservation_id": rid, "reason": reason})])


def test_a_cancellation_is_offered_with_grounded_values_and_runs_on_the_yes():
    h, tools = _session()
    r = _cancel(h, "Please cancel reservation 4WQ150, my plans changed", "4WQ150", "change_of_plan")
    assert [c.card_id for c in r.of("action_card")] == ["card.cancel_reservation"], h.meta
    h.turn("yes")
    assert tools.world.reservations["4WQ150"].status == "cancelled"


def test_an_invented_reason_is_never_offered():
    h, tools = _session()
    r = _cancel(h, "Please cancel reservation 4WQ150", "4WQ150", "weather")
    assert r.of("action_card") == []
    assert tools.world.reservations["4WQ150"].status is None


def test_a_change_before_the_user_id_asks_for_it():
    pack = AirlinePack()
    h = harnesses.TandemHarness("airline", tools=LocalToolRunner(pack, pack.new_world(0)))
    r = h.turn("I want to add a bag to my trip", orch=[doubles.w1("change", "bags", "Let me look at that.")])
    said = "".join(e.text for e in r.events if e.type in ("narration.delta", "reply.delta"))
    assert "user id" in said and r.of("action_card") == []


def test_a_cancellation_without_a_reservation_id_takes_the_one_the_policy_lets_be_cancelled():
    """chen_jackson_3290 holds four reservations: two begun, one basic economy booked days ago without insurance,
    one business (4WQ150): only the last can be cancelled, so it is the one in question and the only one a card
    may carry."""
    h, _ = _session()
    r = _cancel(h, "I need to cancel a reservation, my plans changed", "4WQ150", "change_of_plan", "Let me look at your reservations.")
    assert [(c.card_id, c.params) for c in r.of("action_card")] == [
        ("card.cancel_reservation", {"reservation_id": "4WQ150", "reason": "change_of_plan"})], h.meta
    assert h.meta["state"]["selected"] == "4WQ150"


def test_a_cancellation_never_carries_another_reservation_than_the_one_in_question():
    h, _ = _session()
    r = _cancel(h, "I need to cancel a reservation, my plans changed", "DDHPNX", "change_of_plan", "Let me look at your reservations.")
    assert r.of("action_card") == []


def test_a_hand_over_runs_the_transfer_tool_with_the_arguments_it_takes():
    """tau2-airline's transfer tool takes a summary alone: the hand-over passes no reason code to it."""
    h, _ = _session()
    r = h.turn("I want to talk to a person about my trip",
               orch=[doubles.w1("human", "agent", "Let me get someone for you."),
                     doubles.j(decision="escalate", reason_code="user_requested_human")])
    calls = [f for k, f in r.sink if k == "tandem.tool" and f.get("tool") == "transfer_to_human_agents"]
    assert r.of("escalation"), r.events
    assert [(c["args"], c["ok"]) for c in calls] == [({"summary": "I want to talk to a person about my trip"}, True)]


def test_a_reservation_named_with_the_user_id_is_read_after_the_profile_and_offered_at_once():
    """The user id and the reservation in one text: the profile is read first (it makes them the session's user),
    then the reservation; the card follows in the same turn."""
    pack = AirlinePack()
    tools = LocalToolRunner(pack, pack.new_world(0))
    h = harnesses.TandemHarness("airline", tools=tools)
    r = _cancel(h, "I'm chen_jackson_3290, please cancel 4WQ150: my plans changed", "4WQ150", "change_of_plan")
    reads = [f["tool"] for k, f in r.sink if k == "tandem.tool" and f.get("ok")]
    assert reads[:2] == ["get_user_details", "get_reservation_details"], reads
    assert h.meta["state"]["user_id"] == "chen_jackson_3290"
    assert [c.card_id for c in r.of("action_card")] == ["card.cancel_reservation"]


def _certificate(h, text: str, amount: int):
    return h.turn(text, orch=[doubles.w1("compensation", "certificate", "Let me check that reservation."),
                              doubles.j(decision="action", card_id="card.send_certificate",
                                        params={"user_id": "chen_jackson_3290", "amount": amount})])


@pytest.mark.parametrize(("text", "amount", "offered"), [
    ("My flight on DDHPNX was delayed by hours, can I get a certificate?", 100, True),  # 2 passengers x $50
    ("The flight of DDHPNX got cancelled, I'd like a certificate", 200, True),  # 2 x $100
    ("My flight on DDHPNX was delayed, can I get a certificate?", 200, False),  # not the delayed rate
    ("My flight on DDHPNX was delayed, can I get a certificate?", 150, False),  # not a multiple of the passengers
    ("DDHPNX was a bad trip, can I get a certificate of $100?", 100, False),  # an amount the user names: not the policy's
])
def test_a_certificate_is_the_policy_s_amount_for_the_reservation_in_question(text, amount, offered):
    h, tools = _session()
    r = _certificate(h, text, amount)
    assert ([c.params["amount"] for c in r.of("action_card")] == [amount]) is offered, (r.events, h.meta)


def test_a_refused_reservation_of_several_passes_the_request_on_to_the_next():
    h, tools = _session()
    r = _cancel(h, "Cancel DDHPNX and 4WQ150 please, my plans changed", "DDHPNX", "change_of_plan")
    said = "".join(e.text for e in r.events if e.type in ("narration.delta", "reply.delta"))
    assert r.of("action_card") == [] and "I can't cancel reservation DDHPNX" in said, said
    assert (h.meta["state"]["selected"], h.meta["state"]["queue"]) == ("4WQ150", [])
    r = _cancel(h, "ok, what about the other one", "4WQ150", "change_of_plan")
    assert [c.params["reservation_id"] for c in r.of("action_card")] == ["4WQ150"]
