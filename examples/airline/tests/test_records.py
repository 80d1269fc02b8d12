"""Which of the user's reservations a request is about: those a cancellation can reach, every one the user asked
for ("all", "both", several ids named), each in turn, and the card's words. Expected values by hand from
policy.md and the tau2-airline records (amelia_davis_8890: seven reservations)."""

from datetime import datetime

import pytest
from tandem_airline.candidates import extract_user_candidates
from tandem_airline.data import default_data_dir
from tandem_airline.pack import AIRLINE_TEXTS, AirlinePack

from pipelines.domain import FixedClock, TurnFacts

needs_data = pytest.mark.skipif(not (default_data_dir() / "db.json").is_file(),
                                reason="tau2-airline data not found (set TANDEM_AIRLINE_DIR)")
USER = "amelia_davis_8890"
#: her reservations: id → (cabin, insurance, booked, first flight)
#: 8C8K4E business/yes 05-08 → 05-24; UDMOP1 basic economy/no 05-09 → 05-28; XAZ3C0 basic economy/no 05-06 → 05-27;
#: LU15PA business/no 05-01 → 05-23; MSJ4OA economy/yes 05-05 → 05-22; I6M8JQ economy/yes → 05-09 (flown);
#: 4XGCCM business/yes → 05-03 (flown)
ALL = ["8C8K4E", "UDMOP1", "XAZ3C0", "LU15PA", "MSJ4OA", "I6M8JQ", "4XGCCM"]


def _facts(pack: AirlinePack, *texts: str) -> TurnFacts:
    world = pack.new_world(0)
    facts = pack.owner_facts(world, USER, list(texts))
    for rid in ALL:
        pack.observe("get_reservation_details", world.reservations[rid].model_dump(mode="json"), True, facts)
    return facts


def _pack(now: datetime = datetime(2024, 5, 15, 15, 0)) -> AirlinePack:
    pack = AirlinePack()
    pack.clock = FixedClock(now)
    return pack


def test_all_and_both_reservations_ask_for_each_one():
    pack = _pack()
    yes = ["Please cancel every upcoming booking I have", "both reservations should go",
           "each of my trips in May", "drop all of the flights I booked"]
    no = ["change both flights of my round trip", "cancel my flight to Denver", "I have a reservation for both of us"]
    assert [pack.asks_for_all(TurnFacts(session_id="s", user_text=t, user_texts=[t])) for t in yes] == [True] * 4
    assert [pack.asks_for_all(TurnFacts(session_id="s", user_text=t, user_texts=[t])) for t in no] == [False] * 3


@needs_data
def test_a_cancellation_picks_only_the_reservations_the_policy_lets_be_cancelled():
    pack = _pack()
    facts = _facts(pack, "I need to cancel my trips")
    # flown ones (I6M8JQ, 4XGCCM) never; basic economy booked over 24 h ago without insurance (UDMOP1, XAZ3C0)
    # for no reason; business always; economy with insurance for health or weather (MSJ4OA)
    assert pack.pick_records("cancel", ALL, facts) == ["8C8K4E", "LU15PA", "MSJ4OA"]
    # a reason the insurance does not cover: the insured economy one is out too
    facts = _facts(pack, "I need to cancel my trips", "I'd rather not say.")
    assert pack.pick_records("cancel", ALL, facts) == ["8C8K4E", "LU15PA"]
    # the airline cancelled a flight: the basic economy ones may be cancelled too
    facts = _facts(pack, "I need to cancel my trips, the airline cancelled my flight")
    assert pack.pick_records("cancel", ALL, facts) == ["8C8K4E", "UDMOP1", "XAZ3C0", "LU15PA", "MSJ4OA"]


@needs_data
def test_upcoming_keeps_the_reservations_not_begun_by_the_policy_clock():
    facts_text = "I want to add a bag to an upcoming trip"
    # on 2024-05-22 MSJ4OA flies that day (kept); the day after, it has begun
    on_the_day = _pack(datetime(2024, 5, 22, 8, 0))
    assert on_the_day.pick_records("change", ALL, _facts(on_the_day, facts_text)) == [
        "8C8K4E", "UDMOP1", "XAZ3C0", "LU15PA", "MSJ4OA"]
    after = _pack(datetime(2024, 5, 23, 8, 0))
    assert after.pick_records("change", ALL, _facts(after, facts_text)) == ["8C8K4E", "UDMOP1", "XAZ3C0", "LU15PA"]
    # without "upcoming", a change keeps every reservation not cancelled
    assert after.pick_records("change", ALL, _facts(after, "I want to add a bag")) == ALL


