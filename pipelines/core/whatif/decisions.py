"""A turn's typed decisions, read from its events, and how two readings of one turn differ.

::

    guard        the pre-guard's verdict (blocked, route, confirmation, the rules that fired), the routes
                 taken before W1 and the mid-guard's blocks
    intent       W1's intent and sub-intent
    phi          every Φ lookup: outcome, the tool calls dispatched, ``then`` (and the snapshot keys it read)
    offer        per orchestrator step, what was offered: tools, cards, clarify topics, selectable records,
                 and (for a re-run, whose decoding schemas are seen) the grounded candidates per argument
    action       per step, the decision taken (a read, respond, clarify, select, action, escalate)
    card         the card shown with its arguments, the write executed, the refusals (eligibility)
    clarify      the question asked and its options
    escalation   the reason code of a hand-over
    path         the turn's path, its fallback trigger, its status and error
    paragraphs   W2: the conflicts and their tiers, the paragraph plan, the Ψ rules that fired
    guidance     W3: the tip picked and the branch table's version
    gate         the sentence gate's refusals: stage and violation kinds per withheld sentence

:func:`decisions_of` reads them from one turn's events (logged or re-run: the same events); every value is
plain JSON, compared canonically by :func:`changed_kinds`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["KINDS", "decisions_of", "changed_kinds", "refusals", "schema_candidates", "without_candidates"]

KINDS: tuple[str, ...] = ("guard", "intent", "phi", "offer", "action", "card", "clarify", "escalation", "path",
                          "paragraphs", "guidance", "gate")


def _of(events: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [e for e in events if e.get("kind") == kind]


def _guard(events: Sequence[Mapping[str, Any]], p: str) -> dict[str, Any]:
    pre = next(iter(_of(events, f"{p}.pre_guard")), None)
    verdict = None if pre is None else {
        "blocked": bool(pre.get("blocked")), "route": pre.get("route"), "confirmation": pre.get("confirmation"),
        "hits": sorted(f"{h.get('rule_id')}:{h.get('action')}" for h in pre.get("hits") or [])}
    return {"pre": verdict,
            "routes": [{"route": e.get("route"), "reason": e.get("reason_code")} for e in _of(events, f"{p}.route")],
            "mid": [{"step": e.get("step"), "decision": e.get("decision"), "violation": e.get("violation")}
                    for e in _of(events, f"{p}.guard")]}


def _card(events: Sequence[Mapping[str, Any]], p: str, contract: Mapping[str, Any]) -> dict[str, Any]:
    actions = contract.get("eligible_actions") or []
    shown = next(({"card_id": a.get("card_id"), "params": a.get("params") or {}} for a in actions
                  if a.get("status") == "awaiting_confirmation"), None)
    executed = next((a.get("card_id") for a in actions if a.get("status") == "executed"), None)
    refused = [{"card_id": e.get("card_id"), "reason": e.get("reason")} for e in _of(events, f"{p}.precheck")
               if e.get("reason") not in (None, "not_confirmed")]
    refused += [{"tool": e.get("tool"), "reason": e.get("reason")} for e in _of(events, f"{p}.tool")
                if e.get("confirmed") and not e.get("ok")]
    return {"shown": shown, "executed": executed, "refused": refused}


def _path(events: Sequence[Mapping[str, Any]], p: str, contract: Mapping[str, Any]) -> dict[str, Any]:
    fb = next(iter(_of(events, f"{p}.fallback")), None)
    end = next(iter(_of(events, "turn.end")), None)
    err = next(iter(_of(events, "turn.error")), None)
    return {"path": contract.get("selected_path"), "fallback": None if fb is None else fb.get("trigger"),
            "status": None if end is None else end.get("status"), "error": None if err is None else err.get("code")}


def _paragraphs(events: Sequence[Mapping[str, Any]], p: str) -> dict[str, Any] | None:
    w2 = next((e for e in _of(events, f"{p}.w2") if e.get("ok")), None)
    if w2 is None:
        return None
    return {"conflicts": [{"kind": c.get("kind"), "tier": c.get("tier")} for c in w2.get("conflicts") or []],
            "plan": [x.get("kind") if isinstance(x, Mapping) else x for x in w2.get("plan") or []],
            "psi_fired": sorted(w2.get("psi_fired") or [])}


def schema_candidates(schema: Any) -> dict[str, list[Any]]:
    """``{"<decision>.<argument>": enum}`` of a step's decoding schema: the grounded candidates offered."""
    out: dict[str, list[Any]] = {}
    for branch in (schema or {}).get("anyOf", []) if isinstance(schema, Mapping) else []:
        props = branch.get("properties") or {}
        name = (props.get("card_id") or props.get("decision") or {}).get("const")
        for field in ("args", "params", "entity_id", "about", "reason_code"):
            node = props.get(field)
            if not isinstance(node, Mapping):
                continue
            inner = node.get("properties") if field in ("args", "params") else {field: node}
            for arg, sub in (inner or {}).items():
                enum = _enum(sub)
                if enum is not None:
                    out[f"{name}.{arg}"] = enum
    return out


