"""Grounding for the support pack: argument kinds, extractors over the user's words, record candidates.

* :data:`ARG_KINDS` — tool → argument → grounding kind; a card's arguments are its tool's.
* :func:`extract_user_candidates` — deterministic extractors over the user's (redacted)
  text: email placeholders, order / item / product ids, zips, names after a cue
  ("my name is", "I'm", "this is"), US state codes, address placeholders, amounts.
* :func:`slot_schema` / :func:`slot_candidates` — the W2 slot model's JSON schema and
  its proposals, kept only when they occur in the user's own words.
* :func:`record_candidates` — values observed in the authenticated user's own records:
  their user id, orders, the items of their orders, payment methods, addresses on file,
  and the available variants of the products they bought (the new items of an
  exchange or an item change).
* :data:`FIXED_CANDIDATES` — the domain's own vocabularies (cancellation reasons).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipelines.grounding import appears_in, mention_end, normalize_value
from pipelines.guardrails.ids import extract_amounts, extract_ids

from .world import CANCEL_REASONS

__all__ = [
    "ARG_KINDS",
    "OPTIONAL_EMPTY",
    "FIXED_CANDIDATES",
    "US_STATES",
    "STATE_NAMES",
    "typed_addresses",
    "said_as",
    "extract_user_candidates",
    "slot_schema",
    "slot_candidates",
    "record_candidates",
    "described_items",
    "other_payment_methods",
    "names_product",
    "described_variants",
    "option_rank",
    "rank_step",
    "comparatives",
    "price_wanted",
    "described_payment_methods",
    "names_payment",
    "names_measure",
    "says_original_payment",
    "variant_candidates",
]

_ADDRESS = {"address1": "address1", "address2": "address2", "city": "city", "state": "state",
            "country": "country", "zip": "address_zip"}
ARG_KINDS: dict[str, dict[str, str]] = {
    "find_user_id_by_email": {"email": "email"},
    "find_user_id_by_name_zip": {"first_name": "first_name", "last_name": "last_name", "zip": "zip"},
    "get_user_details": {"user_id": "user_id"},
    "get_order_details": {"order_id": "order_id"},
    "get_product_details": {"product_id": "product_id"},
    "get_item_details": {"item_id": "item_id"},
    "list_all_product_types": {},
    "search_help_articles": {"query": "query"},
    "calculate": {"expression": "expression"},
    "transfer_to_human_agents": {"summary": "query"},
    "cancel_pending_order": {"order_id": "order_id", "reason": "cancel_reason"},
    "modify_pending_order_items": {"order_id": "order_id", "item_ids": "item_id",
                                   "new_item_ids": "new_item_id", "payment_method_id": "payment_method_id"},
    "modify_pending_order_address": {"order_id": "order_id", **_ADDRESS},
    "modify_pending_order_payment": {"order_id": "order_id", "payment_method_id": "payment_method_id"},
    "return_delivered_order_items": {"order_id": "order_id", "item_ids": "item_id",
                                     "payment_method_id": "payment_method_id"},
    "exchange_delivered_order_items": {"order_id": "order_id", "item_ids": "item_id",
                                       "new_item_ids": "new_item_id", "payment_method_id": "payment_method_id"},
    "modify_user_address": {"user_id": "user_id", **_ADDRESS},
}
OPTIONAL_EMPTY: dict[str, frozenset[str]] = {
    "modify_pending_order_address": frozenset({"address2"}),
    "modify_user_address": frozenset({"address2"}),
}
FIXED_CANDIDATES: dict[str, tuple[str, ...]] = {"cancel_reason": CANCEL_REASONS}

US_STATES: frozenset[str] = frozenset(
    "AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM NY "
    "NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY".split()
)
_EMAIL_PH = re.compile(r"\[EMAIL_\d+\]")
_ADDRESS_PH = re.compile(r"\[ADDRESS_\d+\]")
_ZIP = re.compile(r"(?<![\w#$.])\d{5}(?!\w|[.,]\d)")
_TEN = re.compile(r"(?<![\w#$.])\d{10}(?!\w)")
_NAME_CUE = re.compile(
    r"\b(?:my name is|my name's|name is|i am|i'm|im|this is|it's|it is|call me)\s+"
    r"([A-Za-z][A-Za-z'\-]+)\s+([A-Za-z][A-Za-z'\-]+)", re.I)
_CAP_PAIR = re.compile(r"\b([A-Z][a-z'\-]+)\s+([A-Z][a-z'\-]+)\b(?=[^.!?\n]{0,40}\b\d{5}\b)")
_STATE = re.compile(r"(?<![A-Za-z])([A-Z]{2})(?![A-Za-z])")
#: The store's user ids: the holder's first and last name and a number (``mei_kovacs_8020``).
_USER_IDS = re.compile(r"(?<![\w@.])(([a-z]{2,})_([a-z]{2,})_\d{3,})(?![\w@])")
_CITY_STATE = re.compile(r"\b([A-Z][a-z]+(?: [A-Z][a-z]+)?),?\s+([A-Z]{2})\b")
_NOT_NAMES = frozenset(
    "a an the and or to of for in on at with not just also very really here there looking trying "
    "calling writing wondering hoping going about asking reaching contacting wanting having still "
    "sorry glad happy sure ready done new old order orders my your hi hello hey thanks i i'm im i've "
    "i'd i'll it it's its please".split()
)


def _is_name(word: str) -> bool:
    return word.lower() not in _NOT_NAMES and len(word) >= 2


def _names(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for m in list(_NAME_CUE.finditer(text)) + list(_CAP_PAIR.finditer(text)):
        first, last = m.group(1), m.group(2)
        if _is_name(first) and _is_name(last):
            out.append((first.capitalize() if first.islower() else first,
                        last.capitalize() if last.islower() else last))
    return out


#: A cancellation reason said in other words → the policy's value (the value said as is counts too).
REASON_CUES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(no longer|don'?t|do not|won'?t)\b.{0,20}\b(need|want|use)\w*|\bnot needed\b", re.I),
     "no longer needed"),
    (re.compile(r"\b(by (a )?mistake|mistaken\w*|accident\w*|wrong order|didn'?t mean to)\b", re.I),
     "ordered by mistake"),
)


#: US state names → their codes (a customer writes "Texas" where a form has "TX").
STATE_NAMES: dict[str, str] = {
    "alabama": "AL", "alaska": "AK", "arizona": "AZ", "arkansas": "AR", "california": "CA", "colorado": "CO",
    "connecticut": "CT", "delaware": "DE", "district of columbia": "DC", "florida": "FL", "georgia": "GA",
    "hawaii": "HI", "idaho": "ID", "illinois": "IL", "indiana": "IN", "iowa": "IA", "kansas": "KS", "kentucky": "KY",
    "louisiana": "LA", "maine": "ME", "maryland": "MD", "massachusetts": "MA", "michigan": "MI", "minnesota": "MN",
    "mississippi": "MS", "missouri": "MO", "montana": "MT", "nebraska": "NE", "nevada": "NV", "new hampshire": "NH",
    "new jersey": "NJ", "new mexico": "NM", "new york": "NY", "north carolina": "NC", "north dakota": "ND",
    "ohio": "OH", "oklahoma": "OK", "oregon": "OR", "pennsylvania": "PA", "rhode island": "RI",
    "south carolina": "SC", "south dakota": "SD", "tennessee": "TN", "texas": "TX", "utah": "UT", "vermont": "VT",
    "virginia": "VA", "washington": "WA", "west virginia": "WV", "wisconsin": "WI", "wyoming": "WY",
}
_PLACE = r"[A-Z][a-z][A-Za-z.'-]*(?:\s+[A-Z][a-z][A-Za-z.'-]*){0,2}"
#: An address as people write it after the street line's placeholder: a second line (its own placeholder), then
#: the city, the state (code or name), the zip code and the country, each optional, separated by commas or spaces.
_TYPED_ADDRESS = re.compile(
    r"(?P<line1>\[ADDRESS_\d+\])(?:\s*,?\s*(?P<line2>\[ADDRESS_\d+\]))?"
    rf"(?:\s*,?\s+(?P<city>{_PLACE}))?"
    r"(?:\s*,?\s+(?P<state>[A-Z]{2}\b|" + "|".join(n.title() for n in sorted(STATE_NAMES, key=len, reverse=True))
    + r"))?(?:\s*,?\s*(?P<zip>\d{5})\b)?(?:\s*,?\s*(?P<country>USA|U\.S\.A\.?|United States))?")


_STATE_OF_CODE = {code: name for name, code in STATE_NAMES.items()}


#: Cities as people name them in short (the abbreviations in common use, with their dots or without).
CITY_SHORT: dict[str, tuple[str, ...]] = {
    "new york": ("NYC", "N.Y.C.", "New York City"), "los angeles": ("L.A.",), "san francisco": ("SF", "S.F."),
    "washington": ("D.C.", "DC"), "philadelphia": ("Philly",), "las vegas": ("Vegas",),
}


def said_as(kind: str, value: str) -> list[str]:
    """How a user says a value of ``kind`` other than as it is stored: a state's code by its name ("NY" →
    "New York"), a city by its short name ("New York" → "NYC")."""
    if kind == "state" and str(value).upper() in _STATE_OF_CODE:
        return [_STATE_OF_CODE[str(value).upper()]]
    if kind == "city":
        return list(CITY_SHORT.get(str(value).strip().lower(), ()))
    return []


def typed_addresses(text: str) -> list[dict[str, str]]:
    """The addresses a (redacted) user text spells out, field by field (``address1``, ``address2``, ``city``,
    ``state`` as its code, ``address_zip``, ``country``): the street line's placeholder, the second line's right
    after it, then city, state, zip and country as written. A city the text names as a state too ("New York,
    10001") is both. Fields the text does not give are absent."""
    out = []
    for m in _TYPED_ADDRESS.finditer(text):
        found = {"address1": m.group("line1")}
        if m.group("line2"):
            found["address2"] = m.group("line2")
        city, state = m.group("city"), m.group("state")
        if city and city.lower() in STATE_NAMES and not state and city.lower() not in ("washington",):
            found["city"], found["state"] = city, STATE_NAMES[city.lower()]
        elif city:
            found["city"] = city
        if state:
            code = state if len(state) == 2 and state.isupper() else STATE_NAMES.get(state.lower())
            if code in US_STATES:
                found["state"] = code
        if m.group("zip"):
            found["address_zip"] = m.group("zip")
        if m.group("country"):
            found["country"] = "USA"
        out.append(found)
    return out


def extract_user_candidates(text: str) -> dict[str, list[str]]:
    """Candidates by kind found in one user text (already redacted: emails are placeholders)."""
    out: dict[str, list[str]] = {}

    def add(kind: str, values: Iterable[str]) -> None:
        for v in values:
            if v and v not in out.setdefault(kind, []):
                out[kind].append(v)

    ids = extract_ids(text)
    add("email", _EMAIL_PH.findall(text))
    add("order_id", sorted(ids.get("order", set())))
    tens = _TEN.findall(text)
    add("item_id", tens)
    add("product_id", tens)
    add("new_item_id", tens)  # an item id the user gives may be the option they want
    add("zip", _ZIP.findall(text))
    add("address_zip", _ZIP.findall(text))
    for first, last in _names(text):
        add("first_name", [first])
        add("last_name", [last])
    for uid, first, last in _USER_IDS.findall(text):  # a user id names its holder: first_last_1234
        add("user_id", [uid])
        add("first_name", [first.capitalize()])
        add("last_name", [last.capitalize()])
    for address in typed_addresses(text):
        for kind, value in address.items():
            add(kind, [value])
    for city, state in _CITY_STATE.findall(text):
        if state in US_STATES:
            add("city", [city])
            add("state", [state])
    add("state", [s for s in _STATE.findall(text) if s in US_STATES])
    if re.search(r"\b(usa|united states|u\.s\.a?\.?)\b", text, re.I):
        add("country", ["USA"])
    add("amount", [f"{c / 100:.2f}" for c in sorted(extract_amounts(text))])
    add("cancel_reason", [value for rx, value in REASON_CUES if rx.search(text)])
    q = " ".join(text.split())[:200]
    add("query", [q] if q else [])
    return out


def slot_schema() -> dict[str, Any]:
    """The W2 slot call's JSON schema (every string bounded; names and zip only — the rest is extracted)."""
    short = {"type": "string", "maxLength": 24}
    return {
        "type": "object",
        "properties": {"first_name": short, "last_name": short, "zip": {"type": "string", "maxLength": 5}},
        "required": ["first_name", "last_name", "zip"],
        "additionalProperties": False,
    }


def slot_candidates(slots: Mapping[str, Any], user_texts: Iterable[str]) -> dict[str, list[str]]:
    """The slot model's proposals that occur, as whole words, in the user's own texts."""
    texts = list(user_texts)
    out: dict[str, list[str]] = {}
    for kind in ("first_name", "last_name", "zip"):
        value = str(slots.get(kind) or "").strip()
        if not value or (kind != "zip" and not _is_name(value)) or (kind == "zip" and not _ZIP.fullmatch(value)):
            continue
        if appears_in(value, texts):
            out[kind] = [value]
    return out


def _address_fields(addr: Mapping[str, Any]) -> dict[str, list[str]]:
    return {kind: [str(addr[k])] for k, kind in _ADDRESS.items() if isinstance(addr.get(k), str) and addr[k]}


def record_candidates(tool: str, result: Mapping[str, Any] | None, owner: str | None) -> dict[str, list[str]]:
    """Candidates read off one successful observation of the owner's records (empty for world text)."""
    if not result:
        return {}
    out: dict[str, list[str]] = {}

    def add(kind: str, values: Iterable[Any]) -> None:
        for v in values:
            s = str(v)
            if s and s not in out.setdefault(kind, []):
                out[kind].append(s)

    if tool == "get_user_details" and owner and result.get("user_id") == owner:
        add("user_id", [owner])
        add("order_id", result.get("orders") or [])
        add("payment_method_id", (result.get("payment_methods") or {}).keys())
        for k, vals in _address_fields(result.get("address") or {}).items():
            add(k, vals)
    elif tool == "get_order_details" and owner and result.get("user_id") == owner:
        add("order_id", [result.get("order_id", "")])
        for item in result.get("items") or []:
            add("item_id", [item.get("item_id", "")])
            add("product_id", [item.get("product_id", "")])
        for k, vals in _address_fields(result.get("address") or {}).items():
            add(k, vals)
        add("payment_method_id", [p.get("payment_method_id", "") for p in result.get("payment_history") or []])
    elif tool.startswith("find_user_id") and owner and result.get("user_id") == owner:
        add("user_id", [owner])
    return out


def variant_candidates(result: Mapping[str, Any] | None, owned_products: Iterable[str]) -> list[str]:
    """Available variants of a product the owner bought (from a ``get_product_details`` observation)."""
    if not result or result.get("product_id") not in set(owned_products):
        return []
    variants = result.get("variants") or {}
    return [vid for vid, v in variants.items() if isinstance(v, Mapping) and v.get("available")]


def _name_pattern(tokens: list[str]) -> re.Pattern[str]:
    """Whole words, in order, joined by a space, a hyphen or nothing ("t-shirt", "t shirt", "tshirt"); the last
    word singular or plural ("headphone" / "headphones", "watch" / "watches")."""
    *head, last = tokens
    stem = last[:-1] if len(last) > 3 and last.endswith("s") and not last.endswith("ss") else last
    parts = [re.escape(t) for t in head] + [_plural(stem)]
    return re.compile(r"(?<![\w])" + r"[\s\-]?".join(parts) + r"(?![\w])")


def _plural(word: str) -> str:
    """A pattern for ``word`` singular or plural as English spells it: "-s"/"-es" ("watches"), a consonant's "-y" as
    "-ies" ("batteries"), "-f"/"-fe" as "-ves" ("bookshelves", "knives")."""
    if len(word) > 3 and word.endswith("y") and word[-2] not in "aeiou":
        return re.escape(word[:-1]) + r"(?:y|ies)"
    if len(word) > 3 and word.endswith("fe"):
        return re.escape(word[:-2]) + r"(?:fe|fes|ves)"
    if len(word) > 3 and word.endswith("f"):
        return re.escape(word[:-1]) + r"(?:f|fs|ves)"
    return re.escape(word) + r"(?:e?s)?"


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[\s\-_/]+", normalize_value(name)) if t]


def names_product(name: str, texts: Iterable[str], *, head: bool = False) -> bool:
    """Whether the user's words name the product ``name``: its whole name as loosely as a customer writes it
    (case, hyphens, spaces, a plural), or with ``head`` its last word alone ("the cleaner" for Vacuum Cleaner,
    "my watch" for Smart Watch; a word of four letters or more, of a name of two words or more)."""
    tokens = _tokens(name)
    if not tokens:
        return False
    if head:
        if len(tokens) < 2 or len(tokens[-1]) < 4:
            return False
        tokens = tokens[-1:]
    rx = _name_pattern(tokens)
    return any(rx.search(normalize_value(t)) for t in texts)


#: Words right before an item's name that leave it out ("not the water bottle", "except the lamp", "keep the
#: grill", "I don't want the mouse") or keep only it ("only the desk lamp").
_LEAVE_OUT = re.compile(r"(?:\bnot|\bno|\bexcept(?: for)?|\bwithout|\bkeep(?:ing)?|\bother than|\bapart from|"
                        r"\bbesides|\bleav(?:e|ing)|\binstead of|\bdon'?t (?:want|need)|\bdo not (?:want|need))"
                        r"\s+(?:(?:the|my|a|an|that|this|any)\s+)?$")
#: "only the lamp", "just the lamp", "only exchange the lamp", "I only want to return the lamp".
_ONLY = re.compile(r"(?:\bonly\s+(?:(?:want|need|wish|like)\s+to\s+)?(?:(?:exchange|return|cancel|change|modify|swap|"
                   r"replace|send\s+back)\s+)?|\bjust\s+)(?:(?:the|my|a|an|that|this)\s+)?$")
#: Words right before an item's name that use it to say which order is meant ("the backpack I received with the
#: vacuum cleaner", "the lamp that came along with my kettle"): the item is where the other one is, not changed.
_ALONG = re.compile(r"\b(?:received|got|came|bought|ordered|arrived|delivered|shipped|purchased)\s+(?:\w+\s+)?"
                    r"(?:(?:together|along)\s+)?with\s+(?:(?:the|my|a|an|that|this)\s+)?$")


def _head_words(tokens: Sequence[str]) -> list[str]:
    """The words a product is called by alone: the last word of a name of two words or more (four letters or
    more: "watch" for Smart Watch), or the tail of a one-word compound (English compounds end in their head:
    "watch" for Wristwatch, "shelf" for Bookshelf; five letters or more after three or more)."""
    if len(tokens) >= 2:
        return [tokens[-1]] if len(tokens[-1]) >= 4 else []
    if len(tokens) == 1 and len(tokens[0]) >= 8:
        word = tokens[0]
        return [word[i:] for i in range(3, len(word) - 4)]
    return []


def _mentions(name: str, text: str, *, head: bool, heads: Sequence[str] | None = None) -> list[str]:
    """How ``text`` mentions the product ``name``: ``named``, ``left_out`` or ``only`` per mention. A name of one
    word is also mentioned split in two ("book shelf" for Bookshelf). With ``head``, by one of its head words
    alone (``heads``, default all of :func:`_head_words`)."""
    tokens = _tokens(name)
    words = (_head_words(tokens) if heads is None else list(heads)) if head else []
    if not tokens or (head and not words):
        return []
    norm = normalize_value(text)
    if head:
        starts = [m.start() for w in words for m in _name_pattern([w]).finditer(norm)]
    else:
        starts = [m.start() for m in _name_pattern(tokens).finditer(norm)]
    if not head and len(tokens) == 1 and len(tokens[0]) >= 7:
        word = tokens[0]
        split = "|".join(re.escape(word[:i]) + r"\s+" + re.escape(word[i:]) for i in range(3, len(word) - 2))
        starts += [m.start() for m in re.finditer(rf"(?<![\w])(?:{split})(?:e?s)?(?![\w])", norm)]
    out = []
    for start in sorted(starts):
        before = norm[max(0, start - 40):start]
        out.append("left_out" if _LEAVE_OUT.search(before) else "only" if _ONLY.search(before)
                   else "along" if _ALONG.search(before) else "named")
    return out


_NOUN_END = re.compile(r"\s*(?:$|[.,;:!?)]|(?:and|or|one|ones|i|that|which|from|in|of|on|with|to|for|please|"
                       r"too|as well)\b)", re.I)


def _as_noun(word: str, text: str) -> bool:
    """Whether ``word`` ends a noun phrase in ``text`` ("the jigsaw I received", "the mechanical one"), not the
    start of one about something else ("the coffee is cold")."""
    norm = normalize_value(text)
    return any(_NOUN_END.match(norm, m.end()) for m in re.finditer(rf"(?<![\w]){re.escape(word)}(?![\w])", norm))


def described_items(items: Mapping[str, Mapping[str, Any]], texts: Iterable[str], *,
                    mentioned: bool = False) -> list[str]:
    """The item ids (of the user's observed orders) whose product the user's words name, as the texts left them.

    ``items``: item id → ``{"name", "product_id"}``. A product is named by its whole name (loosely:
    :func:`names_product`), or by its last word when no other product among ``items`` ends in that word
    ("the lamp" names nothing when the order holds a desk lamp and a floor lamp), or by a first word of six
    letters or more that no other product starts with, ending a noun phrase ("the jigsaw I got", "the mechanical
    one"; not "the coffee is cold"). The texts are read in order:
    a name after "not", "except", "keep", "without", "instead of"… leaves its items out again; after "only"
    keeps them alone. Empty when the user named none (then every item of the order stays a candidate). With
    ``mentioned``: every item the texts speak of, however ("keep the lamp" mentions the lamp)."""
    heads: dict[str, set[str]] = {}
    for info in items.values():
        toks = _tokens(str(info.get("name") or ""))
        for word in [*toks[-1:], *_head_words(toks)]:
            heads.setdefault(word, set()).add(str(info.get("product_id") or info.get("name")))
    firsts: dict[str, set[str]] = {}
    for info in items.values():
        toks = _tokens(str(info.get("name") or ""))
        if len(toks) > 1:
            firsts.setdefault(toks[0], set()).add(str(info.get("product_id") or info.get("name")))
    chosen: list[str] = []
    for text in texts:
        named, left, only = [], [], []
        for iid, info in items.items():
            name = str(info.get("name") or "")
            toks = _tokens(name)
            unique_heads = [w for w in _head_words(toks) if len(heads.get(w, ())) == 1]
            # its first word alone when distinctive: six letters or more, no other product starts with it ("jigsaw")
            unique_first = len(toks) > 1 and len(toks[0]) >= 6 and len(firsts.get(toks[0], ())) == 1
            kinds = (_mentions(name, text, head=False)
                     or (_mentions(name, text, head=True, heads=unique_heads) if unique_heads else [])
                     or (_mentions(toks[0], text, head=False) if unique_first and _as_noun(toks[0], text) else []))
            kinds = [k for k in kinds if k != "along"]  # it says where the others are: neither named nor left out
            if not kinds:
                continue
            if mentioned:
                kinds = ["named"]
            {"named": named, "left_out": left, "only": only}[kinds[-1] if "only" not in kinds else "only"].append(iid)
        if only:  # "only the lamp and the kettle": the names said with it are the whole list
            chosen = [*only, *named]
        else:
            chosen = [i for i in [*chosen, *named] if i not in left]
    return _by_options(items, [i for i in items if i in set(chosen)], texts)


def _by_options(items: Mapping[str, Mapping[str, Any]], chosen: list[str], texts: Iterable[str]) -> list[str]:
    """Several items of one product named alike ("a vacuum cleaner" with two in the order): the newest text that
    names an option value only one of them has ("the robotic one", "the 64 GB one" for 64GB) keeps that one."""
    texts = list(texts)
    out = list(chosen)
    by_name: dict[str, list[str]] = {}
    for i in chosen:
        by_name.setdefault(normalize_value(items[i].get("name", "")), []).append(i)
    for group in (g for g in by_name.values() if len(g) > 1):
        values = {i: {normalize_value(v) for v in (items[i].get("options") or {}).values()} for i in group}
        for text in reversed(texts):
            own = [i for i in group if any((appears_in(v, [text]) or names_measure(v, [text]))
                                           and sum(v in values[j] for j in group) == 1 for v in values[i])]
            if len(own) == 1:
                out = [i for i in out if i not in group or i == own[0]]
                break
    return out


#: Ordered option values: a value's place on its scale ranks it against another of the same scale.
_SCALES: tuple[tuple[str, ...], ...] = (
    ("xxs", "xs", "s", "m", "l", "xl", "xxl", "xxxl"),
    ("small", "medium", "large", "extra large"),
    ("low", "medium", "high"),
    ("basic", "standard", "professional"),
    ("beginner", "intermediate", "expert"),
)
#: Units folded into one measure before numbers are compared (litres in millilitres, terabytes in gigabytes).
_UNITS = {"l": 1000.0, "liter": 1000.0, "liters": 1000.0, "litre": 1000.0, "litres": 1000.0, "tb": 1024.0}
#: Size-like options, in the order a comparative applies to the first one a product has.
_SIZE = ("size", "capacity", "storage", "screen size", "room size", "length", "height")
#: A comparative in the user's words → the options it is about and the direction it wants.
COMPARATIVES: tuple[tuple[re.Pattern[str], tuple[str, ...], int], ...] = (
    (re.compile(r"\b(bigger|larger|a size up|one size up|more (space|room|capacity|storage))\b", re.I), _SIZE, 1),
    (re.compile(r"\b(smaller|a size down|one size down|more compact)\b", re.I), _SIZE, -1),
    (re.compile(r"\blonger\b", re.I), ("length", "battery life"), 1),
    (re.compile(r"\bshorter\b", re.I), ("length", "battery life"), -1),
)
#: Price in the user's words: (pattern, direction, superlative — the extreme price, not merely a lower one).
PRICE_WORDS: tuple[tuple[re.Pattern[str], int, bool], ...] = (
    (re.compile(r"\b(cheapest|least expensive|lowest price)\b", re.I), -1, True),
    (re.compile(r"\b(cheaper|less expensive|lower price)\b", re.I), -1, False),
    (re.compile(r"\b(most expensive|priciest)\b", re.I), 1, True),
    (re.compile(r"\b(more expensive|pricier)\b", re.I), 1, False),
)


def option_rank(value: Any) -> tuple[int, float] | None:
    """``(scale, place)`` of an option value that has an order: a named scale (sizes, levels) or a number with its
    unit folded ("1.5 liters" = 1500, "1TB" = 1024); None for a value without one (a colour)."""
    v = normalize_value(value)
    for i, scale in enumerate(_SCALES):
        if v in scale:
            return i, float(scale.index(v))
    m = re.match(r"^(\d+(?:\.\d+)?)\s*-?\s*([a-z]*)", v)
    if m:
        return -1, float(m.group(1)) * _UNITS.get(m.group(2), 1.0)
    return None


def rank_step(held: Any, other: Any) -> float | None:
    """How far ``other`` lies above (> 0) or below (< 0) ``held`` on the one scale both belong to ("medium" is on
    the sizes' and the levels' scales: "high" puts it on the levels'), or by their numbers; None: no order."""
    a, b = normalize_value(held), normalize_value(other)
    for scale in _SCALES:
        if a in scale and b in scale:
            return float(scale.index(b) - scale.index(a))
    ra, rb = option_rank(a), option_rank(b)
    if ra is None or rb is None or ra[0] != -1 or rb[0] != -1:
        return None
    return rb[1] - ra[1]


#: A comparative of any quality: "more X", "less X", "not as X", "Xer" — about the option whose name starts as X
#: does ("less bright" → brightness, "quieter" → quietness…), matched against the product's own option names.
_MORE_LESS = re.compile(r"\b(more|less|not as|higher|lower|greater|fewer)\s+([a-z]{4,})\b", re.I)
_UP = frozenset({"more", "higher", "greater"})
#: An amount more or less of an option ("1000 more pieces", "two fewer slots" is not read: digits only).
_DELTA = re.compile(r"\b(\d+(?:\.\d+)?)\s+(more|extra|additional|fewer|less)\s+([a-z]{4,})\b", re.I)
_ER = re.compile(r"\b([a-z]{3,}?)(?:(?<=([b-df-hj-np-tv-z]))\2)?er\b", re.I)


def comparatives(texts: Iterable[str]) -> list[tuple[tuple[str, ...], int]]:
    """The comparatives the user's words use: (the options they are about, direction). Besides the size and price
    words, a comparative of any quality names the options starting with its stem (``~stem``)."""
    joined = " ".join(texts)
    out = [(opts, d) for rx, opts, d in COMPARATIVES if rx.search(joined)]
    for m in _MORE_LESS.finditer(joined):
        out.append(((f"~{m.group(2).lower()[:5]}",), 1 if m.group(1).lower() in _UP else -1))
    for m in _ER.finditer(joined):  # the word kept: an option's own name ("diameter", "filter") is no comparative
        if len(m.group(1)) >= 4:
            out.append(((f"~{m.group(1).lower()[:5]}={m.group(0).lower()}",), 1))
    return out


def _about(option: str, name: str) -> bool:
    """Whether a comparative's option ``name`` ("size", "~brigh", "~diame=diameter") is about ``option`` (a product's
    option name, normalised): the name itself or its last word; a stem starts it — unless the word that gave the
    stem is the option's own name ("the diameter to be 10 inches" compares nothing)."""
    if not name.startswith("~"):
        return option == name or option.endswith(" " + name)
    stem, _, word = name[1:].partition("=")
    return option.startswith(stem) and not (word and word in option.split())


def said_in_number(value: str, texts: Iterable[str]) -> bool:
    """Whether a one-word option value of four letters or more is said in the other number ("animal" for the theme
    "animals", "sneakers" for "sneaker")."""
    v = normalize_value(value)
    if not re.fullmatch(r"[a-z]{4,}", v):
        return False
    stem = v[:-2] if v.endswith("es") and len(v) > 5 else v[:-1] if v.endswith("s") else v
    rx = re.compile(rf"(?<![\w]){re.escape(stem)}(?:e?s)?(?![\w])")
    return any(rx.search(normalize_value(t)) for t in texts)


def by_amount(held: Mapping[str, Any], variant: Mapping[str, Any], texts: Iterable[str]) -> list[str]:
    """The option values of ``variant`` that are the held item's value plus or minus an amount the user said of
    that option ("1000 more pieces": 500 pieces held → 1500; the option whose name starts as the word does)."""
    h_opts = {normalize_value(k): x for k, x in (held.get("options") or {}).items()}
    out: list[str] = []
    for m in _DELTA.finditer(" ".join(texts)):
        sign = 1.0 if m.group(2).lower() in ("more", "extra", "additional") else -1.0
        stem = m.group(3).lower()[:5]
        for k, x in (variant.get("options") or {}).items():
            key = normalize_value(k)
            if not key.startswith(stem) or key not in h_opts:
                continue
            a, b = option_rank(h_opts[key]), option_rank(x)
            if a and b and a[0] == b[0] == -1 and abs(b[1] - (a[1] + sign * float(m.group(1)))) < 1e-9:
                out.append(str(x))
    return out


def price_wanted(texts: Iterable[str]) -> tuple[int, bool] | None:
    """(direction, superlative) of a price the user's words ask for ("the cheapest one"), else None."""
    joined = " ".join(texts)
    return next(((d, top) for rx, d, top in PRICE_WORDS if rx.search(joined)), None)


_SAME = re.compile(r"\bsame\s+", re.I)
_JOIN = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+|\s*&\s*)")


