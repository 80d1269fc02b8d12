"""The support pack's W1 labels, the cards each intent may offer, and its kernel vocabularies.

* :data:`W1_LABELS` — intent → sub-intents, short single words so the 4-in-1
  stream spends few tokens on them.
* :data:`CARD_INTENTS` — ``intent`` or ``intent/sub_intent`` → the write cards that
  perceived intent may offer. An intent that asks for no change offers no card
  (a greeting can never decode an address change).
* :data:`ACCOUNT_INTENTS` — intents that need a verified user before anything else.
* :func:`intent_prior` — the intents a text's explicit cues allow ("cancel",
  "return", "exchange"…); W1's grammar is narrowed to them when any cue fires.
* :data:`CONFLICT_KINDS`, :data:`BRANCH_OF_INTENT` — W2 conflict kinds and W3 branches.
"""

from __future__ import annotations

import re

__all__ = ["CARD_INTENT_LABELS", 
    "W1_LABELS",
    "CARD_INTENTS",
    "ACCOUNT_INTENTS",
    "CONFLICT_KINDS",
    "BRANCH_OF_INTENT",
    "TRANSFER_REASONS",
    "INTENT_CUES",
    "SUB_INTENT_CUES",
    "intent_prior",
    "sub_intent_prior",
    "cards_for",
]

W1_LABELS: dict[str, tuple[str, ...]] = {
    "order_status": ("status", "refund", "details"),
    "cancel": ("order",),
    "return": ("items",),
    "exchange": ("items",),
    "modify": ("items", "address", "payment"),
    "account": ("details", "address", "payment"),
    "product": ("info",),
    "policy": ("question",),
    "human": ("agent",),
    "greeting": ("hello", "thanks", "bye"),
    "other": ("unknown",),
}

CARD_INTENTS: dict[str, tuple[str, ...]] = {
    "cancel": ("card.cancel_order",),
    "return": ("card.return_items",),
    "exchange": ("card.exchange_items",),
    "modify/items": ("card.modify_items",),
    "modify/address": ("card.modify_address",),
    "modify/payment": ("card.modify_payment",),
    "account/address": ("card.modify_user_address",),
}

ACCOUNT_INTENTS: frozenset[str] = frozenset({"order_status", "cancel", "return", "exchange", "modify", "account"})

CONFLICT_KINDS: tuple[str, ...] = (
    "action_refused",
    "order_not_found",
    "identity_not_found",
    "identity_unverified",
    "missing_detail",
)

#: Escalation reason code -> the transfer tool's reason (tau2's ``transfer_to_human_agents``).
TRANSFER_REASONS: dict[str, str] = {
    "user_requested_human": "user_request",
    "safety_sensitive": "other",
    "out_of_scope": "out_of_scope",
    "policy_exception": "policy_exception",
    "technical_issue": "technical_issue",
}

BRANCH_OF_INTENT: dict[str, str] = {
    "order_status": "status",
    "cancel": "cancel",
    "return": "returns",
    "exchange": "returns",
    "modify": "modify",
    "account": "account",
    "policy": "policy",
}

# Explicit cues: when one fires, W1 may only choose among the intents it names.
_CHANGE = r"\b(change\w*|modify\w*|update\w*|edit\w*|switch(?!\s+type\b)\w*|upgrad\w*|downgrad\w*)\b"
# a replacement of an item the user has: exchanged when delivered, modified while pending
_REPLACE = re.compile(r"\b(replac\w*|(?:a|another) new one)\b", re.I)
# a new address in the user's own words, with no verb of change: someone who moved, an order going elsewhere
_NEW_ADDRESS = re.compile(r"\b(moved|moving house|relocat\w*|new (?:home|house|apartment|flat|place)|"
                          r"(?:another|a different|the wrong|my new) address)\b", re.I)
# changing an item's options is an exchange or a modification: which one is the order's state, not the words
# ("switch type" is a keyboard's option, not a verb)
_CHANGE_ITEM = re.compile(_CHANGE + r".{0,60}\b(size|colou?r|items?|options?|variants?|material|style|version)\b",
                          re.I)
# whether the user says the item reached them: a change of a delivered item is an exchange, of a pending one a
# modification (the order's state decides once it is read; these words decide before)
_DELIVERED = re.compile(r"\b(?<!not )(?<!n't )(?<!never )(?<!yet )(received|arrived|delivered|got (?:it|them|the|my))\b",
                        re.I)
