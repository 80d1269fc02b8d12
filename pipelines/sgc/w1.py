"""W1 Perception: an incremental parser for the orchestrator's 4-in-1 stream.

The orchestrator's first call streams, in this order::

    <INTENT>recommend</INTENT>
    <SUB_INTENT>lineup_for_opponent</SUB_INTENT>
    <NARRATION>Let me look at your team…</NARRATION>
    <PLAN>[{"tool": "get_inventory", "args": {}}]</PLAN>

:class:`PerceptionParser` is fed the text deltas as they arrive; tags may be
split anywhere across chunks. It returns typed events as soon as they are
certain: :class:`IntentParsed`, :class:`SubIntentParsed` (when
``</SUB_INTENT>`` closes — the W1 dispatch point), :class:`NarrationDelta`
(narration released as it streams, never a partial tag), :class:`PlanParsed`.
:meth:`PerceptionParser.finish` returns the :class:`PerceptionResult`. Any
deviation raises :class:`pipelines.errors.InvalidModelOutput`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipelines.errors import InvalidModelOutput

__all__ = [
    "SECTIONS",
    "ToolCall",
    "IntentParsed",
    "SubIntentParsed",
    "NarrationDelta",
    "PlanParsed",
    "PerceptionEvent",
    "PerceptionResult",
    "PerceptionParser",
    "W1Tags",
    "LONG_TAGS",
    "SHORT_TAGS",
    "parse_perception",
]

SECTIONS: tuple[str, ...] = ("INTENT", "SUB_INTENT", "NARRATION", "PLAN")


_TAG_NAME = r"^[A-Za-z][A-Za-z0-9_]{0,31}$"


class W1Tags(BaseModel):
    """The tag names the stream spells its sections with (section -> tag).

    Every tag is text the engine decodes one token at a time before the narration can
    start: ``</INTENT><SUB_INTENT>`` and ``</SUB_INTENT><NARRATION>`` are 21 of SmolLM2's
    tokens, ``</I><S>`` and ``</S><N>`` are 10.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # letters, digits and underscores: a "<" or ">" inside a name would make a close tag
    # split across chunks impossible to hold back whole
    INTENT: str = Field("INTENT", pattern=_TAG_NAME)
    SUB_INTENT: str = Field("SUB_INTENT", pattern=_TAG_NAME)
    NARRATION: str = Field("NARRATION", pattern=_TAG_NAME)
    PLAN: str = Field("PLAN", pattern=_TAG_NAME)

    def open(self, section: str) -> str:
        return f"<{getattr(self, section)}>"

    def close(self, section: str) -> str:
        return f"</{getattr(self, section)}>"


