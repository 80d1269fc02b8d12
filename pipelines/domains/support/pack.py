"""The support pack behind the :class:`pipelines.domain.Domain` protocol.

Session facts (``facts.state``) are :class:`SupportState`: the verified user,
the ids observed, the owner's order / product ids, a pending action, and the
candidates read off the owner's records. Verification is code: a successful
``find_user_id_by_*`` observation verifies its user (one user per session).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.kernels import load_bundle
from pipelines.domain import (
    CallOutcome,
    CardSpec,
    DomainTexts,
    EligibleAction,
    ForwardContract,
    LocalToolRunner,
    PackBase,
    PendingCard,
    SampleWrite,
    TurnFacts,
    read_state,
    read_tables,
)
from pipelines.errors import TandemError
from pipelines.grounding import CandidateSet, appears_in
from pipelines.guardrails.ids import extract_ids, walk_strings
from pipelines.tools import ToolContext, ToolRegistry

from . import samples
from .candidates import (
    ARG_KINDS,
    FIXED_CANDIDATES,
    OPTIONAL_EMPTY,
    described_as_had,
    described_items,
    described_payment_methods,
    described_variants,
    extract_user_candidates,
    names_payment,
    other_payment_methods,
    price_wanted,
    record_candidates,
    said_as,
    says_original_payment,
    slot_candidates,
    slot_schema,
    typed_addresses,
    variant_candidates,
)
from .cards import ACTION_CARDS, cards_for_tool
from .eligibility import REASONS, authenticate
from .generator import PRODUCT_TEMPLATES, generate_world
from .grounded import owner_candidates, ungrounded_args
from .help import HELP_ARTICLES, classify_question, search_help_articles
from .labels import (
    ACCOUNT_INTENTS,
    BRANCH_OF_INTENT,
    CARD_INTENT_LABELS,
    CONFLICT_KINDS,
    TRANSFER_REASONS,
    W1_LABELS,
    cards_for,
    intent_prior,
    sub_intent_prior,
)
from .observations import state_from_observation, summarize_result
from .policy import policy_lines
from .texts import GENERATOR_PERSONA, ORCHESTRATOR_POLICY, SUPPORT_TEXTS
from .tools import LOOKUP_TOOLS, WRITE_TOOLS, build_registry, invoke, precheck
from .world import RetailWorld, load_tau2_world

__all__ = ["SupportState", "SupportPack", "support_rule_tables", "load_support_rule_tables", "OPEN_READS", "PRIVATE_READS"]

TABLES_DIR = Path(__file__).with_name("tables")
OPEN_READS: tuple[str, ...] = ("search_help_articles", "list_all_product_types", "get_product_details",
                               "get_item_details")
PRIVATE_READS: tuple[str, ...] = ("get_user_details", "get_order_details")
CLARIFY_OF: dict[str, str] = {
    "email": "identity", "first_name": "identity", "last_name": "identity", "zip": "identity", "user_id": "identity",
    "order_id": "order", "item_id": "item", "new_item_id": "new_item", "payment_method_id": "payment_method",
    "address1": "address", "address2": "address", "city": "address", "state": "address", "country": "address", "address_zip": "address",
    "cancel_reason": "reason",
}


class SupportState(BaseModel):
    """The support session's facts, stored in each turn's meta and read back next turn."""

    model_config = ConfigDict(extra="forbid")

    authenticated_user_id: str | None = None
    observed_ids: list[str] = Field(default_factory=list)
    owned_products: list[str] = Field(default_factory=list)
    items: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Items of the user's observed orders: item id → {name, product_id, "
        "order_id, options}.")
    orders: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="The user's orders as read: order id → {status, items (product names), "
        "paid_with (the payment method of its first payment), address (where it ships)}.")
    variants: dict[str, dict[str, dict[str, Any]]] = Field(
        default_factory=dict, description="Observed products of the user's orders: product id → variant id → "
        "{options, available}.")
    payment_methods: dict[str, dict[str, str]] | None = Field(
        None, description="The verified user's payment methods as read: id → {source, brand, last_four} "
        "(None: not read yet).")
    asked: list[str] = Field(
        default_factory=list, description="Items whose wanted variant the user was asked about once (undecided).")
    addresses: list[dict[str, str]] = Field(
        default_factory=list, description="The addresses of the user's records as read (the profile's, each order's), "
        "field by field: a new address named by its city among them is that whole address.")
    profile_address: dict[str, str] = Field(
        default_factory=dict, description="The default address of the verified user's profile as read, field by "
        "field (empty: not read): the one a change of the default address replaces.")
    selected: dict[str, Any] | None = Field(
        None, description="The order found by what it holds ({id, at: the index of the user text it was found "
        "for}); an order the user types in a later text takes over.")
    catalogue: dict[str, str] = Field(
        default_factory=dict, description="The store's product types as read: product name → product id.")
    request_from: int = Field(
        0, description="Where the open request starts among the session's user texts: the texts before it "
        "described a request a confirmed write has done (its items, order and wanted options are not the next "
        "request's).")
    request_done: list[str] = Field(
        default_factory=list, description="The write tools confirmed for the open request, when a text of it asks "
        "for more changes than those (\"change the address, and its item's colour\": the item change stays open).")
    shown_payment: str | None = Field(
        None, description="The payment method of the last card shown: what \"the other card\" is told apart from.")
    records: CandidateSet = Field(default_factory=CandidateSet)
    pending: PendingCard | None = None

    def add_observed(self, ids: Sequence[str]) -> None:
        self.observed_ids = sorted(set(self.observed_ids) | {i for i in ids if i})


def support_rule_tables() -> dict[str, Any]:
    """The support rule bundle as a plain dict (``{version, phi, psi, tiers, w3}``)."""
    return read_tables(TABLES_DIR, "support")


_ALL_ORDERS = re.compile(r"\b(?:all|both|every|each)\b(?:\s+of)?(?:\s+(?:my|the|these|those))?(?:\s+[a-z]+){0,2}?"
                         r"\s+orders?\b", re.I)
_ALL_ITEMS = re.compile(r"\b(all (the |of the |my )?(items|things|products|of them|of it)|everything|"
                        r"(every|each) (single )?(item|thing|product))\b", re.I)
# "all the items" followed by anything but the end of the clause or the order it is in ("everything except the
# lamp", "all the things that are broken", "everything for the garden") names a part the user has not said: which
# items is asked. Unnarrowed: "everything.", "all the items of order #W1", "everything in my order, please".
_OPEN = re.compile(r"\s*(?:$|[.,!?;:)]|(?:in|of|from|on)\s+(?:my|the|this|that|it|them|order\b|#)|"
                   r"(?:please|as well|too|at once|and|then)\b)", re.I)


def says_all_items(texts: Sequence[str]) -> bool:
    """Whether the user asked for every item ("all the items", "everything") without narrowing it."""
    return any(_OPEN.match(t[m.end():]) for t in texts for m in _ALL_ITEMS.finditer(t))


#: Every item but some: "everything except the lamp", "all the items in the order but the kettle", "all of them other
#: than the shoes", "every item apart from the charger", "all but the mug" — the exception runs to the clause's end.
_ALL_BUT = re.compile(r"\b(?:all(?: (?:the |of the |my )?(?:items|things|products|of them|of it))?|everything|"
                      r"every (?:item|thing|product)|each (?:item|thing|product))\b(?:[^.;!?]{0,40}?)[\s,]+"
                      r"(?:except(?: for)?|but(?: not)?|other than|apart from|aside from|besides|save for|excluding)\s+"
                      r"(?P<rest>[^.;!?]+)", re.I)


#: The items not named: "keep the lamp and return the rest", "everything else", "the other items", "all the
#: remaining things" — every item but those the words before it name.
_THE_REST = re.compile(r"\b(?:the\s+rest\b(?!\s+of\s+(?:the\s+)?(?:day|week|month|year|time))|everything\s+else\b|"
                       r"(?:all\s+)?(?:the\s+|my\s+)?(?:other|remaining)\s+(?:items|things|products)\b)", re.I)


def all_but(items: Mapping[str, Mapping[str, Any]], texts: Sequence[str]) -> tuple[int, list[str]] | None:
    """Every one of ``items`` but those an exception names ("everything except the lamp"), or but those named before
    "the rest" ("keep the lamp and return the rest", "everything else": the words before it in that text, else the
    texts before it): the newest text that says so (its index in ``texts``) and the items kept. ``None`` when no text
    does, or its exception names none of ``items`` ("everything, but only if it is refunded": nothing of theirs left
    out, so no exception)."""
    for at in range(len(texts) - 1, -1, -1):
        for m in _ALL_BUT.finditer(texts[at]):
            left = described_items(items, [m.group("rest")])
            kept = [i for i in items if i not in left]
            if left and kept:
                return at, kept
        for m in _THE_REST.finditer(texts[at]):
            left = (described_items(items, [texts[at][:m.start()]], mentioned=True)
                    or described_items(items, texts[:at], mentioned=True))
            kept = [i for i in items if i not in left]
            if left and kept:
                return at, kept
    return None


#: An exception to a request for all orders: "cancel all my orders … except the boots", "but not the one with the
#: lamp", "apart from the charger" — it runs to the clause's end and names what stays as it is.
_EXCEPT = re.compile(r"(?:^|[\s,;(])(?:except(?:\s+for)?|but\s+not|other\s+than|apart\s+from|aside\s+from|excluding|"
                     r"save\s+for)\s+(?P<rest>[^.;!?]+)", re.I)


def excepted_orders(state: SupportState, texts: Sequence[str]) -> set[str]:
    """While the request asks for all orders ("cancel or return all my orders"): the orders holding an item an
    exception describes ("except the boots"): left as they are, never the order in question."""
    if not any(_ALL_ORDERS.search(t) for t in texts):
        return set()
    return {str(state.items[i].get("order_id")) for t in texts for m in _EXCEPT.finditer(t)
            for i in described_items(state.items, [m.group("rest")])}


def _drop_excepted(facts: TurnFacts, state: SupportState) -> None:
    """The request's orders found before an exception was said ("… except the boots") lose the orders it names: the
    one in question goes on to the next, the others leave the queue."""
    selected = state.selected
    if not selected:
        return
    left = excepted_orders(state, _request_texts(facts, state))
    order = [str(selected.get("id")), *map(str, selected.get("queue") or [])]
    kept = [o for o in order if o not in left]
    if kept != order:
        state.selected = {"id": kept[0], "at": selected.get("at", 0), "queue": kept[1:]} if kept else None
        facts.state = state.model_dump(mode="json")


def _session_texts(facts: TurnFacts) -> list[str]:
    """The session's user texts, the newest last, each once."""
    return list(facts.user_texts) if facts.user_texts and facts.user_texts[-1] == facts.user_text else [
        *facts.user_texts, facts.user_text]


