"""What the airline pack gives ``tandem eval``: the instructed scripted user of whole tau2-airline tasks, the oracle
labels of a request, what a card's read-back must name, and the rule a card must meet to count as requested.

The user is the core's :class:`pipelines.core.tau2_user.InstructedUser` (the same rules as every pack's: it says only
what its instructions say) with the airline's words: reservations, flights, passengers, bags, payments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.domain import InstructedUser, InstructedVocabulary, PackEvaluation

from .candidates import _MONTHS as _MONTHS_OF_YEAR
from .labels import CARD_INTENTS

__all__ = ["AirlineEvaluation", "CARD_RULES", "WRITE_TOOLS", "instructed_vocabulary"]

WRITE_TOOLS = frozenset({"cancel_reservation", "update_reservation_flights", "update_reservation_baggages",
                         "update_reservation_passengers", "book_reservation", "send_certificate"})
_RESERVATION = re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}\b")
_MONTHS = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
ASKS: dict[str, re.Pattern[str]] = {  # "order": this pack's record, the reservation
    "order": re.compile(r"\breservation|\bconfirmation (?:code|number)|\bbooking (?:code|id|number)", re.I),
    "flight": re.compile(rf"\bflights?\b|\bdates?\b|\bdepart|\breturn\b|\borigin\b|\bdestination\b|\bairports?\b|"
                         rf"\bcabin\b|\bclass\b|\b{_MONTHS}\b", re.I),
    "passenger": re.compile(r"\bpassengers?\b|\btravell?ers?\b|\bdate of birth\b|\bwho (?:is|will be) (?:flying|"
                            r"travell?ing)", re.I),
    "bags": re.compile(r"\bbags?\b|\bbaggages?\b|\bluggage\b|\bsuitcases?\b", re.I),
    "payment": re.compile(r"\bpayment|\bpay\b|\bcard\b|\bcertificate|\brefund", re.I),
    "reason": re.compile(r"\breason\b|\bwhy\b", re.I),
}
FACTS: dict[str, re.Pattern[str]] = {
    "order": _RESERVATION,
    "flight": re.compile(rf"\b[A-Z]{{3}}\b|\bflights?\b|\b{_MONTHS}\b|\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b(?:economy|business|"
                         r"basic economy|nonstop|direct|one[- ]way|round[- ]trip)\b", re.I),
    "passenger": re.compile(r"\bpassengers?\b|\btravell?ers?\b", re.I),
    "bags": re.compile(r"\bbags?\b|\bbaggages?\b|\bluggage\b|\bsuitcases?\b", re.I),
    "payment": re.compile(r"\b(?:credit|debit|gift) cards?\b|\bcertificates?\b|\bpay(?:ment)?\b|\brefund", re.I),
    "reason": re.compile(r"\b(?:because|since|sick|illness|weather|change of plan)\b", re.I),
}
UNKNOWN: dict[str, str] = {
    "reservation": "I don't know the reservation number.",
    "payment": "I'd like to use a payment method on file.",
    "reason": "I'd rather not say.",  # a reason is a fact: never made up
    "bags": "I don't have any bags to add.",
    "passenger": "Just the passengers already on the reservation.",
}


def instructed_vocabulary() -> InstructedVocabulary:
    """The airline's words for the instructed user (see module docstring)."""
    return InstructedVocabulary(
        write_tools=WRITE_TOOLS, asks=ASKS, facts=FACTS, ids={"order": _RESERVATION},
        id_line={"order": "It's reservation {id}."}, unknown={**UNKNOWN, "order": UNKNOWN["reservation"]},
        identity=re.compile(r"\buser id\b|\be-?mail|\b(your|full|first|last) name\b|verif|identif|authenticat|"
                            r"who you are", re.I),
        identity_order=("user_id", "email", "name_zip"))