LONG_TAGS = W1Tags()
SHORT_TAGS = W1Tags(INTENT="I", SUB_INTENT="S", NARRATION="N", PLAN="P")
_LIMITS = {"INTENT": 64, "SUB_INTENT": 64, "PLAN": 8000}
_WS = " \t\r\n"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCall(_Frozen):
    """One planned tool call: ``{"tool": name, "args": {...}}``."""

    tool: str = Field(..., min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class IntentParsed(_Frozen):
    kind: str = "intent"
    intent: str
    offset: int = Field(..., description="Stream character offset just after </INTENT>.")


class SubIntentParsed(_Frozen):
    kind: str = "sub_intent"
    intent: str
    sub_intent: str
    offset: int = Field(..., description="Stream character offset just after </SUB_INTENT>.")


class NarrationDelta(_Frozen):
    kind: str = "narration"
    text: str


class PlanParsed(_Frozen):
    kind: str = "plan"
    calls: tuple[ToolCall, ...]
    offset: int


PerceptionEvent = IntentParsed | SubIntentParsed | NarrationDelta | PlanParsed


class PerceptionResult(_Frozen):
    """The whole parsed perception step."""

    intent: str
    sub_intent: str
    narration: str
    plan: tuple[ToolCall, ...]
    length: int = Field(..., description="Characters consumed (the whole stream).")


def _bad(message: str, **details: Any) -> InvalidModelOutput:
    return InvalidModelOutput(f"perception stream: {message}", details=details)


def _parse_plan(text: str, tools: Collection[str] | None) -> tuple[ToolCall, ...]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad("PLAN is not valid JSON", error=str(exc)) from exc
    if not isinstance(raw, list):
        raise _bad("PLAN must be a JSON list", got=type(raw).__name__)
    calls: list[ToolCall] = []
    for i, item in enumerate(raw):
        try:
            call = ToolCall.model_validate(item)
        except ValidationError as exc:
            raise _bad(f"PLAN item {i} is not a tool call", index=i) from exc
        if tools is not None and call.tool not in tools:
            raise _bad(f"PLAN item {i} names unknown tool {call.tool!r}", index=i, tool=call.tool)
        calls.append(call)
    return tuple(calls)


class PerceptionParser:
    """Incremental state machine over the 4-in-1 stream (feed chunks, then finish)."""

    def __init__(
        self,
        *,
        labels: Mapping[str, Collection[str]] | None = None,
        tools: Collection[str] | None = None,
        tags: W1Tags = LONG_TAGS,
    ) -> None:
        """``labels`` (intent → sub-intents) and ``tools`` restrict what is accepted when given."""
        self._labels = labels
        self._tools = tools
        self._tags = tags
        self._buf = ""
        self._consumed = 0  # stream offset of self._buf[0]
        self._section = 0  # index into SECTIONS
        self._inside = False
        self._done = False
        self._values: dict[str, Any] = {}
        self._narration: list[str] = []

    @property
    def done(self) -> bool:
        """True once ``</PLAN>`` has closed."""
        return self._done

    @property
    def narration_closed(self) -> bool:
        """True once ``</NARRATION>`` has closed (only the plan can follow)."""
        return self._done or SECTIONS[self._section] == "PLAN"

    def _take(self, n: int) -> str:
        text, self._buf = self._buf[:n], self._buf[n:]
        self._consumed += n
        return text

    def feed(self, chunk: str) -> list[PerceptionEvent]:
        """Consume one text delta; return the events it made certain (possibly none)."""
        self._buf += chunk
        events: list[PerceptionEvent] = []
        while self._step(events):
            pass
        return events

    def _step(self, events: list[PerceptionEvent]) -> bool:
        """Advance once; False when more input is needed."""
        if self._done:
            stripped = self._buf.lstrip(_WS)
            if stripped:
                raise _bad("text after </PLAN>", text=stripped[:40])
            self._take(len(self._buf))
            return False
        name = SECTIONS[self._section]
        if not self._inside:
            skip = len(self._buf) - len(self._buf.lstrip(_WS))
            self._take(skip)
            if not self._buf:
                return False
            tag = self._tags.open(name)
            if self._buf.startswith(tag):
                self._take(len(tag))
                self._inside = True
                return True
            if tag.startswith(self._buf):
                return False
            raise _bad(f"expected {tag}", offset=self._consumed, text=self._buf[:40])
        close = self._tags.close(name)
        at = self._buf.find(close)
        if name == "NARRATION":
            if at < 0:
                keep = _held_suffix(self._buf, close)
                if len(self._buf) > keep:
                    text = self._take(len(self._buf) - keep)
                    self._narration.append(text)
                    events.append(NarrationDelta(text=text))
                return False
            if at:
                text = self._take(at)
                self._narration.append(text)
                events.append(NarrationDelta(text=text))
            self._take(len(close))
            self._close()
            return True
        if at < 0:
            if len(self._buf) > _LIMITS[name] + len(close):
                raise _bad(f"<{name}> section too long", limit=_LIMITS[name])
            return False
        value = self._take(at)
        self._take(len(close))
        events.append(self._finish_section(name, value))
        self._close()
        return True

    def _close(self) -> None:
        self._inside = False
        if self._section == len(SECTIONS) - 1:
            self._done = True
        else:
            self._section += 1

    def _finish_section(self, name: str, raw: str) -> PerceptionEvent:
        if name == "PLAN":
            calls = _parse_plan(raw, self._tools)
            self._values["plan"] = calls
            return PlanParsed(calls=calls, offset=self._consumed)
        value = raw.strip(_WS)
        if not value or "<" in value or any(c in value for c in _WS):
            raise _bad(f"<{name}> must hold one label", value=value[:40])
        if name == "INTENT":
            if self._labels is not None and value not in self._labels:
                raise _bad(f"unknown intent {value!r}", intent=value)
            self._values["intent"] = value
            return IntentParsed(intent=value, offset=self._consumed)
        intent = self._values["intent"]
        if self._labels is not None and value not in self._labels[intent]:
            raise _bad(f"unknown sub-intent {value!r} for {intent!r}", intent=intent, sub_intent=value)
        self._values["sub_intent"] = value
        return SubIntentParsed(intent=intent, sub_intent=value, offset=self._consumed)

    def finish(self, *, plan_optional: bool = False) -> PerceptionResult:
        """End of stream: the complete result, or InvalidModelOutput if a section is missing.

        ``plan_optional``: the caller stopped reading after ``</NARRATION>`` because a
        frozen tool set makes any plan moot; the result then carries an empty plan.
        """
        if plan_optional and not self._done and self.narration_closed:
            return PerceptionResult(
                intent=self._values["intent"],
                sub_intent=self._values["sub_intent"],
                narration="".join(self._narration),
                plan=(),
                length=self._consumed,
            )
        if not self._done:
            where = SECTIONS[self._section]
            state = "inside" if self._inside else "before"
            raise _bad(f"stream ended {state} <{where}>", section=where, offset=self._consumed)
        return PerceptionResult(
            intent=self._values["intent"],
            sub_intent=self._values["sub_intent"],
            narration="".join(self._narration),
            plan=self._values["plan"],
            length=self._consumed,
        )


def _held_suffix(buf: str, close: str) -> int:
    """Length of the longest suffix of ``buf`` that is a proper prefix of ``close``."""
    start = buf.rfind("<", max(0, len(buf) - len(close) + 1))
    while start >= 0:
        tail = buf[start:]
        if close.startswith(tail):
            return len(tail)
        start = buf.rfind("<", max(0, len(buf) - len(close) + 1), start)
    return 0


def parse_perception(
    chunks: Iterable[str],
    *,
    labels: Mapping[str, Collection[str]] | None = None,
    tools: Collection[str] | None = None,
) -> tuple[list[PerceptionEvent], PerceptionResult]:
    """Parse a whole (already chunked) stream: every event, then the result."""
    parser = PerceptionParser(labels=labels, tools=tools)
    events: list[PerceptionEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events, parser.finish()
