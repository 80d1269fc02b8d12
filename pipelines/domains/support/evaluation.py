"""What the support pack gives ``tandem eval``: the multi-turn ``flows`` suite, its order statuses, and the
scripted user that plays whole tau2-retail tasks (:mod:`.tau2_user`).

``flows`` — four sessions, seven turns, on the seeded synthetic world (seed 7: the fixture users alex and
priya); each turn carries what must hold after it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.core.evaluation import Case, EntityLookup, EvalTurn, PackEvaluation, SuiteOptions

from .labels import CARD_INTENTS
from .tau2_user import WRITE_VERBS, ScriptedUser, instructed_vocabulary, intent_label

__all__ = ["ALEX", "PRIYA", "FLOWS", "CARD_RULES", "flow_suite", "SupportEvaluation"]

ALEX, PRIYA = "alex_rivera_1001", "priya_shah_2002"

FLOWS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    ("cancel", [
        ("Hi, my email is alex.rivera@example.com.", {"kind": "authenticate", "user_id": ALEX}),
        ("Please cancel order #W1000001, I no longer need it.",
         {"kind": "action_card", "card_id": "card.cancel_order", "params": {"order_id": "#W1000001"}}),
        ("yes", {"kind": "executed", "card_id": "card.cancel_order", "entity": "#W1000001",
                 "status": "cancelled"}),
    ]),
    ("ambiguous", [
        ("My email is priya.shah@example.com", {"kind": "authenticate", "user_id": PRIYA}),
        ("I want to return my order.", {"kind": "clarify"}),
    ]),
    ("human", [
        ("I want to talk to a human agent please.", {"kind": "escalate", "reason_code": "user_requested_human"}),
    ]),
    ("noauth", [
        ("Cancel order #W1000002 now.", {"kind": "no_write", "entity": "#W1000002", "status": "delivered"}),
    ]),
]


_CHANGE = r"(?:change|modify|update|switch|edit|correct|fix|use|move|upgrad|downgrad)\w*"
#: The eval's own judge of a requested card, held out of the pipeline's cues: card id → (family, the
#: lexical rule one of the user's texts of the open request must match).
CARD_RULES: dict[str, tuple[str, re.Pattern[str]]] = {
    "card.cancel_order": ("cancel", re.compile(
        r"\b(cancel\w*|call(?:ing)? off|no longer (?:need|want)|don'?t (?:need|want) (?:it|this|that|the order)"
        r"(?: anymore)?)\b", re.I)),
    "card.return_items": ("return", re.compile(
        r"\b(return(?:ing|ed|s)?\b(?!\s+polic)|send\w* (?:it|them|this|these|\w+) back|refund\w*)", re.I)),
    "card.exchange_items": ("exchange", re.compile(
        r"\b(exchang\w*|swap\w*|replac\w*|different (?:size|colou?r|one|version|model))\b", re.I)),
    "card.modify_items": ("modify_items", re.compile(
        rf"\b({_CHANGE}|swap\w*)\b.{{0,60}}\b(items?|sizes?|colou?rs?|options?|variants?|models?|versions?)\b", re.I)),
    "card.modify_address": ("address", re.compile(
        rf"\b{_CHANGE}\b.{{0,60}}\baddress\b|\baddress\b.{{0,40}}\b(change|update|wrong|moved|new)\b|"
        r"\bship (?:it|them|this|that|the order|my order) to\b|\bnew address\b", re.I)),
    "card.modify_user_address": ("address", re.compile(
        rf"\b{_CHANGE}\b.{{0,60}}\baddress\b|\baddress\b.{{0,40}}\b(change|update|wrong|moved|new)\b|"
        r"\bnew address\b|\bi(?:'ve| have)? moved\b", re.I)),
    "card.modify_payment": ("payment", re.compile(
        rf"\b{_CHANGE}\b.{{0,60}}\b(payment|pay|card|paypal|gift card|credit)\b|"
        r"\bpay (?:with|by|using)\b", re.I)),
}


def flow_suite(options: SuiteOptions | None = None) -> list[Case]:
    """The four support flows (seven turns)."""
    return [Case("flows", name, tuple(EvalTurn(text, expect=expect) for text, expect in turns))
            for name, turns in FLOWS]


class SupportEvaluation(PackEvaluation):
    """The support pack's evaluation hooks (see module docstring)."""

    def suites(self) -> Mapping[str, Callable[[SuiteOptions], list[Case]]]:
        return {"flows": flow_suite}

    def card_rules(self) -> Mapping[str, tuple[str, re.Pattern[str]]]:
        return CARD_RULES

    def entity_status(self, lookup: EntityLookup, entity: str) -> str | None:
        found = lookup("order", entity)
        return None if found is None else str(found.get("status"))

    def scripted_user(self, task: Mapping[str, Any], db: Mapping[str, Any], card_tools: Mapping[str, str],
                      max_turns: int, kind: str = "instructed") -> Any:
        if kind == "informed":
            return ScriptedUser(task, card_tools, db=db, max_turns=max_turns)
        from pipelines.core.tau2_user import InstructedUser

        return InstructedUser(task, card_tools, vocab=instructed_vocabulary(db), max_turns=max_turns)

    def oracle_labels(self, tool: str | None) -> tuple[str, str]:
        """The (intent, sub-intent) whose card runs ``tool``; a question about an order when none."""
        from .cards import ACTION_CARDS

        card = next((c.id for c in ACTION_CARDS if c.tool == tool and c.kind == "write"), None)
        for key, cards in CARD_INTENTS.items():
            if card in cards:
                intent, _, sub = key.partition("/")
                return intent, sub or {"cancel": "order"}.get(intent, "items")
        return "order_status", "status"

    def said_as(self, value: str) -> list[str]:
        from .candidates import said_as

        return said_as("state", value)

    def readback_terms(self, card_id: str, params: Mapping[str, Any], db: Mapping[str, Any]) -> dict[str, list[str]]:
        """What a card's read-back must name, per argument it changes: each item by its product name, each new
        item by its option values, the address line by line, the payment method by its kind (a card by its last
        four digits), the reason, the order."""
        orders, products, users = db.get("orders") or {}, db.get("products") or {}, db.get("users") or {}
        order = orders.get(str(params.get("order_id", ""))) or {}
        out: dict[str, list[str]] = {}
        if params.get("order_id"):
            out["order_id"] = [str(params["order_id"])]
        by_item = {str(i.get("item_id")): str(i.get("name")) for i in order.get("items", [])}
        if isinstance(params.get("item_ids"), list):
            out["item_ids"] = [by_item.get(str(i), str(i)) for i in params["item_ids"]]
        if isinstance(params.get("new_item_ids"), list):
            options = {vid: v.get("options") or {} for p in products.values()
                       for vid, v in (p.get("variants") or {}).items()}
            out["new_item_ids"] = [str(x) for i in params["new_item_ids"] for x in options.get(str(i), {}).values()]
        address = [str(params[k]) for k in ("address1", "address2", "city", "state", "zip", "country")
                   if params.get(k)]
        if address:
            out["address"] = address
        if params.get("payment_method_id"):
            owner = str(order.get("user_id") or params.get("user_id") or "")
            pm = ((users.get(owner) or {}).get("payment_methods") or {}).get(str(params["payment_method_id"])) or {}
            source = str(pm.get("source") or "")
            out["payment_method_id"] = ([str(pm.get("last_four"))] if source == "credit_card" and pm.get("last_four")
                                        else [{"gift_card": "gift card", "paypal": "PayPal"}.get(source, source)])
        if params.get("reason"):
            out["reason"] = [str(params["reason"])]
        return {k: v for k, v in out.items() if v}

    def intent_label(self, actions: Sequence[Mapping[str, Any]]) -> str | None:
        return intent_label(actions)

    def label_tools(self, label: str) -> set[str]:
        return {t for t, (lab, _) in WRITE_VERBS.items() if lab == label}