def _request_texts(facts: TurnFacts, state: SupportState) -> list[str]:
    """The user texts of the open request: those since the last write that finished a request (the newest
    text at least). What a done request's texts described — its items, its order, the options wanted — is
    never the next request's; who the user is and how they pay are the session's (read from every text)."""
    texts = _session_texts(facts)
    return texts[min(state.request_from, len(texts) - 1):]


#: An order named as the source of an address, not as the order to change: "the same (address) as order #W2",
#: "to the address of my order #W2", "like the one on order #W2" (not "the address of order #W2": the one to change).
_AS_ORDER = re.compile(r"\b(?:(?:the\s+)?same\s+(?:\w+\s+){0,2}as|(?:to|use|using|with)\s+(?:the\s+)?(?:\w+\s+)?"
                       r"address\s+(?:of|on|from|in)|like\s+the\s+one\s+(?:of|on|in|for))\s+"
                       r"(?:(?:my|the|that\s+of)\s+)?(?:order\s+)?(?P<rest>\S+)", re.I)


def referenced_orders(text: str) -> list[str]:
    """The orders ``text`` names as where an address comes from ("the same as order #W2"): not the order in
    question."""
    return [o for m in _AS_ORDER.finditer(text) for o in extract_user_candidates(m.group("rest")).get("order_id", [])]


def _order_in_question(facts: TurnFacts, state: SupportState | None = None) -> str | None:
    """The order the user named this turn, else the one they named last in the session (an answer to a
    question — who are you? why? — goes on with the request it interrupted), unless the turn found the order by
    what it holds for a later text (``state.selected``); a text that describes items of exactly one read order
    names that order."""
    texts = _session_texts(facts)
    selected = (state.selected or {}) if state is not None else {}
    first = min(state.request_from, len(texts) - 1) if state is not None else 0
    left = excepted_orders(state, texts[first:]) if state is not None else set()  # "… except the boots"
    for at in range(len(texts) - 1, first - 1, -1):
        if selected.get("id") and int(selected.get("at", -1)) >= at:
            return str(selected["id"])
        sources = referenced_orders(texts[at])
        typed = [o for o in extract_user_candidates(texts[at]).get("order_id", []) if o not in sources]
        if typed:
            return str(typed[-1])
        priced = _by_price(state, texts[first:], texts[at]) if state is not None else None
        if priced:  # "the more expensive one" of a product the request named in several orders: the one it is in
            return priced
        told = _by_item_options(state, texts[first:], texts[at]) if state is not None else None
        if told:  # "it is the 15-inch one": the order whose item of that product has what the answer says
            return told
        if state is not None:  # items of one read order, and of no other, described in this text: that order
            held = {state.items[i].get("order_id") for i in described_items(state.items, [texts[at]])}
            held -= left  # "… all my orders. Except the boots": never the boots' order
            if len(held) == 1:
                return str(held.pop())
    return str(selected["id"]) if selected.get("id") else None


#: Intents whose sub-intents are parts of one order or account, each changed by a write of its own (an order's
#: address and its items); a return and an exchange of one item are alternatives, never both asked.
_PARTS = ("modify", "account")


def _asks_more(text: str, done: Sequence[str]) -> bool:
    """Whether ``text`` asked for a write of ``done`` (the write tools confirmed for its request) and, by the cues of
    its words, for a change of another part none of them made ("change my order's address, and its item's colour
    to red": an item change after the address write; "exchange or return it": one of the two, not both)."""
    asked: set[str] = set()
    for intent in [i for i in intent_prior(text) or [] if i in _PARTS]:
        for sub in sub_intent_prior(text, intent) or [""]:
            asked |= set(cards_for(intent, sub))
    made = {c.id for tool in done for c in cards_for_tool(tool)}
    return bool(asked & made) and bool(asked - made)


def _by_price(state: SupportState, request: Sequence[str], text: str) -> str | None:
    """The order ``text`` picks by price ("the more expensive one", "the cheaper one") among the items of one
    product the ``request`` texts named in several read orders: the order of the priciest (cheapest) of them;
    ``None`` when ``text`` says no price or the named items are in one order."""
    price = price_wanted([text])
    if price is None:
        return None
    named = [i for i in described_items(state.items, request) if isinstance(state.items[i].get("price"), float)]
    if len({state.items[i].get("order_id") for i in named}) < 2:
        return None
    best = (max if price[0] > 0 else min)(named, key=lambda i: float(state.items[i]["price"]))
    return str(state.items[best]["order_id"])


def _by_item_options(state: SupportState, request: Sequence[str], text: str) -> str | None:
    """The order ``text`` picks by what its item is ("it is the 128GB one") among the items of one product the
    ``request``'s other texts named in several read orders: the one order left once ``text`` is read with them
    (:func:`.candidates.described_items` keeps the item whose option value only it has); ``None`` otherwise. The
    request's first text is never read so: what it names of a product it asks to change is what is wanted."""
    if not request or text == request[0]:
        return None
    before = [t for t in request if t != text]
    if len({state.items[i].get("order_id") for i in described_items(state.items, before)}) < 2:
        return None
    told = {state.items[i].get("order_id") for i in described_items(state.items, [*before, text])}
    return str(told.pop()) if len(told) == 1 else None


