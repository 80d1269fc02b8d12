"""A scripted, deterministic user for tau2-format tasks: built from the task and the task's database alone.

The user knows the task (``user_scenario.instructions`` and the expected actions of
``evaluation_criteria``) and reads descriptions of its own things from the database the
task runs on (``db.json``: ``users``, ``orders``, ``products``). It never sees the
assistant's tools, events or meta: only what a person reads (:class:`AssistantTurn`).

Rules, in the order they are tried on each assistant turn:

1. **escalation** (the assistant hands over to a person) → the session ends (``escalated``).
2. **a card** (an action offered for confirmation) → ``yes`` when the card's tool and
   arguments equal an expected write not done yet (that write is then done), else ``no``
   (counted in ``cards_refused``).
3. **asked who they are** → what the task's identity holds: the expected lookup's
   arguments (email, or first name, last name and zip), else the email or name and zip
   written in ``known_info``.
4. **asked about a product of the write's order the expected write leaves alone** ("which option of
   the water bottle?" when only the lamp is to change) → "Not the water bottle: only the desk lamp."
   (``not_wanted``; never a repeated ask: the question asked for something new).
5. **asked about an order, item, option, address, payment method or reason** → the
   facts of the next expected write not done yet that answer what was asked, as a
   customer would say them: the order id as on a receipt (``#W…``), an item by its
   product name and options (never its item id), the wanted variant by its options, an
   address in words, a payment method by its kind and last digits, a cancellation
   reason as the task states it. When everything it would say was already said in an
   earlier user turn of the session, the question is a ``repeated_ask``.
6. **anything else** while expected writes remain → the request of the next one restated
   (its verb and order id: what the opening says, never its other facts); after two
   restatements in a row with no progress the user gives up (``stuck``).
7. **anything else** when no write remains → ``done`` (the session ends).

At most ``max_turns`` user turns (``turn_cap``). Everything is a pure function of the
task, the database and the assistant's turns: same inputs, same conversation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.core.evaluation import AssistantTurn, opening
from pipelines.core.tau2_user import TaskUser, UserReply, asking, same_arguments

__all__ = ["AssistantTurn", "UserReply", "ScriptedUser", "intent_label", "opening_of", "INTENT_LABELS",
           "LOOKUP_ACTIONS", "WRITE_VERBS", "asking", "same_arguments"]

LOOKUP_ACTIONS = ("find_user_id_by_email", "find_user_id_by_name_zip")
#: tau2's write tools → the request in words (the label of intent accuracy, the restated request).
WRITE_VERBS: dict[str, tuple[str, str]] = {
    "cancel_pending_order": ("cancel", "cancel order {order_id}"),
    "modify_pending_order_address": ("modify address", "change the shipping address of order {order_id}"),
    "modify_user_address": ("modify address", "change my default address"),
    "modify_pending_order_items": ("modify items", "change items in order {order_id}"),
    "modify_pending_order_payment": ("modify payment", "change the payment method of order {order_id}"),
    "return_delivered_order_items": ("return", "return items from order {order_id}"),
    "exchange_delivered_order_items": ("exchange", "exchange items from order {order_id}"),
}
INTENT_LABELS = ("cancel", "modify address", "modify items", "modify payment", "return", "exchange", "status only")

_IDENTITY = re.compile(r"e-?mail|\b(your|full|first|last) name\b|\bname and zip\b|\byour zip\b|verif|identif|"
                       r"authenticat|who you are|your account", re.I)
_TOPICS: dict[str, re.Pattern[str]] = {
    "order": re.compile(r"\border(s| number| id)?\b", re.I),
    "item": re.compile(r"\b(items?|products?|which one|options?|sizes?|colou?rs?|variants?|versions?|models?)\b",
                       re.I),
    "address": re.compile(r"\baddress\b|\bship(ping)? to\b", re.I),
    "payment": re.compile(r"\b(payment|pay|card|paypal|gift card|refund (it )?to)\b", re.I),
    "reason": re.compile(r"\breason\b|\bwhy\b", re.I),
}
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
_NAME_ZIP = re.compile(r"\bYou are ([A-Z][a-z]+) ([A-Z][a-z]+)\b.*?\bzip ?code (\d{5})", re.S)


def intent_label(actions: Sequence[Mapping[str, Any]]) -> str:
    """The task's intent label from its first expected write (``status only`` when it has none)."""
    for a in actions:
        if a["name"] in WRITE_VERBS:
            return WRITE_VERBS[a["name"]][0]
    return "status only"


