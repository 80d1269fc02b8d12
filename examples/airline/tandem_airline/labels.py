"""The airline pack's W1 labels, the cards each intent may offer, its cue priors and kernel vocabularies.

* :data:`W1_LABELS` — intent → sub-intents (short words: the 4-in-1 stream spends few tokens on them).
* :data:`CARD_INTENTS` — ``intent`` or ``intent/sub_intent`` → the write cards that perceived intent may
  offer; an intent that asks for no change offers none.
* :func:`intent_prior` — the intents a text's explicit cues allow ("cancel", "book", "bag"…).
* :data:`CONFLICT_KINDS`, :data:`BRANCH_OF_INTENT` — W2 conflict kinds and W3 branches.
"""

from __future__ import annotations

import re

__all__ = ["W1_LABELS", "CARD_INTENTS", "ACCOUNT_INTENTS", "CONFLICT_KINDS", "BRANCH_OF_INTENT",
           "TRANSFER_REASONS", "INTENT_CUES", "intent_prior", "sub_intent_prior", "cards_for"]

W1_LABELS: dict[str, tuple[str, ...]] = {
    "reservation": ("status", "details"),
    "cancel": ("reservation",),
    "change": ("flights", "cabin", "bags", "passengers"),
    "book": ("flight",),
    "search": ("flights",),
    "compensation": ("certificate",),
    "policy": ("question",),
    "human": ("agent",),
    "greeting": ("hello", "thanks", "bye"),
    "other": ("unknown",),
}

CARD_INTENTS: dict[str, tuple[str, ...]] = {
    "cancel": ("card.cancel_reservation",),
    "change/flights": ("card.change_flights",),
    "change/cabin": ("card.change_flights",),
    "change/bags": ("card.add_bags",),
    "change/passengers": ("card.change_passengers",),
    "book": ("card.book_reservation",),
    "compensation": ("card.send_certificate",),
}

ACCOUNT_INTENTS: frozenset[str] = frozenset({"reservation", "cancel", "change", "book", "compensation"})

CONFLICT_KINDS: tuple[str, ...] = ("action_refused", "reservation_not_found", "identity_not_found",
                                   "identity_unverified", "missing_detail")

BRANCH_OF_INTENT: dict[str, str] = {"reservation": "status", "cancel": "cancel", "change": "change",
                                    "book": "book", "search": "book"}

TRANSFER_REASONS: dict[str, str] = {"user_asked": "user_asked", "out_of_scope": "out_of_scope",
                                    "repeated_failure": "repeated_failure"}

INTENT_CUES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bcancel", re.I), "cancel"),
    (re.compile(r"\b(book|reserve)\b", re.I), "book"),
    (re.compile(r"\b(bag|bags|baggage|luggage|cabin|upgrade|downgrade|passenger|passengers|change|modify)\b",
                re.I), "change"),
    # how people ask a trip moved: "move my flight", "reschedule", "rebook me", "switch to", "postpone", "… instead"
    (re.compile(r"\b(mov(?:e|ing)|reschedul\w*|rebook\w*|switch\w*|postpon\w*|instead)\b", re.I), "change"),
    (re.compile(r"\b(compensat\w*|certificate|voucher)\b", re.I), "compensation"),
    (re.compile(r"\b(human|person|agent|representative)\b", re.I), "human"),
)

SUB_CUES: dict[str, tuple[tuple[re.Pattern[str], str], ...]] = {
    "change": (
        (re.compile(r"\b(bag|bags|baggage|luggage)\b", re.I), "bags"),
        (re.compile(r"\b(passenger|passengers|name)\b", re.I), "passengers"),
        (re.compile(r"\b(cabin|upgrade|downgrade|business|economy)\b", re.I), "cabin"),
        (re.compile(r"\b(flight|flights|date|dates|day|earlier|later|mov(?:e|ing)|reschedul\w*|rebook\w*|"
                    r"postpon\w*)\b", re.I), "flights"),
    ),
}


def intent_prior(text: str) -> list[str] | None:
    """The intents the text's explicit cues allow (``None``: any)."""
    hits = list(dict.fromkeys(intent for pattern, intent in INTENT_CUES if pattern.search(text)))
    return hits or None


def sub_intent_prior(text: str, intent: str) -> list[str] | None:
    hits = list(dict.fromkeys(sub for pattern, sub in SUB_CUES.get(intent, ()) if pattern.search(text)))
    return hits or None


def cards_for(intent: str, sub_intent: str) -> tuple[str, ...]:
    return CARD_INTENTS.get(f"{intent}/{sub_intent}") or CARD_INTENTS.get(intent, ())
