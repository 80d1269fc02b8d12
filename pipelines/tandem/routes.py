"""The tandem turn's deterministic routes: decided by code from the pre-guard and the pending card.

::

    human / safety topic         → escalate with the reason code (the transfer tool runs)
    the pre-guard asks           → clarify with the guard's question (thin evidence of instructions aimed
                                   at the assistant: "Did you mean ...?"); a pending card is dropped, so a
                                   "yes" to the question never confirms it
    blocked by the pre-guard     → fallback ``guardrail_block``
    pending card + "yes"         → the confirmed write, once (checkpointed before the reply)
    pending card + "no"          → declined (the pack's ``declined`` text and its question of what should
                                   change; the card is remembered and never shown again)
    pending card + a no that goes on ("No, that's not it. Only the lamp.") → declined as above, then W1 and the
                                   orchestrator decide on the correction (the same card stays refused)
    pending card + anything else → dropped; W1 and the orchestrator decide

:func:`route` returns ``None`` when no route applies.
"""

from __future__ import annotations

from pipelines.core.fallback import Stop, fallback
from pipelines.core.outcome import Outcome

from .cards import declined_outcome, signature
from .state import TandemState

__all__ = ["route", "decided_by_route"]


def decided_by_route(st: TandemState) -> bool:
    """Whether a route decides this turn without W1 (known before anything is recorded)."""
    assert st.facts is not None
    pending = st.facts.state.get("pending")
    return (st.pre.route is not None or st.pre.blocked or st.pre.decision == "ask"
            or bool(pending and st.pre.confirmation in ("affirmative", "negative")))


def _decline(st: TandemState, pending: dict) -> None:
    """The pending card refused: remembered by its arguments (never shown again), dropped, and the correction that
    follows goes on with the same request."""
    assert st.facts is not None
    declined = st.meta.setdefault("declined", [])
    declined.append(signature(pending["card_id"], pending["args"]))
    del declined[:-20]
    st.facts.state = {**st.facts.state, "pending": None}
    if len(pending.get("labels") or []) == 2:
        st.meta["c1"] = {"intent": pending["labels"][0], "sub_intent": pending["labels"][1]}


async def route(st: TandemState) -> Outcome | None:
    """The route's outcome, or ``None`` (see module docstring). A route's failure is a fallback outcome."""
    assert st.facts is not None and st.orch is not None
    facts, pre = st.facts, st.pre
    pending = facts.state.get("pending")
    try:
        if pre.route is not None:
            st.emit("tandem.route", route="escalate", reason_code=pre.route, rule=pre.route_rule)
            facts.state = {**facts.state, "pending": None}
            return await st.orch.escalate(pre.route)
        if pre.decision == "ask":
            rules = ",".join(h.rule_id for h in pre.hits if h.action == "block")
            st.emit("tandem.route", route="ask", reason_code="guardrail_ask", rule=rules)
            facts.state = {**facts.state, "pending": None}
            return Outcome(path="clarify", clarify_question=pre.question)
        if pre.blocked:
            rules = ",".join(h.rule_id for h in pre.hits if h.action == "block")
            st.emit("tandem.route", route="fallback", reason_code="guardrail_block", rule=rules)
            return Outcome(path="fallback", fallback=fallback("guardrail_block", rules))
        if pending and pre.confirmation == "affirmative":
            st.emit("tandem.route", route="execute_pending", reason_code="confirmed", rule=pending["card_id"])
            facts.state = {**facts.state, "pending": None}
            outcome = await st.orch.execute_pending(pending)
            if outcome.executed is not None:  # a write done is never offered again
                st.meta.setdefault("done", []).append(signature(pending["card_id"], pending["args"]))
            if outcome.executed is not None:  # recorded before the reply is generated
                st.ctx.mark_side_effect(f"{pending['card_id']}:{pending.get('turn_id', '')}")
                st.record({**st.meta, "state": facts.state, "executed": pending["card_id"]})
                await st.ctx.checkpoint()
            return outcome
        if pending and pre.confirmation == "negative":
            st.emit("tandem.route", route="decline_pending", reason_code="declined", rule=pending["card_id"])
            _decline(st, pending)
            st.intent, st.sub_intent = "declined", "pending"
            return declined_outcome(st.orch.domain, st.meta.setdefault("asked", []), str(pending["card_id"]),
                                    pending.get("args"))  # never the same card again: what should change?
        if pending and pre.opens_with_no:  # "No, that's not it. Only the lamp.": refused, the correction decides
            st.emit("tandem.route", route="drop_pending", reason_code="declined_with_correction",
                    rule=pending["card_id"])
            _decline(st, pending)
            return None
        if pending:
            st.emit("tandem.route", route="drop_pending", reason_code="not_confirmed", rule=pending["card_id"])
            facts.state = {**facts.state, "pending": None}
        return None
    except Stop as stop:
        return Outcome(path="fallback", fallback=stop.fallback)
