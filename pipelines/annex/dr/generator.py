"""The generator step: the ``generator`` role words the reply from the forward contract only,
and every sentence passes the post-guard before it is released.

The generator gets no tools, no history and no choice of action: its prompt
is the rendered contract (:func:`pipelines.annex.dr.prompts.generator_messages`).
Its deltas go through an incremental :class:`SentenceSplitter`; each complete
sentence is judged by the ``Guardrails`` port and released at once, or
withheld and replaced by the safe wording (never twice in a row). If the
guard itself fails, the sentence is withheld (fail closed). Withheld
sentences are logged (``dr.guard`` events) and counted by violation kind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from pipelines.core.contract import ForwardContract
from pipelines.core.ports import Guardrails
from pipelines.gate import GuardrailsJudge, SentenceGate
from pipelines.guardrails import PostGuardView, SentenceSplitter
from pipelines.guardrails.pii import Vault
from pipelines.protocols import ModelCall, ModelClient

from .prompts import generator_messages, scrub

__all__ = ["release_gate", "generate_reply"]


def release_gate(guardrails: Guardrails, view: PostGuardView, counters: Any, emit: Callable[..., None], *,
                 fail_closed: str = "") -> SentenceGate:
    """The DR reply's sentence gate: the guardrail table's post-guard, fail closed, logged as ``dr.guard``."""
    return SentenceGate([GuardrailsJudge(guardrails, view)], counters, emit, stage="post", safe="",
                        fail_closed=fail_closed, event="dr.guard", source="generator")


async def generate_reply(
    models: ModelClient,
    contract: ForwardContract,
    gate: SentenceGate,
    vault: Vault,
    *,
    max_tokens: int = 160,
    temperature: float = 0.0,
    seed: int = 0,
    max_sentences: int = 3,
) -> AsyncIterator[str]:
    """Stream the guarded reply, one released sentence at a time (redacted form).

    Raises the model client's :class:`~pipelines.errors.UpstreamError`; what was
    yielded before stays delivered. The turn deadline is the runner's.
    """
    call = ModelCall(
        messages=scrub(generator_messages(contract, max_sentences=max_sentences), vault),
        max_tokens=max_tokens, temperature=temperature, seed=seed,
    )
    splitter = SentenceSplitter()
    stream = models.stream("generator", call)
    async for delta in stream:
        for sentence in splitter.feed(delta):
            out = await gate.release(sentence)
            if out is not None:
                yield out
    for sentence in splitter.flush():
        out = await gate.release(sentence)
        if out is not None:
            yield out