def opening_of(task: Mapping[str, Any], verbatim: bool = False) -> str:
    """Turn 1: the opening the openings suite sends."""
    return opening(task["user_scenario"]["instructions"]["reason_for_call"], verbatim)


def _words(options: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


@dataclass
class ScriptedUser(TaskUser):
    """One task's informed user (see module docstring)."""

    db: Mapping[str, Any] = field(kw_only=True)
    max_turns: int = 10
    kind: str = "informed"

    @property
    def write_tools(self) -> frozenset[str]:
        return frozenset(WRITE_VERBS)

    def opening(self) -> str:
        return self._say(opening_of(self.task, self.verbatim), "opening").text or ""

    # -- what the user knows, in words ------------------------------------------------------------

    def identity(self) -> str:
        for a in self.actions:
            args = a["arguments"]
            if a["name"] == "find_user_id_by_email":
                return f"My email is {args['email']}."
            if a["name"] == "find_user_id_by_name_zip":
                return f"I'm {args['first_name']} {args['last_name']}, zip code {args['zip']}."
        info = str(self.task["user_scenario"]["instructions"].get("known_info") or "")
        m = _EMAIL.search(info)
        if m:
            return f"My email is {m.group(0)}."
        m = _NAME_ZIP.search(info)
        if m:
            return f"I'm {m.group(1)} {m.group(2)}, zip code {m.group(3)}."
        return "I don't know how else to identify myself."

    def _order_item(self, order_id: str, item_id: str) -> str:
        order = (self.db.get("orders") or {}).get(order_id) or {}
        item = next((i for i in order.get("items", []) if i.get("item_id") == item_id), None)
        if item is None:
            return "an item I can't describe"
        return f"the {item['name']} ({_words(item.get('options') or {})})"

    def _variant(self, order_id: str, old_id: str, new_id: str) -> str:
        order = (self.db.get("orders") or {}).get(order_id) or {}
        item = next((i for i in order.get("items", []) if i.get("item_id") == old_id), None)
        product = (self.db.get("products") or {}).get((item or {}).get("product_id", ""), {})
        variant = (product.get("variants") or {}).get(new_id)
        if variant is None:
            return "another version I can't describe"
        return _words(variant.get("options") or {})

    def _payment(self, user_id: str | None, pm_id: str) -> str:
        user = (self.db.get("users") or {}).get(user_id or "") or {}
        pm = (user.get("payment_methods") or {}).get(pm_id)
        if pm is None:
            return "a payment method I can't describe"
        if pm.get("source") == "credit_card":
            return f"my {pm.get('brand', '')} credit card ending in {pm.get('last_four', '')}".replace("  ", " ")
        if pm.get("source") == "gift_card":
            return "my gift card"
        return f"my {pm.get('source', 'payment method').replace('_', ' ')} account".replace("paypal", "PayPal")

    def _owner(self, args: Mapping[str, Any]) -> str | None:
        if args.get("user_id"):
            return str(args["user_id"])
        order = (self.db.get("orders") or {}).get(str(args.get("order_id", ""))) or {}
        return order.get("user_id")

    def facts(self, action: Mapping[str, Any], topics: set[str]) -> list[str]:
        """The sentences answering ``topics`` about one expected write (an empty list: nothing to say)."""
        a, out = action["arguments"], []
        oid = str(a.get("order_id", ""))
        if "order" in topics and oid:
            out.append(f"It's order {oid}.")
        if "item" in topics and a.get("item_ids"):
            olds = [self._order_item(oid, i) for i in a["item_ids"]]
            if a.get("new_item_ids"):
                pairs = [f"{o} to {self._variant(oid, i, n)}" for o, i, n
                         in zip(olds, a["item_ids"], a["new_item_ids"], strict=False)]
                out.append("I'd like to change " + "; and ".join(pairs) + ".")
            else:
                out.append("It's " + " and ".join(olds) + ".")
        if "address" in topics and a.get("address1"):
            line = ", ".join(str(a[k]) for k in ("address1", "address2", "city") if a.get(k))
            out.append(f"The address is {line}, {a.get('state', '')} {a.get('zip', '')}, {a.get('country', '')}.")
        if "payment" in topics and a.get("payment_method_id"):
            out.append(f"Please use {self._payment(self._owner(a), str(a['payment_method_id']))}.")
        if "reason" in topics and a.get("reason"):
            out.append(f"The reason is: {a['reason']}.")
        return out

    def request(self, action: Mapping[str, Any]) -> str:
        verb = WRITE_VERBS[action["name"]][1].format(order_id=action["arguments"].get("order_id", ""))
        return f"I'd like to {verb}."

    # -- one reply ---------------------------------------------------------------------------------

    def _reply(self, asked: str, turn: AssistantTurn) -> UserReply:
        """The reply to what the turn asks, or tells (see module docstring)."""
        if asked and _IDENTITY.search(asked):
            text = self.identity()
            repeated = any(text in s for s in self.said)
            self.repeated_asks += repeated
            return self._say(text, "identity", repeated)
        action = self.next_write()
        topics = {t for t, rx in _TOPICS.items() if asked and rx.search(asked)}
        unwanted = self._unwanted(action, asked) if action is not None else []
        if unwanted:  # asked about an item its request leaves alone: it says so (nothing repeated)
            keep = self._wanted_names(action)
            text = f"Not the {' or the '.join(unwanted)}" + (f": only the {' and the '.join(keep)}." if keep else ".")
            self.restated = 0
            return self._say(text, "not_wanted")
        if action is not None and topics:
            lines = self.facts(action, topics)
            if lines:
                values = self._values(action, topics)
                repeated = bool(values) and all(any(v.casefold() in s.casefold() for s in self.said) for v in values)
                self.repeated_asks += repeated
                self.restated = 0
                return self._say(" ".join(lines), "facts", repeated)
        if action is None:
            return self._say(None, "done")
        if self.restated >= 2:
            return self._say(None, "stuck")
        self.restated += 1
        return self._say(self.request(action), "restate")

    def _wanted_names(self, action: Mapping[str, Any]) -> list[str]:
        """The product names of the items the expected write changes, in its order."""
        order = (self.db.get("orders") or {}).get(str(action["arguments"].get("order_id", ""))) or {}
        ids = [str(i) for i in action["arguments"].get("item_ids") or []]
        names = [i["name"] for iid in ids for i in order.get("items", []) if i.get("item_id") == iid]
        return list(dict.fromkeys(names))

    def _unwanted(self, action: Mapping[str, Any], asked: str | None) -> list[str]:
        """Products of the write's order the question names that the expected write does not change ("which
        option of the water bottle would you like?" when only the lamp is to change)."""
        from .candidates import names_product

        if not asked or not action["arguments"].get("item_ids"):
            return []
        order = (self.db.get("orders") or {}).get(str(action["arguments"].get("order_id", ""))) or {}
        keep = set(self._wanted_names(action))
        names = dict.fromkeys(i["name"] for i in order.get("items", []) if i.get("name"))
        return [n for n in names if n not in keep and names_product(n, [asked])]

    def _values(self, action: Mapping[str, Any], topics: set[str]) -> list[str]:
        """The plain facts a topic answer carries (to tell whether they were all said before)."""
        a = action["arguments"]
        out: list[str] = []
        if "order" in topics and a.get("order_id"):
            out.append(str(a["order_id"]))
        if "address" in topics and a.get("address1"):
            out.append(str(a["address1"]))
        if "reason" in topics and a.get("reason"):
            out.append(str(a["reason"]))
        if "payment" in topics and a.get("payment_method_id"):
            out.append(self._payment(self._owner(a), str(a["payment_method_id"])))
        if "item" in topics and a.get("item_ids"):
            out += [self._order_item(str(a.get("order_id", "")), i) for i in a["item_ids"]]
        return out


# -- the instructed user's vocabulary (pipelines.core.tau2_user) -----------------------------------------------

_PAYMENT_FACT = re.compile(r"\b(credit|debit) cards?\b|\b(visa|mastercard|amex|american express|discover)\b|"
                           r"\bgift ?cards?\b|\bpay ?pal\b|\b(original|same) (payment|method|card)\b|"
                           r"\bpayment method\b|\brefund\w* (?:to|on|in)\b|\bpay (?:for |the )?(?:difference|with)\b",
                           re.I)
_ADDRESS_FACT = re.compile(r"\b\d{1,6}\s+(?:[A-Za-z0-9'.-]+\s+){0,3}(?:street|st|avenue|ave|road|rd|lane|ln|drive|"
                           r"dr|boulevard|blvd|way|court|ct|place|pl|terrace|parkway|highway|hwy|circle)\b|"
                           r"\baddress\b|\blives? in\b|\bliving in\b", re.I)
_REASON_FACT = re.compile(r"\b(because|since|no longer|not needed|don'?t need|by mistake|mistaken|accident\w*)\b",
                          re.I)
_ORDER_ID = re.compile(r"#?\bW\d{6,8}\b")
UNKNOWN_LINES: dict[str, str] = {
    "order": "I don't know the order number.",
    "payment": "I'd like to use the payment method I paid for the order with.",
    "reason": "I'd rather not say.",
    "address": "I don't have another address to give.",
    "item": "I'm not sure which one.",
}


def _product_names(db: Mapping[str, Any]) -> list[str]:
    return sorted({str(p.get("name")) for p in (db.get("products") or {}).values() if p.get("name")}, key=len,
                  reverse=True)


def _names_pattern(names: Sequence[str]) -> re.Pattern[str]:
    """A product named as a customer writes it: its whole name (hyphens, spaces or nothing between its words, a
    plural), or its last word of four letters or more."""
    alts: set[str] = set()
    for name in names:
        toks = [t for t in re.split(r"[\s\-_/]+", name.lower()) if t]
        if not toks:
            continue
        alts.add(r"[\s\-]?".join(map(re.escape, toks)) + r"(?:e?s)?")
        if len(toks) > 1 and len(toks[-1]) >= 4:
            alts.add(re.escape(toks[-1]) + r"(?:e?s)?")
    body = "|".join(sorted(alts, key=len, reverse=True)) or r"(?!x)x"
    return re.compile(rf"\b(?:{body})\b|\b(?:items?|everything|all (?:the |my )?(?:things|items))\b", re.I)


def instructed_vocabulary(db: Mapping[str, Any]) -> Any:
    """The support pack's words for the instructed user: topics of its questions and facts, the order id's shape,
    what the user says when its instructions hold nothing, and the names of a write's records."""
    from pipelines.core.tau2_user import InstructedVocabulary

    orders = db.get("orders") or {}
    products = db.get("products") or {}

    def names(args: Mapping[str, Any]) -> dict[str, list[str]]:
        order = orders.get(str(args.get("order_id", ""))) or {}
        by_item = {str(i.get("item_id")): str(i.get("name")) for i in order.get("items", [])}
        out: dict[str, list[str]] = {}
        if isinstance(args.get("item_ids"), list):
            out["item_ids"] = [by_item.get(str(i), "item") for i in args["item_ids"]]
        if isinstance(args.get("new_item_ids"), list):
            variant_of = {vid: str(p.get("name")) for p in products.values() for vid in (p.get("variants") or {})}
            out["new_item_ids"] = [variant_of.get(str(i), "item") for i in args["new_item_ids"]]
        return out

    return InstructedVocabulary(
        write_tools=frozenset(WRITE_VERBS), asks=_TOPICS,
        facts={"item": _names_pattern(_product_names(db)), "payment": _PAYMENT_FACT, "address": _ADDRESS_FACT,
               "reason": _REASON_FACT, "order": _ORDER_ID},
        ids={"order": _ORDER_ID}, id_line={"order": "It's order {id}."}, unknown=UNKNOWN_LINES,
        identity=_IDENTITY, identity_order=("email", "name_zip", "user_id"), names=names)
