"""The turn-state object: one turn as it moves through its steps.

The prologue (:func:`pipelines.core.prologue.open_turn`) makes it from the turn context and the
pre-guard's result; each step reads the fields it needs and writes what it decided, instead of
passing loose values from step to step (vLLM's per-request state is the model)::

    ctx, pipeline, pre, vault, emit, counters, clock, t0     set by the prologue, never replaced
    meta                 this family's record of the turn (``ctx.meta[<family>]``)
    facts                the pack's session facts and grounded candidates (pack turns)
    intent, sub_intent   W1's labels (or the route that decided without them)
    c1, c2, c3           the contract's context blocks: intent, conflicts + plan, guidance
    outcome              where the decision ended
    contract             the forward contract the reply is written from
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pipelines.counters import Counters
from pipelines.guardrails import PreGuardResult
from pipelines.guardrails.pii import Vault
from pipelines.turn import TurnContext

from .contract import ForwardContract
from .domain import TurnFacts
from .outcome import Emit, Outcome

__all__ = ["TurnState"]


@dataclass
class TurnState:
    """One turn's state (see module docstring)."""

    ctx: TurnContext
    pipeline: str
    pre: PreGuardResult
    vault: Vault
    emit: Emit
    counters: Counters
    t0: float
    clock: Callable[[], float] = time.perf_counter
    meta: dict[str, Any] = field(default_factory=dict)
    facts: TurnFacts | None = None
    turn_index: int = 0
    intent: str = ""
    sub_intent: str = ""
    c1: dict[str, Any] | None = None
    c2: dict[str, Any] | None = None
    c3: dict[str, Any] | None = None
    outcome: Outcome | None = None
    contract: ForwardContract | None = None

    @property
    def turn_id(self) -> str:
        return self.ctx.turn_id

    @property
    def session_id(self) -> str:
        return self.ctx.session_id

    @property
    def user_text(self) -> str:
        """This turn's text as every model and log sees it (redacted)."""
        return self.pre.text

    def elapsed_ms(self) -> float:
        """Milliseconds since the turn's prologue started."""
        return (self.clock() - self.t0) * 1000

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Record how long a stage took in ``ctx.stage_ms[stage]``."""
        t = self.clock()
        try:
            yield
        finally:
            self.ctx.stage_ms[stage] = (self.clock() - t) * 1000