def kept_options(options: Iterable[str], texts: Iterable[str]) -> set[str]:
    """The options (of ``options``, a product's option names) the user's words say to keep as they are: a list of
    them after "same" ("the same size and material", "same colour, size or length") or one followed, within two
    words, by "the same" / "unchanged" ("keep the colour the same")."""
    names = sorted({normalize_value(o) for o in options}, key=len, reverse=True)
    heads = [(n, re.compile(rf"{re.escape(n)}s?\b")) for n in names]
    out: set[str] = set()
    for t in texts:
        low = normalize_value(t)
        for m in _SAME.finditer(low):
            at = m.end()
            while (hit := next(((n, r.match(low, at)) for n, r in heads if r.match(low, at)), None)) is not None:
                out.add(hit[0])
                join = _JOIN.match(low, hit[1].end())
                if join is None or not join.group(0):
                    break
                at = join.end()
        out |= {n for n in names if re.search(rf"\b{re.escape(n)}s?\s+(?:\w+\s+){{0,2}}?(?:the\s+same|unchanged)\b", low)}
    return out


_ONE_STEP = re.compile(r"\b(?:one|a|single) (?:size|step|notch|level)\b|\bslightly\b|\ba (?:bit|little)\b", re.I)


def _steps(held: Mapping[str, Any], variant: Mapping[str, Any],
           comps: list[tuple[tuple[str, ...], int]]) -> list[tuple[float | None, int]]:
    """Per comparative (the options it is about, its direction): how far ``variant`` lies from the held item on
    the first of those options both have (``None``: no ordered option of this product), with the direction."""
    h_opts = {normalize_value(k): x for k, x in (held.get("options") or {}).items()}
    v_opts = {normalize_value(k): x for k, x in (variant.get("options") or {}).items()}
    out: list[tuple[float | None, int]] = []
    for names, d in comps:
        key = next((k for n in names for k in h_opts if k in v_opts and _about(k, n)), None)
        out.append((rank_step(h_opts[key], v_opts[key]) if key else None, d))
    return out


