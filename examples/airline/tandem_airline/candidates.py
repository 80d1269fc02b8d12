"""Grounded candidates for every argument of the airline tools and cards.

Two sources, as everywhere in Tandem: what the user typed (:func:`extract_user_candidates`, deterministic
extractors over one redacted text) and the user's own records (:func:`record_candidates`: their profile,
their reservations, and the flights a search for them returned), plus the fixed vocabularies
(:data:`FIXED_CANDIDATES`: cabins, trip types, insurance).

Grounding kinds: ``user_id``, ``reservation_id``, ``airport``, ``date``, ``flight_number``, ``cabin``,
``flight_type``, ``insurance``, ``cancel_reason``, ``payment_id``, ``first_name``, ``last_name``, ``dob``,
``bag_count``, ``amount``, ``expression``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .world import CABINS

__all__ = ["AIRPORTS", "AIRPORT_CITIES", "airports_said", "places_said", "FIXED_CANDIDATES", "ARG_KINDS",
           "extract_user_candidates", "record_candidates"]

AIRPORTS: frozenset[str] = frozenset({"ATL", "BOS", "CLT", "DEN", "DFW", "DTW", "EWR", "IAH", "JFK", "LAS", "LAX",
                                      "LGA", "MCO", "MIA", "MSP", "ORD", "PHL", "PHX", "SEA", "SFO"})
#: The city each airport serves, as people name it ("a flight from Dallas to Seattle"); New York has two.
AIRPORT_CITIES: dict[str, str] = {
    "ATL": "Atlanta", "BOS": "Boston", "CLT": "Charlotte", "DEN": "Denver", "DFW": "Dallas", "DTW": "Detroit",
    "EWR": "Newark", "IAH": "Houston", "JFK": "New York", "LAS": "Las Vegas", "LAX": "Los Angeles",
    "LGA": "New York", "MCO": "Orlando", "MIA": "Miami", "MSP": "Minneapolis", "ORD": "Chicago",
    "PHL": "Philadelphia", "PHX": "Phoenix", "SEA": "Seattle", "SFO": "San Francisco"}
_CITY_NAMES = "|".join(sorted({re.escape(c) for c in AIRPORT_CITIES.values()}, key=len, reverse=True))
#: A city named as a place travelled from or to (after "from", "to", "in", "via", "between", "and", … or before
#: "airport", "flight", "trip") — not a person who bears its name ("Charlotte Davis").
_CITY = re.compile(rf"(?:\b(?:from|to|in|at|into|via|through|between|and|out\s+of|leaving|departing|arriving|"
                   rf"back\s+to)\s+(?:the\s+)?(?P<after>{_CITY_NAMES})\b(?!(?-i:\s+[A-Z][a-z]))|"
                   rf"\b(?P<before>{_CITY_NAMES})\s+(?=(?:airport|flights?|trip|reservation)\b))", re.I)
#: Always candidates. A cancellation's reason is not among them: the policy has the agent obtain it from the
#: user, so it is grounded only in the user's words (:func:`extract_user_candidates`).
FIXED_CANDIDATES: dict[str, tuple[str, ...]] = {
    "cabin": CABINS, "flight_type": ("one_way", "round_trip"), "insurance": ("yes", "no"),
}

_FLIGHTS = {"flights[].flight_number": "flight_number", "flights[].date": "date"}
_PASSENGERS = {"passengers[].first_name": "first_name", "passengers[].last_name": "last_name",
               "passengers[].dob": "dob"}
ARG_KINDS: dict[str, dict[str, str]] = {
    "get_user_details": {"user_id": "user_id"},
    "get_reservation_details": {"reservation_id": "reservation_id"},
    "search_direct_flight": {"origin": "airport", "destination": "airport", "date": "date"},
    "search_onestop_flight": {"origin": "airport", "destination": "airport", "date": "date"},
    "list_all_airports": {},
    "calculate": {"expression": "expression"},
    "cancel_reservation": {"reservation_id": "reservation_id", "reason": "cancel_reason"},
    # a change of flights keeps the reservation's cabin unless the user names another (pack._narrow)
    # a change is paid by a gift card or a credit card, never a certificate (pack._narrow: ``change_payment``)
    # the new flights: those typed, those a search found that fit the request, those held (pack.new_flights)
    "update_reservation_flights": {"reservation_id": "reservation_id", "cabin": "flight_cabin",
                                   "flights[].flight_number": "new_flight", "flights[].date": "date",
                                   "payment_id": "change_payment"},
    # bags are added, never removed: the new total is above the one held (pack._narrow)
    "update_reservation_baggages": {"reservation_id": "reservation_id", "total_baggages": "bag_total",
                                    "nonfree_baggages": "bag_fee_count", "payment_id": "change_payment"},
    "update_reservation_passengers": {"reservation_id": "reservation_id", **_PASSENGERS},
    "book_reservation": {"user_id": "user_id", "origin": "airport", "destination": "airport",
                         "flight_type": "flight_type", "cabin": "cabin", **_FLIGHTS, **_PASSENGERS,
                         "payment_methods[].payment_id": "payment_id", "payment_methods[].amount": "amount",
                         "total_baggages": "bag_count", "nonfree_baggages": "bag_count", "insurance": "insurance"},
    "send_certificate": {"user_id": "user_id", "amount": "certificate_amount"},  # the policy's, never the user's
}

_USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{3,5}\b")
_RESERVATION = re.compile(r"\b(?=[A-Z0-9]{6}\b)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}\b")
_AIRPORT = re.compile(r"\b[A-Z]{3}\b")
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_FLIGHT = re.compile(r"\bHAT\d{3}\b", re.I)
_PAYMENT = re.compile(r"\b(?:credit_card|gift_card|certificate)_\d+\b")
_AMOUNT = re.compile(r"\$\s?(\d+(?:\.\d{1,2})?)|\b(\d+(?:\.\d{1,2})?)\s?(?:dollars|usd)\b", re.I)
_SMALL = re.compile(r"\b(\d{1,2})\b")
#: Arithmetic the user writes out (numbers joined by + - * /, parentheses): what ``calculate`` works out.
_EXPRESSION = re.compile(r"[(\s]*\d+(?:\.\d+)?(?:[\s)]*[-+*/][(\s]*\d+(?:\.\d+)?)+[\s)]*")
_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10}
_WORD_NUM = re.compile(r"\b(" + "|".join(_WORDS) + r")\b", re.I)
_NAME = re.compile(r"\b([A-Z][a-z]+)\s+([A-Z][a-z]+)\b")
_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                        "september", "october", "november", "december"), start=1)}
_MONTH_DAY = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b", re.I)
_CABIN_WORDS = (("basic economy", "basic_economy"), ("business", "business"), ("economy", "economy"))
_REASON_WORDS = (("change of plan", "change_of_plan"), ("change my plan", "change_of_plan"),
                 ("plans changed", "change_of_plan"), ("cancelled by the airline", "airline_cancelled"),
                 ("airline cancelled", "airline_cancelled"), ("health", "health"), ("sick", "health"),
                 ("ill", "health"), ("weather", "weather"), ("storm", "weather"),
                 # the policy's reasons are a change of plan, a flight the airline cancelled, or other reasons: one
                 # the user keeps to themselves is an other reason
                 ("other reason", "other"), ("other reasons", "other"), ("personal reason", "other"),
                 ("personal reasons", "other"), ("rather not say", "other"), ("prefer not to say", "other"),
                 ("rather not tell", "other"), ("no particular reason", "other"))


def extract_user_candidates(text: str, *, year: int = 2024) -> dict[str, list[str]]:
    """Kind → values found in one user text (``year``: the year a "May 20" falls in)."""
    out: dict[str, list[str]] = {}

    def add(kind: str, values: Any) -> None:
        for v in values:
            if v not in out.setdefault(kind, []):
                out[kind].append(v)

    low = text.casefold()
    add("user_id", _USER_ID.findall(text))
    add("reservation_id", [r for r in _RESERVATION.findall(text) if not _FLIGHT.fullmatch(r)])
    add("airport", airports_said(text))
    dates = _ISO_DATE.findall(text)
    dates += [f"{year:04d}-{_MONTHS[m.casefold()]:02d}-{int(d):02d}" for m, d in _MONTH_DAY.findall(text)
              if 1 <= int(d) <= 31]
    add("date", dates)
    add("dob", _ISO_DATE.findall(text))
    add("flight_number", [f.upper() for f in _FLIGHT.findall(text)])
    add("payment_id", _PAYMENT.findall(text))
    add("amount", [a or b for a, b in _AMOUNT.findall(text)])
    # an ISO date or a phone number is no sum: an operator other than a bare hyphen
    add("expression", [e.strip() for e in _EXPRESSION.findall(text) if re.search(r"[+*/]|\s-\s", e)])
    add("bag_count", _SMALL.findall(_ISO_DATE.sub(" ", text)) + [str(_WORDS[w.casefold()])
                                                                   for w in _WORD_NUM.findall(text)])
    names = _NAME.findall(text)
    add("first_name", [f for f, _ in names])
    add("last_name", [la for _, la in names])
    add("cabin", [v for w, v in _CABIN_WORDS if w in low and not (v == "economy" and "basic economy" in low
                                                                   and low.count("economy") == 1)])
    add("cancel_reason", [v for w, v in _REASON_WORDS if re.search(rf"\b{re.escape(w)}\b", low)])
    if re.search(r"\bround[- ]trip\b", low):
        add("flight_type", ["round_trip"])
    if re.search(r"\bone[- ]way\b", low):
        add("flight_type", ["one_way"])
    return {k: v for k, v in out.items() if v}


def places_said(text: str) -> list[list[str]]:
    """The places ``text`` names, in the order said, each as its airports: a code is one, a city the airports that
    serve it ("New York": JFK and LGA)."""
    at = [(m.start(), [m.group(0)]) for m in _AIRPORT.finditer(text) if m.group(0) in AIRPORTS]
    for m in _CITY.finditer(text):
        city = (m.group("after") or m.group("before")).casefold()
        at.append((m.start("after") if m.group("after") else m.start(),
                   [code for code, name in AIRPORT_CITIES.items() if name.casefold() == city]))
    return [codes for _, codes in sorted(at, key=lambda x: x[0])]


def airports_said(text: str) -> list[str]:
    """The airports ``text`` names, by code or by the city they serve, in the order said."""
    return list(dict.fromkeys(code for codes in places_said(text) for code in codes))


def _passengers(found: dict[str, list[str]], people: Any) -> None:
    for p in people or ():
        if isinstance(p, Mapping):
            found["first_name"].append(str(p.get("first_name", "")))
            found["last_name"].append(str(p.get("last_name", "")))
            found["dob"].append(str(p.get("dob", "")))


def record_candidates(tool: str, result: Mapping[str, Any] | None, owner: str | None) -> dict[str, list[str]]:
    """Candidates read off one successful observation of the owner's records (nothing from someone else's)."""
    found: dict[str, list[str]] = {k: [] for k in ("user_id", "reservation_id", "payment_id", "first_name",
                                                   "last_name", "dob", "flight_number", "date", "airport",
                                                   "amount", "bag_count")}
    if not result:
        return {}
    if tool == "get_user_details" and result.get("user_id") == owner:
        found["user_id"].append(str(owner))
        found["reservation_id"] += [str(r) for r in result.get("reservations", [])]
        found["payment_id"] += [str(p) for p in (result.get("payment_methods") or {})]
        name = result.get("name") or {}
        _passengers(found, [{**name, "dob": result.get("dob", "")}])
        _passengers(found, result.get("saved_passengers"))
    elif tool == "get_reservation_details" and result.get("user_id") == owner:
        found["reservation_id"].append(str(result.get("reservation_id")))
        _passengers(found, result.get("passengers"))
        for f in result.get("flights") or ():
            found["flight_number"].append(str(f.get("flight_number")))
            found["date"].append(str(f.get("date")))
            found["airport"] += [str(f.get("origin")), str(f.get("destination"))]
        found["bag_count"] += [str(result.get("total_baggages", "")), str(result.get("nonfree_baggages", ""))]
    elif tool in ("search_direct_flight", "search_onestop_flight"):
        legs = result.get("flights") or [leg for trip in result.get("trips") or () for leg in trip]
        for leg in legs:
            found["flight_number"].append(str(leg.get("flight_number")))
            if leg.get("date"):
                found["date"].append(str(leg.get("date")))
    elif tool == "calculate" and "value" in result:
        value = float(result["value"])
        found["amount"].append(str(int(value)) if value.is_integer() else str(value))
    return {k: list(dict.fromkeys(v for v in vs if v)) for k, vs in found.items() if any(vs)}