def _enum(node: Any) -> list[Any] | None:
    if not isinstance(node, Mapping):
        return None
    if isinstance(node.get("enum"), list):
        return list(node["enum"])
    if isinstance(node.get("items"), Mapping):
        return _enum(node["items"])
    for b in node.get("anyOf") or []:
        found = _enum(b)
        if found is not None:
            return found
    return None


def decisions_of(events: Sequence[Mapping[str, Any]], *, prefix: str = "tandem",
                 step_schemas: Sequence[Any] | None = None) -> dict[str, Any]:
    """The turn's decisions by kind (see module docstring); ``step_schemas``: the decoding schemas of the
    orchestrator steps that called the model, in order (a re-run sees them; a log does not)."""
    p = prefix
    w1 = next(iter(_of(events, f"{p}.w1")), None)
    contract = next(iter(_of(events, "contract.forward")), {}).get("contract") or {}
    steps = _of(events, f"{p}.step")
    schemas = list(step_schemas or [])
    offer = []
    for st in steps:
        summary = st.get("offer") or {}
        row = {k: summary.get(k) for k in ("tools", "cards", "clarify", "select", "respond", "escalate")}
        if step_schemas is not None:
            row["candidates"] = schema_candidates(schemas.pop(0)) if st.get("raw") and schemas else {}
        offer.append({"step": st.get("step"), **row})
    action = [{"step": st.get("step"), "decision": st.get("decision"), "error": st.get("error")} for st in steps]
    action += [{"step": e.get("step"), "repeat_read": e.get("tool")} for e in _of(events, f"{p}.repeat_read")]
    w3 = next((e for e in _of(events, f"{p}.w3") if e.get("ok")), None)
    selected = contract.get("selected_path")
    return {
        "guard": _guard(events, p),
        "intent": None if w1 is None else {"intent": w1.get("intent"), "sub_intent": w1.get("sub_intent")},
        "phi": [{"intent": e.get("intent"), "sub_intent": e.get("sub_intent"), "outcome": e.get("outcome"),
                 "calls": e.get("calls") or [], "then": e.get("then"), "state": sorted(e.get("snapshot") or {})}
                for e in _of(events, f"{p}.phi")],
        "offer": offer,
        "action": action,
        "card": _card(events, p, contract),
        "clarify": {"question": contract.get("clarify_question"), "options": contract.get("clarify_options") or []}
        if selected == "clarify" else None,
        "escalation": contract.get("escalation_reason") if selected == "escalate" else None,
        "path": _path(events, p, contract),
        "paragraphs": _paragraphs(events, p),
        "guidance": None if w3 is None else {"pick": w3.get("pick"),
                                             "table_version": (w3.get("meta") or {}).get("table_version")},
        "gate": [{"stage": e.get("stage"), "kinds": list(e.get("kinds") or [])} for e in _of(events, "gate.block")
                 if e.get("decision") == "block"],
    }


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def changed_kinds(a: Mapping[str, Any], b: Mapping[str, Any], kinds: Iterable[str] = KINDS) -> list[str]:
    """The kinds whose decisions differ between two readings of one turn."""
    return [k for k in kinds if _canon(a.get(k)) != _canon(b.get(k))]


def without_candidates(d: Mapping[str, Any]) -> dict[str, Any]:
    """``d`` without what only a re-run sees (the candidates of each offer): comparable with a log."""
    return {**d, "offer": [{k: v for k, v in o.items() if k != "candidates"} for o in d.get("offer") or []]}


def refusals(d: Mapping[str, Any]) -> set[str]:
    """What the turn refused: a pre-guard block, a card's eligibility refusal, a mid-guard block, a withheld
    sentence (each as a short tag)."""
    out: set[str] = set()
    pre = (d.get("guard") or {}).get("pre") or {}
    if pre.get("blocked"):
        out.add("pre_guard")
    out |= {f"card:{r.get('card_id') or r.get('tool')}:{r.get('reason')}" for r in (d.get("card") or {}).get("refused", [])}
    out |= {f"mid:{m.get('violation')}" for m in (d.get("guard") or {}).get("mid", []) if m.get("decision") == "block"}
    out |= {f"gate:{g.get('stage')}:{','.join(g.get('kinds') or [])}" for g in d.get("gate") or []}
    return out
