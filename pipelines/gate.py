"""The one fail-closed sentence gate, and the judges plugged into it.

Every model sentence that reaches a user passes a :class:`SentenceGate` first:
narration (before the contract exists) and the generator's reply (after). A gate
runs its judges in order on each complete sentence; the first violation withholds
the sentence and releases the gate's safe wording instead (never the same safe
wording twice in a row); a judge that fails withholds the sentence too (fail
closed). Judges:

* :class:`GuardrailsJudge` — the guardrail table's post-guard (ids, actions,
  amounts, dates, handoff, completion claims, placeholders) through the
  ``Guardrails`` port (a CPU deployment in ``serve/``);
* :class:`NarrationJudge` — what narration may never carry: ids, amounts, dates,
  entity names, promises, action claims, placeholders; it tells the gate which words
  of a sentence still being written may go out, and (given the pack's completion) ends
  a refused sentence whose released words were a promise's subject ("I'll …");
* :class:`EchoJudge` — a sentence that echoes the contract's internal fields or
  repeats a sentence already released;
* any object with ``async judge(sentence, released) -> Judgement`` (a domain's own,
  e.g. the coach's ownership / contradiction judge).

Decisions are counted (``guard`` ``<stage>.pass|block``, ``blocked`` by kind)
and withheld sentences logged (``gate.block`` events).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import regex
from pydantic import BaseModel, ConfigDict, Field

from pipelines.guardrails.ids import (
    VALUE_PATTERNS,
    extract_amounts,
    extract_ids,
    extract_time_promises,
    normalize_text,
)
from pipelines.guardrails.pii import PLACEHOLDER_RE
from pipelines.guardrails.post import PostGuardView, Violation, canary_forming, canary_leak
from pipelines.spans import guard_span

__all__ = [
    "Judgement",
    "SentenceJudge",
    "SentenceGate",
    "GuardrailsJudge",
    "NarrationJudge",
    "EchoJudge",
    "GateCounters",
]

logger = logging.getLogger("tandem.gate")


class Judgement(BaseModel):
    """One judge's verdict on a sentence (``text`` is the form to release when it passes)."""

    model_config = ConfigDict(extra="forbid")

    text: str
    violations: list[Violation] = Field(default_factory=list)
    replacement: str = Field("", description="The judge's own safe wording for this violation (else the gate's).")


@runtime_checkable
class SentenceJudge(Protocol):
    """Judges one complete sentence given what was already released."""

    async def judge(self, sentence: str, released: Sequence[str]) -> Judgement:
        """The verdict; ``released`` is the gate's delivered sentences so far (redacted form)."""
        ...


class GateCounters(Protocol):
    def guard(self, stage: str, decision: str) -> None: ...

    def blocked(self, kind: str) -> None: ...

    def delivered_violation(self, kind: str) -> None: ...