def _distance(held: Mapping[str, Any], variant: Mapping[str, Any], comps: list[tuple[tuple[str, ...], int]]) -> float:
    """How far ``variant`` moves from the held item along the options the comparatives are about (a comparative
    of one step asks for the nearest option in its direction)."""
    return sum(abs(step) for step, _ in _steps(held, variant, comps) if step is not None)


def _moves(held: Mapping[str, Any], variant: Mapping[str, Any], comps: list[tuple[tuple[str, ...], int]],
           price: tuple[int, bool] | None) -> int | None:
    """How many of the user's comparatives ``variant`` satisfies against the held one; None when it goes against
    one (a smaller bottle for "bigger"; the same price for "cheaper")."""
    moved = 0
    for step, d in _steps(held, variant, comps):
        if step is None:
            continue  # the comparative is about no ordered option of this product
        if step * d <= 0:
            return None
        moved += 1
    if price is not None and isinstance(held.get("price"), (int, float)) and isinstance(variant.get("price"),
                                                                                        (int, float)):
        if (float(variant["price"]) - float(held["price"])) * price[0] <= 0:
            return None
        moved += 1
    return moved


def _described_end(variant: Mapping[str, Any] | None, text: str) -> int | None:
    """Where the description of ``variant`` in ``text`` ends (the first mention of its last-named option value),
    or None unless the text names every one of its option values (at least two: a whole description)."""
    values = [str(x) for x in ((variant or {}).get("options") or {}).values()]
    if len(values) < 2:
        return None
    ends = [mention_end(v, text) for v in values]
    return None if None in ends else max(e for e in ends if e is not None)


