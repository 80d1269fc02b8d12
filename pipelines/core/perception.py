"""W1, the one perception step: the grammar-constrained 4-in-1 stream, narration at once, Φ's dispatch.

::

    grammar     ``<INTENT>``, ``<SUB_INTENT>`` (the labels given, narrowed by the caller to what the
                request's cues allow), ``<NARRATION>`` (non-empty when required), ``<PLAN>``
    Φ           at ``</SUB_INTENT>``: (intent, sub_intent, snapshot) → a frozen tool set, dispatched at
                once (``dispatch``) while the narration keeps streaming; a miss is counted and, with
                ``plan``, waits for the model's ``<PLAN>``, which is dispatched instead (a plan after
                a frozen set is ignored and counted)
    narration   through the narration gate, word by word as the gate allows (a refused sentence becomes
                the safe acknowledgement — never silence), or, with no gate, as decoded (capped)
    stop        without ``plan``, decoding stops once ``</NARRATION>`` closes (the orchestrator decides
                the rest); with it, once Φ froze the set and the narration closed (``stop_moot_plan``: the
                plan could change nothing), else at ``</PLAN>``

Decoding modes (``segments``, ``parallel``): the same text from three calls — the intent label, the
sub-intent label (of that intent), then the narration and plan, each continuing the text so far as
the reply's prefix (the tags between the labels are given, never decoded; with ``skip_forced`` a label
with one allowed value — an intent with one sub-intent, a request the caller narrowed to one intent — is
given too, with no call); or the narration in its
own call (its own short prompt, one sentence) beside the two label calls, which start when its first
word went out or ``lead_ms`` passed — the caller may start deciding (``on_labels``) while the
narration still streams.

Failures: with ``degrade``, an engine error or an unparseable stream becomes intent "other" (the
caller decides without Φ) and the safe acknowledgement; without it they are raised (from
:meth:`Perception.stream` or :meth:`Perception.finish`).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.errors import InvalidModelOutput, UpstreamError
from pipelines.events import NarrationDelta
from pipelines.gate import SentenceGate
from pipelines.guardrails.post import SentenceSplitter
from pipelines.protocols import ChatMessage, ModelCall, ModelClient, StructuredOutput
from pipelines.sgc.phi import PhiOutcome, PhiRow, PhiTable
from pipelines.sgc.snapshot import Snapshot
from pipelines.sgc.w1 import LONG_TAGS, PlanParsed, SubIntentParsed, ToolCall, W1Tags
from pipelines.sgc.w1 import NarrationDelta as ParsedNarration
from pipelines.sgc.w1_grammar import grammar, label_grammar, sentence_grammar, tail_grammar
from pipelines.sgc.w1_run import DispatchTools, PerceptionOutcome, PerceptionRun

__all__ = ["W1Config", "W1Outcome", "Perception", "FALLBACK_INTENT"]

FALLBACK_INTENT = ("other", "unknown")


@dataclass(frozen=True)
class W1Config:
    """How W1 is decoded (see module docstring)."""

    tags: W1Tags = LONG_TAGS
    max_tokens: int = 96
    temperature: float = 0.0
    seed: int = 0
    priority: int = 0
    narration_max_chars: int = 120
    narration_required: bool = True
    opened: bool = True  # the opening tag is the reply's prefix, never decoded
    plan: bool = False
    stop_moot_plan: bool = True
    segments: bool = False
    parallel: bool = False
    lead_ms: float = 0.0
    hold_words: int | None = None
    degrade: bool = True
    skip_forced: bool = False  # segments: a label with one allowed value is given, not decoded


@dataclass
class W1Outcome:
    """What W1 perceived, dispatched and said."""

    intent: str = FALLBACK_INTENT[0]
    sub_intent: str = FALLBACK_INTENT[1]
    narration: str = ""
    raw: str = ""
    phi: PhiOutcome | None = None
    dispatched: DispatchTools | None = None
    dispatch_ms: float | None = None
    error: str | None = None
    allowed_intents: list[str] = field(default_factory=list)
    stopped_early: bool = False
    tasks: list[tuple[str, dict[str, Any], asyncio.Task[Any]]] = field(default_factory=list)


class Perception:
    """One turn's W1 (see module docstring).

    ``phi`` and ``live_version`` may still be on their way (awaitables): only Φ's lookup needs them, so
    the stream starts without waiting. ``dispatch`` receives the frozen tool set (Φ's, or the plan's).
    """

    def __init__(self, models: ModelClient, config: W1Config, *, labels: Mapping[str, Sequence[str]],
                 tools: Sequence[str], phi: PhiTable | Awaitable[PhiTable], snapshot: Snapshot,
                 counters: Any, emit: Callable[..., None], prefix: str,
                 dispatch: Callable[[DispatchTools], None], gate: SentenceGate | None = None, safe_ack: str = "",
                 narration: Callable[[str], list[ChatMessage]] | None = None,
                 on_c1: Callable[[SubIntentParsed], None] | None = None, on_labels: Callable[[], None] | None = None,
                 turn: int | None = None, live_version: int | None | Awaitable[int | None] = None,
                 index: Mapping[tuple[str, str], PhiRow] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.models, self.c = models, config
        self.labels = {i: list(s) for i, s in labels.items()}
        self.tools = sorted(tools)
        self._phi_source: PhiTable | Awaitable[PhiTable] = phi
        self._live: int | None | Awaitable[int | None] = live_version
        self.snapshot, self.turn, self.index = snapshot, turn, index
        self.counters, self.emit, self.prefix = counters, emit, prefix
        self.dispatch, self.gate, self.safe_ack, self.narration_prompt = dispatch, gate, safe_ack, narration
        self.on_c1, self.on_labels, self.clock = on_c1, on_labels, clock
        self.out = W1Outcome(allowed_intents=sorted(self.labels))
        self.run: PerceptionRun | None = None
        self._t0 = clock()
        self._open = False  # the gate released part of the sentence being written (what follows joins it)
        self._chars = 0

    # -- calls -------------------------------------------------------------------------------

    @property
    def opening(self) -> str:
        """The stream's fixed opening tag: given as the reply's prefix when ``opened``."""
        return self.c.tags.open("INTENT") if self.c.opened else ""

    def call(self, messages: list[ChatMessage]) -> ModelCall:
        """The one W1 call (the segments and the parallel narration are derived from it)."""
        g = grammar(list(self.labels), self.labels, self.tools, narration_max_chars=self.c.narration_max_chars,
                    narration_required=self.c.narration_required, opened=self.c.opened, tags=self.c.tags)
        return ModelCall(messages=messages, max_tokens=self.c.max_tokens, temperature=self.c.temperature,
                         seed=self.c.seed, structured_output=StructuredOutput(kind="grammar", spec=g),
                         prefix=self.opening, priority=self.c.priority, purpose="w1")

    async def _label(self, call: ModelCall, prefix: str, kind: str, values: list[str]) -> str:
        """One label decoded alone, continuing ``prefix``; must be one of ``values``.

        With ``skip_forced``, a label with one allowed value is that value without a call: its grammar
        admits nothing else, so decoding it could only spend a prefill and a few tokens."""
        if self.c.skip_forced and len(values) == 1:
            self.emit(f"{self.prefix}.w1.forced_label", section=kind, value=values[0])
            return values[0]
        seg = call.model_copy(update={"prefix": prefix, "max_tokens": 24, "purpose": f"w1.{kind.replace('-', '_')}",
                                      "structured_output": StructuredOutput(kind="grammar",
                                                                            spec=label_grammar(kind, values))})
        text = "".join([d async for d in self.models.stream("orchestrator", seg)]).strip()
        if text not in values:
            raise InvalidModelOutput(f"W1 {kind} segment: {text[:40]!r} is not a label")
        return text

    async def _decode_labels(self, call: ModelCall) -> tuple[str, str, str]:
        """The intent label, then the sub-intent label of that intent, each decoded alone: (intent, sub,
        the stream's text through ``</SUB_INTENT>``)."""
        o, c = self.c.tags.open, self.c.tags.close
        opening = self.opening or o("INTENT")
        intent = await self._label(call, opening, "intent", sorted(self.labels))
        text = opening + intent + c("INTENT") + o("SUB_INTENT")
        sub = await self._label(call, text, "sub-intent", sorted(self.labels[intent]))
        return intent, sub, text + sub + c("SUB_INTENT")

    async def _segments(self, call: ModelCall) -> AsyncIterator[str]:
        """The W1 stream from three calls (see module docstring); yields text as one stream would."""
        _, _, text = await self._decode_labels(call)
        text += self.c.tags.open("NARRATION")
        yield text[len(self.opening):]
        tail = call.model_copy(update={"prefix": text, "purpose": "w1.narration", "structured_output": StructuredOutput(
            kind="grammar", spec=tail_grammar(self.tools, narration_max_chars=self.c.narration_max_chars,
                                              narration_required=self.c.narration_required, tags=self.c.tags))})
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

    # -- Φ and the dispatch ------------------------------------------------------------------

    async def _ready(self) -> None:
        """Resolve Φ's table and the live version once (awaitables given at construction), before Φ runs."""
        if inspect.isawaitable(self._phi_source):
            self._phi_source = await self._phi_source
        if inspect.isawaitable(self._live):
            self._live = await self._live

    @property
    def live_version(self) -> int | None:
        return None if inspect.isawaitable(self._live) else self._live  # type: ignore[return-value]

    def _new_run(self) -> PerceptionRun:
        if inspect.isawaitable(self._phi_source):
            raise RuntimeError("Φ's table is still pending: await _ready() first")
        return PerceptionRun(self._phi_source, self.snapshot, labels=self.labels, tools=self.tools, turn=self.turn,
                             live_version=self.live_version, index=self.index, tags=self.c.tags)

    def elapsed_ms(self) -> float:
        return (self.clock() - self._t0) * 1000

    def _on_sub_intent(self, ev: SubIntentParsed) -> None:
        assert self.run is not None and self.run.phi is not None
        phi = self.run.phi
        self.out.intent, self.out.sub_intent, self.out.phi = ev.intent, ev.sub_intent, phi
        self.counters.phi(phi.kind)
        if self.run.dispatched is not None and self.out.dispatched is None:
            self._on_dispatch(self.run.dispatched)  # Φ froze the set: it goes out before anything is logged
        if self.on_c1 is not None:
            self.on_c1(ev)
        self.emit(f"{self.prefix}.phi", intent=ev.intent, sub_intent=ev.sub_intent, outcome=phi.kind,
                  tools=[c.tool for c in phi.tools], calls=[c.model_dump() for c in phi.tools], then=phi.then,
                  missing_keys=list(phi.missing_keys), stale_keys=list(phi.stale_keys),
                  snapshot=self.snapshot.values(), snapshot_version=self.snapshot.version,
                  live_version=self.live_version, table_version=phi.table_version,
                  dispatch=None if self.out.dispatched is None else {
                      "char_offset": self.out.dispatched.point.char_offset,
                      "chunk_index": self.out.dispatched.point.chunk_index,
                      "elapsed_ms": round(self.out.dispatch_ms or 0.0, 3)})

    def _on_dispatch(self, step: DispatchTools) -> None:
        self.out.dispatched = step
        self.out.dispatch_ms = self.elapsed_ms()
        self.counters.dispatch(step.source)
        self.dispatch(step)

    def _on_plan(self, ev: PlanParsed) -> None:
        assert self.run is not None
        if self.run.plan_ignored and self.run.phi is not None:
            self.counters.plan_ignored(self.run.phi.intent, self.run.phi.sub_intent)
            frozen = self.out.dispatched.calls if self.out.dispatched else ()
            self.emit(f"{self.prefix}.w1.plan_ignored", plan=[c.tool for c in ev.calls], frozen=[c.tool for c in frozen])

    def _steps(self, chunk: str) -> list[Any]:
        """Feed one chunk to the run; Φ's decision and the dispatch handled; the narration deltas returned."""
        assert self.run is not None
        out: list[Any] = []
        for step in self.run.feed(chunk):
            if isinstance(step, SubIntentParsed):
                self._on_sub_intent(step)
            elif isinstance(step, DispatchTools) and step is not self.out.dispatched:
                self._on_dispatch(step)
            elif isinstance(step, PlanParsed):
                self._on_plan(step)
            elif isinstance(step, ParsedNarration):
                out.append(step.text)
        return out

    # -- narration ---------------------------------------------------------------------------

    def _say(self, text: str, *, joins: bool = False) -> NarrationDelta:
        if not joins and self.out.narration and not self.out.narration.endswith(" ") and not text.startswith(" "):
            text = " " + text  # a new sentence after a finished one
        self.out.narration += text
        return NarrationDelta(text=text)

    async def _close(self, sentence: str) -> NarrationDelta | None:
        """A finished sentence through the gate: the rest of it (joined to what went out of it), or its stand-in."""
        assert self.gate is not None
        out = await self.gate.close(sentence)
        joins, self._open = self._open, False
        return self._say(out, joins=joins) if out else None

    async def _narrate(self, splitter: SentenceSplitter, delta: str) -> AsyncIterator[NarrationDelta]:
        """Release narration word by word as the gate allows, or (no gate) as decoded within the cap."""
        if self.gate is None:
            text = delta[: max(0, self.c.narration_max_chars - self._chars)]
            self._chars += len(delta)  # the grammar caps it; this guards an unconstrained engine
            if text:
                self.out.narration += text
                yield NarrationDelta(text=text)
            return
        for sentence in splitter.feed(delta):
            if closed := await self._close(sentence):
                yield closed
        partial = splitter.pending.lstrip()
        if partial:
            hold = self.c.hold_words  # None: held only where a violation may be forming
            new = await (self.gate.stream(partial) if hold is None
                         else self.gate.stream(partial, hold_words=hold, forming=False))
            if new:
                yield self._say(new, joins=self._open)
                self._open = True

    # -- the stream --------------------------------------------------------------------------

    async def _failed(self, exc: UpstreamError | InvalidModelOutput, section: str | None = None) -> None:
        """Degrade (log; a failure of the labels is the outcome's ``error``), or raise."""
        if not self.c.degrade:
            raise exc
        if section != "narration":  # the labels still came: the decision keeps them
            self.out.error = exc.code
        extra = {"section": section} if section else {}
        self.emit(f"{self.prefix}.w1_failed", code=exc.code, message=exc.message[:200], **extra)

    async def _serial(self, call: ModelCall, splitter: SentenceSplitter) -> AsyncIterator[NarrationDelta]:
        """One stream (or its segments) through the parser: labels, narration, and (with ``plan``) the plan."""
        await self._ready()  # one stream: its labels may close at any chunk
        self.run = self._new_run()
        raw: list[str] = []
        if self.opening:
            self.run.feed(self.opening)
            raw.append(self.opening)
        stream = self._segments(call) if self.c.segments else self.models.stream("orchestrator", call)
        try:
            async for chunk in stream:
                if self.c.plan and self.c.stop_moot_plan and self.run.plan_moot:
                    # Φ froze the tool set and the narration is done: a later PLAN could change nothing.
                    self.out.stopped_early = True
                    self.emit(f"{self.prefix}.w1.early_stop", offset=self.run.parser._consumed,
                              elapsed_ms=round(self.elapsed_ms(), 3))
                    await stream.aclose()  # type: ignore[attr-defined]
                    break
                raw.append(chunk)
                for text in self._steps(chunk):
                    async for d in self._narrate(splitter, text):
                        yield d
                if not self.c.plan and self.run.parser.narration_closed:
                    await stream.aclose()  # type: ignore[attr-defined]
                    break
            if not self.c.plan:
                self.run.parser.finish(plan_optional=True)
        except (UpstreamError, InvalidModelOutput) as exc:
            await self._failed(exc)
        text = "".join(raw)
        close = self.c.tags.close("NARRATION")
        cut = text.find(close)
        self.out.raw = text if self.c.plan or cut < 0 else text[: cut + len(close)]

    async def _label_pair(self, call: ModelCall) -> str:
        """The two labels decoded alone, then Φ on their close. Returns their text."""
        intent, sub, text = await self._decode_labels(call)
        await self._ready()
        self.run = self._new_run()
        self._steps(text)
        return text

    def _narration_alone(self, call: ModelCall, user_text: str) -> AsyncIterator[str]:
        """The narration decoded in its own call: its own short prompt (the request), one sentence."""
        assert self.narration_prompt is not None
        seg = call.model_copy(update={
            "messages": self.narration_prompt(user_text), "prefix": None, "max_tokens": 48, "purpose": "w1.narration",
            "structured_output": StructuredOutput(kind="grammar", spec=sentence_grammar(self.c.narration_max_chars))})
        return self._relay(seg)

    async def _labels_beside(self, call: ModelCall) -> None:
        """The label pair beside the narration; the caller's W1 text is the labels alone."""
        try:
            self.out.raw = await self._label_pair(call)
        except (UpstreamError, InvalidModelOutput) as exc:
            await self._failed(exc, "labels")
            self.out.raw = ""  # the orchestrator reads the "other" opening, as after a broken stream
        if self.on_labels is not None:
            self.on_labels()

    async def after_lead(self, first: asyncio.Event, work: Any) -> Any:
        """``work`` (a coroutine) once the narration's first word went out, or ``lead_ms`` passed."""
        try:
            if self.c.lead_ms > 0:
                await asyncio.wait_for(first.wait(), self.c.lead_ms / 1000)
        except TimeoutError:
            pass
        except BaseException:  # cancelled while waiting: the work never starts
            work.close()
            raise
        return await work

    async def _parallel(self, call: ModelCall, splitter: SentenceSplitter,
                        user_text: str) -> AsyncIterator[NarrationDelta]:
        """Narration streamed while the labels are decoded beside it (see module docstring)."""
        first = asyncio.Event()
        task = asyncio.create_task(self.after_lead(first, self._labels_beside(call)))
        try:
            try:
                async for text in self._narration_alone(call, user_text):
                    async for d in self._narrate(splitter, text):
                        first.set()  # a word is out: the labels may start
                        yield d
            except (UpstreamError, InvalidModelOutput) as exc:
                await self._failed(exc, "narration")
            first.set()  # the narration ended (or failed) without a token: nothing to wait for
            await task
        finally:
            if not task.done():
                task.cancel()

    async def stream(self, messages: list[ChatMessage], user_text: str = "") -> AsyncIterator[NarrationDelta]:
        """Run the W1 call(s); yield the narration; dispatch the frozen tool set when it is decided."""
        call = self.call(messages)
        splitter = SentenceSplitter()
        self._t0 = self.clock()
        body = self._parallel(call, splitter, user_text) if self.c.parallel else self._serial(call, splitter)
        async for d in body:
            yield d
        if self.gate is not None:
            for sentence in splitter.flush():
                if closed := await self._close(sentence):
                    yield closed
            if not self.out.narration:
                self.gate.add_trusted(self.safe_ack)
                yield self._say(self.safe_ack)
        if self.c.degrade:
            self.emit(f"{self.prefix}.w1", intent=self.out.intent, sub_intent=self.out.sub_intent,
                      error=self.out.error, allowed=self.out.allowed_intents, narration=self.out.narration,
                      ms=round(self.elapsed_ms(), 3))

    def finish(self) -> PerceptionOutcome:
        """The whole stream's outcome (``plan`` mode); raises InvalidModelOutput when it was incomplete."""
        if self.run is None:
            raise InvalidModelOutput("the W1 stream produced nothing")
        return self.run.finish(stopped_early=self.out.stopped_early)

    def calls(self) -> tuple[ToolCall, ...]:
        """The tool calls dispatched (Φ's or the plan's)."""
        return self.out.dispatched.calls if self.out.dispatched else ()

    def cancel(self) -> None:
        for _, _, task in self.out.tasks:
            if not task.done():
                task.cancel()
