"""W1 of the tandem turn: the grammar-constrained perception stream, guarded narration, Φ dispatch.

::

    grammar     the domain's labels (narrowed to the intent prior when a cue fired), a
                non-empty narration; decoding stops once </NARRATION> closes (the
                orchestrator, not a PLAN, decides the rest)
    segments    (``w1_segments``) the same text from three calls: the intent label, the
                sub-intent label (of that intent), then the narration and plan; each call
                continues the text so far as the reply's prefix, so the tags between the
                labels are given, never decoded (the parser sees one stream either way)
    parallel    (``w1_parallel_narration``) the narration decoded in its own call — its own
                short prompt (the request), one sentence — started with the intent label's and
                run beside the two label calls: the first narration token waits for one small
                prefill, not for the labels; with ``w1_narration_lead_ms`` the label calls
                start once the narration's first word went out (its prefill and first
                tokens run alone; the labels' prefill would stall them), or when the lead
                runs out;
                the orchestrator reads the labels alone and may start (``on_labels``) while
                the narration still streams
    narration   each sentence through the narration gate, released at once; a refused
                sentence becomes the domain's safe acknowledgement — never silence
    Φ           at </SUB_INTENT>: (intent, sub_intent, snapshot) → the read tools, started
                as tasks while the narration keeps streaming; ``then`` ends the decision
    failure     an engine error or an unparseable stream degrades to intent "other"
                (the orchestrator decides without Φ) and the safe acknowledgement
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pipelines.core.tools import ToolCaller
from pipelines.errors import InvalidModelOutput, UpstreamError
from pipelines.events import NarrationDelta
from pipelines.gate import SentenceGate
from pipelines.guardrails.post import SentenceSplitter
from pipelines.protocols import ChatMessage, ModelCall, ModelClient, StructuredOutput
from pipelines.sgc.phi import PhiOutcome, PhiTable, phi_lookup
from pipelines.sgc.snapshot import Snapshot
from pipelines.sgc.w1 import NarrationDelta as ParsedNarration
from pipelines.sgc.w1 import PerceptionParser, SubIntentParsed
from pipelines.sgc.w1_grammar import grammar, label_grammar, sentence_grammar, tail_grammar

from .prompts import narration_messages
from .settings import TandemSettings

__all__ = ["W1Outcome", "Perception", "FALLBACK_INTENT"]

FALLBACK_INTENT = ("other", "unknown")


@dataclass
class W1Outcome:
    intent: str = FALLBACK_INTENT[0]
    sub_intent: str = FALLBACK_INTENT[1]
    narration: str = ""
    raw: str = ""
    phi: PhiOutcome | None = None
    dispatch_ms: float | None = None
    error: str | None = None
    allowed_intents: list[str] = field(default_factory=list)
    tasks: list[tuple[str, dict[str, Any], asyncio.Task[Any]]] = field(default_factory=list)


class Perception:
    """One turn's W1 (see module docstring)."""

    def __init__(self, domain: Any, models: ModelClient, phi: PhiTable | Awaitable[PhiTable],
                 settings: TandemSettings, *,
                 snapshot: dict[str, Any], caller: ToolCaller, gate: SentenceGate, counters: Any,
                 emit: Callable[..., None], on_c1: Callable[[str, str], None] | None = None,
                 on_labels: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        # Φ's table may still be on its way (the rule kernels' version check): only the labels need it,
        # so the narration starts without waiting for it (see :meth:`_phi`).
        self.domain, self.models, self.s = domain, models, settings
        self._phi_source: PhiTable | Awaitable[PhiTable] = phi
        self.snapshot, self.caller, self.gate = snapshot, caller, gate
        self.counters, self.emit, self.on_c1, self.on_labels, self.clock = counters, emit, on_c1, on_labels, clock
        self.out = W1Outcome()
        self._open = False  # the gate released part of the sentence being written (what follows joins it)

    @property
    def opening(self) -> str:
        """The stream's fixed opening tag: given as the reply's prefix, never decoded."""
        return self.s.tags.open("INTENT")

    def _labels(self, user_text: str) -> dict[str, list[str]]:
        prior = self.domain.intent_prior(user_text)
        labels = {i: list(s) for i, s in self.domain.labels.items()}
        if prior:
            labels = {i: labels[i] for i in prior if i in labels}
        for intent, subs in labels.items():
            allowed = self.domain.sub_intent_prior(user_text, intent)
            if allowed:
                labels[intent] = [s for s in subs if s in allowed] or subs
        self.out.allowed_intents = sorted(labels)
        return labels

    def call(self, messages: list[ChatMessage], user_text: str) -> tuple[ModelCall, dict[str, list[str]]]:
        labels = self._labels(user_text)
        tools = sorted(n for n in self.domain.registry.names())
        g = grammar(list(labels), labels, tools, narration_max_chars=self.s.narration_max_chars,
                    narration_required=True, opened=True, tags=self.s.tags)
        call = ModelCall(messages=messages, max_tokens=self.s.perception_max_tokens, temperature=0.0,
                         seed=self.s.seed, structured_output=StructuredOutput(kind="grammar", spec=g),
                         prefix=self.opening,
                         priority=self.s.first_call_priority)
        return call, labels

    async def _label(self, call: ModelCall, prefix: str, kind: str, values: list[str]) -> str:
        """One label decoded alone, continuing ``prefix``; must be one of ``values``."""
        seg = call.model_copy(update={"prefix": prefix, "max_tokens": 24, "structured_output": StructuredOutput(
            kind="grammar", spec=label_grammar(kind, values))})
        text = "".join([d async for d in self.models.stream("orchestrator", seg)]).strip()
        if text not in values:
            raise InvalidModelOutput(f"W1 {kind} segment: {text[:40]!r} is not a label")
        return text

    async def _decode_labels(self, call: ModelCall, labels: dict[str, list[str]]) -> tuple[str, str, str]:
        """The intent label, then the sub-intent label of that intent, each decoded alone: (intent, sub,
        the stream's text through ``</SUB_INTENT>``)."""
        o, c = self.s.tags.open, self.s.tags.close
        intent = await self._label(call, self.opening, "intent", sorted(labels))
        text = self.opening + intent + c("INTENT") + o("SUB_INTENT")
        sub = await self._label(call, text, "sub-intent", sorted(labels[intent]))
        return intent, sub, text + sub + c("SUB_INTENT")

    async def _segments(self, call: ModelCall, labels: dict[str, list[str]]) -> AsyncIterator[str]:
        """The W1 stream from three calls (see module docstring); yields text as one stream would."""
        _, _, text = await self._decode_labels(call, labels)
        text += self.s.tags.open("NARRATION")
        yield text[len(self.opening):]
        tools = sorted(self.domain.registry.names())
        tail = call.model_copy(update={"prefix": text, "structured_output": StructuredOutput(
            kind="grammar", spec=tail_grammar(tools, narration_max_chars=self.s.narration_max_chars,
                                              narration_required=True, tags=self.s.tags))})
        async for chunk in self._relay(tail):
            yield chunk

    async def _relay(self, call: ModelCall) -> AsyncIterator[str]:
        """The orchestrator role's stream for ``call``, closed however the caller stops reading."""
        stream = self.models.stream("orchestrator", call)
        try:
            async for chunk in stream:
                yield chunk
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def _phi(self) -> None:
        """Resolve Φ's table once (an awaitable given at construction), before the first label closes."""
        if inspect.isawaitable(self._phi_source):
            self._phi_source = await self._phi_source

    @property
    def phi_table(self) -> PhiTable:
        if inspect.isawaitable(self._phi_source):
            raise RuntimeError("Φ's table is still pending: await _phi() first")
        return self._phi_source

    def _on_sub_intent(self, ev: SubIntentParsed, t0: float) -> None:
        self.out.intent, self.out.sub_intent = ev.intent, ev.sub_intent
        if self.on_c1 is not None:
            self.on_c1(ev.intent, ev.sub_intent)
        outcome = phi_lookup(self.phi_table, ev.intent, ev.sub_intent, Snapshot.of(self.snapshot))
        self.out.phi = outcome
        self.counters.phi(outcome.kind)
        if outcome.hit:
            self.out.dispatch_ms = (self.clock() - t0) * 1000
            self.counters.dispatch("phi")
            for c in outcome.tools:
                task = asyncio.create_task(self.caller.raw(c.tool, dict(c.args), step=0))
                self.out.tasks.append((c.tool, dict(c.args), task))
        self.emit("tandem.phi", intent=ev.intent, sub_intent=ev.sub_intent, outcome=outcome.kind,
                  tools=[c.tool for c in outcome.tools], calls=[c.model_dump() for c in outcome.tools],
                  then=outcome.then, missing=list(outcome.missing_keys), snapshot=dict(self.snapshot),
                  table_version=outcome.table_version, dispatch_ms=self.out.dispatch_ms)

    def _emit(self, text: str, *, joins: bool = False) -> NarrationDelta:
        if not joins and self.out.narration and not self.out.narration.endswith(" ") and not text.startswith(" "):
            text = " " + text  # a new sentence after a finished one
        self.out.narration += text
        return NarrationDelta(text=text)

    async def _close(self, sentence: str) -> NarrationDelta | None:
        """A finished sentence through the gate: the rest of it (joined to what went out of it), or its stand-in."""
        out = await self.gate.close(sentence)
        joins, self._open = self._open, False
        return self._emit(out, joins=joins) if out else None

    async def _narrate(self, splitter: SentenceSplitter, delta: str) -> AsyncIterator[NarrationDelta]:
        """Release narration word by word as the gate allows (a few words behind the model)."""
        for sentence in splitter.feed(delta):
            if closed := await self._close(sentence):
                yield closed
        partial = splitter.pending.lstrip()
        if partial:
            hold = self.s.narration_hold_words  # None: held only where a violation may be forming
            new = await (self.gate.stream(partial) if hold is None
                         else self.gate.stream(partial, hold_words=hold, forming=False))
            if new:
                yield self._emit(new, joins=self._open)
                self._open = True

    async def _label_pair(self, call: ModelCall, labels: dict[str, list[str]], t0: float) -> str:
        """The two labels decoded alone, then Φ on their close. Returns their text."""
        intent, sub, text = await self._decode_labels(call, labels)
        await self._phi()
        self._on_sub_intent(SubIntentParsed(intent=intent, sub_intent=sub, offset=len(text)), t0)
        return text

    def _narration_alone(self, call: ModelCall, user_text: str) -> AsyncIterator[str]:
        """The narration decoded in its own call: its own short prompt (the request), one sentence."""
        seg = call.model_copy(update={
            "messages": narration_messages(user_text), "prefix": None, "max_tokens": 48,
            "structured_output": StructuredOutput(kind="grammar", spec=sentence_grammar(self.s.narration_max_chars))})
        return self._relay(seg)

    async def _labels_beside(self, call: ModelCall, labels: dict[str, list[str]], t0: float) -> None:
        """The label pair beside the narration; the orchestrator's W1 text is the labels alone."""
        try:
            self.out.raw = await self._label_pair(call, labels, t0)
        except (UpstreamError, InvalidModelOutput) as exc:
            self.out.error = exc.code
            self.emit("tandem.w1_failed", code=exc.code, message=exc.message[:200], section="labels")
            self.out.raw = ""  # the orchestrator reads the "other" opening, as after a broken stream
        if self.on_labels is not None:
            self.on_labels()

    async def after_lead(self, first: asyncio.Event, work: Any) -> Any:
        """``work`` (a coroutine) once the narration's first word went out, or ``w1_narration_lead_ms`` passed."""
        try:
            if self.s.w1_narration_lead_ms > 0:
                await asyncio.wait_for(first.wait(), self.s.w1_narration_lead_ms / 1000)
        except TimeoutError:
            pass
        except BaseException:  # cancelled while waiting: the work never starts
            work.close()
            raise
        return await work

    async def _parallel(self, call: ModelCall, labels: dict[str, list[str]], splitter: SentenceSplitter,
                        t0: float, user_text: str) -> AsyncIterator[NarrationDelta]:
        """Narration streamed while the labels are decoded beside it (see module docstring)."""
        first = asyncio.Event()
        task = asyncio.create_task(self.after_lead(first, self._labels_beside(call, labels, t0)))
        try:
            try:
                async for text in self._narration_alone(call, user_text):
                    async for d in self._narrate(splitter, text):
                        first.set()  # a word is out: the labels may start
                        yield d
            except (UpstreamError, InvalidModelOutput) as exc:
                self.emit("tandem.w1_failed", code=exc.code, message=exc.message[:200], section="narration")
            first.set()  # the narration ended (or failed) without a token: nothing to wait for
            await task
        finally:
            if not task.done():
                task.cancel()

    async def _serial(self, call: ModelCall, labels: dict[str, list[str]], splitter: SentenceSplitter,
                      t0: float, user_text: str) -> AsyncIterator[NarrationDelta]:
        """One stream (or its segments) through the parser: labels, then the narration."""
        await self._phi()  # one stream: its labels may close at any chunk
        parser = PerceptionParser(labels=labels, tags=self.s.tags)
        parser.feed(self.opening)
        raw: list[str] = [self.opening]
        stream = self._segments(call, labels) if self.s.w1_segments else self.models.stream("orchestrator", call)
        try:
            async for chunk in stream:
                raw.append(chunk)
                for ev in parser.feed(chunk):
                    if isinstance(ev, SubIntentParsed):
                        self._on_sub_intent(ev, t0)
                    elif isinstance(ev, ParsedNarration):
                        async for d in self._narrate(splitter, ev.text):
                            yield d
                if parser.narration_closed:
                    await stream.aclose()  # type: ignore[attr-defined]
                    break
            parser.finish(plan_optional=True)
        except (UpstreamError, InvalidModelOutput) as exc:
            self.out.error = exc.code
            self.emit("tandem.w1_failed", code=exc.code, message=exc.message[:200])
        text = "".join(raw)
        close = self.s.tags.close("NARRATION")
        cut = text.find(close)
        self.out.raw = text[: cut + len(close)] if cut >= 0 else text

    async def stream(self, messages: list[ChatMessage], user_text: str) -> AsyncIterator[NarrationDelta]:
        """Run the W1 call(s); yield guarded narration; dispatch Φ's tools when the labels close."""
        call, labels = self.call(messages, user_text)
        splitter = SentenceSplitter()
        t0 = self.clock()
        body = self._parallel if self.s.w1_parallel_narration else self._serial
        async for d in body(call, labels, splitter, t0, user_text):
            yield d
        for sentence in splitter.flush():
            if closed := await self._close(sentence):
                yield closed
        if not self.out.narration:
            self.gate.add_trusted(self.domain.texts.safe_ack)
            yield self._emit(self.domain.texts.safe_ack)
        self.emit("tandem.w1", intent=self.out.intent, sub_intent=self.out.sub_intent, error=self.out.error,
                  allowed=self.out.allowed_intents, narration=self.out.narration,
                  ms=round((self.clock() - t0) * 1000, 3))

    def cancel(self) -> None:
        for _, _, task in self.out.tasks:
            if not task.done():
                task.cancel()
