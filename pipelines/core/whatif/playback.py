"""The ports a re-decided turn runs on: its logged model outputs, tool observations and prechecks played back.

::

    PlaybackModels      a call whose fingerprint (``model.call`` ``key``) is in the turn's log gets the logged
                        output (masked JSON values put back from their enum); a role being swapped, or a call
                        the candidate changed when a live client re-runs those, goes to the live client; a
                        changed call without one gets the logged output of the same slot (``estimated``);
                        a call with neither fails as a model outage (``missing``)
    PlaybackTools       a tool call gets the logged observation of the same tool and arguments (this turn's,
                        else, for a read, the session's latest); a precheck its logged reason; anything not
                        in the log fails as a tool error (noted: the decision that needs it is unresolved)
    PlaybackGuardrails  the candidate's guard, which also hands the session's vault to the tool playback
    MemoryTurns         the re-run session's own history (what its next turn reads)

Which session and turn a call belongs to is a context variable (:func:`playing`): one pipeline object
serves every session of a what-if, as one serves every session of an app.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pipelines.core.modelrecord import CANCELLED, EVENT, call_key, call_slot, unpick
from pipelines.core.ports import ToolCallResult, ToolSession
from pipelines.errors import ModelTimeout, ModelUnavailable, ToolError, error_class_for_code
from pipelines.guardrails.pii import Vault, mask_pii_fields
from pipelines.protocols import ModelCall, ModelClient, TurnRecord
from pipelines.tools import ToolObservation

from .log import LoggedSession, LoggedTurn

__all__ = ["SessionPlay", "playing", "PlaybackModels", "PlaybackTools", "PlaybackGuardrails", "MemoryTurns",
           "ListSink", "SOURCES"]

#: Where a re-run model call's output came from.
SOURCES = ("logged", "live", "estimated", "missing")


@dataclass
class SessionPlay:
    """The playback state of one session being re-decided (the turn now running, what it used)."""

    session: LoggedSession
    prefix: str = "tandem"
    turn: LoggedTurn | None = None
    vault: Vault = field(default_factory=Vault)
    text: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    schemas: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _used_calls: set[int] = field(default_factory=set)
    _used_tools: set[int] = field(default_factory=set)

    def begin(self, turn: LoggedTurn) -> None:
        self.turn, self.text = turn, ""
        self.calls, self.schemas, self.notes = [], [], []
        self._used_calls, self._used_tools = set(), set()

    def logged_calls(self) -> list[dict[str, Any]]:
        return self.turn.of(EVENT) if self.turn is not None else []

    def take_call(self, role: str, *, key: str | None = None, slot: str | None = None) -> dict[str, Any] | None:
        """The first unused logged call of ``role`` with this key (or, with ``slot``, of this slot)."""
        for i, rec in enumerate(self.logged_calls()):
            if i in self._used_calls or rec.get("role") != role:
                continue
            if (key is not None and rec.get("key") == key) or (slot is not None and rec.get("slot") == slot):
                self._used_calls.add(i)
                return rec
        return None

    def redacted(self, args: Any) -> str:
        """Arguments as the log keeps them (placeholders, personal fields masked), canonical."""
        return json.dumps(mask_pii_fields(self.vault.redact_obj(args)), sort_keys=True, default=str)

    def take_tool(self, name: str, args: dict[str, Any], *, confirmed: bool) -> tuple[dict[str, Any], int] | None:
        """The logged observation of ``name`` with these arguments: this turn's first unused one, else (a read)
        the latest one of an earlier turn; with the index of the turn it comes from."""
        assert self.turn is not None
        want = self.redacted(args)
        kind = f"{self.prefix}.tool"
        for i, ev in enumerate(self.turn.of(kind)):
            if i not in self._used_tools and ev.get("tool") == name and self.redacted(ev.get("args") or {}) == want:
                self._used_tools.add(i)
                return ev, self.turn.index
        if confirmed:
            return None
        for t in reversed([t for t in self.session.turns if t.index < self.turn.index]):
            for ev in reversed(t.of(kind)):
                if ev.get("tool") == name and not ev.get("confirmed") and self.redacted(ev.get("args") or {}) == want:
                    return ev, t.index
        return None


_PLAY: ContextVar[SessionPlay | None] = ContextVar("tandem_whatif_play", default=None)


@contextlib.contextmanager
def playing(play: SessionPlay) -> Iterator[SessionPlay]:
    """``play`` is the session the ports below serve in this block (and the tasks it starts)."""
    token = _PLAY.set(play)
    try:
        yield play
    finally:
        _PLAY.reset(token)


def _play() -> SessionPlay:
    play = _PLAY.get()
    if play is None or play.turn is None:
        raise RuntimeError("a playback port was called outside a re-decided turn")
    return play


class PlaybackModels:
    """A :class:`~pipelines.protocols.ModelClient` over the logged calls (see module docstring)."""

    def __init__(self, live: ModelClient | None = None, *, live_roles: Sequence[str] = (),
                 rerun_changed: bool = False) -> None:
        self.live, self.live_roles, self.rerun_changed = live, frozenset(live_roles), rerun_changed

    async def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        play = _play()
        so = call.structured_output
        if role == "orchestrator" and so is not None and so.kind == "json":
            play.schemas.append(so.spec)  # a decision step's offer, with its grounded candidates
        key = call_key(role, call)
        note = {"role": role, "purpose": getattr(call, "purpose", ""), "key": key}
        rec = None if role in self.live_roles else play.take_call(role, key=key)
        if rec is None and self.live is not None and (role in self.live_roles or self.rerun_changed):
            play.calls.append({**note, "source": "live"})
            async for delta in self.live.stream(role, call):
                yield delta
            return
        source = "logged"
        if rec is None:
            rec = play.take_call(role, slot=call_slot(role, call))
            source = "estimated" if rec is not None else "missing"
        play.calls.append({**note, "source": source})
        if rec is None:
            raise ModelUnavailable(f"no logged output for this {role} call")
        text = unpick(str(rec.get("text") or ""), rec.get("picks") or {}, call)
        if text:
            yield text
        if rec.get("error") == CANCELLED:  # the logged call ran past its caller's timeout
            raise ModelTimeout(f"the logged {role} call was cut off by its caller's timeout")
        if rec.get("error"):
            raise error_class_for_code(str(rec["error"]))(f"logged {role} failure: {rec['error']}")


class PlaybackTools:
    """A tool port over the logged observations and prechecks (see module docstring)."""

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        play = _play()
        found = play.take_tool(name, args, confirmed=session.confirmed)
        if found is None:
            play.notes.append(f"no logged observation of {name} {play.redacted(args)}")
            raise ToolError(f"{name}: no logged observation for these arguments")
        ev, index = found
        if index != play.turn.index:  # type: ignore[union-attr]
            play.notes.append(f"{name}: the observation logged in turn {index}")
        ok = bool(ev.get("ok"))
        reason = None if ok else ev.get("reason")
        obs = ToolObservation(tool=name, args=args, ok=ok, result=ev.get("result") if ok else None,
                              error_code=reason, error_message=None if ok else f"logged refusal [{reason}]")
        return ToolCallResult(observation=obs, reason=reason)

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        play = _play()
        want = play.redacted(args)
        for ev in play.turn.of(f"{play.prefix}.precheck"):  # type: ignore[union-attr]
            if ev.get("tool") == name and play.redacted(ev.get("args") or {}) == want:
                return ev.get("reason")  # type: ignore[no-any-return]
        play.notes.append(f"no logged precheck of {name} {want}")
        raise ToolError(f"{name}: no logged precheck for these arguments")


class PlaybackGuardrails:
    """The guard of one side of the what-if; its pre-guard also gives the playback the session's vault."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def version(self) -> str:
        return str(self.inner.version)

    async def pre(self, text: str, history: Sequence[str] = ()) -> Any:
        res = await self.inner.pre(text, history)
        play = _PLAY.get()
        if play is not None:
            play.vault, play.text = Vault.from_entries(res.vault), res.text
        return res

    async def post(self, sentence: str, view: Any, context: str = "") -> Any:
        return await self.inner.post(sentence, view, context)


class MemoryTurns:
    """A session store in memory: the re-run session's history."""

    def __init__(self) -> None:
        self.turns: dict[str, list[TurnRecord]] = {}

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        rows = self.turns.get(session_id, [])
        return list(rows[-limit:] if limit else rows)

    async def session_exists(self, session_id: str) -> bool:
        return session_id in self.turns

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        rows = self.turns.setdefault(session_id, [])
        rows.append(record.model_copy(update={"index": len(rows)}))


class ListSink:
    """An event sink that keeps the re-run's events as ``{"kind": ..., **fields}``."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, kind: str, **fields: Any) -> None:
        self.events.append({"kind": kind, **fields})
