"""The one turn epilogue: the decision settled, the contract sent forward, the reply's path event, and
the delivered text checked back against the contract.

::

    settle       a fallback is counted (trigger, class) and logged as ``<prefix>.fallback``; the path is
                 counted and traced
    forward      the forward contract is logged (``contract.forward``): with the observations it
                 reconstructs why a reply was allowed
    path_event   escalate → the escalation event with the handoff text; clarify → the question with
                 its options; action_card → the validated card, placeholders resolved for the user
    close        the delivered text's return contract (ids, actions, amounts, state keys) must be a
                 member of the forward contract: violations are counted as delivered violations
                 (they stay 0) and logged; ``contract.return`` is logged with what the gate withheld

The reply itself (templates or :func:`pipelines.core.generate.guarded_sentences`) runs between
``path_event`` and ``close``, through one :class:`pipelines.gate.SentenceGate`.
"""

from __future__ import annotations

from collections.abc import Collection

from pipelines.counters import Counters
from pipelines.events import ActionCardEvent, ClarifyEvent, EscalationEvent
from pipelines.gate import SentenceGate
from pipelines.telemetry import annotate

from .contract import ForwardContract, ReturnContract, build_return, check_closure
from .outcome import Emit, Outcome
from .state import TurnState

__all__ = ["settle", "forward", "path_event", "close"]


def settle(outcome: Outcome, *, counters: Counters, emit: Emit, prefix: str) -> None:
    """Count, log and trace where the decision ended (the turn's status is the caller's: ``fallback`` when
    ``outcome.fallback`` is set)."""
    fb = outcome.fallback
    if fb is not None:
        counters.fallback(fb.trigger, fb.cls)
        emit(f"{prefix}.fallback", trigger=fb.trigger, cls=fb.cls, detail=fb.detail)
    counters.path(outcome.path)
    annotate(path=outcome.path, card_id=outcome.card_id, fallback_trigger=fb.trigger if fb else None,
             fallback_class=fb.cls if fb else None)


def forward(st: TurnState, contract: ForwardContract) -> None:
    """Log the forward contract the reply will be written from."""
    st.contract = contract
    st.emit("contract.forward", contract=contract.model_dump(mode="json"))


def path_event(st: TurnState, outcome: Outcome, *, handoff: str, question: str
               ) -> EscalationEvent | ClarifyEvent | ActionCardEvent | None:
    """The event the path sends before the reply's text (``None``: answer and fallback send none).

    An action card must have been selected and validated: its id is one of the contract's actions.
    """
    if outcome.path == "escalate":
        return EscalationEvent(reason_code=outcome.escalation_reason or "out_of_scope", message=handoff)
    if outcome.path == "clarify":
        return ClarifyEvent(question=st.vault.restore(question), options=[st.vault.restore(o) for o in outcome.clarify_options])
    if outcome.path == "action_card" and outcome.card_id:
        if st.contract is not None and outcome.card_id not in st.contract.action_ids():
            raise AssertionError("an action card must be selected by the orchestrator and validated")
        return ActionCardEvent(card_id=outcome.card_id, title=outcome.card_title or outcome.card_id,
                               params=st.vault.resolve(dict(outcome.card_params)))
    return None


def close(st: TurnState, gate: SentenceGate, contract: ForwardContract, *, card_id: str | None,
          trusted: Collection[str] = ()) -> ReturnContract:
    """The delivered text checked against ``contract`` (skipped for a fixed ``trusted`` text)."""
    ret = build_return(gate.text, contract, card_id=card_id, sentences=len(gate.released))
    if gate.text not in trusted:
        for v in check_closure(ret, contract):
            st.counters.delivered_violation(v.kind)
            st.emit("contract.closure_violation", violation=v.kind, detail=v.detail)
    st.emit("contract.return", contract=ret.model_dump(mode="json"), withheld=gate.withheld)
    return ret
