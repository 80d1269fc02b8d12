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
    ("The plane for DDHPNX took off late, I'd like compensation", 100, True),  # late: delayed
    ("We landed two hours late on DDHPNX, I'd like compensation", 100, True),
    ("I'm running late for DDHPNX, I'd like compensation", 100, False),  # the user late, not the flight
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


def _flights_session():
    """olivia_moore_2080: SF5VA1, economy, one passenger, PHL → DEN on HAT076 (2024-05-23), back on HAT080
    (2024-05-30); her gift card can pay a change, her certificate cannot."""
    pack = AirlinePack()
    tools = LocalToolRunner(pack, pack.new_world(0))
    h = harnesses.TandemHarness("airline", tools=tools)
    h.turn("Hi, my user id is olivia_moore_2080", orch=[doubles.w1("greeting", "hello", "Let me find your profile.")],
           gen=["Hello, how can I help with your trip?"])
    return h, tools


def _change(h, text: str, flights: list[dict]):
    """One turn perceived as a change of flights, the model putting ``flights`` on the card."""
    return h.turn(text, orch=[doubles.w1("change", "flights", "Let me look at that reservation."),
                              doubles.j(decision="action", card_id="card.change_flights",
                                        params={"reservation_id": "SF5VA1", "cabin": "economy", "flights": flights,
                                                "payment_id": "gift_card_7002574"})])


def test_a_change_of_flights_searches_the_route_and_carries_the_whole_itinerary():
    """Back on May 29, the cheapest: DEN → PHL that day is HAT158 ($111, 06:00) or HAT080 ($148, 07:00) direct, or
    a stop from $238; the card carries HAT158 — not the flight the model picked — and the outbound it keeps."""
    h, tools = _flights_session()
    r = _change(h, "Could SF5VA1 come back on May 29 instead, on the cheapest flight?",
                [{"flight_number": "HAT080", "date": "2024-05-30"}])
    searched = [(f["tool"], f["args"].get("date")) for k, f in r.sink if k == "tandem.tool"
                and f["tool"].startswith("search_")]
    assert searched == [("search_direct_flight", "2024-05-29"), ("search_onestop_flight", "2024-05-29")], searched
    cards = r.of("action_card")
    assert [c.params["flights"] for c in cards] == [[{"flight_number": "HAT076", "date": "2024-05-23"},
                                                     {"flight_number": "HAT158", "date": "2024-05-29"}]], h.meta
    h.turn("yes")
    assert [(f.flight_number, f.date) for f in tools.world.reservations["SF5VA1"].flights] == [
        ("HAT076", "2024-05-23"), ("HAT158", "2024-05-29")]


def test_a_new_date_with_several_flights_and_nothing_to_choose_by_is_asked():
    h, _ = _flights_session()
    r = _change(h, "Could SF5VA1 come back on May 29 instead?", [{"flight_number": "HAT080", "date": "2024-05-29"}])
    assert r.of("action_card") == []
    said = "".join(e.text for e in r.events if e.type in ("narration.delta", "reply.delta"))
    assert "HAT158 at 06:00 on 2024-05-29 ($111 in economy)" in said and "HAT080 at 07:00" in said, said
    # the answer by its time: the one flight leaving then
    r = _change(h, "the one at 7 am", [{"flight_number": "HAT158", "date": "2024-05-29"}])
    assert [c.params["flights"] for c in r.of("action_card")] == [[{"flight_number": "HAT076", "date": "2024-05-23"},
                                                                   {"flight_number": "HAT080", "date": "2024-05-29"}]]


def test_a_flight_number_typed_is_the_one_carried():
    h, _ = _flights_session()
    r = _change(h, "Please move SF5VA1's return to HAT080 on May 29", [{"flight_number": "HAT158", "date": "2024-05-29"}])
    assert [c.params["flights"][1] for c in r.of("action_card")] == [{"flight_number": "HAT080", "date": "2024-05-29"}]


def test_a_cabin_change_keeps_the_flights_held_and_searches_nothing():
    h, _ = _flights_session()
    r = h.turn("Please upgrade SF5VA1 to business", orch=[
        doubles.w1("change", "cabin", "Let me look at that reservation."),
        doubles.j(decision="action", card_id="card.change_flights",
                  params={"reservation_id": "SF5VA1", "cabin": "business",
                          "flights": [{"flight_number": "HAT076", "date": "2024-05-23"}],
                          "payment_id": "gift_card_7002574"})])
    assert not [f for k, f in r.sink if k == "tandem.tool" and f["tool"].startswith("search_")]
    checked = [f["args"]["flights"] for k, f in r.sink if k == "tandem.precheck"]
    assert checked == [[{"flight_number": "HAT076", "date": "2024-05-23"},
                        {"flight_number": "HAT080", "date": "2024-05-30"}]], checked
    # (the backend's check refuses it: HAT076 has no business seat left that day)
    assert [f["reason"] for k, f in r.sink if k == "tandem.precheck"] == ["not_enough_seats"]

