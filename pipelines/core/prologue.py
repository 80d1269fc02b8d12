"""The one turn prologue: limits and pre-guard, the PII vault, the turn's event log, its counters.

::

    pre-guard    limits (typed errors, raised), injection, safety / human routes, confirmation,
                 PII redaction — in a GUARDRAIL span; counted (guard pre.pass|block|ask|route, blocked
                 by kind) and logged as ``<prefix>.pre_guard``
    vault        the session's placeholders (what the models see) ↔ values (what tools use)
    emit         every event of the turn: the turn id and pipeline added, placeholders kept, personal
                 fields masked (names, address lines, city, zip, card digits, email) — nothing of it
                 reaches the event log in the clear; the turn's model calls are logged through it too
                 (``model.call``, :mod:`pipelines.core.modelrecord`)
    rules        ``ctx.rules_version`` is the guardrail table's version (a family may add its own)

Every pipeline family starts its turn here (:func:`open_turn`) and carries the returned
:class:`~pipelines.core.state.TurnState` through its steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from pipelines.counters import Counters
from pipelines.guardrails.pii import Vault, mask_pii_fields
from pipelines.spans import guard_span
from pipelines.telemetry import annotate
from pipelines.turn import TurnContext

from .modelrecord import bind_turn
from .outcome import Emit
from .ports import Guardrails
from .state import TurnState

__all__ = ["open_turn", "pre_decision", "emitter"]

S = TypeVar("S", bound=TurnState)


def emitter(ctx: TurnContext, pipeline: str, vault: Vault | None = None) -> Emit:
    """The turn's event log: the turn id and pipeline added, personal fields masked, the vault's values
    (when the turn has one) replaced by their placeholders. A turn's events repeat their texts (an observation
    in its tool event and again in the contract): each distinct text is redacted once per turn."""
    redacted: dict[str, str] = {}

    def redact(value: Any) -> Any:
        if isinstance(value, str):
            if value not in redacted:
                redacted[value] = vault.redact(value) if vault is not None else value
            return redacted[value]
        if isinstance(value, dict):
            return {redact(str(k)): redact(v) for k, v in value.items()}
        return [redact(v) for v in value] if isinstance(value, list | tuple) else value

    def emit(kind: str, /, **fields: Any) -> None:
        masked = mask_pii_fields(fields)
        ctx.sink.emit(kind, turn_id=ctx.turn_id, pipeline=pipeline, **(redact(masked) if vault is not None else masked))

    return emit


def pre_decision(blocked: bool, route: str | None, ask: bool = False) -> str:
    """The pre-guard's decision as counted and traced: ``block``, ``route``, ``ask`` or ``pass``."""
    return "block" if blocked else "route" if route else "ask" if ask else "pass"


async def open_turn(ctx: TurnContext, guardrails: Guardrails, counters: Counters, *, pipeline: str,
                    prefix: str, clock: Callable[[], float] = time.perf_counter,
                    state: type[S] = TurnState, **fields: Any) -> S:  # type: ignore[assignment]
    """Run the pre-guard on the request and open the turn's state (see module docstring): a ``state``
    (a family's own :class:`TurnState` subclass, with its extra ``fields``).

    Raises the pre-guard's typed errors (a text over the limits) before anything is logged.
    """
    t0 = clock()
    with guard_span("pre", turn_id=ctx.turn_id) as guard:
        pre = await guardrails.pre(ctx.request.text, [t.user_text for t in ctx.history])
        guard.decision(pre_decision(pre.blocked, pre.route, pre.decision == "ask"), kinds=[h.rule_id for h in pre.hits], output=pre.text)
    annotate(input=pre.text)  # the turn span: the user's text as the event log has it (redacted)
    vault = Vault.from_entries(pre.vault)
    emit = emitter(ctx, pipeline, vault)
    bind_turn(emit)  # the turn's model calls are logged through the same emitter (pipelines.core.modelrecord)

    counters.guard("pre", pre_decision(pre.blocked, pre.route, pre.decision == "ask"))
    for hit in pre.hits if pre.blocked else ():  # the hits of a refused turn (an ask refuses nothing)
        if hit.action == "block":
            counters.blocked(hit.kind)
    emit(f"{prefix}.pre_guard", **pre.summary())
    ctx.stage_ms["pre_guard"] = (clock() - t0) * 1000
    ctx.rules_version = pre.rules_version
    return state(ctx=ctx, pipeline=pipeline, pre=pre, vault=vault, emit=emit, counters=counters, t0=t0,
                 clock=clock, **fields)
