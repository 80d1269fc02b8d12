"""The support suites of ``tandem eval``: tau2 openings and the multi-turn support flows.

* ``tau2-openings`` — the first ``limit`` tasks (file order; 0 = all) of a tau2-retail
  ``tasks_train.json``. The user's opening is the first sentence of
  ``user_scenario.instructions.reason_for_call`` turned into the first person by a fixed
  pronoun swap ("You received your order" -> "I received my order"; ``verbatim`` sends
  the whole reason unchanged). One turn, a fresh session, nobody verified. The expected
  FIRST decision class comes from the task's expected actions: ``escalate`` when the first
  expected action is ``transfer_to_human_agents``, ``identify`` otherwise (tau2's policy
  verifies the user before any account-specific action; tasks that list only their writes
  leave the lookup out of their action list).
* ``flows`` — four sessions, seven turns, on the seeded synthetic world (seed 7: the
  fixture users alex and priya); each turn carries what must hold after it.

A :class:`Case` is one session: its turns in order, each with the text sent and the
expectation (or the coach label) it is scored against.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ALEX",
    "PRIYA",
    "FLOWS",
    "SUITE_DOMAIN",
    "EvalTurn",
    "Case",
    "first_person",
    "opening",
    "tau2_cases",
    "tau2_suite",
    "tau2_tasks_suite",
    "TAU2_SUITES",
    "flow_suite",
]

ALEX, PRIYA = "alex_rivera_1001", "priya_shah_2002"

#: Which domain pack a suite runs on (one app start per pipeline and domain).
SUITE_DOMAIN: dict[str, str] = {"tau2-openings": "support", "tau2-tasks": "support", "flows": "support",
                                 "coach": "coach"}
#: The suites played from tau2-format tasks (their pack can be named with ``--domain``).
TAU2_SUITES = ("tau2-openings", "tau2-tasks")

FLOWS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    ("cancel", [
        ("Hi, my email is alex.rivera@example.com.", {"kind": "authenticate", "user_id": ALEX}),
        ("Please cancel order #W1000001, I no longer need it.", {"kind": "action_card", "card_id": "card.cancel_order",
                                            "order_id": "#W1000001"}),
        ("yes", {"kind": "executed", "card_id": "card.cancel_order", "order_id": "#W1000001",
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
        ("Cancel order #W1000002 now.", {"kind": "no_write", "order_id": "#W1000002", "status": "delivered"}),
    ]),
]


@dataclass(frozen=True)
class EvalTurn:
    """One user turn: the text sent, what it is scored against, and the request's ``user_id``."""

    text: str
    expect: dict[str, Any] | None = None
    label: dict[str, Any] | None = None
    user_id: str | None = None


@dataclass(frozen=True)
class Case:
    """One session of a suite."""

    suite: str
    case_id: str
    turns: tuple[EvalTurn, ...]
    info: dict[str, Any] = field(default_factory=dict)


_SWAPS = [
    (r"\byou're\b", "I'm"), (r"\byou've\b", "I've"), (r"\byou'd\b", "I'd"), (r"\byou'll\b", "I'll"),
    (r"\byou are\b", "I am"), (r"\byou were\b", "I was"), (r"\byourself\b", "myself"),
    (r"\byours\b", "mine"), (r"\byour\b", "my"),
    (r"\b(to|for|with|asks|ask|tell|tells|give|gives|help|helps|let|lets) you\b", r"\1 me"),
    (r"\byou\b", "I"),
]


def first_person(text: str) -> str:
    """A fixed second-to-first-person pronoun swap (keeps a capital at the start of the text)."""
    out = text
    for pat, rep in _SWAPS:
        out = re.sub(pat, rep, out, flags=re.I)
    out = re.sub(r"\bi\b", "I", out)
    return out[:1].upper() + out[1:] if out else out


def opening(reason: str, verbatim: bool) -> str:
    """The user's opening message built from a tau2 ``reason_for_call``."""
    text = reason.strip().lstrip(".").strip()
    if verbatim:
        return text
    first = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0]
    return first_person(first)


def tau2_cases(base: Path, limit: int, verbatim: bool) -> list[dict[str, Any]]:
    """The tau2 openings as plain dicts: ``task_id``, ``text``, ``first_expected_action``, ``expect``."""
    tasks = json.loads((base / "tasks_train.json").read_text())
    if limit > 0:
        tasks = tasks[:limit]
    out = []
    for t in tasks:
        actions = (t.get("evaluation_criteria") or {}).get("actions") or []
        first = actions[0]["name"] if actions else None
        out.append({
            "task_id": str(t["id"]),
            "text": opening(t["user_scenario"]["instructions"]["reason_for_call"], verbatim),
            "first_expected_action": first,
            "expect": {"kind": "escalate" if first == "transfer_to_human_agents" else "identify"},
        })
    return out


def tau2_suite(base: Path, limit: int, *, verbatim: bool = False) -> list[Case]:
    """One single-turn case per tau2 task (see module docstring)."""
    return [Case("tau2-openings", f"task-{c['task_id']}", (EvalTurn(c["text"], expect=c["expect"]),),
                 info={"task_id": c["task_id"], "first_expected_action": c["first_expected_action"]})
            for c in tau2_cases(base, limit, verbatim)]


def tau2_tasks_suite(base: Path, limit: int, *, verbatim: bool = False) -> list[Case]:
    """One whole session per tau2 task, played by the scripted user (:mod:`serve.eval.tau2_user`).

    The case's one turn is the opening; the evaluator asks the user for every later one.
    ``info`` carries the task id, the intent label of its expected write and the tasks' folder.
    """
    from .tau2_user import intent_label

    tasks = json.loads((base / "tasks_train.json").read_text())
    if limit > 0:
        tasks = tasks[:limit]
    out = []
    for t in tasks:
        actions = (t.get("evaluation_criteria") or {}).get("actions") or []
        out.append(Case("tau2-tasks", f"task-{t['id']}",
                        (EvalTurn(opening(t["user_scenario"]["instructions"]["reason_for_call"], verbatim)),),
                        info={"task_id": str(t["id"]), "intent_label": intent_label(actions),
                              "tau2_dir": str(base)}))
    return out


def flow_suite() -> list[Case]:
    """The four support flows (seven turns)."""
    return [Case("flows", name, tuple(EvalTurn(text, expect=expect) for text, expect in turns))
            for name, turns in FLOWS]
