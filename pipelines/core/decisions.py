"""What the orchestrator may decide this step: the offer, its decoding schema, and the parser.

One step = one JSON object whose ``"decision"`` field discriminates::

    {"decision": "<read tool>", "args": {...}}             a typed read-tool call
    {"decision": "respond"}                                 answer from what is known
    {"decision": "clarify", "about": "<kind>"}              ask for what is missing (the pack's question)
    {"decision": "clarify", "question": "..."}              ... or in the model's words (``clarify_free``)
    {"decision": "select", "entity_id": "<id>" | null}      the user's record meant (null: ask which, among 2+)
    {"decision": "action", "card_id": "<card>", "params": {...}}   propose a change
    {"decision": "escalate", "reason_code": "<code>"}       hand over to a person

:func:`build_offer` reads the domain's gating and the session's grounded
candidates: a read tool is offered when every required argument has a candidate
of its kind (each argument an enum of them); a write card is offered when the
perceived intent may offer it and every required parameter has a candidate;
the kinds a card lacks become what ``clarify`` may ask ``about``. So an invented
argument, an unrequested card or a free-text question cannot be decoded at all.
:func:`decision_schema` is the union of the offer; :func:`parse_decision`
reads one step back and re-checks it against the offer (the backend never trusts
decoding) — or, for an ``open`` offer (the ``dr`` rung, whose mid-guard judges every
decision), by its shape alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pipelines.core.domain import Domain, TurnFacts
from pipelines.grounding import constrain_args, split_path
from pipelines.schema_bounds import bound_schema

__all__ = ["REASON_CODES", "TERMINALS", "MAX_QUESTION_CHARS", "clean_schema", "Offer", "build_offer", "transfer_args",
           "owned_records", "decision_schema", "parse_decision", "DecisionError"]

REASON_CODES: tuple[str, ...] = (
    "user_requested_human", "safety_sensitive", "out_of_scope", "policy_exception", "technical_issue",
)
#: The decisions that end a step loop (any other decision names a read tool).
TERMINALS: tuple[str, ...] = ("respond", "clarify", "select", "action", "escalate")
MAX_QUESTION_CHARS = 160


class DecisionError(ValueError):
    """The output is not one offered decision (``detail`` says why)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


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
    clarify_free: bool = False
    """``clarify`` carries a question in the model's words (bounded) instead of a kind to ask ``about``."""
    open: bool = False
    """Decisions are parsed by their shape alone: a tool or card not offered, or an entity not selectable,
    is left to the caller's mid-guard (the ``dr`` rung's second guardrail ring)."""

    def proposal(self) -> Offer:
        """Φ's ``propose``: the change was asked for and its entity is known, so the only decision left
        is filling the intent's card from the grounded enums (the user confirms or declines it next)."""
        return Offer(tools={}, cards=dict(self.cards), clarify=[] if self.cards else list(self.clarify),
                     select_ids=[], respond=False, select=False, escalate=not self.cards)

    def summary(self) -> dict[str, Any]:
        """What was offered, by name (logged with each step; enough to re-parse the step's output)."""
        return {"tools": sorted(self.tools), "cards": sorted(self.cards), "clarify": list(self.clarify),
                "select": list(self.select_ids), "respond": self.respond, "select_allowed": self.select,
                "escalate": self.escalate, "clarify_free": self.clarify_free, "open": self.open}

    @classmethod
    def of_summary(cls, summary: dict[str, Any]) -> Offer:
        """The offer a logged :meth:`summary` describes (enough to re-parse a step's output)."""
        return cls(tools={t: {} for t in summary.get("tools", [])},
                   cards={c: (None, {}) for c in summary.get("cards", [])},
                   clarify=list(summary.get("clarify", [])), select_ids=list(summary.get("select", [])),
                   respond=bool(summary.get("respond", True)), select=bool(summary.get("select_allowed", True)),
                   escalate=bool(summary.get("escalate", True)), clarify_free=bool(summary.get("clarify_free")),
                   open=bool(summary.get("open")))


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


def transfer_args(domain: Domain, summary: str, reason_code: str) -> dict[str, Any]:
    """The hand-over tool's arguments: the summary, and the pack's own reason code where the tool takes one (the
    protocol's ``transfer_tool`` may be a tool with a summary alone, as tau2-airline's is)."""
    args: dict[str, Any] = {"summary": summary[:200] or "user asked for help"}
    tool = domain.registry.tools.get(domain.transfer_tool or "")
    if tool is None or "reason_code" in (tool.args_schema().get("properties") or {}):
        args["reason_code"] = domain.transfer_reasons.get(reason_code, "other")
    return args


def owned_records(facts: TurnFacts, kind: str | None) -> list[str]:
    """The values of ``kind`` observed in the verified user's own records, in the order seen (the selectable
    entities: the pack's ``entity_kind``, e.g. the user's orders)."""
    if not kind:
        return []
    cands = facts.candidates
    return [i for i in cands.of(kind) if cands.source_of(kind, i) == "record"]