#: An order status as a refusal says it: "pending (item modified)" is no longer pending.
_STATUS_SAID = {"pending (item modified)": "no longer open to changes: its items were already changed once"}


#: A count of a product ("both laptops", "two of the laptops"), unless the same text takes one of
#: them ("two tablets came and I only need one", "which of the two laptops").
_COUNTED = re.compile(r"\b(?:both|two|three|four)\s+(?:of\s+)?(?:the\s+|my\s+|these\s+|those\s+)?(?P<what>[a-z][\w\- ]*)",
                      re.I)
_ONE_OF = re.compile(r"\b(?:only|just)\s+(?:\w+\s+)?one\b|\bone\s+of\b|\bwhich(?:ever)?\b|\beither\b", re.I)


def _counted_in_orders(state: SupportState, text: str) -> bool:
    """Whether ``text`` counts a product of the user's items held in several read orders as more than one ("it is
    actually two laptops", "both laptops"), taking none of them alone: each order's item is meant."""
    if _ONE_OF.search(text):
        return False
    for m in _COUNTED.finditer(text):
        head = " ".join(m.group("what").split()[:3])  # the product right after the count
        named = described_items(state.items, [head])
        if len({state.items[i].get("order_id") for i in named}) > 1:
            return True
    return False


def _scoped_items(facts: TurnFacts, state: SupportState) -> dict[str, dict[str, str]]:
    """The observed items of the order in question; all observed items when the user named no order. An order
    named but not read yet has none: an item of another order that the same words describe is never theirs
    (a change on a second order must not carry the first order's item; Φ reads the named order first)."""
    order = _order_in_question(facts, state)
    if not order:
        return dict(state.items)
    return {i: info for i, info in state.items.items() if info.get("order_id") == order}


def _named_product(facts: TurnFacts, state: SupportState) -> str | None:
    """The product to read for the items named in the newest user text that names one: the first whose
    variants are not read yet (Φ, run again after each read, reads them in turn), else the last named."""
    items = _scoped_items(facts, state)
    for text in reversed(_request_texts(facts, state)):
        named = described_items(items, [text])
        if named:
            products = list(dict.fromkeys(items[i]["product_id"] for i in named))
            unread = [p for p in products if p not in state.variants]
            return unread[0] if unread else products[-1]
    held = [items[i]["product_id"] for i in _named_items(facts, state) if i in items]  # "its item", "all the items"
    unread = [p for p in dict.fromkeys(held) if p not in state.variants]
    return unread[0] if unread else (held[-1] if held else None)


#: An item spoken of by the order it is in, not by its name ("its item", "the product on that order").
_ITS_ITEM = re.compile(r"\b(?:its|the|that|this|the order'?s)\s+(?:item|product|article)\b(?!\s+(?:of|in|on)\s+"
                       r"(?:the|my)\s+(?:other|second|first))", re.I)

#: Words that point past the order in question ("the item in my other order", "my second order").
_ANOTHER_ORDER = re.compile(r"\b(?:other|another|second|first|previous|earlier|older|newer)\s+(?:order|purchase)\b",
                            re.I)


def _named_items(facts: TurnFacts, state: SupportState) -> list[str]:
    """The items of the order in question the user named by product name ("all the items": every one; "everything
    except the lamp": every one but the lamp; "its item" of an order that holds one item: that one)."""
    texts = _request_texts(facts, state)
    scoped = _scoped_items(facts, state)
    but = all_but(scoped, texts) if _order_in_question(facts, state) else None
    if but is not None:  # "everything except the lamp": every item but the lamp, unless a later text names some
        return described_items(scoped, texts[but[0] + 1:]) or but[1]
    named = described_items(scoped, texts)
    if not named and _order_in_question(facts, state):
        if says_all_items(texts) or any(_ALL_ORDERS.search(t) for t in texts) or (
                len(scoped) == 1 and any(_ITS_ITEM.search(t) for t in texts)):
            named = list(scoped)  # "all the items of the order", each of "all my orders"; "its item" of one item
        elif len(scoped) == 1 and not described_items(dict(state.items), texts) and not any(
                _ANOTHER_ORDER.search(t) for t in texts):
            named = list(scoped)  # the order holds one item, the user named no product of theirs: that one
    return named


def _named_payment(facts: TurnFacts, state: SupportState) -> list[str]:
    """The payment methods the newest user text that names any describes (by kind, brand, digits or id; "the other
    card": those of its kind but the last card's), or the one the order in question was paid with when that text
    says so ("the card I paid with", "the original payment method")."""
    typed = facts.candidates.of("payment_method_id")
    order = _order_in_question(facts, state)
    paid = str((state.orders.get(order or "") or {}).get("paid_with") or "")
    for text in [facts.user_text, *reversed(facts.user_texts)]:
        other = other_payment_methods(state.payment_methods or {}, text, state.shown_payment)
        named = other or described_payment_methods(state.payment_methods or {}, [text]) + [
            p for p in typed if appears_in(p, [text])]
        if not named and paid and says_original_payment(text):
            named = [paid]
        if named:
            return list(dict.fromkeys(named))
    return []


def _wanted_of(facts: TurnFacts, state: SupportState, item: str) -> list[str]:
    """The variants the user's words describe as the change of ``item`` (several: a tie; none: not said). Another
    item of the same product the user holds and described as what they had in a change ("change the T-Shirt
    (black, XXL, cotton, crew neck) to …" about an earlier order) names no wish for ``item``."""
    pid = state.items.get(item, {}).get("product_id")
    variants = state.variants.get(str(pid)) if pid else None
    if not variants:
        return []
    texts = _request_texts(facts, state)
    return described_variants(variants, [item], texts, described=_had(state, str(pid), variants, [item], texts))


def _had(state: SupportState, pid: str, variants: Mapping[str, Any], mine: Sequence[str],
         texts: Sequence[str]) -> list[str]:
    """The user's other items of product ``pid`` (not ``mine``) their words described as what they had in a
    change (:func:`.candidates.described_as_had`): what they name is no wish for ``mine``."""
    return [i for i, info in state.items.items()
            if i not in mine and info.get("product_id") == pid and described_as_had(variants, i, texts)]


def _named_alike(facts: TurnFacts, state: SupportState, named: Sequence[str]) -> list[str]:
    """Named items of one product the user spoke of as one ("a vacuum cleaner", "the lamp": not a plural, not
    "both" or "all"), not asked about yet: the ones to ask among (empty: none)."""
    texts = _request_texts(facts, state)
    groups: dict[str, list[str]] = {}
    for i in named:
        groups.setdefault(str(state.items.get(i, {}).get("name", "")), []).append(i)
    for name, ids in groups.items():
        if len(ids) < 2 or "which:" + ids[0] in state.asked or not name:
            continue
        if _one_of(name, texts):
            return ids
    return []


def _one_of(name: str, texts: Sequence[str]) -> bool:
    """Whether the user speaks of one ``name`` (singular, no "both", "all", "two"…): the newest text naming it."""
    words = [re.escape(w) for w in name.lower().split()]
    rx = re.compile(r"\b(?:(both|all|two|three|every|each)\s+(?:\w+\s+){0,2})?" + r"[\s-]?".join(words) + r"(e?s)?\b",
                    re.I)
    for text in reversed(texts):
        m = rx.search(text)
        if m:
            return not (m.group(1) or m.group(2))
    return False


def _options_text(options: Mapping[str, Any], sep: str = " / ") -> str:
    return sep.join(str(v) for v in options.values())


def _item_words(info: Mapping[str, Any]) -> str:
    """An item as a customer knows it: "the Desk Lamp (black, battery)"."""
    opts = _options_text(info.get("options") or {}, ", ")
    return f"the {info.get('name', 'item')}" + (f" ({opts})" if opts else "")


