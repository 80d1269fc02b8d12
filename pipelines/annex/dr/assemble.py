"""Build the forward contract from the orchestration outcome (code only; the models add nothing).

Sources are the help articles a deterministic search finds for the redacted
request plus any the orchestrator retrieved; user state comes only from this
turn's successful observations and the authenticated user; policy constraints
are fixed lines chosen by the card on offer (or executed).
"""

from __future__ import annotations

from typing import Any

from pipelines.annex.dr.inputs import OrchestratorInput
from pipelines.core.contract import EligibleAction, ForwardContract, SourceRef
from pipelines.core.outcome import Outcome
from pipelines.domains.support.observations import state_from_observation
from pipelines.domains.support.policy import GENERAL_CONSTRAINTS, POLICY_CONSTRAINTS
from pipelines.spans import retriever_span

__all__ = ["POLICY_CONSTRAINTS", "GENERAL_CONSTRAINTS", "build_forward"]

_MIN_SCORE = 3.0  # one keyword overlap alone does not make an article relevant
def _sources(search_help: Any, text: str, outcome: Outcome, limit: int = 2) -> list[SourceRef]:
    out: dict[str, SourceRef] = {}
    for o in outcome.observations:
        if o.ok and o.result and "articles" in o.result:
            for a in o.result["articles"]:
                out.setdefault(a["id"], SourceRef(id=a["id"], title=a["title"], snippet=a["body"][:280]))
    if text and search_help is not None:
        with retriever_span(text, source="help") as r:
            _, hits = search_help(text, limit)
            r.documents([{"id": h.id, "content": h.body, "score": h.score, "metadata": {"title": h.title}} for h in hits])
        for h in hits:
            if h.score < _MIN_SCORE:
                continue
            out.setdefault(h.id, SourceRef(id=h.id, title=h.title, snippet=h.body[:280]))
    return list(out.values())[: limit + 2]


def _task_state(inp: OrchestratorInput, outcome: Outcome) -> str:
    if inp.blocked and outcome.path == "fallback" and outcome.fallback and outcome.fallback.trigger == "guardrail_block":
        return "blocked"
    if outcome.path == "escalate":
        return "escalated"
    if outcome.executed is not None:
        return "action_executed"
    if outcome.path == "action_card":
        return "awaiting_confirmation"
    return "authenticated" if inp.facts.authenticated_user_id else "unauthenticated"


def build_forward(inp: OrchestratorInput, outcome: Outcome, *, search_help: Any = None) -> ForwardContract:
    """The forward contract of this turn (every text in it is redacted)."""
    state: dict[str, Any] = {}
    if inp.facts.authenticated_user_id:
        state["authenticated_user_id"] = inp.facts.authenticated_user_id
    for o in outcome.observations:
        if o.ok:
            state.update(state_from_observation(o.tool, o.result))
    actions: list[EligibleAction] = []
    tool = None
    if outcome.path == "action_card" and outcome.card_id:
        pending = inp.facts.pending_action
        assert pending is not None and pending.card_id == outcome.card_id, "card without a pending action"
        tool = pending.tool
        actions.append(EligibleAction(card_id=pending.card_id, title=pending.title, tool=pending.tool,
                                      params=pending.args, status="awaiting_confirmation"))
    if outcome.executed is not None:
        tool = outcome.executed.tool
        actions.append(outcome.executed)
    blocked = _task_state(inp, outcome) == "blocked"
    options = outcome.clarify_options
    return ForwardContract(
        turn_id=inp.turn_id,
        locale=inp.locale,
        task_state=_task_state(inp, outcome),  # type: ignore[arg-type]
        selected_path=outcome.path,
        user_request="" if blocked else inp.user_text,
        eligible_actions=actions,
        sources=[] if blocked or outcome.path == "escalate" else _sources(search_help, inp.user_text, outcome),
        user_state=state,
        policy_constraints=list(POLICY_CONSTRAINTS.get(tool or "", ())) + list(GENERAL_CONSTRAINTS),
        prior_observations=[o for o in outcome.observations],
        selected_entity=outcome.selected_entity,
        clarify_question=outcome.clarify_question,
        clarify_options=options,
        escalation_reason=outcome.escalation_reason,
        fallback=outcome.fallback,
        placeholders=inp.vault.ids(),
    )
