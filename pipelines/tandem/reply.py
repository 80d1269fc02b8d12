"""The tandem turn's forward contract, and the reply written from it.

:func:`build_contract` is code only: the selected path, the eligible actions,
user state from this turn's successful observations, sources, policy lines, the
observations, and the three context blocks — c1 (W1's intent), c2 (W2's conflicts
and paragraph plan), c3 (W3's guidance pick). Every text in it is redacted.

:func:`template_reply` composes a reply from the contract alone, following the
paragraph plan (apology, constraint account, guidance): it is what a path with
nothing to word delivers (a card's read-back, a confirmed change, a clarify, a
greeting) and what replaces a generated reply that the sentence gate refused.
:func:`generator_facts` renders the contract as plain facts for the generator
(never as ``key=value`` fields it could echo).
"""

from __future__ import annotations

from typing import Any

from pipelines.core.contract import (
    EligibleAction,
    ForwardContract,
    ObservationRecord,
    SourceRef,
    task_state,
)
from pipelines.core.domain import Domain, DomainTexts, TurnFacts
from pipelines.core.outcome import Outcome
from pipelines.guardrails.pii import Vault

from .cards import readback_parts

__all__ = ["build_contract", "template_reply", "generator_facts", "instruction"]


def _sources(facts: TurnFacts) -> list[SourceRef]:
    out: dict[str, SourceRef] = {}
    for o in facts.observations:
        res = o.get("result") or {}
        if o.get("ok") and isinstance(res, dict) and "articles" in res:
            for a in res["articles"][:2]:
                out.setdefault(a["id"], SourceRef(id=a["id"], title=a["title"], snippet=a["body"][:280]))
    return list(out.values())


def build_contract(domain: Domain, facts: TurnFacts, outcome: Outcome, *, turn_id: str, locale: str,
                   vault: Vault, c1: dict[str, Any] | None, c2: dict[str, Any] | None,
                   c3: dict[str, Any] | None, verified: bool) -> ForwardContract:
    """The forward contract of this turn (see module docstring)."""
    state: dict[str, Any] = {}
    if verified and facts.user_id:
        state["authenticated_user_id"] = facts.user_id
    records = [ObservationRecord.model_validate(o) for o in facts.observations]
    for o in records:
        if o.ok:
            state.update(domain.user_state(o.tool, o.result))
    actions: list[EligibleAction] = []
    tool = None
    pending = facts.state.get("pending")
    if outcome.path == "action_card" and isinstance(pending, dict) and pending.get("card_id") == outcome.card_id:
        tool = pending["tool"]
        actions.append(EligibleAction(card_id=pending["card_id"], title=pending["title"], tool=pending["tool"],
                                      params=pending["args"], status="awaiting_confirmation"))
    if outcome.executed is not None:
        tool = outcome.executed.tool
        actions.append(outcome.executed)
    policy = list(domain.policy_lines(tool))
    if c3 and c3.get("text"):
        policy.append(c3["text"])
    return ForwardContract(
        turn_id=turn_id, locale=locale, task_state=task_state(outcome.path, executed=outcome.executed is not None, verified=verified),
        selected_path=outcome.path, user_request=facts.user_text, eligible_actions=actions,
        sources=[] if outcome.path == "escalate" else _sources(facts), user_state=state,
        policy_constraints=policy, prior_observations=records, selected_entity=outcome.selected_entity,
        clarify_question=outcome.clarify_question, clarify_options=list(outcome.clarify_options),
        escalation_reason=outcome.escalation_reason, fallback=outcome.fallback, placeholders=vault.ids(),
        c1=c1, c2=c2, c3=c3,
    )


def _fmt(text: str, **fields: Any) -> str:
    try:
        return text.format(**fields)
    except (KeyError, IndexError, ValueError):
        return ""


def template_reply(domain: Domain, facts: TurnFacts, contract: ForwardContract, outcome: Outcome, *,
                   intent: str, sub_intent: str) -> list[str]:
    """The reply's sentences from the contract alone (see module docstring)."""
    texts: DomainTexts = domain.texts
    t = texts.templates
    path = contract.selected_path
    if path == "escalate":
        return [texts.handoff]
    if path == "clarify":
        return [contract.clarify_question or texts.question("details")]
    if path == "fallback":
        if contract.fallback is not None and contract.fallback.trigger == "write_outcome_unknown":
            return [t.get("write_unknown") or texts.fallback]  # never deny a write that may have run
        return [texts.fallback]
    plan = [p.get("kind") for p in ((contract.c2 or {}).get("plan") or [])]
    out: list[str] = []
    if "apology" in plan and facts.refusals:
        out.append("I'm sorry.")
    for r in facts.refusals:
        title = next((c.title for c in domain.cards if c.id == r.get("card_id")), "make that change")
        out.append(domain.refusal_line(r, title, contract))
    if path == "action_card" and contract.eligible_actions:
        a = contract.eligible_actions[0]
        phrase = _fmt(t.get(f"card:{a.card_id}", ""), **a.params) or a.title.lower()
        parts = readback_parts(domain, a.tool, a.params, facts, shown=phrase)  # every argument, in words
        out.append(_fmt(t.get("action_card", ""), phrase=phrase + (": " + "; ".join(parts) if parts else "")))
    elif outcome.executed is not None:
        out += domain.executed_lines(outcome.executed, contract)
    elif not facts.refusals:
        out += domain.answer_lines(facts, contract)
        direct = t.get(f"{intent}/{sub_intent}")
        if not out and direct:
            out.append(direct)
        if not out:  # the pack's line for the first conflict it words, else what is missing
            conflicts = (contract.c2 or {}).get("conflicts") or []
            worded = [t[f"conflict:{c.get('kind')}"] for c in conflicts if t.get(f"conflict:{c.get('kind')}")]
            out.append(worded[0] if worded else texts.question("details"))
    if contract.c3 and contract.c3.get("text") and path in ("answer", "action_card"):
        out.append(contract.c3["text"])
    return [o for o in out if o]


def generator_facts(contract: ForwardContract) -> list[str]:
    """The contract as plain facts (no field names, no internal states)."""
    out: list[str] = []
    for key, value in contract.user_state.items():
        if key == "authenticated_user_id":
            continue
        label = key.replace(".", " ").replace("_", " ")
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        out.append(f"{label}: {shown}")
    for s in contract.sources[:2]:
        out.append(f"{s.title}: {s.snippet}")
    for a in contract.eligible_actions:
        verb = "was done" if a.status == "executed" else "is proposed, waiting for the user's yes"
        out.append(f"The change '{a.title}' {verb}.")
    return out


def instruction(contract: ForwardContract) -> str:
    """The generator's task for the selected path."""
    if contract.write_executed():
        return "Tell the user the change was done, using only the facts."
    if contract.selected_path == "action_card":
        return "Summarise the proposed change and ask the user to reply yes to confirm."
    return "Answer the user's request from the facts only."