def described_as_had(variants: Mapping[str, Mapping[str, Any]], vid: str, texts: Iterable[str]) -> bool:
    """Whether one of ``texts`` describes variant ``vid`` in full and then another variant in full — "change the
    T-Shirt (black, XXL, cotton, crew neck) to purple, S, polyester, v-neck": the description that ends first is
    what the user has, the other what they want. A lone description is not read as either."""
    for t in texts:
        mine = _described_end(variants.get(vid), t)
        if mine is not None and any(
                (end := _described_end(v, t)) is not None and end > mine for w, v in variants.items() if w != vid):
            return True
    return False


#: Units as customers and catalogues write them → one spelling ("4 foot" names "4 ft", "13 inch" names "13-inch").
_UNIT_OF: dict[str, str] = {
    **dict.fromkeys(("ft", "foot", "feet"), "ft"), **dict.fromkeys(("inch", "inches", "in"), "inch"),
    **dict.fromkeys(("ml", "milliliter", "milliliters", "millilitre", "millilitres"), "ml"),
    **dict.fromkeys(("l", "liter", "liters", "litre", "litres"), "l"), **dict.fromkeys(("cup", "cups"), "cup"),
    **dict.fromkeys(("hour", "hours", "hr", "hrs", "h"), "hour"), **dict.fromkeys(("lb", "lbs", "pound", "pounds"), "lb"),
    **dict.fromkeys(("gb", "gigabyte", "gigabytes"), "gb"), **dict.fromkeys(("tb", "terabyte", "terabytes"), "tb"),
    **dict.fromkeys(("mm", "millimeter", "millimeters"), "mm"), **dict.fromkeys(("mp", "megapixel", "megapixels"), "mp"),
    **dict.fromkeys(("mah",), "mah"), **dict.fromkeys(("w", "watt", "watts"), "w"), **dict.fromkeys(("bar",), "bar"),
    **dict.fromkeys(("x", "times"), "x"), **dict.fromkeys(("degrees", "degree", "°"), "deg"),
    **dict.fromkeys(("piece", "pieces", "pc", "pcs"), "piece"),
}
_MEASURE = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s*-?\s*(" + "|".join(
    sorted(_UNIT_OF, key=len, reverse=True)) + r")(?![a-z])", re.I)