@needs_data
def test_several_reservations_named_are_each_in_question_in_turn():
    pack = _pack()
    facts = _facts(pack, "Cancel LU15PA, 8C8K4E and MSJ4OA for me, my plans changed")
    pack.restore(facts)
    state = pack.state_of(facts)
    assert (state.selected, state.queue) == ("LU15PA", ["8C8K4E", "MSJ4OA"])
    assert facts.candidates.of("reservation_id") == ["LU15PA"]  # a card carries the one in question only
    assert pack.snapshot_values(facts)["reservation_id"] == "LU15PA"
    pack.observe("get_reservation_details", {"reservation_id": "8C8K4E", "user_id": USER}, True, facts)
    assert pack.state_of(facts).selected == "LU15PA"  # a read moves nothing on
    assert facts.candidates.of("reservation_id") == ["LU15PA"]  # nor lends a card another reservation
    pack.observe("cancel_reservation", {"reservation_id": "LU15PA", "user_id": USER, "status": "cancelled"}, True,
                 facts)
    state = pack.state_of(facts)
    assert (state.selected, state.queue, state.reservations["LU15PA"]["status"]) == ("8C8K4E", ["MSJ4OA"],
                                                                                     "cancelled")
    pack.observe("cancel_reservation", {"reservation_id": "MSJ4OA", "user_id": USER, "status": "cancelled"}, True,
                 facts)
    assert pack.state_of(facts).selected == "8C8K4E"  # a write on another reservation moves nothing on
    pack.observe("cancel_reservation", {"reservation_id": "8C8K4E", "user_id": USER, "status": "cancelled"}, True,
                 facts)
    assert (pack.state_of(facts).selected, pack.state_of(facts).queue) == ("MSJ4OA", [])
    pack.observe("cancel_reservation", {"reservation_id": "MSJ4OA", "user_id": USER, "status": "cancelled"}, True,
                 facts)
    assert (pack.state_of(facts).selected, pack.state_of(facts).queue) == (None, [])


@needs_data
def test_two_reservations_named_are_a_request_and_one_is_not():
    pack = _pack()
    facts = _facts(pack, "Cancel LU15PA and 8C8K4E for me")
    pack.restore(facts)
    assert (pack.state_of(facts).selected, pack.state_of(facts).queue) == ("LU15PA", ["8C8K4E"])
    facts = _facts(pack, "Cancel LU15PA for me")
    pack.restore(facts)
    assert (pack.state_of(facts).selected, pack.state_of(facts).queue) == (None, [])
    assert facts.candidates.of("reservation_id") == ["LU15PA"]


@needs_data
def test_one_reservation_named_now_comes_before_the_request_s():
    pack = _pack()
    facts = _facts(pack, "Cancel LU15PA and 8C8K4E for me")
    pack.restore(facts)
    later = TurnFacts(session_id="s", user_text="actually do MSJ4OA first",
                      user_texts=[*facts.user_texts, "actually do MSJ4OA first"], state=facts.state,
                      candidates=facts.candidates)
    assert pack.snapshot_values(later)["reservation_id"] == "MSJ4OA"


def test_a_reason_kept_to_oneself_is_an_other_reason():
    said = {t: extract_user_candidates(t).get("cancel_reason") for t in (
        "I'd rather not say.", "personal reasons", "for some other reason", "no particular reason",
        "I would prefer not to say", "I'd rather keep it quiet", "my plans changed")}
    assert said == {"I'd rather not say.": ["other"], "personal reasons": ["other"], "for some other reason": ["other"],
                    "no particular reason": ["other"], "I would prefer not to say": ["other"],
                    "I'd rather keep it quiet": None, "my plans changed": ["change_of_plan"]}


def test_a_refused_cancellation_and_a_card_read_in_the_card_s_words():
    pack = _pack()
    line = pack.refusal_line({"card_id": "card.cancel_reservation", "reason": "not_cancellable", "entity": "MSJ4OA"},
                             "Cancel the reservation", None)  # type: ignore[arg-type]
    assert line == f"I can't cancel reservation MSJ4OA: {AIRLINE_TEXTS.refusals['not_cancellable']}."
    # a card whose phrase needs more than the reservation: its title and the reservation
    line = pack.refusal_line({"card_id": "card.add_bags", "reason": "bags_removed", "entity": "MSJ4OA"},
                             "Add checked bags", None)  # type: ignore[arg-type]
    assert line == f"I can't add checked bags for reservation MSJ4OA: {AIRLINE_TEXTS.refusals['bags_removed']}."
    facts = TurnFacts(session_id="s", user_text="", user_texts=[])
    assert pack.readback("cancel_reservation", {"reservation_id": "MSJ4OA", "reason": "other"}, facts)["reason"] \
        == "for other reasons"
    assert pack.readback("cancel_reservation", {"reservation_id": "MSJ4OA", "reason": "weather"}, facts)["reason"] \
        == "for the weather"


