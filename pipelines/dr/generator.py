"""The generator step: the ``generator`` role words the reply from the forward contract only,
and every sentence passes the post-guard before it is released.

The generator gets no tools, no history and no choice of action: its prompt
is the rendered contract (:func:`pipelines.dr.prompts.generator_messages`).
Its deltas go through an incremental :class:`SentenceSplitter`; each complete
sentence is judged by the ``Guardrails`` port and released at once, or
withheld and replaced by the safe wording (never twice in a row). If the
guard itself fails, the sentence is withheld (fail closed). Withheld
sentences are logged (``dr.guard`` events) and counted by violation kind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from pipelines.guardrails import PostGuardView, SentenceSplitter, SentenceVerdict, Violation
from pipelines.guardrails.pii import Vault
from pipelines.protocols import ModelCall, ModelClient
from pipelines.spans import guard_span

from .contract import ForwardContract
from .fallback import Counters
from .ports import Guardrails
from .prompts import generator_messages, scrub

__all__ = ["ReleaseGate", "generate_reply"]


class ReleaseGate:
    """Judges sentences one by one and keeps what was released (redacted form)."""

    def __init__(
        self, guardrails: Guardrails, view: PostGuardView, counters: Counters, emit: Callable[..., None],
        *, fail_closed: str = "",
    ) -> None:
        self.guardrails = guardrails
        self.fail_closed = fail_closed
        self.view = view
        self.counters = counters
        self.emit = emit
        self.released: list[str] = []
        self.withheld = 0

    @property
    def text(self) -> str:
        return " ".join(self.released)

    async def release(self, sentence: str, *, source: str = "generator") -> str | None:
        """The text to deliver for ``sentence`` (itself, the safe wording, or ``None``)."""
        with guard_span("post", text=sentence, source=source) as g:
            try:
                verdict = await self.guardrails.post(sentence, self.view, self.text[-120:])
            except Exception as exc:  # fail closed: an unjudged sentence is never released
                verdict = SentenceVerdict(text="", violations=[Violation(kind="guard_unavailable", detail=type(exc).__name__)],
                                          replacement=self.fail_closed)
            g.decision("block" if verdict.violations else "pass", kinds=[v.kind for v in verdict.violations],
                       output=verdict.replacement if verdict.violations else verdict.text)
        if not verdict.violations:
            self.counters.guard("post", "pass")
            self.released.append(verdict.text)
            return verdict.text
        self.withheld += 1
        self.counters.guard("post", "block")
        for v in verdict.violations:
            self.counters.blocked(v.kind)
        self.emit("dr.guard", stage="post", decision="block", source=source,
                  kinds=[v.kind for v in verdict.violations],
                  details=[v.detail for v in verdict.violations], sentence=verdict.text)
        safe = verdict.replacement
        if not safe or (self.released and self.released[-1] == safe):
            return None
        self.released.append(safe)
        return safe


async def generate_reply(
    models: ModelClient,
    contract: ForwardContract,
    gate: ReleaseGate,
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