class SentenceGate:
    """Releases sentences through its judges (see module docstring).

    ``mode="observe"`` (the audit of an unguarded ablation rung) releases every
    sentence unchanged and counts its violations as delivered. ``event`` /
    ``source`` name the logged event of a decision (``gate.block`` by default);
    ``replacements=False`` ignores the judges' own safe wordings (a withheld
    sentence is then dropped, or replaced by the gate's ``safe``).
    A judge with an ``accept(judgement)`` method is told about every sentence
    that was released (so a judge can remember what the reply already said).
    """

    def __init__(self, judges: Sequence[Any], counters: GateCounters, emit: Callable[..., None], *,
                 stage: str, safe: str, fail_closed: str | None = None, mode: str = "enforce",
                 event: str = "gate.block", source: str = "", replacements: bool = True) -> None:
        self.judges = list(judges)
        self.counters = counters
        self.emit = emit
        self.stage = stage
        self.safe = safe
        self.fail_closed = safe if fail_closed is None else fail_closed
        self.mode = mode
        self.event = event
        self.source = source
        self.replacements = replacements
        self.released: list[str] = []
        self.withheld = 0
        self.replaced = 0
        self.kinds: list[str] = []
        self._decision: tuple[str, list[str]] = ("pass", [])  # the last release's, for its span
        self._streamed = 0  # characters of the current sentence released by stream()
        self._blocked_partial = False

    @property
    def text(self) -> str:
        return " ".join(self.released)

    @property
    def last_blocked(self) -> list[str]:
        """The violation kinds of the last release if it was withheld or replaced, else []."""
        return list(self._decision[1]) if self._decision[0] == "block" else []

    @property
    def model_released(self) -> int:
        """How many released sentences were the model's own (not safe wordings)."""
        return len(self.released) - self.replaced

    def add_trusted(self, text: str) -> None:
        """Record a text the pipeline delivers itself (a template), so judges see it as released."""
        self.released.append(text)
        self.replaced += 1

    def _accepted(self, verdicts: list[tuple[Any, Judgement]]) -> None:
        for judge, verdict in verdicts:
            accept = getattr(judge, "accept", None)
            if accept is not None:
                accept(verdict)

    def _log(self, decision: str, violations: list[Violation], sentence: str) -> None:
        fields: dict[str, Any] = {"stage": self.stage, "decision": decision, "kinds": [v.kind for v in violations],
                                  "details": [v.detail for v in violations],
                                  "sentence": normalize_text(sentence)[:300]}
        if self.source:
            fields["source"] = self.source
        self.emit(self.event, **fields)

    async def release(self, sentence: str) -> str | None:
        """The text to deliver for ``sentence``: itself, the safe wording, or ``None``.

        Each decision is a GUARDRAIL span ``tandem.guard.<stage>`` (sentence, decision, kinds, release).
        """
        with guard_span(self.stage, text=sentence, source=self.source or None, mode=self.mode) as span:
            self._decision = ("pass", [])
            out = await self._release(sentence)
            span.decision(self._decision[0], kinds=self._decision[1], output=out)
        return out

    async def _release(self, sentence: str) -> str | None:
        text = sentence
        violations: list[Violation] = []
        safe = self.safe
        verdicts: list[tuple[Any, Judgement]] = []
        for judge in self.judges:
            try:
                verdict = await judge.judge(text, self.released)
            except Exception as exc:  # fail closed: an unjudged sentence is never released
                logger.warning("judge %s failed", type(judge).__name__, exc_info=exc)
                violations = [Violation(kind="guard_unavailable", detail=type(exc).__name__)]
                safe = self.fail_closed
                break
            verdicts.append((judge, verdict))
            if verdict.violations:
                violations = list(verdict.violations)
                safe = (verdict.replacement or safe) if self.replacements else safe
                break
            text = verdict.text
        if not violations:
            self.counters.guard(self.stage, "pass")
            self._accepted(verdicts)
            self.released.append(text)
            return text
        self.kinds += [v.kind for v in violations if v.kind not in self.kinds]
        self._decision = ("observe" if self.mode == "observe" else "block", [v.kind for v in violations])
        if self.mode == "observe":
            for v in violations:
                self.counters.delivered_violation(v.kind)
            self._log("observe", violations, sentence)
            self._accepted(verdicts)
            self.released.append(sentence)
            return sentence
        self.withheld += 1
        self.counters.guard(self.stage, "block")
        for v in violations:
            self.counters.blocked(v.kind)
        self._log("block", violations, sentence)
        if not safe or (self.released and self.released[-1] == safe):
            return None
        self.released.append(safe)
        self.replaced += 1
        return safe

    async def stream(self, partial: str, *, hold_words: int = 3, forming: bool = True) -> str:
        """Release a sentence while it is still being written: the words that are newly safe.

        ``partial`` is the sentence so far. Every judge sees all of it on each call, and
        only complete words are released, held back from its end: ``hold_words`` words
        for a judge that only judges text (a violation that takes up to ``hold_words + 1``
        words to appear is caught before its first word goes out); for a judge with a
        ``releasable(partial) -> int`` method (unless ``forming`` is false), every word before
        the first one a violation may still be forming from (no word of a violation ever goes
        out, however long) — the word still being written too when the judge counts it
        (``"I"`` of ``"I'll"``, which an ending can complete).
        Once the sentence so far fails, nothing more of it is released (:meth:`close`
        then decides). Returns ``""`` when nothing new is safe.
        """
        if self._blocked_partial:
            return ""
        words = _WORD.findall(partial)  # the last one may still grow
        complete = len(words) if partial[-1:].isspace() else len(words) - 1
        limits = []
        for judge in self.judges:
            # a judge that can tell where a violation may still be forming holds from there instead
            releasable = getattr(judge, "releasable", None) if forming else None
            try:
                limits.append(complete - hold_words if releasable is None else releasable(partial))
            except Exception:  # fail closed, as for a judge that fails
                self._blocked_partial = True
                return ""
        cut = sum(len(w) for w in words[: max(0, min(limits, default=complete - hold_words))])
        if cut <= self._streamed:
            return ""
        if await self._passes(partial, self.released) is None:  # close() decides, fail closed
            self._blocked_partial = True
            return ""
        new = partial[self._streamed:cut]
        self._streamed = cut
        return new

    async def close(self, sentence: str) -> str | None:
        """The sentence :meth:`stream` was releasing is complete: its remainder, or the safe wording.

        Judged whole; when it passes, the rest of it is released. When it fails, nothing
        more of it is: a judge's ending for the fragment that already went out completes it
        when the whole passes (``"I'll"`` + ``"look into that."``), else the safe wording
        follows as a sentence of its own (a fragment that went out never carried the violation).
        """
        streamed, self._streamed, self._blocked_partial = self._streamed, 0, False
        if not streamed:
            return await self.release(sentence)
        withheld = self.withheld
        out = await self.release(sentence)
        if self.withheld == withheld:
            return sentence[streamed:]
        completed = await self._complete(sentence[:streamed], out)
        if completed is not None:
            return completed
        # the safe wording follows as a sentence of its own, after a space the fragment may lack ("I")
        return out if out is None or sentence[streamed - 1].isspace() else " " + out

    async def _passes(self, text: str, released: Sequence[str]) -> list[tuple[Any, Judgement]] | None:
        """Every judge's verdict on ``text`` when all pass it; ``None`` when one refuses or fails."""
        verdicts: list[tuple[Any, Judgement]] = []
        for judge in self.judges:
            try:
                verdict = await judge.judge(text, released)
            except Exception:  # fail closed: an unjudged text is never released
                return None
            if verdict.violations:
                return None
            verdicts.append((judge, verdict))
        return verdicts

    async def _complete(self, fragment: str, out: str | None) -> str | None:
        """A judge's ending for a released ``fragment`` whose sentence was refused, when the whole passes.

        The first judge with a ``completion(fragment) -> str | None`` method that has one for this
        fragment gives it; fragment + ending is judged like any sentence and then recorded as
        released in place of the safe wording (``out``, when one was recorded).
        """
        ending = None
        for judge in self.judges:
            complete = getattr(judge, "completion", None)
            ending = complete(fragment) if complete is not None else None
            if ending:
                break
        if not ending:
            return None
        whole = fragment + ending
        verdicts = await self._passes(whole, self.released[:-1] if out is not None else self.released)
        if verdicts is None:  # refused, or a judge failed: the safe wording stands
            return None
        self._accepted(verdicts)
        if out is not None:
            self.released[-1] = whole
        else:
            self.released.append(whole)
            self.replaced += 1
        self._log("complete", [], whole)
        return ending

    def summary(self) -> dict[str, Any]:
        """What the gate did this turn (stored in the turn's meta)."""
        return {"mode": self.mode, "released": len(self.released), "withheld": self.withheld,
                "kinds": sorted(self.kinds)}