@needs_data
def test_a_reservation_the_policy_refuses_passes_the_request_on_and_the_same_names_do_not_restart_it():
    pack = _pack()
    text = "Cancel LU15PA, 8C8K4E and MSJ4OA for me"
    facts = _facts(pack, text)
    pack.restore(facts)
    pack.refused("cancel_reservation", {"reservation_id": "8C8K4E", "reason": "other"}, "not_cancellable", facts)
    assert pack.state_of(facts).selected == "LU15PA"  # not the one in question: nothing moves
    pack.refused("cancel_reservation", {"reservation_id": "LU15PA", "reason": "other"}, "not_cancellable", facts)
    assert (pack.state_of(facts).selected, pack.state_of(facts).queue) == ("8C8K4E", ["MSJ4OA"])
    again = TurnFacts(session_id="s", user_text=text, user_texts=[*facts.user_texts, text], state=facts.state,
                      candidates=facts.candidates)
    pack.restore(again)  # the same three named again: the request goes on where it was
    assert (pack.state_of(again).selected, pack.snapshot_values(again)["reservation_id"]) == ("8C8K4E", "8C8K4E")
    pack.refused("cancel_reservation", {"reservation_id": "8C8K4E", "reason": "other"}, "not_cancellable", again)
    pack.refused("cancel_reservation", {"reservation_id": "MSJ4OA", "reason": "other"}, "not_cancellable", again)
    assert (pack.state_of(again).selected, pack.state_of(again).queue) == ("MSJ4OA", [])  # the last one stays


def test_the_invented_argument_judge_reads_a_date_as_people_say_it():
    from tandem_airline.evaluation import AirlineEvaluation

    from serve.eval.measures import SessionLedger

    kit = AirlineEvaluation()
    assert kit.said_as("2024-05-23") == ["May 23", "May 23rd", "23 May"]
    assert kit.said_as("2024-06-01")[1] == "June 1st" and kit.said_as("2024-06-12")[1] == "June 12th"
    assert kit.said_as("2024-13-01") == [] and kit.said_as("HAT123") == []
    ledger = SessionLedger(said_as=kit.said_as)
    ledger.raw_texts.append("push my flight on May 23 back a day")
    assert ledger.grounded("2024-05-23", set()) and not ledger.grounded("2024-05-24", set())


@needs_data
def test_a_change_of_flights_keeps_the_cabin_held_unless_the_user_names_another():
    pack = _pack()
    facts = _facts(pack, "Please move my UDMOP1 flights to a day later.")  # basic economy, no cabin named
    pack.restore(facts)
    assert facts.candidates.of("flight_cabin") == ["basic_economy"]
    assert facts.candidates.source_of("flight_cabin", "basic_economy") == "record"
    facts = _facts(pack, "Move LU15PA a day later, and put me in economy.")  # LU15PA is business: economy named
    pack.restore(facts)
    assert facts.candidates.of("flight_cabin") == ["economy"]
    facts = _facts(pack, "I want to fly a day later.")  # no reservation in question: the cabins she holds
    pack.restore(facts)
    assert sorted(facts.candidates.of("flight_cabin")) == ["basic_economy", "business", "economy"]


@needs_data
def test_which_reservation_is_asked_among_those_the_request_could_change():
    pack = _pack()
    facts = _facts(pack, "I need to cancel my trips")
    pack.restore(facts)
    facts.intent = "cancel"
    listed = pack.choices("choose", facts)
    # the three a cancellation could reach, each in words, and none of the four it could not
    assert len(listed) == 3 and all(any(r in x for x in listed) for r in ("8C8K4E", "LU15PA", "MSJ4OA"))
    assert not any(r in x for x in listed for r in ("UDMOP1", "XAZ3C0", "I6M8JQ", "4XGCCM"))
    facts.intent = None  # no request read: every reservation
    assert len(pack.choices("choose", facts)) == len(ALL)


@needs_data
@pytest.mark.parametrize(("text", "totals", "paid"), [
    # MSJ4OA: economy, 3 passengers, 3 bags held, none paid; Amelia is silver: 2 free a passenger, 6 in all
    ("Please add 2 bags to MSJ4OA.", ["5"], ["0"]),  # 3 held + 2; within the allowance
    ("Please add two more checked bags to MSJ4OA.", ["5"], ["0"]),
    ("I need 4 extra bags on MSJ4OA.", ["7"], ["1"]),  # "extra": added, without "add"
    ("I need 4 bags on MSJ4OA.", ["4"], ["0"]),  # a total: one more than held, within the allowance
    ("MSJ4OA should have 7 bags in total.", ["7"], ["1"]),  # one beyond the allowance is paid
    ("MSJ4OA should have 3 bags in total.", [], []),  # the total it holds: no change, no card
    # LU15PA: business, 2 passengers, 4 held: 3 free a passenger
    ("Add 3 bags to LU15PA.", ["7"], ["1"]),
    # UDMOP1: basic economy, 1 passenger, none held: 1 free
    ("Add two bags to UDMOP1, please.", ["2"], ["1"]),
])
def test_a_bags_change_adds_to_the_bags_held_and_pays_for_those_beyond_the_allowance(text, totals, paid):
    pack = _pack()
    facts = _facts(pack, text)
    pack.restore(facts)
    assert facts.candidates.of("bag_total") == totals
    assert facts.candidates.of("bag_fee_count") == paid