_MOVE = r"(?:chang\w*|mov\w*|switch\w*|reschedul\w*|rebook\w*|modif\w*|updat\w*|push\w*|upgrad\w*|downgrad\w*)"
#: The judge of a requested card (``tandem eval``'s "unrequested cards"), written apart from the pack's cues
#: (:mod:`.labels`): card id → (family, a rule one of the user's texts of the open request must match).
CARD_RULES: dict[str, tuple[str, re.Pattern[str]]] = {
    "card.cancel_reservation": ("cancel", re.compile(
        r"\b(cancel\w*|call\w* off|(?:don'?t|do not|no longer) (?:need|want) (?:the|my|this|that) "
        r"(?:flight|trip|reservation|booking))\b", re.I)),
    "card.change_flights": ("change_flights", re.compile(
        rf"\b{_MOVE}\b.{{0,60}}\b(flights?|dates?|day|cabin|class|business|economy|trip|reservation)\b|"
        r"\b(?:earlier|later|different|another|cheaper) (?:flight|date|day)\b|\b(?:upgrad|downgrad)\w*\b", re.I)),
    "card.add_bags": ("bags", re.compile(
        r"\b(add\w*|more|extra|additional|check\w*(?: in)?|bring\w*)\b.{0,40}\b(bags?|baggages?|luggage|suitcases?)\b",
        re.I)),
    "card.change_passengers": ("passengers", re.compile(
        rf"\b({_MOVE}|correct\w*|fix\w*|replac\w*|remov\w*|add\w*)\b.{{0,60}}\b(passengers?|travell?ers?|names?|"
        r"dates? of birth|birthdays?)\b", re.I)),
    "card.book_reservation": ("book", re.compile(
        r"\b(book\w*|reserv(?:e|ing)|buy\w*|purchas\w*)\b.{0,60}\b(flights?|tickets?|trips?|seats?)\b|"
        r"\bnew (?:reservation|booking)\b", re.I)),
    "card.send_certificate": ("compensation", re.compile(
        r"\b(compensat\w*|certificates?|vouchers?|make up for|goodwill)\b", re.I)),
}

_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_MONTH_NAMES = tuple(m.capitalize() for m in _MONTHS_OF_YEAR)  # the months as the pack's extractor reads them


class AirlineEvaluation(PackEvaluation):
    """The airline pack's evaluation hooks (see module docstring)."""

    def card_rules(self) -> Mapping[str, tuple[str, re.Pattern[str]]]:
        return CARD_RULES

    def said_as(self, value: str) -> list[str]:
        """A date as people say it: 2024-05-23 is "May 23", "May 23rd", "23 May" (the pack reads them so, in the
        policy's year)."""
        m = _ISO_DATE.fullmatch(value.strip())
        if not m or not 1 <= int(m.group(2)) <= 12:
            return []
        month, day = _MONTH_NAMES[int(m.group(2)) - 1], int(m.group(3))
        nth = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
        return [f"{month} {day}", f"{month} {day}{nth}", f"{day} {month}"]

    def scripted_user(self, task: Mapping[str, Any], db: Mapping[str, Any], card_tools: Mapping[str, str],
                      max_turns: int, kind: str = "instructed") -> Any:
        if kind != "instructed":
            return None  # the airline pack keeps no informed user
        return InstructedUser(task, card_tools, vocab=instructed_vocabulary(), max_turns=max_turns)

    def oracle_labels(self, tool: str | None) -> tuple[str, str]:
        """The (intent, sub-intent) whose card runs ``tool``; a question about a reservation when none."""
        from .pack import CARDS

        card = next((c.id for c in CARDS if c.tool == tool), None)
        for key, cards in CARD_INTENTS.items():
            if card in cards:
                intent, _, sub = key.partition("/")
                return intent, sub or {"cancel": "reservation", "book": "flight",
                                       "compensation": "certificate"}.get(intent, "")
        return "reservation", "details"

    def readback_terms(self, card_id: str, params: Mapping[str, Any], db: Mapping[str, Any]) -> dict[str, list[str]]:
        """The reservation, each flight by its number, the cabin, the passengers by their first names, the bag
        counts and the amount, as the card changes them."""
        out: dict[str, list[str]] = {}
        if params.get("reservation_id"):
            out["reservation_id"] = [str(params["reservation_id"])]
        flights = params.get("flights")
        if isinstance(flights, list):
            out["flights"] = [str(f.get("flight_number")) for f in flights if isinstance(f, Mapping)
                              and f.get("flight_number")]
        if params.get("cabin"):
            out["cabin"] = [str(params["cabin"]).replace("_", " ")]
        passengers = params.get("passengers")
        if isinstance(passengers, list):
            out["passengers"] = [str(p.get("first_name")) for p in passengers if isinstance(p, Mapping)
                                 and p.get("first_name")]
        if "total_baggages" in params:
            out["total_baggages"] = [str(params["total_baggages"])]
        if params.get("amount") is not None:
            out["amount"] = [str(params["amount"]).rstrip("0").rstrip(".") if "." in str(params["amount"])
                             else str(params["amount"])]
        return {k: v for k, v in out.items() if v}

    def label_tools(self, label: str) -> set[str]:
        return set()

    def intent_label(self, actions: Sequence[Mapping[str, Any]]) -> str | None:
        return None