class GuardrailsJudge:
    """The guardrail table's post-guard, through the ``Guardrails`` port."""

    def __init__(self, guardrails: Any, view: PostGuardView) -> None:
        self.guardrails = guardrails
        self.view = view

    async def judge(self, sentence: str, released: Sequence[str]) -> Judgement:
        verdict = await self.guardrails.post(sentence, self.view, " ".join(released)[-120:])
        return Judgement(text=verdict.text, violations=list(verdict.violations), replacement=verdict.replacement)


_OUTCOME = (r"(?:cancel\w*|refund\w*|send|sent|ship\w*|deliver\w*|replac\w*|fix\w*|credit\w*|return\w*|"
            r"exchang\w*|chang\w*|updat\w*|modif\w*|process\w*|approv\w*|transfer\w*|complet\w*)")
_PROMISE = re.compile(
    rf"\b(?:i(?:['’]ll| will|['’]m| am)|we(?:['’]ll| will|['’]re| are)|you(?:['’]ll| will))\s+(?:\w+\s+){{0,2}}?"
    rf"{_OUTCOME}\b"
    r"|\b(guarantee\w*|promise\w*|definitely|for sure|right away)\b|\bmake sure\b", re.I)
_CLAIM = re.compile(
    rf"\b(?:i|we)(?:['’]ve| have)\s+(?:already\s+|now\s+|just\s+)?{_OUTCOME}\b"
    rf"|\b(?:has|have|had) (?:now |already )?been\s+{_OUTCOME}\b"
    rf"|\b(?:is|are) (?:now |already )?(?:cancelled|canceled|refunded|processed|updated|changed|returned|"
    r"exchanged|approved|completed|shipped|delivered|done)\b"
    rf"|\b(?:i|we) (?:just )?(?:cancelled|canceled|refunded|processed|updated|changed|returned|exchanged|"
    r"approved|completed|transferred)\b", re.I)
