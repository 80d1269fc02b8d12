"""Build the forward contract from the orchestration outcome (code only; the models add nothing).

Sources are the help articles a deterministic search finds for the redacted
request plus any the orchestrator retrieved; user state comes only from this
turn's successful observations and the authenticated user; policy constraints
are the pack's lines for the card on offer (or executed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.core.contract import EligibleAction, ForwardContract, SourceRef, task_state
from pipelines.core.outcome import Outcome
from pipelines.spans import retriever_span

from ..rungpack import RungPack
from .inputs import OrchestratorInput

__all__ = ["build_forward"]

_MIN_SCORE = 3.0  # one keyword overlap alone does not make an article relevant


def _sources(search_help: Callable[..., Any], text: str, outcome: Outcome, limit: int = 2) -> list[SourceRef]:
    out: dict[str, SourceRef] = {}
    for o in outcome.observations:
        if o.ok and o.result and "articles" in o.result:
            for a in o.result["articles"]:
                out.setdefault(a["id"], SourceRef(id=a["id"], title=a["title"], snippet=a["body"][:280]))
    if text:
        with retriever_span(text, source="help") as r:
            _, hits = search_help(text, limit)
            r.documents([{"id": h.id, "content": h.body, "score": h.score, "metadata": {"title": h.title}} for h in hits])
        for h in hits:
            if h.score < _MIN_SCORE:
                continue
            out.setdefault(h.id, SourceRef(id=h.id, title=h.title, snippet=h.body[:280]))
    return list(out.values())[: limit + 2]


def build_forward(inp: OrchestratorInput, outcome: Outcome, domain: RungPack) -> ForwardContract:
    """The forward contract of this turn (every text in it is redacted)."""
    state: dict[str, Any] = {}
    if inp.facts.authenticated_user_id:
        state["authenticated_user_id"] = inp.facts.authenticated_user_id
    for o in outcome.observations:
        if o.ok:
            state.update(domain.user_state(o.tool, o.result))
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
    task = task_state(outcome.path, executed=outcome.executed is not None,
                      verified=bool(inp.facts.authenticated_user_id),
                      blocked=inp.blocked and outcome.fallback is not None
                      and outcome.fallback.trigger == "guardrail_block")
    blocked = task == "blocked"
    search = domain.search_help
    return ForwardContract(
        turn_id=inp.turn_id,
        locale=inp.locale,
        task_state=task,
        selected_path=outcome.path,
        user_request="" if blocked else inp.user_text,
        eligible_actions=actions,
        sources=[] if blocked or outcome.path == "escalate" else _sources(search, inp.user_text, outcome),
        user_state=state,
        policy_constraints=list(domain.policy_lines(tool)),
        prior_observations=list(outcome.observations),
        selected_entity=outcome.selected_entity,
        clarify_question=outcome.clarify_question,
        clarify_options=outcome.clarify_options,
        escalation_reason=outcome.escalation_reason,
        fallback=outcome.fallback,
        placeholders=inp.vault.ids(),
    )