def _measures(text: str) -> set[tuple[float, str]]:
    """The measures a text gives, each as (number, unit): "20,000 mAh" and "20000mAh" are one."""
    return {(float(n.replace(",", "")), _UNIT_OF[u.lower()]) for n, u in _MEASURE.findall(text)}


#: Letter sizes as people say them ("a large", "the extra small one"): a word for a size never names a bigger one
#: it is part of ("large" is not "extra large").
_SIZE_WORDS: dict[str, str] = {
    "xs": r"(?:extra|x)[\s-]?small", "s": r"(?<!extra )(?<!x-)(?<!x )small", "m": r"medium",
    "l": r"(?<!extra )(?<!x-)(?<!x )(?<!xx-)large", "xl": r"(?<!extra )(?:extra|x)[\s-]?large",
    "xxl": r"(?:extra[\s-]extra|xx)[\s-]?large|2xl|double[\s-]xl",
}


_SIZE_PLAIN = {"xs": "extra small", "s": "small", "m": "medium", "l": "large", "xl": "extra large"}


def says_letter_size(option: str, value: str, texts: Iterable[str], taken: Iterable[str] = ()) -> bool:
    """Whether the user says a letter size of a size option in words ("small" for S, "extra large" for XL) — not
    where the word is a value of another of the product's options (``taken``: a helmet's "medium" ventilation)."""
    words = _SIZE_WORDS.get(normalize_value(value))
    if words is None or not normalize_value(option).endswith("size") or _SIZE_PLAIN.get(
            normalize_value(value)) in set(taken):
        return False
    rx = re.compile(rf"\b(?:{words})\b")
    return any(rx.search(normalize_value(t)) for t in texts)