_MARKUP = re.compile(r"[<>{}\[\]]")
# the subject a promise opens with that an ending can still make harmless ("I'll" + "look into that.")
_SUBJECT = r"\b(?:i|we)(?:['’]ll| will)\s+"
_SUBJECT_AT = re.compile(_SUBJECT, re.I)
_SUBJECT_END = re.compile(_SUBJECT + r"$", re.I)
# the whole subjects a fragment that stopped inside one is completed to, in this order
_SUBJECT_FORMS = ("I'll ", "I’ll ", "I will ", "we'll ", "we’ll ", "we will ")
_WORD = re.compile(r"\S+\s*")  # a word and its whitespace (the last one may still grow)


@functools.cache
def _partial_form(pattern: str, flags: int) -> regex.Pattern[str]:
    return regex.compile(pattern, flags & (re.I | re.M | re.S | re.X | re.A))


def inside_subject(text: str) -> bool:
    """Whether ``text`` is a promise's subject still being written: ``"I"``, ``"I'll"``, ``"we w"``."""
    m = _partial_form(_SUBJECT, re.I).fullmatch(text, partial=True) if text else None
    return m is not None and m.partial


def forming_at(pattern: re.Pattern[str], text: str) -> int | None:
    """Where a match of ``pattern`` begins that text going on from ``text`` could still
    complete (a partial match reaching its end); ``None`` when none is forming."""
    starts = [m.start() for m in _partial_form(pattern.pattern, pattern.flags).finditer(text, partial=True)
              if m.partial and m.end() > m.start()]  # not the empty one at the end: anything may start there
    return min(starts, default=None)


