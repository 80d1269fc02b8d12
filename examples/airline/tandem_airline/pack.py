"""The airline pack behind Tandem's ``Domain`` protocol (``pipelines.domain``), on the tau2-airline data.

The session's user is who they say they are by user id (the policy: "the agent must first obtain the user
id"): a successful ``get_user_details`` of an id the user typed makes it the session's user, and only then
are their reservations readable and a change offered. Every card argument is grounded: the user's words,
their own records (profile, reservations, saved passengers, payment methods), the flights a search for
them returned, and the fixed vocabularies. Writes run through Tandem's ``LocalToolRunner`` (exactly once,
each inside its scope), after the policy's rules (:mod:`.eligibility`) say yes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.domain import (
    MAX_ENUM,
    CandidateSet,
    Card,
    Clock,
    DomainTexts,
    EligibleAction,
    ForwardContract,
    PackBase,
    PendingCard,
    SampleWrite,
    TaskReplayHook,
    TurnFacts,
    read_state,
)

from . import candidates as cand
from . import flights as fl
from . import labels as lab
from .data import default_data_dir, load_world, load_world_clock_for
from .eligibility import CANCEL_REASONS, REASONS, bags_needing_fee, cancel_refusal
from .samples import sample_writes
from .tools import LOOKUP_TOOLS, TOOL_SPECS, TRANSFER_TOOL, WRITE_TOOLS
from .world import AirlineWorld

__all__ = ["AirlinePack", "AIRLINE_TEXTS"]


CARDS: tuple[Card, ...] = (
    Card(id="card.cancel_reservation", title="Cancel the reservation", tool="cancel_reservation",
         required_params=("reservation_id", "reason")),
    Card(id="card.change_flights", title="Change the flights or cabin", tool="update_reservation_flights",
         required_params=("reservation_id", "cabin", "flights", "payment_id")),
    Card(id="card.add_bags", title="Add checked bags", tool="update_reservation_baggages",
         required_params=("reservation_id", "total_baggages", "nonfree_baggages", "payment_id")),
    Card(id="card.change_passengers", title="Change the passengers", tool="update_reservation_passengers",
         required_params=("reservation_id", "passengers")),
    Card(id="card.book_reservation", title="Book the flights", tool="book_reservation",
         required_params=("user_id", "origin", "destination", "flight_type", "cabin", "flights", "passengers",
                          "payment_methods", "total_baggages", "nonfree_baggages", "insurance")),
    Card(id="card.send_certificate", title="Send a travel certificate", tool="send_certificate",
         required_params=("user_id", "amount")),
)

AIRLINE_TEXTS = DomainTexts(
    safe_ack="Let me check that for you.",
    fallback="Sorry, I can't help with that right now. Could you try again in a moment?",
    handoff="YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.",
    declined="All right, I've left your reservation as it is.",
    clarify={
        "user_id": "Could you give me your user id?",
        "reservation_id": "Which reservation is it? Its id has six letters and digits.",
        "choose": "Which reservation do you mean: {options}?",
        "airport": "Which airports are you flying from and to?",
        "date": "On which date?",
        "flight_number": "Which flight do you mean?",
        "new_flight": "Which flight would you like instead, and on which date?",
        "flight_choices": "Which flight would you like: {options}?",
        "cabin": "Which cabin: basic economy, economy or business?",
        "flight_cabin": "Which cabin: basic economy, economy or business?",
        "flight_type": "Is it one way or a round trip?",
        "insurance": "Would you like travel insurance, at $30 per passenger?",
        "cancel_reason": "May I ask why you are cancelling: a change of plan, a flight the airline cancelled, "
                         "health, weather, or something else?",
        "payment_id": "Which payment method on your profile should I use?",
        "first_name": "What are the passengers' first and last names and dates of birth?",
        "last_name": "What are the passengers' first and last names and dates of birth?",
        "dob": "What is each passenger's date of birth?",
        "bag_count": "How many checked bags in total?",
        "bag_total": "How many checked bags in total?",
        "bag_fee_count": "How many checked bags in total?",
        "change_payment": "Which gift card or credit card on file should pay for the change?",
        "amount": "What amount is it?",
        "certificate_amount": "Which reservation is it about, and was its flight cancelled or delayed?",
        "expression": "What should I work out?",
        "details": "Could you tell me a little more about what you need?",
    },
    templates={
        "chat/hello": "Hello! I can look up, book, change or cancel your flight reservations.",
        "action_card": "I can {phrase}. Reply yes to confirm.",
        "card:card.cancel_reservation": "cancel reservation {reservation_id}",
        "card:card.change_flights": "change reservation {reservation_id} to the new flights in {cabin}",
        "card:card.add_bags": "set reservation {reservation_id} to {total_baggages} checked bags "
                              "({nonfree_baggages} paid)",
        "card:card.change_passengers": "update the passengers of reservation {reservation_id}",
        "card:card.book_reservation": "book a {flight_type} trip from {origin} to {destination} in {cabin}",
        "card:card.send_certificate": "send you a travel certificate of ${amount}",
        "executed": "Done: your reservation is updated.",
        "reservation_state": "Reservation {reservation_id}: {origin} to {destination}, {cabin}, {status}.",
        "verified": "Thanks, I have your profile.",
    },
    guidance={
        "tip:refund_timing": "Refunds go back to the original payment methods within 5 to 7 business days.",
        "tip:confirm_before_change": "I'll list the details and wait for your yes before changing anything.",
        "tip:insurance": "Travel insurance is $30 per passenger and allows a full refund for health or weather.",
        "tip:bags": "Each checked bag beyond your allowance is $50.",
    },
    refusals={
        "not_confirmed": "I need your explicit yes first",
        "other_user": "it belongs to another profile",
        "user_not_found": "I couldn't find that user id",
        "reservation_not_found": "I couldn't find that reservation",
        "flight_not_found": "I couldn't find that flight",
        "flight_not_available": "that flight can't be booked on that date",
        "not_enough_seats": "there are not enough seats left in that cabin",
        "payment_not_found": "that payment method is not on your profile",
        "insufficient_balance": "the balance on that card doesn't cover it",
        "certificate_not_allowed": "a travel certificate can't pay for a change",
        "payment_mismatch": "the payments don't add up to the total price",
        "already_cancelled": "it is already cancelled",
        "already_flown": "part of the trip has already been flown",
        "not_cancellable": "it was booked more than 24 hours ago, is not business class, and the reason is not "
                           "covered by insurance",
        "basic_economy_fixed": "basic economy flights can't be changed",
        "no_change": "it already holds those flights in that cabin",
        "route_changed": "the origin, destination and trip type must stay the same",
        "bags_removed": "checked bags can be added but not removed",
        "no_bags_added": "the reservation already holds that many checked bags",
        "bags_under_charged": "bags beyond your free allowance are $50 each",
        "passenger_count": "the number of passengers can't change",
        "too_many_passengers": "a reservation holds one to five passengers",
        "payment_mix": "a booking takes at most one certificate, one credit card and three gift cards",
        "no_compensation": "compensation is only for silver and gold members, insured or business travellers",
        "bad_amount": "the certificate amount is not one the policy gives",
        "too_many_certificates": "no more certificates can be added to the profile",
        "invalid_expression": "I can only work out numbers with + - * / and parentheses",
    },
)

ORCHESTRATOR_POLICY = (
    "You are an airline agent. Get the user's id and read their profile before anything else. Read a "
    "reservation before you change or cancel it. Basic economy flights cannot be changed; cabin changes are "
    "possible before any flight is flown. A cancellation needs its reason and is allowed within 24 hours of "
    "booking, for a flight the airline cancelled, in business, or with insurance for health or weather. Bags "
    "can be added, never removed. A change happens only through an action card and the user's explicit yes.")
GENERATOR_PERSONA = "You are a concise, courteous airline agent. Answer in one to three short sentences."
POLICY_LINES: dict[str, tuple[str, ...]] = {
    "cancel_reservation": ("Refunds go to the original payment methods within 5 to 7 business days.",),
    "update_reservation_flights": ("A fare difference is paid or refunded on the gift card or credit card "
                                   "you choose.",),
    "update_reservation_baggages": ("Each checked bag beyond the allowance is $50.",),
    "book_reservation": ("Travel insurance is $30 per passenger.",),
}


class AirlineState(BaseModel):
    """The session facts the airline pack keeps (stored in each turn's meta)."""

    model_config = ConfigDict(extra="forbid")

    user_id: str | None = None
    observed_ids: list[str] = Field(default_factory=list)
    records: CandidateSet = Field(default_factory=CandidateSet)
    reservations: dict[str, dict[str, str]] = Field(default_factory=dict)
    selected: str | None = None  # the reservation in question: found by what it holds, or the first of several named
    queue: list[str] = Field(default_factory=list)  # the request's other reservations, each after the one before
    named: list[str] = Field(default_factory=list)  # the several reservations a text named last (said again: no restart)
    pending: PendingCard | None = None  # the card on offer (the turn keeps it here, awaiting the yes)
    membership: str | None = None  # the user's, as read (their bag allowance)
    #: the flights searches returned, by "number@date": route, times, and per cabin its price and seats left
    flights: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: the itineraries searches returned, each its flights' keys in order (a direct flight: one; one stop: two)
    trips: list[list[str]] = Field(default_factory=list)


def _named_reservation(facts: TurnFacts, extract: Any) -> str | None:
    """The reservation the user named last (this turn's text first, then earlier ones)."""
    for text in [facts.user_text, *reversed(facts.user_texts)]:
        typed = extract(text).get("reservation_id")
        if typed:
            return str(typed[-1])
    return None


#: "all my upcoming flights", "both reservations", "each of my bookings": the request is about every reservation
#: that fits (a flight is a reservation's part: "both flights" may be one round trip, so flights take all/every)
_ALL_RESERVATIONS = re.compile(
    r"\b(?:(?:all|both|every|each)\b(?:\s+of)?(?:\s+(?:my|the|these|those))?(?:\s+[a-z]+){0,2}?\s+"
    r"(?:reservations?|bookings?|trips?)|(?:all|every)\b(?:\s+of)?(?:\s+(?:my|the|these|those))?"
    r"(?:\s+[a-z]+){0,2}?\s+flights?)\b", re.I)
#: a cancellation's reason, as a card reads it back
_REASON_SAID = {"change_of_plan": "for a change of plan", "airline_cancelled": "as the airline cancelled a flight",
                "health": "for health reasons", "weather": "for the weather", "other": "for other reasons"}
#: a reservation still ahead: one whose first flight is past is not "upcoming"
_UPCOMING = re.compile(r"\b(?:upcoming|future|coming up|ahead)\b", re.I)


def _place(code: str) -> str:
    """An airport as people know it: "Dallas DFW" (the code alone when its city is not known)."""
    city = cand.AIRPORT_CITIES.get(code)
    return f"{city} {code}" if city else code


def _typed_reservations(text: str, extract: Any) -> list[str]:
    return [str(r) for r in extract(text).get("reservation_id", [])]


def _in_question(facts: TurnFacts, state: AirlineState, extract: Any) -> str | None:
    """The reservation a change is about: the one this text names alone; else the request's (found by what it holds,
    or the next of several named: :meth:`AirlinePack.restore`); else the one the user named last."""
    said = _typed_reservations(facts.user_text, extract)
    return (said[0] if len(said) == 1 else None) or state.selected or _named_reservation(facts, extract)


#: what the user complains of, as the policy's compensation rules name it (a flight cancelled: $100 a passenger;
#: delayed: $50 a passenger)
_CANCELLED_FLIGHT = re.compile(r"\bflights?\b[^.?!]*\bcancel+ed\b|\bcancel+ed\b[^.?!]*\bflights?\b", re.I)
_DELAYED_FLIGHT = re.compile(r"\bdelay(?:ed|s)?\b|\b(?:hours?|minutes?)\s+late\b|"
                             r"\blate\s+(?:flight|departure|arrival)\b|\b(?:flights?|plane|departure|arrival)\b[^.?!]{0,40}\b(?:late|behind\s+schedule)\b",
                             re.I)  # "delayed", "a delay", "three hours late", "the plane left late"
COMPENSATION_PER_PASSENGER = (("cancelled", 100), ("delayed", 50))


def policy_amounts(facts: TurnFacts, state: AirlineState, extract: Any) -> list[str]:
    """The certificate amounts the policy gives for the reservation in question, once read: $100 a passenger for a
    flight the user says was cancelled, $50 a passenger for one delayed (both, when they say both)."""
    rid = _in_question(facts, state, extract)
    count = int((state.reservations.get(rid or "") or {}).get("passengers") or 0)
    texts = [*facts.user_texts, facts.user_text]
    said = {"cancelled": any(_CANCELLED_FLIGHT.search(t) for t in texts),
            "delayed": any(_DELAYED_FLIGHT.search(t) for t in texts)}
    return [str(rate * count) for what, rate in COMPENSATION_PER_PASSENGER if count and said[what]]


def _next_in_request(state: AirlineState) -> None:
    """The request's next reservation is in question (none when it was the last)."""
    state.selected, state.queue = (state.queue[0], state.queue[1:]) if state.queue else (None, [])


def _narrow(facts: TurnFacts, state: AirlineState, extract: Any) -> None:
    """A card carries the reservation in question, never another of the user's."""
    rid = _in_question(facts, state, extract)
    if rid and rid in facts.candidates.of("reservation_id"):
        facts.candidates.keep("reservation_id", [rid])
    for amount in policy_amounts(facts, state, extract):
        facts.candidates.add("certificate_amount", amount, "record")
    # what a change may carry, decided anew from what is known now (the policy's, below)
    _renew(facts, "change_payment", [(p, facts.candidates.source_of("payment_id", p) or "record")
                                     for p in facts.candidates.of("payment_id") if not p.startswith("certificate_")])
    _renew(facts, "bag_total", added_bag_totals(facts, state, rid))
    _renew(facts, "bag_fee_count", [(c, "record") for c in fee_counts(facts, state, rid)])
    _renew(facts, "flight_cabin", kept_cabins(facts, state, rid))
    _renew(facts, "new_flight", new_flights(facts, state, rid))


def _renew(facts: TurnFacts, kind: str, values: Sequence[tuple[str, str]]) -> None:
    """``kind``'s candidates are ``values`` (each with its source) and nothing else."""
    facts.candidates.keep(kind, [])
    for value, source in values:
        facts.candidates.add(kind, value, source)


#: "add 2 bags", "adding one more checked bag", "two extra bags": a count added to those held, not a total
_COUNT_WORDS = {**cand._WORDS, "a": 1, "an": 1}
_COUNT = r"(\d+|" + "|".join(_COUNT_WORDS) + ")"
_ADD_BAGS = re.compile(rf"\b(?:add(?:ing)?\s+{_COUNT}\s+(?:more\s+|extra\s+|additional\s+)?|"
                       rf"{_COUNT}\s+(?:more|extra|additional)\s+)(?:checked\s+)?(?:bags?|luggage|suitcases?)\b", re.I)


def added_bag_totals(facts: TurnFacts, state: AirlineState, rid: str | None) -> list[tuple[str, str]]:
    """The new bag total of a bags change, the user's to say: the total held plus a count they say to add ("add 2
    bags": 3 when one is held), then a count they say that is above the total the reservation in question holds
    (the policy: bags are added, never removed; a total it holds already changes nothing; every count said while
    no reservation is in question or its total is not read). A count on record is no new total."""
    held = str((state.reservations.get(rid or "") or {}).get("bags") or "")
    out: list[tuple[str, str]] = []
    deltas: set[str] = set()  # counts said as how many to add: no total
    if held.isdigit():
        for text in reversed([*facts.user_texts, facts.user_text]):
            adds = [int(n) if n.isdigit() else _COUNT_WORDS[n.lower()]
                    for n in (a or b for a, b in _ADD_BAGS.findall(text))]
            if adds:  # the newest text that says how many to add
                out += [(str(int(held) + n), "user") for n in adds if n > 0]
                deltas = {str(n) for n in adds}
                break
    for count in facts.candidates.of("bag_count"):
        if any(c == count for c, _ in out) or count in deltas:
            continue
        if facts.candidates.source_of("bag_count", count) != "user":
            continue  # a count on record is what some reservation holds, never a new total the user chose
        if held.isdigit() and count.isdigit() and int(count) <= int(held):
            continue
        out.append((count, "user"))
    return out


def fee_counts(facts: TurnFacts, state: AirlineState, rid: str | None) -> list[str]:
    """The paid bags of each new bag total: the policy's — every bag beyond the allowance of the user's membership
    and the reservation's cabin for its passengers, never fewer than it pays for now; while the membership or the
    reservation is not read, the counts said or read."""
    info = state.reservations.get(rid or "") or {}
    pax, paid = str(info.get("passengers") or ""), str(info.get("paid_bags") or "")
    if not (state.membership and info.get("cabin") and pax.isdigit() and paid.isdigit()):
        return facts.candidates.of("bag_count")
    try:
        return list(dict.fromkeys(str(max(int(paid), bags_needing_fee(state.membership, str(info["cabin"]), int(pax),
                                                                     int(t))))
                                  for t in facts.candidates.of("bag_total") if t.isdigit()))
    except KeyError:  # a membership or cabin the policy's table does not know: the counts said or read
        return facts.candidates.of("bag_count")


def kept_cabins(facts: TurnFacts, state: AirlineState, rid: str | None) -> list[tuple[str, str]]:
    """The cabin of a change of flights: the one the user names (an upgrade, a downgrade); none named, the one the
    reservation in question has (a new flight in the cabin they hold), else the cabins of the reservations read."""
    said = [c for c in facts.candidates.of("cabin") if facts.candidates.source_of("cabin", c) == "user"]
    if said:
        return [(c, "user") for c in said]
    held = [rid] if rid in state.reservations else list(state.reservations)
    return [(c, "record") for c in dict.fromkeys(str(state.reservations[r].get("cabin") or "") for r in held) if c]


class ChangePlan(BaseModel):
    """A change of flights of the reservation in question (:mod:`.flights`): its directions, the date wanted for
    each (``None``: kept), the itineraries that fit each, best first, the cabin and whether the user ranked them."""

    dirs: list[fl.Direction]
    days: list[str | None]
    options: list[list[list[str]]]
    cabin: str
    ranked: bool


def change_plan(facts: TurnFacts, state: AirlineState, rid: str | None) -> ChangePlan | None:
    """The change of flights the user's words ask of the reservation in question, once it is read (else none)."""
    info = state.reservations.get(rid or "")
    if not info:  # (whatever the intent: only a change of flights reads it, and perception may come after the reads)
        return None
    dirs = fl.directions(info)
    if not dirs:
        return None
    texts = [*facts.user_texts, facts.user_text]
    said = [d for t in texts for d in cand.extract_user_candidates(t).get("date", [])]
    days = fl.wanted_dates(dirs, said, texts)
    cabin = next(iter(kept_cabins(facts, state, rid)), ("", ""))[0] or str(info.get("cabin") or "")
    seats = int(pax) if (pax := str(info.get("passengers") or "")).isdigit() else 1
    rank = fl.ranks(texts)
    tests = fl.said_filters(texts)
    options = [fl.fitting_trips(state.flights, state.trips, d, day, cabin, seats, rank, tests) if day else []
               for d, day in zip(dirs, days, strict=True)]
    return ChangePlan(dirs=dirs, days=days, options=options, cabin=cabin, ranked=rank is not None)


def _typed_flights(facts: TurnFacts) -> list[str]:
    """The flight numbers the user typed."""
    return [f for f in facts.candidates.of("flight_number") if facts.candidates.source_of("flight_number", f) == "user"]


def new_flights(facts: TurnFacts, state: AirlineState, rid: str | None) -> list[tuple[str, str]]:
    """The flights a change of flights may carry: those the user typed, then the itineraries that fit what they
    asked (best first), then the flights the reservation holds (a direction not changed keeps them)."""
    typed = [(f, "user") for f in _typed_flights(facts)]
    plan = change_plan(facts, state, rid)
    if plan is None:
        return typed + [(f, "record") for f in facts.candidates.of("flight_number") if (f, "user") not in typed]
    found = list(dict.fromkeys(k.split("@", 1)[0] for opts in plan.options for trip in opts for k in trip))
    held = [k.split("@", 1)[0] for d in plan.dirs for k in d[3]]
    room = max(0, MAX_ENUM - len(typed) - len(held))  # a decoding enum keeps its newest values: the best stay
    return typed + [(f, "record") for f in dict.fromkeys([*found[:room], *held]) if (f, "user") not in typed]


class AirlinePack(PackBase):
    """The airline domain (see module docstring)."""

    name = "airline"
    change_cues = True  # the cue tables read change requests: a card only once one is asked in words
    labels = lab.W1_LABELS
    cards = CARDS
    texts = AIRLINE_TEXTS
    orchestrator_policy = ORCHESTRATOR_POLICY
    generator_persona = GENERATOR_PERSONA
    conflict_kinds = lab.CONFLICT_KINDS
    branch_of_intent = lab.BRANCH_OF_INTENT
    entity_kind = "reservation_id"
    transfer_tool = TRANSFER_TOOL
    transfer_reasons = lab.TRANSFER_REASONS
    binds_user = False
    reasons = REASONS  # the policy's reason codes (eligibility.py returns them; each has a refusal text)
    tools = TOOL_SPECS
    tables_dir = Path(__file__).with_name("tables")
    arg_kind_table = cand.ARG_KINDS
    lookup_tools = LOOKUP_TOOLS  # get_user_details of an id the user typed signs them in
    owner_reads = frozenset({"get_user_details", "get_reservation_details"})  # their profile, their reservations
    #: Values the backend's grounding re-check leaves to the tool itself: a new itinerary's flights and dates come
    #: from searches (session observations the backend does not hold), amounts and bag counts from arithmetic the
    #: tool re-does (a payment that does not add up is refused).
    unchecked_args = frozenset({"flights[].flight_number", "flights[].date", "payment_methods[].amount", "amount",
                                "total_baggages", "nonfree_baggages"})
    sample_texts = ("Please cancel it, my plans changed.", "Could I get a $100 certificate?",
                    "What is 2 * (350 - 122)?")
    persistent = True
    clock: Clock | None = None  # the policy's time (default: the data directory's ``policy.md``)

    def now(self) -> Any:
        if self.clock is None:
            self.clock = load_world_clock()
        return self.clock.now()

    @staticmethod
    def state_of(facts: TurnFacts) -> AirlineState:
        return read_state(AirlineState, facts.state)

    # -- gating ----------------------------------------------------------------------------------
    def read_tools(self, facts: TurnFacts) -> list[str]:
        """Open reads always; a reservation's details once the user is known."""
        out = ["get_user_details", "search_direct_flight", "search_onestop_flight", "list_all_airports",
               "calculate"]
        return out + (["get_reservation_details"] if self.state_of(facts).user_id else [])

    def cards_for(self, intent: str, sub_intent: str, facts: TurnFacts) -> list[Card]:
        if self.state_of(facts).user_id is None:
            return []
        wanted = set(lab.cards_for(intent, sub_intent))
        return [c for c in self.cards if c.id in wanted]

    def change_intents(self) -> set[str]:
        return {key.split("/", 1)[0] for key, cards in lab.CARD_INTENTS.items() if cards}

    # -- perception and grounding -----------------------------------------------------------------
    def intent_prior(self, text: str) -> list[str] | None:
        return lab.intent_prior(text)

    def sub_intent_prior(self, text: str, intent: str) -> list[str] | None:
        return lab.sub_intent_prior(text, intent)

    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        found = cand.extract_user_candidates(text)
        if "amount" in found:  # 150 and 150.0 are the same amount
            found["amount"] = list(dict.fromkeys(v for a in found["amount"] for v in (a, str(float(a)))))
        return found

    def fixed_candidates(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in cand.FIXED_CANDIDATES.items()}

    def restore(self, facts: TurnFacts) -> None:
        """The records seen on earlier turns; a text that names several reservations ("cancel XEHM4B and 59XX6W")
        makes them the request's, the first in question and each other after the write (or the refusal) before it;
        the same reservations named again do not start it over."""
        facts.candidates = facts.candidates.merged(self.state_of(facts).records)
        typed = list(dict.fromkeys(_typed_reservations(facts.user_text, self.extract_candidates)))
        state = self.state_of(facts)
        if len(typed) > 1 and typed != state.named:
            state.selected, state.queue, state.named = typed[0], typed[1:], typed
            facts.state = state.model_dump(mode="json")
        _narrow(facts, state, self.extract_candidates)

    def session_fields(self, facts: TurnFacts) -> dict[str, Any]:
        state = self.state_of(facts)
        return {"authenticated_user_id": state.user_id, "observed_ids": list(state.observed_ids)}

    # -- observations -------------------------------------------------------------------------------
    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        state = self.state_of(facts)
        if ok and result:
            if tool in LOOKUP_TOOLS and state.user_id is None and result.get("user_id"):
                state.user_id = str(result["user_id"])
            if tool == "get_user_details" and result.get("user_id") == state.user_id and result.get("membership"):
                state.membership = str(result["membership"])
            found = cand.record_candidates(tool, result, state.user_id)
            if tool == "get_reservation_details" and result.get("user_id") == state.user_id:
                rid = str(result.get("reservation_id"))
                flights = [f for f in result.get("flights") or [] if isinstance(f, Mapping)]
                state.reservations[rid] = {
                    "origin": str(result.get("origin")), "destination": str(result.get("destination")),
                    "cabin": str(result.get("cabin")), "status": str(result.get("status") or "active"),
                    "date": str(flights[0].get("date", "")) if flights else "",
                    "insurance": str(result.get("insurance") or "no"),
                    "created_at": str(result.get("created_at") or ""),
                    "passengers": str(len(result.get("passengers") or [])),
                    "bags": str(result.get("total_baggages", "")),
                    "paid_bags": str(result.get("nonfree_baggages", "")),
                    "legs": ";".join(f"{f.get('origin')}>{f.get('destination')}>{f.get('date')}>"
                                     f"{f.get('flight_number')}" for f in flights)}
            if tool in ("search_direct_flight", "search_onestop_flight"):
                fl.keep_trips(state.flights, state.trips, result)
            rid = str(result.get("reservation_id") or "")
            if tool in WRITE_TOOLS and rid in state.reservations and result.get("status"):
                state.reservations[rid] = {**state.reservations[rid], "status": str(result["status"])}
            if tool in WRITE_TOOLS and rid and rid == state.selected:  # done: the request's next reservation
                _next_in_request(state)
            ids = [v for k in ("reservation_id", "payment_id", "user_id") for v in found.get(k, [])]
            state.observed_ids = sorted(set(state.observed_ids) | set(ids))
            state.records.add_all(found, "record")
            facts.candidates.add_all(found, "record")
            # a reservation read: still the one in question, its amounts; a search: the flights that fit the change
            if tool in ("get_reservation_details", "search_direct_flight", "search_onestop_flight"):
                _narrow(facts, state, self.extract_candidates)
        facts.state = state.model_dump(mode="json")

    def refused(self, tool: str, args: Mapping[str, Any], reason: str, facts: TurnFacts) -> None:
        """A reservation of several the policy will not let change: the request goes on to the next one."""
        state = self.state_of(facts)
        if args.get("reservation_id") == state.selected and state.queue:
            _next_in_request(state)
            facts.state = state.model_dump(mode="json")

    def user_state(self, tool: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
        r = dict(result or {})
        if tool == "get_reservation_details" and r.get("reservation_id"):
            key = f"reservation.{r['reservation_id']}"
            return {f"{key}.status": r.get("status") or "active", f"{key}.cabin": r.get("cabin"),
                    f"{key}.origin": r.get("origin"), f"{key}.destination": r.get("destination")}
        if tool == "get_user_details" and r.get("user_id"):
            return {"user.membership": r.get("membership"), "user.reservations": len(r.get("reservations") or [])}
        return super().user_state(tool, result)

    # -- texts and the reply ------------------------------------------------------------------------
    def answer_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        t = self.texts.templates
        out: list[str] = []
        for rid, r in self.state_of(facts).reservations.items():
            if any(o.tool == "get_reservation_details" and o.ok and (o.args or {}).get("reservation_id") == rid
                   for o in contract.prior_observations):
                out.append(t["reservation_state"].format(reservation_id=rid, **r))
        return out

    def refusal_line(self, refusal: Mapping[str, Any], title: str, contract: ForwardContract) -> str:
        """"I can't cancel reservation 4WQ150: …" — the card's own phrase where the reservation is all it needs, else
        its title and the reservation."""
        why = self.texts.refusals.get(str(refusal.get("reason")), "") or "it is not allowed here"
        rid = refusal.get("entity")
        try:
            what = self.texts.templates[f"card:{refusal.get('card_id')}"].format(reservation_id=rid) if rid else None
        except (KeyError, IndexError):
            what = None
        what = what or title[:1].lower() + title[1:] + (f" for reservation {rid}" if rid else "")
        return f"I can't {what}: {why}."

    def executed_lines(self, action: EligibleAction, contract: ForwardContract) -> list[str]:
        if action.tool == "book_reservation":
            return ["Done: your new reservation is booked."]
        if action.tool == "send_certificate":
            return ["Done: the certificate is on your profile."]
        return [self.texts.templates["executed"]]

    def policy_lines(self, tool: str | None) -> Sequence[str]:
        return POLICY_LINES.get(tool or "", ())

    # -- finding the user's reservation (pipelines.tandem.asking) --------------------------------------------
    def record_reads(self, facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        """Each of the user's reservations not read yet."""
        state = self.state_of(facts)
        mine = [r for r in facts.candidates.of("reservation_id") if facts.candidates.source_of("reservation_id", r)
                == "record"]
        return [("get_reservation_details", {"reservation_id": r}) for r in mine if r not in state.reservations]

    def pick_records(self, intent: str, options: Sequence[str], facts: TurnFacts) -> list[str]:
        """The reservations the intent can change whose airports (or first flight's date) the user's words name:
        none cancelled; none begun when the user says "upcoming"; for a cancellation, only those the policy lets
        be cancelled for some reason (the user's, when they gave one)."""
        state = self.state_of(facts)
        texts = [*facts.user_texts, facts.user_text]
        typed = [self.extract_candidates(t) for t in texts]
        airports = {a for c in typed for a in c.get("airport", [])}
        dates = {d for c in typed for d in c.get("date", [])}
        today = self.now().date().isoformat()
        ahead = intent == "cancel" or any(_UPCOMING.search(t) for t in texts)
        given = [r for c in typed for r in c.get("cancel_reason", [])]
        reasons = given or list(CANCEL_REASONS)  # a flight the airline cancelled: only when the user says so

        def fits(r: str) -> bool:
            info = state.reservations.get(r) or {}
            if info.get("status", "active") == "cancelled" or (ahead and info and info.get("date", "") < today):
                return False
            if intent != "cancel" or not info.get("created_at"):
                return True
            return any(cancel_refusal(status=info.get("status"), cabin=info.get("cabin", ""),
                                      insurance=info.get("insurance", "no"), created_at=info["created_at"],
                                      flown=[], airline_cancelled="airline_cancelled" in given, reason=reason,
                                      now=self.now()) is None for reason in reasons)

        live = [r for r in options if fits(r)]

        def told(r: str) -> int:  # how much of what the user said the reservation has: its airports, its dates
            info = state.reservations.get(r, {})
            held = {info.get("date")} | {d[2] for d in fl.directions(info)}  # each direction's date
            return len({info.get("origin"), info.get("destination")} & airports) + len(held & dates)

        best = max((told(r) for r in live), default=0)
        named = [r for r in live if best and told(r) == best]  # the reservations that have the most of it
        return named or live

    def select_record(self, record: str, facts: TurnFacts, then: Sequence[str] = ()) -> None:
        state = self.state_of(facts)
        state.selected, state.queue = record, list(then)
        facts.state = state.model_dump(mode="json")
        _narrow(facts, state, self.extract_candidates)

    def asks_for_all(self, facts: TurnFacts) -> bool:
        """"all my upcoming flights", "both reservations", "each of my bookings": each its own card, in turn."""
        return any(_ALL_RESERVATIONS.search(t) for t in [*facts.user_texts, facts.user_text])

    def describe_records(self, records: Sequence[str], facts: TurnFacts) -> list[str]:
        """"8JX2WO (DFW → LAX, 2024-05-22, business)" for each reservation read; one not read by its id."""
        state = self.state_of(facts)
        out = []
        for r in records:
            info = state.reservations.get(r)
            out.append(f"{r} ({_place(info['origin'])} → {_place(info['destination'])}, "
                       f"{info.get('date') or 'no date'}, {info['cabin'].replace('_', ' ')})" if info else r)
        return out

    def choices(self, about: str, facts: TurnFacts) -> list[str]:
        if about in ("choose", "reservation"):  # those the request could change, when some can (all, else)
            mine = [r for r in facts.candidates.of("reservation_id")
                    if facts.candidates.source_of("reservation_id", r) == "record"]
            mine = self.pick_records(str(facts.intent or ""), mine, facts) or mine
            return self.describe_records(mine, facts) if len(mine) > 1 else []
        return []

    def choice_reads(self, about: str, facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        return self.record_reads(facts) if about in ("choose", "reservation") else []

    def readback(self, tool: str, args: Mapping[str, Any], facts: TurnFacts) -> dict[str, str]:
        """A card in words: each flight by its number and date, the passengers by name, the payment by its id's
        kind (the template names the reservation, the cabin and the bag counts)."""
        out: dict[str, str] = {"user_id": ""}
        flights = args.get("flights")
        if isinstance(flights, list):
            out["flights"] = "flights " + ", ".join(
                f"{f.get('flight_number')} on {f.get('date')}" for f in flights if isinstance(f, Mapping))
        passengers = args.get("passengers")
        if isinstance(passengers, list):
            out["passengers"] = "for " + ", ".join(
                f"{p.get('first_name')} {p.get('last_name')}" for p in passengers if isinstance(p, Mapping))
        if args.get("reason"):
            out["reason"] = _REASON_SAID.get(str(args["reason"]), f"for {str(args['reason']).replace('_', ' ')}")
        for key in ("payment_id", "payment_methods"):
            value = args.get(key)
            ids = [value] if isinstance(value, str) else [p.get("payment_id") for p in value or []
                                                          if isinstance(p, Mapping)]
            if ids:
                out[key] = "paid with " + ", ".join(str(i).replace("_", " ") for i in ids if i)
        return out

    def arrange(self, tool: str, args: dict[str, Any], facts: TurnFacts) -> dict[str, Any]:
        """A change of flights carries its whole new itinerary as the user's words decide it
        (:func:`.flights.itinerary`), whatever flights the model put on the card: per direction, the itinerary of a
        flight number the user typed, else the best of those that fit when their words rank them or only one fits,
        else the flights it holds when they want no new date for it; each flight on the date it flies, a stop's
        second leg with its first. Left as proposed while a direction is still open (:meth:`undecided` asks)."""
        plan = self._flight_change(tool, args, facts)
        if plan is None:
            return args
        whole = fl.itinerary(_typed_flights(facts), plan.dirs, plan.options, plan.ranked)
        if whole is None:
            return args
        return {**args, "flights": [{"flight_number": k.split("@", 1)[0], "date": k.split("@", 1)[1]} for k in whole]}

    def undecided(self, tool: str, args: dict[str, Any], facts: TurnFacts) -> tuple[str, list[str]] | None:
        """A new date with several flights that fit and nothing the user said to choose among them (a flight number
        typed, a ranking, a time): which one is asked — the model never picks a flight for the user."""
        plan = self._flight_change(tool, args, facts)
        at = None if plan is None else fl.open_direction(_typed_flights(facts), plan.dirs, plan.options, plan.ranked)
        if plan is None or at is None:
            return None
        flights = self.state_of(facts).flights
        return "flight_choices", [fl.describe_trip(flights, t, plan.cabin) for t in plan.options[at][:5]]

    def _flight_change(self, tool: str, args: Mapping[str, Any], facts: TurnFacts) -> ChangePlan | None:
        """The change of flights a card of ``tool`` makes, as the user's words ask it (none: another card)."""
        if tool != "update_reservation_flights" or not isinstance(args.get("flights"), list):
            return None
        state = self.state_of(facts)
        return change_plan(facts, state, _in_question(facts, state, self.extract_candidates))

    def entity_names(self, facts: TurnFacts) -> list[str]:
        c = facts.candidates
        return c.of("first_name") + c.of("last_name")

    # -- kernels ------------------------------------------------------------------------------------
    def snapshot_values(self, facts: TurnFacts) -> dict[str, Any]:
        state = self.state_of(facts)
        typed = self.extract_candidates(facts.user_text)
        out: dict[str, Any] = {}
        uid = state.user_id or (facts.candidates.of("user_id") or typed.get("user_id") or [None])[-1]
        if uid:
            out["user_id"] = uid
        if state.user_id:
            out["verified"] = state.user_id
        rid = _in_question(facts, state, self.extract_candidates)
        if rid:
            out["reservation_id"] = rid
        plan = change_plan(facts, state, rid)
        if plan is not None:  # a change of flights: the route of each direction to search, on the date wanted
            for (origin, dest, _held, _legs), day, key in zip(plan.dirs, plan.days, ("out", "back"), strict=False):
                if day:
                    out |= {f"{key}_origin": origin, f"{key}_destination": dest, f"{key}_date": day}
        places = [p for p in cand.places_said(facts.user_text) if p]  # a city of two airports searches neither
        if len(places) >= 2 and len(places[0]) == len(places[1]) == 1 and places[0] != places[1]:
            out["origin"], out["destination"] = places[0][0], places[1][0]
        if typed.get("date"):
            out["date"] = typed["date"][0]
        return out

    def conflicts(self, facts: TurnFacts) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"constraint_id": f"card:{r.get('card_id')}", "kind": "action_refused",
                                      "detail": str(r.get("reason") or "")} for r in facts.refusals]
        for o in facts.observations:
            if o.get("ok"):
                continue
            if o.get("tool") == "get_reservation_details":
                out.append({"constraint_id": f"reservation:{(o.get('args') or {}).get('reservation_id', '')}",
                            "kind": "reservation_not_found", "detail": str(o.get("reason") or "")})
            elif o.get("tool") == "get_user_details":
                out.append({"constraint_id": "identity", "kind": "identity_not_found",
                            "detail": str(o.get("reason") or "")})
        if (facts.intent in lab.ACCOUNT_INTENTS and self.state_of(facts).user_id is None
                and not any(c["constraint_id"] == "identity" for c in out)):
            out.append({"constraint_id": "identity", "kind": "identity_unverified"})
        return out

    # -- serving: the world, its store and the tools --------------------------------------------------
    def new_world(self, seed: int, dataset: str | None = None) -> AirlineWorld:
        """The tau2-airline world (``dataset``: its ``db.json`` or directory; default the data directory)."""
        return load_world(dataset)

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> AirlineWorld:
        return AirlineWorld.from_entities(rows).with_clock(load_world_clock())

    def evaluation(self) -> Any:
        """The airline's scripted user, oracle labels and read-back terms for ``tandem eval`` (:mod:`.evaluation`)."""
        from .evaluation import AirlineEvaluation

        return AirlineEvaluation()

    def task_replay(self, data_dir: str | Path | None = None) -> TaskReplayHook:
        """The hook that replays tau2-airline's expected actions through these tools."""
        from .replay import AirlineReplay

        return AirlineReplay(data_dir)

    def sample_writes(self, world: Any) -> list[SampleWrite]:
        return sample_writes(self, world)


def load_world_clock() -> Clock:
    """The clock of the configured data directory's policy (a stored world keeps no clock of its own)."""
    return load_world_clock_for(default_data_dir())