def names_measure(value: str, texts: Iterable[str]) -> bool:
    """Whether the user's words give the measure of an option value in other units' spellings ("4 foot" for
    "4 ft", "13 inch" for "13-inch"): the same number with the same unit."""
    mine = _measures(str(value))
    return bool(mine) and any(mine & _measures(t) for t in texts)


_NONE_VALUES = frozenset({"none", "no", "without"})
_YES_VALUES = frozenset({"yes"})
_NEGATION = r"(?:no|not|non|without(?: an?| any)?)"


def _option_forms(option: str) -> str:
    """An option's name as people say it, as a regex alternation: itself, and an "-ance"/"-ence" noun's adjective
    ("water resistance" → "water resistant"); a space or a hyphen between its words."""
    name = normalize_value(option)
    forms = [name] + [name[:-4] + end for tail, end in (("ance", "ant"), ("ence", "ent")) if name.endswith(tail)]
    return "|".join(re.escape(f).replace(r"\ ", r"[\s-]") for f in forms)


def _says_none_of(option: str, texts: Iterable[str]) -> bool:
    """Whether the user asks for an item without ``option`` ("no backlight", "without a backlight", "not
    waterproof", "non-water-resistant")."""
    rx = re.compile(rf"\b{_NEGATION}[\s-]+(?:{_option_forms(option)})\b")
    return any(rx.search(normalize_value(t)) for t in texts)


