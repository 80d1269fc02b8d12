"""The generator's two loops: guarded sentences through the one sentence gate, or raw deltas.

* :func:`guarded_sentences` — the reply every contract-bound path writes: deltas are split into
  sentences and each passes the gate (:class:`pipelines.gate.SentenceGate`) before it is released;
  a ``cap`` bounds the sentences delivered and ``stop`` ends the generation on a gate verdict (the
  generator narrating its own prompt). What was released stays delivered; a model error is raised
  to the caller (its fallback is the caller's).
* :func:`reply_deltas` — the baselines that have no contract (``prompting``, ``monolithic``, the
  audited rungs): deltas as they come, timed as the ``generate`` stage and logged as
  ``stage.generate``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from pipelines.events import ReplyDelta
from pipelines.gate import SentenceGate
from pipelines.guardrails.post import SentenceSplitter
from pipelines.protocols import ModelCall, ModelClient
from pipelines.telemetry import stage_span
from pipelines.turn import TurnContext

__all__ = ["guarded_sentences", "reply_deltas"]


async def guarded_sentences(models: ModelClient, call: ModelCall, gate: SentenceGate, *, role: str = "generator",
                            cap: int | None = None,
                            stop: Callable[[SentenceGate], bool] | None = None) -> AsyncIterator[str]:
    """The sentences of ``role``'s completion that ``gate`` released (redacted form), in order.

    ``cap``: at most this many sentences are released (the rest is never judged); ``stop``: called
    after a withheld sentence, True ends the generation. Raises the model client's errors.
    """
    if cap is not None and cap <= 0:
        return
    splitter = SentenceSplitter()
    released = 0
    async for delta in models.stream(role, call):
        for sentence in splitter.feed(delta):
            out = await gate.release(sentence)
            if out:
                released += 1
                yield out
            elif stop is not None and stop(gate):
                return
            if cap is not None and released >= cap:
                return
    for sentence in splitter.flush():
        out = await gate.release(sentence)
        if out:
            released += 1
            yield out
        if cap is not None and released >= cap:
            return


async def reply_deltas(ctx: TurnContext, models: ModelClient, call: ModelCall, *, role: str = "generator",
                       clock: Callable[[], float] = time.perf_counter,
                       **event_fields: Any) -> AsyncIterator[ReplyDelta]:
    """``role``'s completion as reply deltas, unguarded; the stage is timed and logged (``event_fields``
    are added to the ``stage.generate`` event: the shape of the model input)."""
    t0 = clock()
    n = 0
    with stage_span("generate", role=role, turn_id=ctx.turn_id):
        async for delta in models.stream(role, call):
            if delta:
                n += 1
                yield ReplyDelta(text=delta)
    ctx.stage_ms["generate"] = (clock() - t0) * 1000
    ctx.sink.emit("stage.generate", turn_id=ctx.turn_id, role=role, deltas=n,
                  ms=round(ctx.stage_ms["generate"], 3), **event_fields)
