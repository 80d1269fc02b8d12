"""What the support pack gives ``tandem eval``: the multi-turn ``flows`` suite, its order statuses, and the
scripted user that plays whole tau2-retail tasks (:mod:`.tau2_user`).

``flows`` — four sessions, seven turns, on the seeded synthetic world (seed 7: the fixture users alex and
priya); each turn carries what must hold after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pipelines.core.evaluation import Case, EntityLookup, EvalTurn, PackEvaluation, SuiteOptions

from .tau2_user import WRITE_VERBS, ScriptedUser, intent_label

__all__ = ["ALEX", "PRIYA", "FLOWS", "flow_suite", "SupportEvaluation"]

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


def flow_suite(options: SuiteOptions | None = None) -> list[Case]:
    """The four support flows (seven turns)."""
    return [Case("flows", name, tuple(EvalTurn(text, expect=expect) for text, expect in turns))
            for name, turns in FLOWS]


class SupportEvaluation(PackEvaluation):
    """The support pack's evaluation hooks (see module docstring)."""

    def suites(self) -> Mapping[str, Callable[[SuiteOptions], list[Case]]]:
        return {"flows": flow_suite}

    def entity_status(self, lookup: EntityLookup, entity: str) -> str | None:
        found = lookup("order", entity)
        return None if found is None else str(found.get("status"))

    def scripted_user(self, task: Mapping[str, Any], db: Mapping[str, Any], card_tools: Mapping[str, str],
                      max_turns: int) -> ScriptedUser:
        return ScriptedUser(task, db, card_tools, max_turns=max_turns)

    def intent_label(self, actions: Sequence[Mapping[str, Any]]) -> str | None:
        return intent_label(actions)

    def label_tools(self, label: str) -> set[str]:
        return {t for t, (lab, _) in WRITE_VERBS.items() if lab == label}