_PENDING = re.compile(r"\b(pending|just (?:placed|ordered)|not (?:yet )?(?:shipped|arrived|delivered|received)|"
                      r"(?:hasn't|haven't|has not|have not|hasn't yet|didn't) (?:shipped|arrived|been delivered|"
                      r"received|receive|get|got))\b", re.I)
# an item taken out of an order: the order cancelled, or changed while pending — never a return of it
_REMOVE = re.compile(r"\b(remove|take|drop)\b.{0,30}\b(?:from|off|out of) (?:my|the|this|that|an?) (?:\w+ ){0,2}order\b",
                     re.I)
_UNWANTED = re.compile(r"\b(?:no longer|don'?t|do not) (?:need|want|use)\b(?! (?:to|any help|help))", re.I)
_FAULTY = re.compile(r"\b(damaged|broken|defective|faulty|cracked|doesn'?t work|does not work|stopped working|"
                     r"not working)\b", re.I)
INTENT_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cancel", re.compile(r"\bcancel", re.I)),
    ("cancel", _REMOVE),
    ("return", re.compile(r"\b(return(?:ing)?\b(?!\s+policy)|send (?:it|them|this|these) back)", re.I)),
    ("exchange", re.compile(r"\b(exchang\w*|swap\w*)\b", re.I)),
    ("exchange", _CHANGE_ITEM),
    ("exchange", _REPLACE),
    ("modify", _CHANGE_ITEM),
    ("modify", re.compile(_CHANGE + r".{0,40}\b(address|payment|order|shipping)\b", re.I)),
    ("modify", _REPLACE),
    ("modify", _REMOVE),
    ("modify", _NEW_ADDRESS),
    ("account", re.compile(r"\b(my (account|profile)|(?:default|user|home|profile) address|payment methods?|"
                           r"balance|(?:left|remaining) on (?:my|the) (?:gift )?card)\b", re.I)),

    ("account", _NEW_ADDRESS),
    ("order_status", re.compile(r"\b(where(?:'s| is)|status|track\w*|arriv\w*|shipped|deliver\w*|"
                                r"refund(?:ed)?|late|delayed)\b", re.I)),
    ("policy", re.compile(r"\b(polic\w*|why|how (?:do|can|long|does)|can i|allowed)\b", re.I)),
    ("product", re.compile(r"\b(products?|in stock|available|options?|models?|variants?)\b", re.I)),
    ("human", re.compile(r"\b(human|agent|person|representative|someone)\b", re.I)),
)
#: Cues that say why, not what: an item the user no longer wants, or one that arrived broken — cancelled or returned
#: (exchanged), as the order's state allows. They count only when no cue of a change names what to do ("cancel it,
#: I no longer need it" is a cancellation).
WEAK_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cancel", _UNWANTED),
    ("return", _UNWANTED),
    ("return", _FAULTY),
    ("exchange", _FAULTY),
)
_CHANGES = frozenset({"cancel", "return", "exchange", "modify"})
GREETING = re.compile(r"^\W*(hi|hello|hey|good (morning|afternoon|evening)|thanks?|thank you|bye|goodbye)\b"
                      r"|\bwhat can you (help|do)\b|\bhow can you help\b"
                      # a short closing: "ok thanks", "great, thank you!", "that's all, bye"
                      r"|^\W*(\w+'?\w*\W+){0,3}(thanks?|thank you|thx|bye|goodbye)\W*$", re.I)


# A fact a text carries (a number, an address or email the vault redacted): a text opening with "Hi" that
# carries one answers something ("Hi, my email is [EMAIL_1]"), so it is not a greeting alone.
PLACEHOLDER = re.compile(r"\[[A-Z]+_\d+\]")
_FACT_PLACEHOLDER = re.compile(r"\[(?:EMAIL|ADDRESS|PHONE|CARD|IBAN|SSN)_\d+\]")


def carries_fact(text: str) -> bool:
    """A fact placeholder, or a digit or "@" outside the placeholders ("Thanks, [NAME_12]" carries none)."""
    return bool(_FACT_PLACEHOLDER.search(text) or re.search(r"\d|@", PLACEHOLDER.sub(" ", text)))


