"""Decision scoring of one support turn: the facts read off its events, and whether it was right.

:func:`analyse_turn` reduces one turn to the same facts for every pipeline kind
(``path``, ``card_id``, ``executed``, ``escalation_reason``, ``authenticated_user_id``,
the ``first_decision``, ``terminal`` …): from the ``dr.*`` events for ``dr``
(:func:`analyse_dr`), from the ``tandem.*`` events and the turn's stored meta for
``tandem`` (:func:`analyse_tandem`), and only the client's events for kinds that
decide nothing (``prompting``…).

The FIRST decision of a turn:

* ``dr`` — the first ``dr.step`` (a deterministic ``dr.route`` comes before any step);
* ``tandem`` — a route (``tandem.route``), else Φ: a dispatch (``tandem.phi`` with tools;
  the lookup among them, with its arguments from the step-0 ``tandem.tool`` event; a Φ
  *fill* after W2 counts as the dispatch) or its ``then`` (``respond`` / ``clarify:<kind>``,
  the question being the one delivered), else the first ``tandem.step``.

:func:`score` is one boolean per turn, no partial credit:

* flows: the turn's expectation (authenticate / action_card / executed / clarify /
  escalate / no_write), read from the facts, the SSE cards (every expected parameter) and the named record's status;
* tau2 ``escalate``: the turn ends on path escalate (a route or a model decision);
* tau2 ``identify``: the first decision is a ``clarify`` whose question asks for identity
  (email, your / full / first / last name, zip / postal code, verify / identify /
  authenticate, a user / customer / member / account id or number), or one of the pack's identity
  lookups (``Domain.lookup_tools``, which the facts carry as ``lookups``) whose arguments are all
  grounded in the user's text (each a placeholder in the redacted text or a whole word of it).
  Events are redacted, so an invented email is a placeholder too: it counts only if that
  placeholder is in the user's redacted text.

``terminal``: the turn reached a terminal decision within the step cap — a model decision
respond / clarify / select / action / escalate at step <= max_steps, Φ's ``then``, or a
deterministic route (escalate, execute_pending, and tandem's decline_pending). A step cap,
a parse failure or a refused tool call is not terminal.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from pipelines.guardrails.pii import PLACEHOLDER_RE

__all__ = [
    "TERMINAL_DECISIONS",
    "TERMINAL_ROUTES",
    "IDENTITY_Q",
    "DECIDING_KINDS",
    "analyse",
    "analyse_dr",
    "analyse_tandem",
    "analyse_turn",
    "grounded_lookup",
    "score",
]

TERMINAL_DECISIONS = ("respond", "clarify", "select", "action", "escalate")
TERMINAL_ROUTES = ("escalate", "execute_pending", "decline_pending")
IDENTITY_Q = re.compile(r"e-?mail|\b(your|full|first|last) name\b|\bname and zip\b|\bzip\b|postal|verif|identif|"
                        r"authenticat|\b(user|customer|member(ship)?|account) ?(id|number)\b", re.I)
#: Kinds whose events carry decisions (the others are scored on outcomes only).
DECIDING_KINDS = ("dr", "tandem")

Event = dict[str, Any]


def _client_facts(sse: Sequence[Event]) -> dict[str, Any]:
    done = sse[-1] if sse and sse[-1].get("type") == "done" else {}
    clarify = next((e for e in sse if e.get("type") == "clarify"), None)
    return {
        "turn_id": done.get("turn_id"),
        "status": done.get("status"),
        "sse_types": [e.get("type") for e in sse if e.get("type") not in ("reply.delta", "narration.delta")],
        "sse_cards": [{"card_id": e["card_id"], "params": e.get("params", {})} for e in sse
                      if e.get("type") == "action_card"],
        "clarify_question": clarify.get("question") if clarify else None,
        "reply": "".join(e.get("text", "") for e in sse if e.get("type") == "reply.delta")[:300],
    }


def _empty_facts() -> dict[str, Any]:
    return {"route": None, "path": None, "card_id": None, "card_params": {}, "executed": None,
            "escalation_reason": None, "authenticated_user_id": None, "terminal": None, "terminal_by": None,
            "steps": 0, "decisions": [], "first_decision": None, "first_raw": None, "parse_failures": 0,
            "fallbacks": {}, "tools": [], "guards": [], "lookups": []}


def analyse_dr(sse: Sequence[Event], log: Sequence[Event], max_steps: int,
               lookups: Collection[str] = ()) -> dict[str, Any]:
    """The facts of one ``dr`` turn: its SSE events, and what the kind reads off its own events
    (``KindRecord.analyse``; ``lookups``: the pack's)."""
    return _kind_facts("dr", sse, log, max_steps, lookups)


def _kind_facts(kind: str, sse: Sequence[Event], log: Sequence[Event], max_steps: int,
                lookups: Collection[str]) -> dict[str, Any]:
    from pipelines.registry import kind_record

    analyse = kind_record(kind).analyse
    assert analyse is not None, f"the {kind} kind reads no decisions off its events"
    return {**_client_facts(sse), **analyse(list(log), max_steps), "lookups": sorted(lookups)}


analyse = analyse_dr  # the name scripts/bench_dr.py has always used


def _phi_decision(phi: Event, tools: Sequence[Event], question: str | None,
                  lookups: Collection[str]) -> dict[str, Any] | None:
    """Φ's decision as a dr-shaped decision dict (``None`` when Φ decided nothing)."""
    names = list(phi.get("tools") or [])
    if names:
        pick = next((n for n in names if n in lookups), names[0])
        call = next((t for t in tools if t["tool"] == pick and t.get("step") == 0 and not t.get("confirmed")), {})
        return {"decision": pick, "args": dict(call.get("args") or {}), "via": "phi", "tools": names}
    then = phi.get("then") or ""
    if then == "respond":
        return {"decision": "respond", "via": "phi"}
    if then.startswith("clarify:"):
        return {"decision": "clarify", "about": then.split(":", 1)[1], "question": question or "", "via": "phi"}
    return None


def _table_path(then: str | None) -> str | None:
    """The path a Φ row's ``then`` ends the decision on, when no orchestrator step runs."""
    if then == "respond":
        return "answer"
    if then == "choose" or (then or "").startswith("clarify:"):
        return "clarify"
    return None


def analyse_tandem(sse: Sequence[Event], log: Sequence[Event], meta: Mapping[str, Any] | None,
                   max_steps: int, *, user_text_redacted: str = "", lookups: Collection[str] = ()) -> dict[str, Any]:
    """The facts of one ``tandem`` turn, from its SSE events, its tandem.* events and its stored meta."""
    client = _client_facts(sse)
    m = dict(meta or {})
    routes = [e for e in log if e["kind"] == "tandem.route" and e.get("route") != "drop_pending"]
    route = routes[0]["route"] if routes else None
    phis = [e for e in log if e["kind"] == "tandem.phi"]
    steps = sorted((e for e in log if e["kind"] == "tandem.step"), key=lambda e: e["step"])
    tools = [e for e in log if e["kind"] == "tandem.tool"]
    decisions = [(s["decision"] or {}).get("decision") if s["decision"] else None for s in steps]
    question = client["clarify_question"]
    first: dict[str, Any] | None = None
    phi_terminal = False
    if route is None and phis:
        fill = next((p for p in phis if p.get("fill")), None)
        first = _phi_decision(fill or phis[0], tools, question, lookups)
        if first is not None and first["decision"] in ("respond", "clarify"):
            phi_terminal = True
    if route is None and first is None and steps:
        first = dict(steps[0]["decision"]) if steps[0]["decision"] else None
        if first is not None and first.get("decision") == "clarify":
            first["question"] = question or ""
    terminal_by = None
    if route in TERMINAL_ROUTES:
        terminal_by = "route"
    elif phi_terminal and not steps:
        terminal_by = "phi"
    elif not steps and phis and _table_path(phis[-1].get("then")) == m.get("path"):
        terminal_by = "phi"  # Φ read first, then its row ended the decision (respond, clarify, choose)
    elif steps and steps[-1]["decision"] and decisions[-1] in TERMINAL_DECISIONS and len(steps) <= max_steps:
        terminal_by = "model"
    state = m.get("state") or {}
    contract = next((e["contract"] for e in log if e["kind"] == "contract.forward"), {})
    return {
        **client,
        "route": route,
        "path": m.get("path") or contract.get("selected_path"),
        "card_id": m.get("card_id"),
        "card_params": (client["sse_cards"][0]["params"] if client["sse_cards"] else {}),
        "executed": m.get("executed"),
        "escalation_reason": m.get("escalation") or contract.get("escalation_reason"),
        "authenticated_user_id": state.get("authenticated_user_id"),
        "terminal": terminal_by is not None,
        "terminal_by": terminal_by,
        "steps": len(steps),
        "decisions": decisions,
        "first_decision": first,
        "first_raw": steps[0]["raw"] if steps else None,
        "parse_failures": sum(1 for s in steps if s["decision"] is None),
        "fallbacks": dict(Counter(e["trigger"] for e in log if e["kind"] == "tandem.fallback")),
        "lookups": sorted(lookups),
        "user_text_redacted": user_text_redacted,
        "tools": [{"tool": e["tool"], "args": e.get("args") or {}, "ok": bool(e.get("ok")),
                   "confirmed": bool(e.get("confirmed"))} for e in tools],
        "guards": [{"stage": e.get("stage"), "decision": e.get("decision"), "violation": e.get("violation"),
                    "source": "tandem"} for e in log if e["kind"] == "tandem.guard"],
        "intent": (m.get("c1") or {}).get("intent"),
        "sub_intent": (m.get("c1") or {}).get("sub_intent"),
        "phi": [{"intent": p.get("intent"), "sub_intent": p.get("sub_intent"), "outcome": p.get("outcome"),
                 "tools": p.get("tools"), "then": p.get("then"), "fill": bool(p.get("fill"))} for p in phis],
    }


def analyse_turn(kind: str, sse: Sequence[Event], log: Sequence[Event], meta: Mapping[str, Any] | None,
                 max_steps: int, *, user_text_redacted: str = "", lookups: Collection[str] = ()) -> dict[str, Any]:
    """The facts of one turn of any pipeline kind (see module docstring; ``lookups``: the pack's identity
    lookups)."""
    if kind == "dr":
        facts = analyse_dr(sse, log, max_steps, lookups)
        facts["user_text_redacted"] = facts["user_text_redacted"] or user_text_redacted
        return facts
    if kind == "tandem":
        return analyse_tandem(sse, log, meta, max_steps, user_text_redacted=user_text_redacted, lookups=lookups)
    return {**_client_facts(sse), **_empty_facts(), "user_text_redacted": user_text_redacted}


def grounded_lookup(decision: Mapping[str, Any], redacted_text: str, raw_text: str) -> bool:
    """A lookup decision whose arguments all occur in the user's text (see module docstring)."""
    values = [str(v).strip() for v in (decision.get("args") or {}).values()]
    text = raw_text + " " + redacted_text

    def said(v: str) -> bool:  # a placeholder the user's own redacted text holds, or a whole word of the text
        if PLACEHOLDER_RE.fullmatch(v):
            return v in redacted_text
        return bool(v) and re.search(rf"(?<!\w){re.escape(v)}(?!\w)", text, re.I) is not None

    return bool(values) and all(said(v) for v in values)


def score(expect: Mapping[str, Any], a: Mapping[str, Any], raw_text: str,
          entity_status: str | None) -> tuple[bool, str]:
    """Whether the turn met ``expect``, and a short detail (see module docstring)."""
    kind = expect["kind"]
    if kind == "authenticate":
        ok = a["authenticated_user_id"] == expect["user_id"]
        return ok, f"auth={a['authenticated_user_id']}"
    if kind == "action_card":
        cards = [c for c in a["sse_cards"] if c["card_id"] == expect["card_id"]]
        ok = (a["path"] == "action_card" and a["card_id"] == expect["card_id"] and len(cards) == 1
              and all(cards[0]["params"].get(k) == v for k, v in (expect.get("params") or {}).items()))
        return ok, f"card={a['card_id']}"
    if kind == "executed":
        ok = a["executed"] == expect["card_id"] and entity_status == expect["status"]
        return ok, f"executed={a['executed']} status={entity_status}"
    if kind == "clarify":
        return a["path"] == "clarify", f"path={a['path']}"
    if kind == "escalate":
        want = expect.get("reason_code")
        ok = a["path"] == "escalate" and (want is None or a["escalation_reason"] == want)
        return ok, f"escalation={a['escalation_reason']} via {a['route'] or 'model'}"
    if kind == "no_write":
        confirmed = any(t["confirmed"] for t in a["tools"])
        ok = not a["sse_cards"] and entity_status == expect["status"] and not confirmed
        return ok, f"cards={len(a['sse_cards'])} status={entity_status}"
    if kind == "identify":
        d = a["first_decision"] or {}
        if d.get("decision") == "clarify":
            q = str(d.get("question", ""))
            return bool(IDENTITY_Q.search(q)), f"clarify q={q[:60]!r}"
        if d.get("decision") in set(a.get("lookups") or ()):
            ok = grounded_lookup(d, a["user_text_redacted"], raw_text)
            return ok, f"{d['decision']} grounded={ok}"
        if a["route"]:
            return False, f"route {a['route']}"
        return False, f"first={d.get('decision') if d else 'parse failure'}"
    raise ValueError(f"unknown expectation {kind}")