def _says_yes_of(option: str, texts: Iterable[str]) -> bool:
    """Whether the user asks for an item with a yes-or-no ``option`` ("waterproof", "with water resistance", "a
    water-resistant one"): its name said, and not negated ("not waterproof" says the other)."""
    rx = re.compile(rf"\b(?:{_option_forms(option)})\b")
    return any(rx.search(normalize_value(t)) for t in texts) and not _says_none_of(option, texts)


def _value_heads(variants: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Option values of several words that a customer names by their first word alone ("Google" for "Google
    Assistant"): a first word of four letters or more that no other value of the same option starts with."""
    by_option: dict[str, set[str]] = {}
    for v in variants.values():
        for key, value in ((v or {}).get("options") or {}).items():
            by_option.setdefault(str(key), set()).add(normalize_value(value))
    out: dict[str, str] = {}
    for values in by_option.values():
        firsts: dict[str, list[str]] = {}
        for value in values:
            words = value.split()
            if len(words) > 1 and len(words[0]) >= 4 and words[0].isalpha():
                firsts.setdefault(words[0], []).append(value)
        out.update({vals[0]: first for first, vals in firsts.items() if len(vals) == 1})
    return out


#: A stated order of preference: "prefer A > B > C", "A over B", "A rather than B", "A, otherwise B".
_PREFERENCE = re.compile(r"\b(?:prefer(?:s|red|ably)?|preference(?: is)?|rather|ideally)\b[^.;!?]*", re.I)
_BEFORE = re.compile(r"\s*(?:>|\bover\b|\brather than\b|\bthen\b|\botherwise\b|\bor else\b|\bbefore\b)\s*", re.I)


def preferred(variants: Mapping[str, Mapping[str, Any]], tied: Sequence[str], texts: Iterable[str]) -> list[str]:
    """Among ``tied`` variants, the one whose own option value comes first in an order of preference the user
    stated ("prefer AC adapter > battery > USB"); empty when no stated order tells them apart."""
    for text in reversed(list(texts)):
        for m in _PREFERENCE.finditer(text):
            ranked = [normalize_value(p) for p in _BEFORE.split(m.group(0)) if p.strip()]
            if len(ranked) < 2:
                continue

            def place(vid: str, ranked: list[str] = ranked) -> int:
                values = [normalize_value(v) for v in (variants[vid].get("options") or {}).values()]
                hits = [i for i, part in enumerate(ranked) if any(mention_end(v, part) is not None for v in values)]
                return min(hits) if hits else len(ranked)

            places = {vid: place(vid) for vid in tied}
            first = min(places.values())
            if first < len(ranked) and sum(p == first for p in places.values()) == 1:
                return [vid for vid, p in places.items() if p == first]
    return []


def described_variants(variants: Mapping[str, Mapping[str, Any]], current: Iterable[str],
                       texts: Iterable[str], *, described: Iterable[str] = ()) -> list[str]:
    """The available variants the user's words describe, as a change of ``current`` (the variant ids held now).

    A variant qualifies when it is available, is not held now, and the user named at least one of its
    option values that the held item does not have, or it satisfies a comparative the user used against
    the held one ("a bigger one": a larger capacity or size; "less bright"; "the cheapest one") — a
    variant that goes against a comparative never qualifies, and among those that satisfy it the nearest wins (a
    comparative of one step — "one size smaller", "slightly bigger" — asks for the next option in its direction). The qualifying variants are ranked by how
    many of their option values the user named that the held item does not have (a description of the held
    item — "change it (black, XXL) to purple, S" — names no wish) plus comparatives satisfied, then by how
    many option values they
    keep of the held item ("the same one but clicky") — with a superlative price, only of the options the user said
    to keep ("the cheapest one of the same size": the other options are the price's to choose) — and a superlative
    price keeps only the extreme price among them. Every variant tied at the top is returned (one: the change is determined; several: the
    user is asked which; none: nothing described yet). An available variant whose own id the user typed is the one
    described, whatever else they said.

    ``described``: other variants the user holds and described as what they have (another order's item): their
    option values name no wish either, unless the held item has them too."""
    texts, held = list(texts), [c for c in current if c in variants]
    typed = [vid for vid, v in variants.items() if vid not in held and isinstance(v, Mapping) and v.get("available")
             and appears_in(vid, texts)]
    if typed:  # the user gave the option's own item id
        return typed
    kept_values = {normalize_value(v) for c in held for v in (variants[c].get("options") or {}).values()}
    theirs = {normalize_value(v) for c in described if c in variants and c not in held
              for v in (variants[c].get("options") or {}).values()}  # values of what they have elsewhere
    no_wish = kept_values | theirs
    comps, price = (comparatives(texts), price_wanted(texts)) if len(held) == 1 else ([], None)
    heads = _value_heads(variants)
    taken = {normalize_value(x) for w in variants.values() if isinstance(w, Mapping)
             for x in (w.get("options") or {}).values()}  # the product's own values: a word that is one names it
    step_of_one = any(_ONE_STEP.search(t) for t in texts)  # a comparative of one step: the nearest option only
    said = [_DELTA.sub(r" \2 \3", t) for t in texts]  # "1000 more pieces" names no 1000: an amount, not a value
    h_opts = {normalize_value(k): normalize_value(x) for k, x in (variants[held[0]].get("options") or {}).items()
              } if len(held) == 1 else {}
    extreme = price is not None and price[1]  # "the cheapest": a kept value ranks only where the user said to keep it
    keep = kept_options(h_opts, texts) if extreme else set()  # "the cheapest one of the same size"
    scored: list[tuple[tuple[int, int, float], str]] = []
    for vid, v in variants.items():
        if not isinstance(v, Mapping) or not v.get("available") or vid in held:
            continue
        v_opts = {normalize_value(k): normalize_value(x) for k, x in (v.get("options") or {}).items()}
        values = [str(x) for x in (v.get("options") or {}).values()]
        named = [x for x in values if appears_in(x, said) or names_measure(x, said) or said_in_number(x, said) or (
            heads.get(normalize_value(x)) and appears_in(heads[normalize_value(x)], said))]
        named += [str(x) for k, x in (v.get("options") or {}).items()
                  if str(x) not in named and says_letter_size(str(k), str(x), said, taken)]
        named += [str(x) for k, x in (v.get("options") or {}).items()
                  if normalize_value(x) in _NONE_VALUES and str(x) not in named and _says_none_of(str(k), texts)]
        named += [str(x) for k, x in (v.get("options") or {}).items()
                  if normalize_value(x) in _YES_VALUES and str(x) not in named and _says_yes_of(str(k), texts)]
        if held:  # "1000 more pieces": the value that far from the held one is named
            named += [x for x in by_amount(variants[held[0]], v, texts) if x not in named]
        moved = _moves(variants[held[0]], v, comps, price) if held else 0
        if moved is None:
            continue  # against what the user asked ("bigger", "cheaper")
        if not moved and not any(normalize_value(x) not in no_wish for x in named):
            continue
        # a restated held value is no wish; a word said once names one option ("brown" for a brown frame is not
        # also a brown lens): each value counts once
        changed = list(dict.fromkeys(normalize_value(x) for x in named if normalize_value(x) not in no_wish))
        near = -_distance(variants[held[0]], v, comps) if held and step_of_one else 0.0  # "one size smaller"
        # "the cheapest": only the options said to keep count as kept ("the cheapest one of the same size")
        kept = sum(v_opts.get(k) == h_opts[k] for k in keep) if extreme else sum(
            normalize_value(x) in kept_values for x in values)
        scored.append(((len(changed) + moved, kept, near), vid))
    if not scored:
        return []
    first = max(score[0] for score, _ in scored)
    leading = [vid for score, vid in scored if score[0] == first]
    liked = preferred(variants, leading, texts) if len(leading) > 1 else []
    if liked:  # a stated order of preference ("prefer battery > USB > AC") decides among the best described
        return liked
    best = max(score for score, _ in scored)
    top = [vid for score, vid in scored if score == best]
    if extreme and price is not None and all(isinstance(variants[t].get("price"), (int, float)) for t in top):
        end = (min if price[0] < 0 else max)(float(variants[t]["price"]) for t in top)
        top = [t for t in top if float(variants[t]["price"]) == end]  # "the cheapest": one price, not any lower
    return top


#: Words that name a kind of payment method (``source``) in a customer's words.
#: The kinds' abbreviations ("refund it to my GC", "the CC") count only in capitals: "cc" is also a copy line.
PAYMENT_WORDS: dict[str, re.Pattern[str]] = {
    "credit_card": re.compile(r"\b(?i:(credit|debit) cards?|visa|mastercard|master card|amex|american express|"
                              r"discover)\b|\bCCs?\b"),
    "gift_card": re.compile(r"\b(?i:gift ?cards?)\b|\bGCs?\b"),
    "paypal": re.compile(r"\bpay ?pal\b", re.I),
}


#: The method an order was paid with, in a customer's words: "the original payment method", "the same card",
#: "the card I paid with", "what I paid for the order with".
_ORIGINAL_PAYMENT = re.compile(
    r"\b(?:original|same|usual)\s+(?:payment|method|card|account)\b|"
    r"\b(?:i|we)\s+(?:originally\s+)?(?:paid|bought|ordered|purchased|used)\b(?:\s+\w+){0,4}?\s+(?:with|on|by|using)\b|"
    r"\b(?:paid|bought|purchased)\s+(?:it|them|this|that|the\s+order|my\s+order)\s+with\b", re.I)


def says_original_payment(text: str) -> bool:
    """Whether a user text asks for the payment method the order was paid with (see ``_ORIGINAL_PAYMENT``)."""
    return bool(_ORIGINAL_PAYMENT.search(text))


def names_payment(texts: Iterable[str]) -> bool:
    """Whether the user's words name a payment method at all (a kind, or a card's last digits)."""
    return any(rx.search(t) for t in texts for rx in PAYMENT_WORDS.values()) or any(
        re.search(r"\b(ending|ends|last (four|4|digits))\b", t, re.I) for t in texts)


def described_payment_methods(methods: Mapping[str, Mapping[str, Any]], texts: Iterable[str]) -> list[str]:
    """The user's payment methods their words describe: named by id, by a card's last four digits, or by kind
    ("my gift card", "PayPal", "my visa") — every method of that kind (one: it is determined; several: ask
    which). A credit card's brand narrows the kind. Empty when the words describe none."""
    texts = list(texts)
    by_id = [pid for pid in methods if appears_in(pid, texts)]
    if by_id:
        return by_id
    by_digits = [pid for pid, m in methods.items() if m.get("last_four") and appears_in(str(m["last_four"]), texts)]
    if by_digits:
        return by_digits
    out: list[str] = []
    for source, rx in PAYMENT_WORDS.items():
        if not any(rx.search(t) for t in texts):
            continue
        kind = [pid for pid, m in methods.items() if m.get("source") == source]
        branded = [pid for pid in kind if methods[pid].get("brand") and appears_in(str(methods[pid]["brand"]), texts)]
        out += branded or kind
    return out


#: "the other card", "my other credit card", "the other payment method": a method told apart from the one just shown.
_OTHER_METHOD = re.compile(r"\b(?:the|my)\s+other\s+(?P<what>(?:credit\s+|debit\s+|gift\s+)?cards?|payment(?:\s+methods?)?|"
                           r"methods?)\b", re.I)
_CARD_SOURCES = {"credit": ("credit_card",), "debit": ("credit_card",), "gift": ("gift_card",)}


def other_payment_methods(methods: Mapping[str, Mapping[str, Any]], text: str, shown: str | None) -> list[str]:
    """The user's payment methods ``text`` calls "the other card" / "the other payment method" after a card showed
    ``shown``: every method but ``shown`` of the kind said (a card of ``shown``'s kind when it is a card, else a
    credit card; any kind for a payment method). Empty when the text says no such thing or ``shown`` is not theirs."""
    m = _OTHER_METHOD.search(text)
    if not m or not shown or shown not in methods:
        return []
    what = m.group("what").lower()
    if "card" in what:
        first = what.split()[0]
        held = str(methods[shown].get("source", ""))
        sources = _CARD_SOURCES.get(first) or ((held,) if held.endswith("_card") else ("credit_card",))
    else:
        sources = tuple({str(x.get("source", "")) for x in methods.values()})
    return [pid for pid, x in methods.items() if pid != shown and str(x.get("source", "")) in sources]