def _told_apart(name: str, order: str, kinds: Mapping[str, Mapping[str, list[dict[str, Any]]]]) -> str:
    """A product's name in one order's description; where other orders described beside it hold the same product,
    with the option values of its items here that the others' items lack (nothing differs: the name alone)."""
    held = kinds.get(name) or {}
    if len(held) < 2 or order not in held:
        return name
    elsewhere = {(k, str(v)) for other, items in held.items() if other != order for opts in items for k, v in opts.items()}
    own = [", ".join(str(v) for k, v in opts.items() if (k, str(v)) not in elsewhere) for opts in held[order]]
    own = [x for x in dict.fromkeys(own) if x]
    return f"{name} ({'; '.join(own)})" if own else name


def _payment_words(method: Mapping[str, Any]) -> str:
    """A payment method by its kind (and a card by its brand and last digits)."""
    source = str(method.get("source", ""))
    if source == "credit_card":
        brand = str(method.get("brand", "")).strip()
        return f"your {brand + ' ' if brand else ''}credit card ending in {method.get('last_four', '')}".strip()
    return {"gift_card": "your gift card", "paypal": "your PayPal account"}.get(source, f"your {source}")


def _said_status(texts: Sequence[str]) -> Any:
    """What the user's newest words say of the state of the order they mean: received (delivered) or not yet
    (pending); ``None`` when they say neither or both."""
    from .labels import _DELIVERED, _PENDING

    for text in reversed(texts):
        delivered, pending = bool(_DELIVERED.search(text)), bool(_PENDING.search(text))
        if delivered != pending:
            return (lambda s: s == "delivered") if delivered else (lambda s: s.startswith("pending"))
    return None


def _status_fits(intent: str, status: str) -> bool:
    """Whether an order in ``status`` is one ``intent`` can change (pending: cancel, modify; delivered: return,
    exchange); any status for other intents."""
    if intent in ("cancel", "modify"):
        return status.startswith("pending")
    if intent in ("return", "exchange"):
        return status == "delivered"
    return True


def _asked_product(facts: TurnFacts, state: SupportState) -> str | None:
    """The store's product the newest text of the open request names (whole name, loosely; or its last word
    when no other product type ends in it): its details answer a question about what the store has (read
    once a turn; a question asked before the identity check is answered after it)."""
    products = {pid: {"name": name, "product_id": pid} for name, pid in state.catalogue.items()}
    for text in [facts.user_text, *reversed(facts.user_texts)]:  # the newest text of the request that names one
        named = described_items(products, [text])
        if named:
            return named[0]
    return None


def _narrow(facts: TurnFacts, state: SupportState) -> None:
    """The order, items and wanted variants as the user described them: the order the user named last is the
    only order candidate (a card never carries another of their orders); once the user names items of the
    order in question by their product name, only those items are candidates; a wanted variant is a candidate only
    when the user's words describe it (:func:`.candidates.described_variants`), never merely because it
    is available."""
    texts = _request_texts(facts, state)
    order = _order_in_question(facts, state)
    if order and order in facts.candidates.of("order_id"):  # the order the user named, never another of theirs
        facts.candidates.keep("order_id", [order])
    named = _named_items(facts, state)
    if state.items:  # the items a change is about are the user's to say: never merely the order's
        facts.candidates.keep("item_id", named)
    held = named or [i for i in state.items if i in facts.candidates.of("item_id")]
    wanted: list[str] = []
    for pid, variants in state.variants.items():
        mine = [i for i in held if state.items.get(i, {}).get("product_id") == pid]
        wanted += described_variants(variants, mine, texts, described=_had(state, pid, variants, mine, texts))
    if state.variants:
        facts.candidates.keep("new_item_id", wanted)
    # a payment method is the user's to state: never one merely on record (the order's, the profile's); the
    # newest text that names one decides ("use my PayPal instead" after a refused card)
    facts.candidates.keep("payment_method_id", _named_payment(facts, state))
    _narrow_address(facts, state, texts)
    for text in reversed(texts):  # the newest text that gives a reason for a cancellation decides it
        said = [r for r in FIXED_CANDIDATES.get("cancel_reason", ()) if appears_in(r, [text])]
        said += extract_user_candidates(text).get("cancel_reason", [])
        if said:
            facts.candidates.keep("cancel_reason", said)
            break


def _refund_to(args: dict[str, Any], facts: TurnFacts, state: SupportState) -> dict[str, Any]:
    """``args`` of a return with its refund method settled by the policy (the original method or a gift card)
    when the user named several methods and exactly one of them may take the refund ("to my credit card, or
    else to the gift card"); otherwise as proposed (the precheck refuses a method that may not)."""
    pm, named = args.get("payment_method_id"), facts.candidates.of("payment_method_id")
    if pm not in named or len(named) < 2:
        return args
    paid = str((state.orders.get(str(args.get("order_id") or "")) or {}).get("paid_with") or "")
    methods = state.payment_methods or {}
    may = [p for p in named if (paid and p == paid) or (methods.get(p) or {}).get("source") == "gift_card"]
    return {**args, "payment_method_id": may[0]} if pm not in may and len(may) == 1 else args


_ADDRESS_KINDS = ("address1", "address2", "city", "state", "address_zip", "country")
_FIELD_KIND = {"address1": "address1", "address2": "address2", "city": "city", "state": "state", "zip": "address_zip",
               "country": "country"}


def _replaced_address(facts: TurnFacts, state: SupportState) -> dict[str, str]:
    """The address a change of address would replace: the profile's for a change of the account, the shipping
    address of the order in question for a change of an order; before the turn's request is read, the one the
    card awaiting the user's yes replaces, else the order's when one is in question, else the profile's (empty:
    not read)."""
    pending = state.pending if facts.intent is None else None
    if pending is not None and pending.tool == "modify_pending_order_address":
        return dict((state.orders.get(str(pending.args.get("order_id") or "")) or {}).get("address") or {})
    if facts.intent == "account" or (pending is not None and pending.tool == "modify_user_address"):
        return state.profile_address
    order = _order_in_question(facts, state)
    if order is None and facts.intent is None:
        return state.profile_address
    return dict((state.orders.get(order or "") or {}).get("address") or {})