@needs_data
def test_a_change_is_never_paid_with_a_certificate():
    pack = _pack()
    facts = _facts(pack, "Add 2 bags to MSJ4OA.")
    facts.candidates.add("payment_id", "certificate_1111111", "record")
    pack.restore(facts)
    assert "certificate_1111111" in facts.candidates.of("payment_id")  # a booking may still use it
    assert "certificate_1111111" not in facts.candidates.of("change_payment")
    assert "credit_card_4074252" in facts.candidates.of("change_payment")


def test_paid_bags_are_never_fewer_than_those_paid_for_now():
    from tandem_airline.pack import AirlineState, fee_counts

    state = AirlineState(membership="regular", reservations={"R1": {
        "cabin": "economy", "passengers": "1", "bags": "3", "paid_bags": "2"}})
    facts = TurnFacts(session_id="s", user_text="x", user_texts=["x"])
    for total in ("4", "5"):
        facts.candidates.add("bag_total", total, "user")
    # regular economy: 1 free bag a passenger; 4 in all → 3 beyond it; 5 → 4
    assert fee_counts(facts, state, "R1") == ["3", "4"]
    state.reservations["R1"]["paid_bags"] = "4"  # paid for more than the allowance asks: never fewer
    assert fee_counts(facts, state, "R1") == ["4"]
    state.membership = None  # not read: the counts said or read
    facts.candidates.add("bag_count", "2", "user")
    assert fee_counts(facts, state, "R1") == ["2"]


@pytest.mark.parametrize(("text", "places"), [
    ("a flight from Dallas to Seattle", [["DFW"], ["SEA"]]),
    ("leaving New York for good, landing at LAX", [["JFK", "LGA"], ["LAX"]]),  # a city two airports serve
    ("flying back to Las Vegas on May 2", [["LAS"]]),
    ("my Chicago trip", [["ORD"]]),
    ("the flights between Phoenix and San Francisco", [["PHX"], ["SFO"]]),
    ("Charlotte Davis flies with me", []),  # a person, not the city
    ("please add Charlotte Davis to it", []),
    ("I fly to Charlotte on Friday", [["CLT"]]),
    ("I live in Houston", [["IAH"]]),
    ("Denver is lovely", []),  # named, but not as a place travelled from or to
])
def test_an_airport_is_named_by_its_code_or_its_city(text, places):
    from tandem_airline.candidates import airports_said, places_said

    assert places_said(text) == places
    assert airports_said(text) == [a for p in places for a in p]


def test_a_search_goes_from_the_first_place_said_to_the_second_of_one_airport_each():
    pack = _pack()
    for text, route in [("book me from Dallas to Boston on May 20", ("DFW", "BOS")),
                        ("book me out of New York, to Boston, on May 20", None),  # which New York airport: not said
                        ("book me from BOS to Boston on May 20", None)]:
        facts = TurnFacts(session_id="s", user_text=text, user_texts=[text])
        snap = pack.snapshot_values(facts)
        assert (snap.get("origin"), snap.get("destination")) == (route or (None, None)), text


@needs_data
@pytest.mark.parametrize(("text", "picked"), [
    ("the trip from Boston to Denver", ["8C8K4E"]),  # both its airports
    ("my flight to San Francisco on May 22", ["MSJ4OA"]),  # its destination and date; LU15PA has SFO alone
    ("the Dallas trip", ["MSJ4OA"]),
    ("my trip to San Francisco", ["UDMOP1", "LU15PA", "MSJ4OA"]),  # as much of it in three: all three
    ("the one on 2024-05-29", ["UDMOP1"]),  # a round trip's return date is its date too
    ("the one to Miami", ["8C8K4E", "UDMOP1", "XAZ3C0", "LU15PA", "MSJ4OA"]),  # a stop is no destination: none told
])
def test_a_reservation_is_picked_by_as_much_of_what_was_said_as_it_has(text, picked):
    pack = _pack()
    assert pack.pick_records("change", ALL[:5], _facts(pack, text)) == picked


@needs_data
def test_reservations_are_described_with_their_cities():
    pack = _pack()
    facts = _facts(pack, "which ones do I have?")
    assert pack.describe_records(["8C8K4E"], facts) == ["8C8K4E (Boston BOS → Denver DEN, 2024-05-24, business)"]
