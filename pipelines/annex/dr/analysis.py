"""The decisions of one logged ``dr`` turn, read off its ``dr.*`` events: what the evaluation harness scores
(the kind's ``KindRecord.analyse``; the harness reads no rung's events itself).

:func:`turn_facts` gives the route, the path and card of the outcome, the verified user, the steps and their
decisions (the first one, its raw text, parse failures), whether a terminal decision was reached within the
step cap (by a deterministic route or by the model), the fallbacks, the tool calls and the guard decisions
that were not a pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pipelines.core.decisions import TERMINALS

__all__ = ["turn_facts", "TERMINAL_ROUTES"]

#: Deterministic routes that end a turn's decision (no model step).
TERMINAL_ROUTES = ("escalate", "execute_pending", "decline_pending")


def turn_facts(log: Sequence[dict[str, Any]], max_steps: int) -> dict[str, Any]:
    """The facts of one ``dr`` turn from its logged events (see module docstring)."""
    steps = sorted((e for e in log if e["kind"] == "dr.step"), key=lambda e: e["step"])
    routes = [e for e in log if e["kind"] == "dr.route"]
    outcome = next((e for e in log if e["kind"] == "dr.outcome"), {})
    start = next((e for e in log if e["kind"] == "dr.start"), {})
    fallbacks = Counter(e["trigger"] for e in log if e["kind"] == "dr.fallback")
    decisions = [(s["decision"] or {}).get("decision") if s["decision"] else None for s in steps]
    route = routes[0]["route"] if routes else None
    terminal_by = None
    if route in TERMINAL_ROUTES:
        terminal_by = "route"
    elif steps and steps[-1]["decision"] and decisions[-1] in TERMINALS and len(steps) <= max_steps:
        terminal_by = "model"
    first = steps[0] if steps else None
    return {
        "route": route,
        "path": outcome.get("path"),
        "card_id": outcome.get("card_id"),
        "card_params": outcome.get("card_params") or {},
        "executed": outcome.get("executed"),
        "escalation_reason": outcome.get("escalation_reason"),
        "authenticated_user_id": ((outcome.get("facts") or {}).get("authenticated_user_id")),
        "terminal": terminal_by is not None,
        "terminal_by": terminal_by,
        "steps": len(steps),
        "decisions": decisions,
        "first_decision": (first["decision"] if first else None),
        "first_raw": (first["raw"] if first else None),
        "parse_failures": sum(1 for s in steps if s["decision"] is None),
        "fallbacks": dict(fallbacks),
        "user_text_redacted": start.get("user_text", ""),
        "tools": [{"tool": e["tool"], "args": e["args"], "ok": e["result"]["observation"]["ok"],
                   "confirmed": e.get("confirmed", False)} for e in log if e["kind"] == "dr.tool"],
        "guards": [{"stage": e.get("stage"), "decision": e.get("decision"),
                    "violation": e.get("violation") or ",".join(e.get("kinds") or []), "source": e.get("source")}
                   for e in log if e["kind"] == "dr.guard" and e.get("decision") != "pass"],
    }