def _cue_text(text: str) -> str:
    """The words cues are matched on: placeholders ([EMAIL_1]…) and asides in parentheses removed — "the
    keyboard (switch type linear, size 80%)" describes an item, it asks for nothing (a text that is all aside is
    read whole)."""
    text = PLACEHOLDER.sub(" ", text)
    outside = re.sub(r"\([^()]*\)", " ", text)
    return outside if re.search(r"\w", outside) else text


def intent_prior(text: str) -> list[str] | None:
    """The intents the text's cues allow, in label order; ``None`` when no cue fires (any intent).

    A greeting with no other cue and no fact (:func:`carries_fact`) allows ``greeting`` alone; cues are matched on
    :func:`_cue_text`. A change of an item cued as both an exchange and a modification is the one the text's
    words about delivery allow (received: exchange; pending: modification; both or neither: both).
    """
    facts = carries_fact(text)
    text = _cue_text(text)
    hits = {intent for intent, rx in INTENT_CUES if rx.search(text)}
    if not hits & _CHANGES:
        hits |= {intent for intent, rx in WEAK_CUES if rx.search(text)}
    if {"exchange", "modify"} <= hits:
        delivered, pending = bool(_DELIVERED.search(text)), bool(_PENDING.search(text))
        if delivered != pending:
            hits.discard("modify" if delivered else "exchange")
    if not hits and not facts and GREETING.search(text):
        return ["greeting"]
    if not hits:
        return None
    return [i for i in W1_LABELS if i in hits]


# Within an intent, sub-intents that need their own cue; none firing leaves the default (first).
SUB_INTENT_CUES: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "greeting": (
        ("thanks", re.compile(r"\b(thanks?|thank you|thx|appreciate)\b", re.I)),
        ("bye", re.compile(r"\b(bye|goodbye|see you|that'?s all|that is all)\b", re.I)),
    ),
    # what of an order or an account a change is about, when the words say it
    "modify": (
        ("items", re.compile(r"\b(items?|sizes?|colou?rs?|options?|variants?|products?|material|style|version|"
                             r"upgrad\w*|downgrad\w*)\b", re.I)),
        ("items", _REPLACE),
        ("address", re.compile(r"\b(address|ship(ping|ped)? to)\b", re.I)),
        ("address", _NEW_ADDRESS),
        ("payment", re.compile(r"\b(payment|pay(ing)? with|credit card|gift card|paypal)\b", re.I)),
    ),
    "account": (
        ("address", re.compile(r"\baddress\b", re.I)),
        ("address", _NEW_ADDRESS),
        ("payment", re.compile(r"\b(payment methods?|credit cards?|gift cards?|paypal|balance)\b", re.I)),
    ),
}
#: Intents whose sub-intent is left to W1 when no cue fires ("I want to change my order").
OPEN_WITHOUT_CUE = frozenset({"modify", "account"})


def sub_intent_prior(text: str, intent: str) -> list[str] | None:
    """The sub-intents of ``intent`` the text's cues allow, in label order; ``None``: any.

    For an intent with cued sub-intents, only those whose cue fires are allowed, and the
    intent's first (default) sub-intent when none fires: "Hi! What can you help me with?"
    can never decode a goodbye. For an intent of :data:`OPEN_WITHOUT_CUE` no cue leaves any.
    """
    cues = SUB_INTENT_CUES.get(intent)
    if not cues:
        return None
    text = _cue_text(text)
    hits = {sub for sub, rx in cues if rx.search(text)}
    if not hits and intent in OPEN_WITHOUT_CUE:
        return None
    default = W1_LABELS[intent][0]
    return [s for s in W1_LABELS[intent] if s in hits] or [default]


def cards_for(intent: str, sub_intent: str) -> tuple[str, ...]:
    """The write cards a perceived (intent, sub-intent) may offer (empty: none)."""
    return CARD_INTENTS.get(f"{intent}/{sub_intent}") or CARD_INTENTS.get(intent, ())

#: The coarse intents of the action cards (``ActionCard.intent``).
CARD_INTENT_LABELS: tuple[str, ...] = (
    "order_status",
    "cancel",
    "return",
    "exchange",
    "modify",
    "account",
    "policy_question",
    "human",
    "other",
)