def build_offer(domain: Domain, facts: TurnFacts, *, intent: str, sub_intent: str) -> Offer:
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
        # a field of a list of objects ("flights[].flight_number") is grounded as its own enum, as a plain argument is
        kinds = {p: k for p, k in domain.arg_kinds(card.tool).items() if split_path(p)[0] in props}
        schema = constrain_args(base, kinds, cands, optional_empty=domain.optional_empty(card.tool))
        if schema is None:
            missing += [k for p, k in kinds.items() if p not in domain.optional_empty(card.tool) and not cands.has(k)]
            continue
        offer.cards[card.id] = (card, bound_schema(schema))
    topics = [domain.clarify_key(k) for k in missing]
    # a clarify asks for exactly what a card lacks; "details" only when no card lacks anything namable — and what
    # the pack needs first (who the user is, before anything of their account) before anything else
    first = domain.first_question(facts)
    offer.clarify = [first] if first else (list(dict.fromkeys([t for t in topics if t])) or ["details"])
    offer.select_ids = owned_records(facts, domain.entity_kind)
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
    if offer.clarify_free:
        branches.append(_obj({"decision": {"const": "clarify"},
                              "question": {"type": "string", "maxLength": MAX_QUESTION_CHARS}}))
    elif offer.clarify:
        branches.append(_obj({"decision": {"const": "clarify"}, "about": {"enum": list(offer.clarify)}}))
    if offer.select and offer.select_ids:  # null asks which one: only where there are several to choose from
        entity: dict[str, Any] = ({"anyOf": [{"enum": list(offer.select_ids)}, {"type": "null"}]}
                                  if len(offer.select_ids) > 1 else {"enum": list(offer.select_ids)})
        branches.append(_obj({"decision": {"const": "select"}, "entity_id": entity}))
    if offer.escalate:
        branches.append(_obj({"decision": {"const": "escalate"}, "reason_code": {"enum": list(REASON_CODES)}}))
    return {"anyOf": branches}


#: The fields of each decision besides ``decision`` (a read tool's are "tool"'s); ``args``, ``params`` and a
#: clarify's ``about`` may be left out.
_FIELDS: dict[str, tuple[str, ...]] = {"tool": ("args",), "respond": (), "clarify": (), "select": ("entity_id",),
                                       "action": ("card_id", "params"), "escalate": ("reason_code",)}
_OPTIONAL = frozenset({"args", "params"})


def parse_decision(raw: str, offer: Offer) -> dict[str, Any]:
    """One decision as a dict, re-checked against the offer; raises :class:`DecisionError`."""
    text = raw.strip()
    start = text.find("{")
    if start < 0:
        raise DecisionError("no JSON object in the output")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise DecisionError(f"invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("decision"), str):
        raise DecisionError("the object has no string 'decision'")
    kind = data["decision"]
    fields = _FIELDS.get(kind, _FIELDS["tool"])
    extra = sorted(set(data) - {"decision", *fields} - ({"about", "question"} if kind == "clarify" else set()))
    if extra:
        raise DecisionError(f"{kind}: unexpected {', '.join(extra)}")
    missing = [f for f in fields if f not in data and f not in _OPTIONAL]
    if missing:
        raise DecisionError(f"{kind}: missing {', '.join(missing)}")
    if kind in offer.tools or (offer.open and kind not in TERMINALS):
        if not isinstance(data.get("args", {}), dict):
            raise DecisionError(f"{kind}: args must be an object")
        return {"decision": kind, "args": dict(data.get("args", {}))}
    if kind == "respond" and offer.respond:
        return {"decision": "respond"}
    if kind == "clarify" and offer.clarify_free:
        question = data.get("question")
        if not isinstance(question, str) or not question.strip():
            raise DecisionError("clarify: the question is empty")
        return {"decision": "clarify", "question": question}
    if kind == "clarify" and offer.clarify:
        about = data.get("about")
        return {"decision": "clarify", "about": about if about in offer.clarify else "details"}
    if kind == "select" and offer.select:
        eid = data.get("entity_id")
        if eid is not None and not isinstance(eid, str):
            raise DecisionError("select: entity_id must be a string or null")
        if eid is not None and eid not in offer.select_ids and not offer.open:
            raise DecisionError(f"select: {eid!r} is not selectable")
        if eid is None and len(offer.select_ids) < 2 and not offer.open:
            raise DecisionError("select: there is nothing to choose among")
        return {"decision": "select", "entity_id": eid}
    if kind == "action":
        cid = data.get("card_id")
        if not isinstance(cid, str) or not isinstance(data.get("params", {}), dict):
            raise DecisionError("action: card_id must be a string and params an object")
        if cid not in offer.cards and not offer.open:
            raise DecisionError(f"action: card {cid!r} is not offered")
        return {"decision": "action", "card_id": cid, "params": dict(data.get("params", {}))}
    if kind == "escalate" and offer.escalate:
        code = data.get("reason_code")
        if code not in REASON_CODES:
            raise DecisionError(f"escalate: unknown reason code {code!r}")
        return {"decision": "escalate", "reason_code": code}
    raise DecisionError(f"{kind!r} is not offered")
