"""What the orchestrator may decide this step: the offer, its decoding schema, and the parser.

:func:`build_offer` reads the domain's gating and the session's grounded
candidates: a read tool is offered when every required argument has a candidate
of its kind (each argument an enum of them); a write card is offered when the
perceived intent may offer it and every required parameter has a candidate;
the kinds a card lacks become what ``clarify`` may ask ``about``. So an invented
argument, an unrequested card or a free-text question cannot be decoded at all.
:func:`decision_schema` is the union of the offer; :func:`parse_decision`
reads one step back and re-checks membership (the backend never trusts decoding).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pipelines.domain import TurnFacts
from pipelines.grounding import constrain_args
from pipelines.schema_bounds import bound_schema

__all__ = ["REASON_CODES", "clean_schema", "Offer", "build_offer", "record_orders", "decision_schema", "parse_decision",
           "DecisionError"]

REASON_CODES: tuple[str, ...] = (
    "user_requested_human", "safety_sensitive", "out_of_scope", "policy_exception", "technical_issue",
)


class DecisionError(ValueError):
    """The output is not one offered decision."""


@dataclass
class Offer:
    """Everything the orchestrator may choose this step."""

    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    cards: dict[str, tuple[Any, dict[str, Any]]] = field(default_factory=dict)
    clarify: list[str] = field(default_factory=list)
    select_ids: list[str] = field(default_factory=list)
    respond: bool = True
    select: bool = True
    escalate: bool = True

    def proposal(self) -> Offer:
        """Φ's ``propose``: the change was asked for and its entity is known, so the only decision left
        is filling the intent's card from the grounded enums (the user confirms or declines it next)."""
        return Offer(tools={}, cards=dict(self.cards), clarify=[] if self.cards else list(self.clarify),
                     select_ids=[], respond=False, select=False, escalate=not self.cards)

    def summary(self) -> dict[str, Any]:
        """What was offered, by name (logged with each step; enough to re-parse the step's output)."""
        return {"tools": sorted(self.tools), "cards": sorted(self.cards), "clarify": list(self.clarify),
                "select": list(self.select_ids), "respond": self.respond, "select_allowed": self.select,
                "escalate": self.escalate}


_DROP = frozenset(
    {"title", "description", "default", "examples", "pattern", "minLength", "maxLength", "minimum",
     "maximum", "exclusiveMinimum", "exclusiveMaximum", "format", "minItems", "maxItems", "multipleOf"}
)


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$ref``/``$defs`` and drop annotation and unsupported keywords."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items() if k not in _DROP and k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def record_orders(facts: TurnFacts) -> list[str]:
    """The orders observed in the verified user's own records, in the order seen (the selectable ones)."""
    cands = facts.candidates
    return [i for i in cands.of("order_id") if cands.source_of("order_id", i) == "record"]


def build_offer(domain: Any, facts: TurnFacts, *, intent: str, sub_intent: str) -> Offer:
    """The tools, cards, clarify topics and selectable entities offered now."""
    offer = Offer()
    cands = facts.candidates
    reg = domain.registry
    for name in domain.read_tools(facts):
        if name not in reg.tools:
            continue
        schema = constrain_args(clean_schema(reg.get(name).args_schema()), domain.arg_kinds(name), cands,
                                optional_empty=domain.optional_empty(name))
        if schema is not None:
            offer.tools[name] = bound_schema(schema)
    missing: list[str] = []
    for card in domain.cards_for(intent, sub_intent, facts):
        full = clean_schema(reg.get(card.tool).args_schema())
        props = {p: full["properties"][p] for p in card.required_params}
        base = {"type": "object", "properties": props, "required": list(card.required_params)}
        kinds = {p: k for p, k in domain.arg_kinds(card.tool).items() if p in props}
        schema = constrain_args(base, kinds, cands, optional_empty=domain.optional_empty(card.tool))
        if schema is None:
            missing += [k for p, k in kinds.items() if p not in domain.optional_empty(card.tool) and not cands.has(k)]
            continue
        offer.cards[card.id] = (card, bound_schema(schema))
    topics = [domain.clarify_key(k) for k in missing]
    offer.clarify = list(dict.fromkeys([t for t in topics if t] + ["details"]))
    offer.select_ids = record_orders(facts)
    return offer


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def decision_schema(offer: Offer) -> dict[str, Any]:
    """The JSON schema of one step: ``anyOf`` the offered decisions."""
    branches = []
    for cid, (_, schema) in sorted(offer.cards.items()):
        branches.append(_obj({"decision": {"const": "action"}, "card_id": {"const": cid}, "params": schema}))
    branches += [_obj({"decision": {"const": n}, "args": s}) for n, s in sorted(offer.tools.items())]
    if offer.respond:
        branches.append(_obj({"decision": {"const": "respond"}}))
    if offer.clarify:
        branches.append(_obj({"decision": {"const": "clarify"}, "about": {"enum": list(offer.clarify)}}))
    if offer.select:
        entity: dict[str, Any] = ({"anyOf": [{"enum": list(offer.select_ids)}, {"type": "null"}]}
                                  if offer.select_ids else {"type": "null"})
        branches.append(_obj({"decision": {"const": "select"}, "entity_id": entity}))
    if offer.escalate:
        branches.append(_obj({"decision": {"const": "escalate"}, "reason_code": {"enum": list(REASON_CODES)}}))
    return {"anyOf": branches}


def parse_decision(raw: str, offer: Offer) -> dict[str, Any]:
    """One decision as a dict, re-checked against the offer; raises :class:`DecisionError`."""
    text = raw.strip()
    start = text.find("{")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:]) if start >= 0 else (None, 0)
    except json.JSONDecodeError as exc:
        raise DecisionError(f"invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("decision"), str):
        raise DecisionError("no decision")
    kind = data["decision"]
    if kind in offer.tools:
        if not isinstance(data.get("args", {}), dict):
            raise DecisionError(f"{kind}: args must be an object")
        return {"decision": kind, "args": dict(data.get("args", {}))}
    if kind == "respond" and offer.respond:
        return {"decision": "respond"}
    if kind == "clarify" and offer.clarify:
        about = data.get("about")
        return {"decision": "clarify", "about": about if about in offer.clarify else "details"}
    if kind == "select" and offer.select:
        eid = data.get("entity_id")
        if eid is not None and eid not in offer.select_ids:
            raise DecisionError(f"select: {eid!r} is not selectable")
        return {"decision": "select", "entity_id": eid}
    if kind == "action":
        cid = data.get("card_id")
        if cid not in offer.cards or not isinstance(data.get("params"), dict):
            raise DecisionError(f"action: card {cid!r} is not offered")
        return {"decision": "action", "card_id": cid, "params": dict(data["params"])}
    if kind == "escalate" and offer.escalate:
        code = data.get("reason_code")
        if code not in REASON_CODES:
            raise DecisionError(f"escalate: unknown reason code {code!r}")
        return {"decision": "escalate", "reason_code": code}
    raise DecisionError(f"{kind!r} is not offered")