def _same_address(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    return all(" ".join(str(a.get(f, "")).lower().split()) == " ".join(str(b.get(f, "")).lower().split())
               for f in _FIELD_KIND)


def _new_addresses(state: SupportState, replaced: Mapping[str, str]) -> list[dict[str, str]]:
    """The addresses of the user's records that could be a new one: every one read but the one it replaces (a
    user who says "my daughter's address in Chicago" and "I live in Denver" names one new address)."""
    return [a for a in state.addresses if not (replaced and _same_address(a, replaced))]


def _address_words(address: Mapping[str, str]) -> str:
    """"380 Maple Drive, Suite 960, San Diego, CA, 92101, USA"."""
    return ", ".join(str(address[f]) for f in ("address1", "address2", "city", "state", "zip", "country")
                     if address.get(f))


def _narrow_address(facts: TurnFacts, state: SupportState, texts: Sequence[str]) -> None:
    """An address is one whole: the newest address the user spelled out gives every field of a new address (a line
    it leaves out is empty, a field it leaves out is asked; the country may be the one of their records) — never a
    field of another address on record; with none spelled out, an address of their records they name by its city
    ("my daughter's address in Chicago"; the newest text that names one, by its name or short name) is that whole
    address; with neither, no address is a candidate (an
    address on record is no new one)."""
    typed = [a for t in texts for a in typed_addresses(t)]
    if typed:
        newest = typed[-1]
        for kind in _ADDRESS_KINDS:
            if kind in newest or kind != "country":
                facts.candidates.keep(kind, [newest[kind]] if kind in newest else [])
        return
    def keep_whole(address: Mapping[str, str]) -> None:
        for field_name, kind in _FIELD_KIND.items():
            facts.candidates.keep(kind, [address[field_name]] if address.get(field_name) else [])

    for text in reversed(texts):  # "the same address as order #W2": that order's address, once read
        sources = [state.orders[o]["address"] for o in referenced_orders(text)
                   if (state.orders.get(o) or {}).get("address")]
        if sources:
            keep_whole(sources[-1])
            return
    named: list[dict[str, str]] = []
    replaced = _replaced_address(facts, state)
    for text in reversed(texts):  # the newest text that names a city of theirs decides ("not Seattle: NYC")
        named = [a for a in _new_addresses(state, replaced) if a.get("city")
                 and any(appears_in(c, [text]) for c in (a["city"], *said_as("city", a["city"])))]
        if named:
            break
    if len({a.get("address1") for a in named}) == 1:
        keep_whole(named[0])
    else:  # no new address given or named: none on record is one (the card waits; the turn asks for it)
        for kind in _ADDRESS_KINDS:
            facts.candidates.keep(kind, [])


class SupportPack(PackBase):
    """The retail support domain (tau2-retail shaped)."""

    name = "support"
    change_cues = True  # the cue tables read change requests: a card only once one is asked in words
    carried_clarifies: frozenset[str] = frozenset({"identity"})  # a question waits for the identity check
    labels: Mapping[str, Sequence[str]] = W1_LABELS
    cards: Sequence[CardSpec] = ACTION_CARDS
    texts: DomainTexts = SUPPORT_TEXTS
    orchestrator_policy = ORCHESTRATOR_POLICY
    generator_persona = GENERATOR_PERSONA
    conflict_kinds: Sequence[str] = CONFLICT_KINDS
    branch_of_intent: Mapping[str, str] = BRANCH_OF_INTENT
    entity_kind: str | None = "order_id"
    binds_user: bool = False  # the user is who they verify as, in the session
    lookup_tools: frozenset[str] = LOOKUP_TOOLS
    owner_reads: frozenset[str] = frozenset({"get_user_details", "get_order_details", "get_product_details"})
    write_tools: frozenset[str] = WRITE_TOOLS
    open_reads: tuple[str, ...] = OPEN_READS
    private_reads: tuple[str, ...] = PRIVATE_READS
    transfer_tool: str = "transfer_to_human_agents"
    transfer_reasons: Mapping[str, str] = TRANSFER_REASONS
    reasons: tuple[str, ...] = REASONS
    help_articles: tuple[Any, ...] = HELP_ARTICLES

    @property
    def intents(self) -> tuple[str, ...]:
        """The coarse intent labels of the action cards (``ActionCard.intent``)."""
        return CARD_INTENT_LABELS

    @staticmethod
    def generate_world(seed: int = 7) -> Any:
        return generate_world(seed)

    @staticmethod
    def load_world(path: Any) -> Any:
        return load_tau2_world(path)

    # -- serving (the tools deployment) -------------------------------------------------------

    persistent = True

    def new_world(self, seed: int, dataset: str | None = None) -> RetailWorld:
        """The seeded synthetic world, or a tau2-retail ``db.json`` when ``dataset`` names one."""
        if dataset and Path(dataset).expanduser().is_file():
            return load_tau2_world(Path(dataset).expanduser())
        return generate_world(seed)

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> RetailWorld:
        return RetailWorld.from_entities(rows)

    def tool_runner(self, world: Any, ledger: Any) -> LocalToolRunner:
        return LocalToolRunner(self, world, ledger=ledger)

    def evaluation(self) -> Any:
        """The pack's suites, judges and scripted tau2 user for ``tandem eval`` (:mod:`.evaluation`)."""
        from .evaluation import SupportEvaluation

        return SupportEvaluation()

    def task_replay(self, tau2_dir: Any = None) -> Any:
        """The hook that replays tau2-retail's expected actions through these tools (``tau2_dir`` unused:
        the retail world needs nothing beside ``db.json``)."""
        from .replay import RetailReplay

        return RetailReplay()

    def sample_writes(self, world: Any) -> list[SampleWrite]:
        """One eligible, grounded call of each write, for ``tandem domain check`` (:mod:`.samples`)."""
        return samples.sample_writes(self, world)

    @staticmethod
    def classify_question(text: str) -> str:
        return classify_question(text)

    def __init__(self) -> None:
        self._registry: ToolRegistry[Any] = build_registry()

    @property
    def registry(self) -> ToolRegistry[Any]:
        return self._registry

    # -- the tool backend (what the tool port runs: pipelines.core.runner.ToolBackend) ----------

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: Any) -> CallOutcome:
        """Run one call against ``world``: the observation, the refusal reason, the entities changed."""
        return invoke(self._registry, name, args, ctx, world)

    def precheck(self, name: str, args: dict[str, Any], ctx: ToolContext, world: Any) -> str | None:
        """A write's eligibility as if the user had confirmed (``None``: eligible)."""
        return precheck(self._registry, name, args, ctx, world)

    def ungrounded(self, name: str, args: dict[str, Any], user_texts: Sequence[str], world: Any,
                   user_id: str) -> list[str]:
        """Write arguments that are neither in the user's texts nor in ``user_id``'s own records."""
        return ungrounded_args(name, args, list(user_texts), owner_candidates(world, user_id))

    @staticmethod
    def search_help(text: str, limit: int = 3) -> Any:
        """The help knowledge base's deterministic search (``(question kind, hits)``)."""
        return search_help_articles(text, limit)

    @staticmethod
    def authenticate(ctx: ToolContext, user_id: str) -> ToolContext:
        """Verify ``user_id`` for the session (one user per session; raises a typed refusal)."""
        return authenticate(ctx, user_id)

    # -- catalogue and gating ------------------------------------------------------------

    def arg_kinds(self, tool: str) -> Mapping[str, str]:
        return ARG_KINDS.get(tool, {})

    def optional_empty(self, tool: str) -> frozenset[str]:
        return OPTIONAL_EMPTY.get(tool, frozenset())

    def clarify_key(self, kind: str) -> str | None:
        return CLARIFY_OF.get(kind, "details")

    def rule_tables(self) -> dict[str, Any]:
        return support_rule_tables()

    @staticmethod
    def state_of(facts: TurnFacts) -> SupportState:
        return read_state(SupportState, facts.state)

    def read_tools(self, facts: TurnFacts) -> list[str]:
        return self.reads(verified=self.state_of(facts).authenticated_user_id is not None)

    def reads(self, *, verified: bool) -> list[str]:
        """Open reads, then private reads once the user is verified (the lookups before)."""
        return list(OPEN_READS) + (list(PRIVATE_READS) if verified else sorted(LOOKUP_TOOLS))

    def change_intents(self) -> set[str]:
        return {c.intent for c in self.cards if c.kind == "write"}

    def cards_for(self, intent: str, sub_intent: str, facts: TurnFacts) -> list[CardSpec]:
        if self.state_of(facts).authenticated_user_id is None:
            return []
        wanted = set(cards_for(intent, sub_intent))
        return [c for c in self.cards if c.id in wanted and c.kind == "write"]

    # -- perception and grounding --------------------------------------------------------

    def intent_prior(self, text: str) -> list[str] | None:
        return intent_prior(text)

    def sub_intent_prior(self, text: str, intent: str) -> list[str] | None:
        return sub_intent_prior(text, intent)

    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        return extract_user_candidates(text)

    def fixed_candidates(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in FIXED_CANDIDATES.items()}

    def slot_schema(self) -> dict[str, Any] | None:
        return slot_schema()

    def absorb_slots(self, slots: Mapping[str, Any], facts: TurnFacts) -> dict[str, list[str]]:
        return slot_candidates(slots, facts.user_texts)

    async def prepare(self, facts: TurnFacts, tools: Any) -> None:
        return None

    def constraints(self, facts: TurnFacts) -> list[str]:
        return []

    def needs_slots(self, facts: TurnFacts) -> bool:
        """The slot call only helps to find a name next to a zip the user typed, before verification."""
        c = facts.candidates
        return (self.state_of(facts).authenticated_user_id is None and c.has("zip")
                and not (c.has("email") or c.has("first_name")))

    def restore(self, facts: TurnFacts) -> None:
        pending = facts.state.get("pending")
        shown = (pending.get("args") or {}).get("payment_method_id") if isinstance(pending, Mapping) else None
        if isinstance(shown, str):  # the card the user answers now: "the other card" is told apart from its method
            facts.state = {**facts.state, "shown_payment": shown}
        state = self.state_of(facts)
        _drop_excepted(facts, state)
        facts.candidates = facts.candidates.merged(state.records)
        _narrow(facts, state)

    def reply_judges(self, facts: TurnFacts, contract: Any) -> list[Any]:
        return []

    def answer_lines(self, facts: TurnFacts, contract: Any) -> list[str]:
        """A template answer from the contract: verification, order states, the top help article."""
        t = self.texts.templates
        out: list[str] = []
        if any(o.tool.startswith("find_user") and o.ok for o in contract.prior_observations):
            out.append(t["verified"])
        for key, value in contract.user_state.items():
            if key.startswith("order.") and key.endswith(".status"):
                out.append(t["order_state"].format(order_id=key[6:-7], status=value))
        for src in contract.sources[:1]:
            out.append(f"{src.title}: {src.snippet.split('. ')[0].rstrip('.')}.")
        return out + self.lead_lines(facts, contract)

    def refusal_line(self, refusal: Mapping[str, Any], title: str, contract: ForwardContract) -> str:
        """"I can't <title> for order <id>: <why>." with the order's observed status; a refusal the user can mend
        by another choice (a payment method) ends with the question that asks for it."""
        oid = refusal.get("entity") or ""
        status = contract.user_state.get(f"order.{oid}.status", "not eligible")
        status = _STATUS_SAID.get(str(status), status)
        why = _fmt(self.texts.refusals.get(str(refusal.get("reason")), ""), status=status) or "it is not allowed here"
        where = (f" {oid}" if title.lower().endswith(" order") else f" for order {oid}") if oid else ""
        return f"I can't {title.lower()}{where}: {why}" + ("" if why.endswith("?") else ".")

    def executed_lines(self, action: EligibleAction, contract: ForwardContract) -> list[str]:
        """Done (an order change, or a profile change), then the states of the orders observed."""
        t = self.texts.templates
        out = [t["executed" if action.params.get("order_id") else "executed_account"]]
        for key, value in contract.user_state.items():
            if key.startswith("order.") and key.endswith(".status"):
                out.append(_fmt(t["order_state"], order_id=key[6:-7], status=value))
        return [o for o in out if o]

    def lead_lines(self, facts: TurnFacts, contract: Any) -> list[str]:
        """The count of a product's options read this turn ("how many t-shirt options do you have?"); otherwise
        none: a support answer is the generator's (its facts are order states and articles)."""
        t = self.texts.templates
        out = []
        for key, value in contract.user_state.items():
            if key.startswith("product.") and key.endswith(".options_available"):
                name = key[len("product."):-len(".options_available")]
                total = contract.user_state.get(f"product.{name}.options_total")
                out.append(_fmt(t["product_options"], name=name, available=value, total=total))
        return [o for o in out if o]

    def session_fields(self, facts: TurnFacts) -> dict[str, Any]:
        state = self.state_of(facts)
        return {"authenticated_user_id": state.authenticated_user_id, "observed_ids": list(state.observed_ids)}

    def summarize(self, tool: str, result: Mapping[str, Any] | None) -> str:
        return summarize_result(tool, dict(result) if result is not None else None)

    def user_state(self, tool: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
        return state_from_observation(tool, dict(result) if result is not None else None)

    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        state = self.state_of(facts)
        if ok and result is not None:
            ids = set().union(*extract_ids(" ".join(walk_strings(result))).values()) if result else set()
            if tool in LOOKUP_TOOLS:
                uid = str(result.get("user_id", ""))
                ctx = ToolContext(authenticated_user_id=state.authenticated_user_id)
                try:
                    authenticate(ctx, uid)
                    state.authenticated_user_id = ctx.authenticated_user_id
                except TandemError:
                    ids.discard(uid)
            owner = state.authenticated_user_id
            state.add_observed(sorted(ids))
            oid = str(result.get("order_id", ""))
            if oid in state.orders and result.get("status"):  # a write changed its state: what it can be asked now
                state.orders[oid] = {**state.orders[oid], "status": str(result["status"])}
            if tool in WRITE_TOOLS:
                selected = state.selected if state.selected and oid == state.selected.get("id") else None
                queue = list(selected.get("queue") or []) if selected else []
                if selected:  # done: the next order of the request, if any
                    state.selected = ({"id": queue[0], "at": selected.get("at", 0), "queue": queue[1:]}
                                      if queue else None)
                if not queue:  # the request is done: the next text starts the next one, unless one of its
                    texts = _session_texts(facts)  # texts asks for another change too (it stays open)
                    done = [*state.request_done, tool]
                    first = min(state.request_from, len(texts) - 1)
                    still = [at for at in range(first, len(texts)) if _asks_more(texts[at], done)]
                    state.request_from, state.request_done = (still[-1], done) if still else (len(texts), [])
            found = record_candidates(tool, result, owner)
            where = result.get("address")
            address = {k: str(v) for k, v in where.items() if isinstance(v, str)} if isinstance(where, Mapping) else {}
            if tool == "get_order_details" and owner and result.get("user_id") == owner:
                state.owned_products = sorted(set(state.owned_products) | set(found.get("product_id", [])))
                for item in result.get("items") or []:
                    if item.get("item_id"):
                        state.items[str(item["item_id"])] = {
                            "name": str(item.get("name", "")), "product_id": str(item.get("product_id", "")),
                            "order_id": str(result.get("order_id", "")),
                            "options": {str(k): str(v) for k, v in (item.get("options") or {}).items()},
                            **({"price": float(item["price"])} if isinstance(item.get("price"), (int, float)) else {})}
                paid = [str(p.get("payment_method_id")) for p in result.get("payment_history") or []
                        if isinstance(p, Mapping) and p.get("transaction_type", "payment") == "payment"
                        and p.get("payment_method_id")]
                state.orders[str(result.get("order_id", ""))] = {
                    "status": str(result.get("status", "")),
                    "items": [str(i.get("name", "")) for i in result.get("items") or [] if isinstance(i, Mapping)],
                    "paid_with": paid[0] if paid else "", "address": address}
            if tool in ("get_user_details", "get_order_details") and owner and result.get("user_id") == owner:
                if address.get("address1") and address not in state.addresses:
                    state.addresses.append(address)
            if tool == "get_user_details" and owner and result.get("user_id") == owner:
                state.profile_address = address
                state.payment_methods = {
                    str(pid): {k: str(m.get(k, "")) for k in ("source", "brand", "last_four") if m.get(k)}
                    for pid, m in (result.get("payment_methods") or {}).items() if isinstance(m, Mapping)}
            if tool == "list_all_product_types":
                state.catalogue = {str(k): str(v) for k, v in (result.get("products") or {}).items()}
            if tool == "get_product_details":
                found["new_item_id"] = variant_candidates(result, state.owned_products)
                if found["new_item_id"]:
                    state.variants[str(result.get("product_id"))] = {
                        str(vid): {"options": dict(v.get("options") or {}), "available": bool(v.get("available")),
                                   **({"price": v["price"]} if isinstance(v.get("price"), (int, float)) else {})}
                        for vid, v in (result.get("variants") or {}).items() if isinstance(v, Mapping)}
            state.records.add_all(found, "record")
            facts.candidates.add_all(found, "record")
            _narrow(facts, state)
        facts.state = state.model_dump(mode="json")

    def policy_lines(self, tool: str | None) -> Sequence[str]:
        return policy_lines(tool)

    def arrange(self, tool: str, args: dict[str, Any], facts: TurnFacts) -> dict[str, Any]:
        """A card's arguments as the user's words determine them, in the order the tool reads them.

        ``item_ids``: every item the user named (a request for two items is one card for both), when the
        model proposed some of them. With ``new_item_ids`` as well: the named items whose change the user
        described by exactly one variant, each beside that variant (``item_ids[i]`` ↔ ``new_item_ids[i]``), and
        those not asked about yet whose change is tied (:meth:`undecided` asks before the card is shown); a
        named item whose change is still open after it was asked once is left off the card. Otherwise each
        proposed variant is put beside the item of its own product; left as proposed when they do not pair.

        ``payment_method_id`` of a return: a method the refund may not go to (the policy: the order's original
        method or a gift card) yields to the one method among those the user named that it may go to."""
        state = self.state_of(facts)
        if tool == "return_delivered_order_items":
            args = _refund_to(args, facts, state)
        olds, news = args.get("item_ids"), args.get("new_item_ids")
        if not isinstance(olds, list):
            return args
        named = _named_items(facts, state)
        if named and set(map(str, olds)) <= set(named):
            if not isinstance(news, list):
                return {**args, "item_ids": list(named)}
            wanted = {i: _wanted_of(facts, state, i) for i in named}
            keep = [i for i in named if len(wanted[i]) == 1 or (len(wanted[i]) > 1 and i not in state.asked)]
            if keep:
                return {**args, "item_ids": keep, "new_item_ids": [wanted[i][0] for i in keep]}
        if not (isinstance(news, list) and len(olds) == len(news) > 1):
            return args
        product_of = {vid: pid for pid, variants in state.variants.items() for vid in variants}
        wanted_pid = {o: state.items.get(str(o), {}).get("product_id") for o in olds}
        pool, paired = list(news), []
        for o in olds:
            match = next((n for n in pool if product_of.get(str(n)) == wanted_pid[o] and wanted_pid[o]), None)
            if match is None:
                return args
            pool.remove(match)
            paired.append(match)
        return {**args, "new_item_ids": paired}

    def undecided(self, tool: str, args: dict[str, Any], facts: TurnFacts) -> tuple[str, list[str]] | None:
        """A change the user's words leave open, asked once per item instead of letting the model pick: an item
        the user named whose wanted variant is tied between several described alike → ``("new_item_choose",
        <those variants in words>)``; one whose product's variants are read but whose change the user has not
        described → ``("new_item_for", [<its name>])``. An item asked about once is not asked again (its
        answer decides it, or it is left off the card)."""
        if not isinstance(args.get("item_ids"), list):
            return None
        state = self.state_of(facts)
        named = _named_items(facts, state)
        alike = _named_alike(facts, state, named)
        if alike:  # "a vacuum cleaner" where the order holds two: which one, by what each is
            state.asked.append("which:" + alike[0])
            facts.state = state.model_dump(mode="json")
            return "item_choose", [_item_words(state.items[i]) for i in alike]
        if not isinstance(args.get("new_item_ids"), list):
            return None
        for item in [*map(str, args["item_ids"]), *(i for i in named if i not in args["item_ids"])]:
            if item in state.asked:
                continue
            pid = str(state.items.get(item, {}).get("product_id"))
            variants = state.variants.get(pid)
            if not variants:
                continue  # not read: nothing to ask about yet
            wanted = _wanted_of(facts, state, item)
            if len(wanted) == 1:
                continue
            state.asked.append(item)
            facts.state = state.model_dump(mode="json")
            if wanted:
                return "new_item_choose", [_options_text(variants[v].get("options") or {}) for v in wanted]
            return "new_item_for", [state.items[item].get("name", "")]
        return None

    def settle_intent(self, intent: str, sub_intent: str, facts: TurnFacts) -> tuple[str, str]:
        """By the state of the order in question, once read (the policy's): an item of a pending order is modified
        and a pending order cancelled; a delivered order's items are exchanged or returned. The request now read,
        the address a change of address would replace is no candidate (the profile's for the account's, the
        order's for an order's)."""
        state = self.state_of(facts)
        if facts.intent:  # narrowed anew from the records, as at the turn's start, with the request known
            facts.candidates = facts.candidates.merged(state.records)
            _narrow(facts, state)
        status = str((state.orders.get(_order_in_question(facts, state) or "") or {}).get("status", ""))
        pending, delivered = status.startswith("pending"), status == "delivered"
        settled = {("exchange", "items"): ("modify", "items") if pending else None,
                   ("modify", "items"): ("exchange", "items") if delivered else None,
                   ("return", "items"): ("cancel", "order") if pending else None,
                   ("cancel", "order"): ("return", "items") if delivered else None}.get((intent, sub_intent))
        return settled or (intent, sub_intent)

    def first_question(self, facts: TurnFacts) -> str | None:
        """Who the user is, while nobody is verified and the perceived request is about their account."""
        unverified = self.state_of(facts).authenticated_user_id is None
        if not (unverified and facts.intent in ACCOUNT_INTENTS):
            return None
        failed = any(o.get("tool") in LOOKUP_TOOLS and not o.get("ok") for o in facts.observations)
        return "identity_retry" if failed else "identity"

    # -- finding the user's orders, questions with choices, read-backs (pipelines.tandem.asking) ----------

    def record_reads(self, facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        """Each of the user's orders not read yet (what it holds and its state)."""
        state = self.state_of(facts)
        if not state.authenticated_user_id:
            return []
        mine = [o for o in facts.candidates.of("order_id") if facts.candidates.source_of("order_id", o) == "record"]
        return [("get_order_details", {"order_id": o}) for o in mine if o not in state.orders]

    def pick_records(self, intent: str, options: Sequence[str], facts: TurnFacts) -> list[str]:
        """The orders among ``options`` in a state the intent can change (pending: cancel, modify; delivered:
        return, exchange) that hold an item the user described; when the user asked for all their orders, or
        described none of their items, those in the right state alone."""
        state = self.state_of(facts)
        texts = _request_texts(facts, state)
        fits = [o for o in options if _status_fits(intent, str((state.orders.get(o) or {}).get("status", "")))]
        said = _said_status(texts)  # "the one I received", "my pending order": the user's words on its state
        fits = [o for o in fits if said is None or said(str((state.orders.get(o) or {}).get("status", "")))] or fits
        left = excepted_orders(state, texts)  # "all my orders, except the boots": the boots' order stays as it is
        if any(_ALL_ORDERS.search(t) for t in texts) and fits:  # "all my pending orders": every one that fits
            return [o for o in fits if o not in left] or fits
        items = {i: info for i, info in state.items.items() if info.get("order_id") in fits}
        named = described_items(items, texts)
        described = [o for o in fits if any(items[i].get("order_id") == o for i in named)]
        if len(described) > 1:  # "the more expensive one" of one product in several orders: the newest text saying
            for text in reversed(texts):
                priced = _by_price(state, texts, text) or _by_item_options(state, texts, text)
                if priced in described:
                    return [priced]
        if len(described) > 1 and not self.asks_for_all(facts):  # the orders that hold the most of what was named
            held = {o: len({items[i].get("name") for i in named if items[i].get("order_id") == o}) for o in described}
            top = max(held.values())  # ("the bookshelf and jigsaw I received in the same order")
            if top > 1:
                described = [o for o in described if held[o] == top]
        if described:
            return described
        named_anywhere = described_items(dict(state.items), texts)
        return [] if named_anywhere else fits

    def refused(self, tool: str, args: Mapping[str, Any], reason: str, facts: TurnFacts) -> None:
        """An order of several the policy will not let change: the request goes on to the next one."""
        state = self.state_of(facts)
        selected = state.selected
        queue = list(selected.get("queue") or []) if selected else []
        if selected and args.get("order_id") == selected.get("id") and queue:
            state.selected = {"id": queue[0], "at": selected.get("at", 0), "queue": queue[1:]}
            facts.state = state.model_dump(mode="json")

    def select_record(self, record: str, facts: TurnFacts, then: Sequence[str] = ()) -> None:
        state = self.state_of(facts)
        state.selected = {"id": record, "at": len(facts.user_texts) - 1, "queue": list(then)}
        facts.state = state.model_dump(mode="json")
        facts.candidates = facts.candidates.merged(state.records)  # narrowed anew around the order found
        _narrow(facts, state)

    def asks_for_all(self, facts: TurnFacts) -> bool:
        """"all (my pending) orders", "both orders", "every order", "each of my orders" — or items of several orders
        named, none of their products in two of them ("no longer need the boots, the watch and the charger"):
        each order its own card."""
        state = self.state_of(facts)
        texts = _request_texts(facts, state)
        if any(_ALL_ORDERS.search(t) for t in texts):
            return True
        if any(_counted_in_orders(state, t) for t in texts):  # "it is two laptops": the one in each order
            return True
        named = described_items(state.items, texts)
        orders = {state.items[i].get("order_id") for i in named}
        products: dict[str, set[Any]] = {}
        for i in named:
            products.setdefault(str(state.items[i].get("name")), set()).add(state.items[i].get("order_id"))
        return len(orders) > 1 and all(len(o) == 1 for o in products.values())

    def describe_records(self, records: Sequence[str], facts: TurnFacts) -> list[str]:
        """"#W1 (Desk Lamp, Water Bottle; delivered)" for each order read; a product that more than one of them
        holds is told apart by the options its items do not share ("Laptop (16GB, 512GB SSD)" and "Laptop (32GB,
        256GB SSD)"); an order not read yet by its id."""
        state = self.state_of(facts)
        kinds: dict[str, dict[str, list[dict[str, Any]]]] = {}  # product name -> order -> its items' options
        for i in state.items.values():
            if i.get("order_id") in records:
                kinds.setdefault(str(i.get("name")), {}).setdefault(str(i["order_id"]), []).append(
                    dict(i.get("options") or {}))
        out = []
        for o in records:
            info = state.orders.get(o)
            if not info:
                out.append(o)
                continue
            names = ", ".join(_told_apart(str(n), o, kinds) for n in dict.fromkeys(info.get("items") or []))
            out.append(f"{o} ({names or 'no items'}; {info.get('status', '')})")
        return out

    def choices(self, about: str, facts: TurnFacts) -> list[str]:
        """The user's own options for a question, in words (payment methods, orders, items, options, reasons)."""
        state = self.state_of(facts)
        if about == "payment_method":
            return [_payment_words(m) for m in (state.payment_methods or {}).values()]
        if about in ("choose", "order"):
            mine = [o for o in facts.candidates.of("order_id") if facts.candidates.source_of("order_id", o) == "record"]
            mine = self.pick_records(str(facts.intent or ""), mine, facts) or mine
            return self.describe_records(mine, facts) if len(mine) > 1 else []
        if about in ("item", "new_item_for"):
            return [_item_words(info) for info in _scoped_items(facts, state).values()]
        if about in ("new_item", "new_item_choose"):
            product = _named_product(facts, state)
            variants = state.variants.get(product or "") or {}
            return [_options_text(v.get("options") or {}) for v in variants.values() if v.get("available")][:6]
        if about == "reason":
            return list(FIXED_CANDIDATES.get("cancel_reason", ()))
        if about == "address":  # the other addresses of their records ("the one my daughter's order went to")
            return [_address_words(a) for a in _new_addresses(state, _replaced_address(facts, state))][:6]
        return []

    def choice_reads(self, about: str, facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        state = self.state_of(facts)
        if about == "payment_method" and state.payment_methods is None and state.authenticated_user_id:
            return [("get_user_details", {"user_id": state.authenticated_user_id})]
        if about in ("choose", "order", "address"):  # an address asked again: where their orders ship, too
            return self.record_reads(facts)
        return []

    def readback(self, tool: str, args: Mapping[str, Any], facts: TurnFacts) -> dict[str, str]:
        """A card in words: the items by name and options (and what each becomes), the address line by line,
        the payment method by kind and last digits, the reason."""
        state = self.state_of(facts)
        out: dict[str, str] = {"user_id": ""}  # the profile is "your profile": nothing to read back
        olds, news = args.get("item_ids"), args.get("new_item_ids")
        product_of = {vid: pid for pid, variants in state.variants.items() for vid in variants}
        if isinstance(olds, list) and isinstance(news, list) and len(olds) == len(news):
            pairs = []
            for old, new in zip(olds, news, strict=True):
                info = state.items.get(str(old)) or {}
                variant = (state.variants.get(product_of.get(str(new), "")) or {}).get(str(new)) or {}
                pairs.append(f"{_item_words(info) if info else old} for one that is "
                             f"{_options_text(variant.get('options') or {}, ', ') or new}")
            out["item_ids,new_item_ids"] = "; ".join(pairs)
        elif isinstance(olds, list):
            out["item_ids"] = ", ".join(_item_words(state.items[str(i)]) if str(i) in state.items else str(i)
                                        for i in olds)
        pm = args.get("payment_method_id")
        if pm:
            method = (state.payment_methods or {}).get(str(pm))
            words = _payment_words(method) if method else str(pm)
            lead = {"return_delivered_order_items": "refunded to", "modify_pending_order_payment": "paid with",
                    }.get(tool, "any price difference paid or refunded with")
            out["payment_method_id"] = f"{lead} {words}"
        fields = [k for k in ("address1", "address2", "city", "state", "zip", "country") if k in args]
        if fields:
            out[",".join(fields)] = f"the address {_address_words(args)}"
        return out

    def readback_reads(self, tool: str, args: Mapping[str, Any], facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        state = self.state_of(facts)
        if args.get("payment_method_id") and state.payment_methods is None and state.authenticated_user_id:
            return [("get_user_details", {"user_id": state.authenticated_user_id})]
        return []

    def entity_names(self, facts: TurnFacts) -> list[str]:
        c = facts.candidates
        return list(PRODUCT_TEMPLATES) + c.of("first_name") + c.of("last_name") + c.of("city")

    def snapshot_values(self, facts: TurnFacts) -> dict[str, Any]:
        state = self.state_of(facts)
        c = facts.candidates
        out: dict[str, Any] = {}
        if state.authenticated_user_id:
            out["user_id"] = state.authenticated_user_id
        order = _order_in_question(facts, state)
        if order:
            out["order_id"] = order
        product = _named_product(facts, state)
        if product:  # a named item's product: its variants answer a change of options
            out["product_id"] = product
        asked = _asked_product(facts, state)
        if asked:  # a product of the store the user asks about: its details answer the question
            out["catalogue_product"] = asked
        if state.authenticated_user_id and state.payment_methods is None and names_payment(
                [*facts.user_texts, facts.user_text]):
            out["payment_named"] = "yes"  # the user named a payment method: read theirs to know which
        if c.has("email"):
            out["email"] = c.of("email")[-1]
        if c.has("first_name") and c.has("last_name") and c.has("zip"):
            out.update(first_name=c.of("first_name")[-1], last_name=c.of("last_name")[-1], zip=c.of("zip")[-1])
        if facts.user_text.strip():
            out["query"] = " ".join(facts.user_text.split())[:200]
        return out

    # -- kernels -------------------------------------------------------------------------

    def conflicts(self, facts: TurnFacts) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        state = self.state_of(facts)
        for r in facts.refusals:
            out.append({"constraint_id": f"card:{r.get('card_id')}", "kind": "action_refused",
                        "detail": str(r.get("reason") or "")})
        for o in facts.observations:
            if o.get("ok"):
                continue
            reason = str(o.get("reason") or "")
            if o.get("tool") == "get_order_details":
                out.append({"constraint_id": f"order:{(o.get('args') or {}).get('order_id', '')}",
                            "kind": "order_not_found", "detail": reason})
            elif o.get("tool") in LOOKUP_TOOLS:
                out.append({"constraint_id": "identity", "kind": "identity_not_found", "detail": reason})
        if (facts.intent in ACCOUNT_INTENTS and state.authenticated_user_id is None
                and not any(c["constraint_id"] == "identity" for c in out)):
            out.append({"constraint_id": "identity", "kind": "identity_unverified"})
        return out

    def w3_candidates(self, facts: TurnFacts) -> list[dict[str, Any]]:
        return []


def _fmt(text: str, **fields: Any) -> str:
    try:
        return text.format(**fields)
    except (KeyError, IndexError, ValueError):
        return ""


def load_support_rule_tables(data: Any | None = None) -> Any:
    """Validate ``data`` (default: the packaged tables) against the support labels, tools, kinds and branches."""
    return load_bundle(SupportPack(), support_rule_tables() if data is None else data)