class NarrationJudge:
    """What a narration sentence (model text before any decision) may never carry."""

    def __init__(self, entity_names: Iterable[str] = (), completion: str | None = None) -> None:
        self.ending = completion
        names = sorted({n for n in entity_names if n and len(n) > 2}, key=lambda n: (-len(n), n))
        self._names = (re.compile(r"(?<![\w])(" + "|".join(re.escape(n) for n in names) + r")(?![\w])", re.I)
                       if names else None)
        self._forming = [p for p in (self._names, _PROMISE, _CLAIM, *VALUE_PATTERNS, PLACEHOLDER_RE, _MARKUP)
                         if p is not None]

    def releasable(self, partial: str) -> int:
        """How many complete words of ``partial`` no violation can still grow into.

        The words before the first one that a match of any of the judge's patterns (or the
        canary) may be forming from, were the sentence to go on: ``"Desk"`` is held while
        ``"Desk Lamp"`` may follow, ``"I'll"`` while ``"I'll cancel…"`` may — unless the judge has
        a ``completion``: then a promise's subject (``"I'll"``, ``"we will"``) goes out when nothing
        else forms before its end, the words after it are held while an outcome may follow, and
        a refused sentence is ended with the completion (:meth:`completion`).
        """
        text = normalize_text(partial)
        starts = {id(p): s for p in self._forming if (s := forming_at(p, text)) is not None}
        cut = min(starts.values(), default=len(text))  # the words that end before the earliest forming match
        n = len(re.findall(r"\S+\s+", text[:cut]))
        if self.ending and starts.get(id(_PROMISE)) == cut:
            subject = _SUBJECT_AT.match(text, cut)
            if subject and all(s >= subject.end() for k, s in starts.items() if k != id(_PROMISE)):
                n = len(re.findall(r"\S+\s+", text[:subject.end()]))
            elif subject is None and inside_subject(text):
                # the sentence so far is a subject being written ("I", "I'll"): all of it, the word still
                # being written too. What goes out is the subject's own letters and nothing else: whatever
                # the sentence turns into, when it is refused the completion finishes the subject
                # ("I" + "'ll look into that."), so no letter of anything else has gone out.
                n = len(_WORD.findall(text))
        canary = canary_forming(_WORD.findall(text))
        return n if canary is None else min(n, canary)

    def completion(self, fragment: str) -> str | None:
        """The ending of a refused sentence whose released ``fragment`` ends with a promise's subject,
        or stops inside one (``"I"`` + ``"'ll "`` + the ending)."""
        if not self.ending:
            return None
        text = normalize_text(fragment)
        if _SUBJECT_END.search(text):
            return self.ending
        if not inside_subject(text):  # only a sentence that opens with the subject went out unfinished
            return None
        tail = text.lower()
        rest = next(f[len(tail):] for f in _SUBJECT_FORMS if f.lower().startswith(tail))
        return rest + self.ending

    async def judge(self, sentence: str, released: Sequence[str]) -> Judgement:
        return self.check(sentence, " ".join(released))

    def check(self, sentence: str, context: str = "") -> Judgement:
        """Pure check (the async :meth:`judge` wraps it); ``context`` is the narration already released."""
        text = normalize_text(sentence).strip()
        out: list[Violation] = []
        if canary_leak(text, context):
            out.append(Violation(kind="canary_leak"))
        ids = extract_ids(text)
        if ids:
            out.append(Violation(kind="narration_id", detail=",".join(sorted(set().union(*ids.values())))))
        if extract_amounts(text):
            out.append(Violation(kind="narration_amount"))
        if extract_time_promises(text):
            out.append(Violation(kind="narration_date"))
        if PLACEHOLDER_RE.search(text) or _MARKUP.search(text):
            out.append(Violation(kind="narration_markup"))
        if self._names is not None:
            m = self._names.search(text)
            if m:
                out.append(Violation(kind="narration_entity", detail=m.group(0)))
        if _PROMISE.search(text):
            out.append(Violation(kind="narration_promise"))
        if _CLAIM.search(text):
            out.append(Violation(kind="narration_claim"))
        return Judgement(text=text, violations=out)


_FIELD = re.compile(r"\b[a-z]+(?:_[a-z]+)+\s*[=:]|\b(?:path|task|state|request|rule|problem|observed|action|"
                    r"source|contract|c[123])\s*:", re.I)


class EchoJudge:
    """A sentence that echoes internal contract fields, or repeats one already released."""

    def __init__(self, internal_terms: Iterable[str] = ()) -> None:
        terms = sorted({t for t in internal_terms if t}, key=len, reverse=True)
        self._terms = re.compile("|".join(re.escape(t) for t in terms), re.I) if terms else None

    async def judge(self, sentence: str, released: Sequence[str]) -> Judgement:
        return self.check(sentence, released)

    def check(self, sentence: str, released: Sequence[str]) -> Judgement:
        text = normalize_text(sentence).strip()
        out: list[Violation] = []
        if _FIELD.search(text) or (self._terms is not None and self._terms.search(text)):
            out.append(Violation(kind="contract_echo"))
        key = _key(text)
        if key and any(_key(r) == key for r in released):
            out.append(Violation(kind="repetition"))
        return Judgement(text=text, violations=out)


def _key(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())
