"""The test doubles of the Protocols of :mod:`pipelines.protocols` (no Ray, no engine) — one set for
every pipeline family.

* :class:`ScriptModels` — a role-addressed :class:`~pipelines.protocols.ModelClient` that plays
  scripts: items pushed per role (one item per call: a ``str`` yielded in small chunks, a
  ``list[str]`` yielded as given, an exception raised, a callable ``(ModelCall) -> str``), or a
  script played on every call (``str`` deltas, exceptions raised, :data:`HANG` blocks until
  cancelled). It records every call, counts streams closed before their end, and can log the order
  of calls and chunks into a shared list (ordering asserted through the log, never through timings).
* :class:`InMemorySessionStore` — a :class:`~pipelines.sessions.TurnStore` on a dict.
* :class:`ListEventSink` — an :class:`~pipelines.protocols.EventSink` that keeps every event.
* :class:`ScriptedPipeline` — a turn pipeline that yields (or raises) a fixed script.
* :class:`TurnResult` — one turn's client events and logged events.
* Writers of model output: :func:`j` (an orchestrator decision), :func:`w1` (a W1 stream in the
  tandem turn's tags), :func:`stream` (the SGC rungs' 4-in-1 stream).

The harnesses that wire one family's pipeline from these doubles are in ``tests/unit/harnesses.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.events import ReplyDelta
from pipelines.protocols import ModelCall, TurnRecord
from pipelines.sgc.w1 import LONG_TAGS, W1Tags

__all__ = [
    "HANG",
    "ScriptModels",
    "ScriptedModelClient",
    "InMemorySessionStore",
    "ListEventSink",
    "ScriptedPipeline",
    "TurnResult",
    "Log",
    "collect",
    "chunks",
    "j",
    "w1",
    "stream",
]

Log = list[tuple[str, str]]
#: The client event types (:mod:`pipelines.events`); :meth:`TurnResult.of` tells them from logged kinds.
CLIENT_EVENTS = frozenset({"narration.delta", "reply.delta", "action_card", "clarify", "escalation", "error", "done"})


class _Hang:
    """Script item: block until the caller cancels (a model that never answers)."""

    def __repr__(self) -> str:
        return "HANG"


HANG: Any = _Hang()

Script = Sequence[Any]


def chunks(text: str, n: int = 7) -> list[str]:
    """``text`` cut into ``n``-character deltas (at least one)."""
    return [text[i: i + n] for i in range(0, len(text), n)] or [""]


def j(**obj: Any) -> str:
    """An orchestrator decision as JSON text."""
    return json.dumps(obj)


def w1(intent: str, sub_intent: str, narration: str = "Let me look into that.", tags: W1Tags = LONG_TAGS) -> str:
    """One W1 stream of the tandem turn as its grammar allows it."""
    o, c = tags.open, tags.close
    return (f"{o('INTENT')}{intent}{c('INTENT')}{o('SUB_INTENT')}{sub_intent}{c('SUB_INTENT')}"
            f"{o('NARRATION')}{narration}{c('NARRATION')}{o('PLAN')}[]{c('PLAN')}")


def stream(intent: str, sub: str, narration: str, plan: list[dict[str, Any]]) -> str:
    """A well-formed 4-in-1 perception stream of the SGC rungs."""
    return (f"<INTENT>{intent}</INTENT>\n<SUB_INTENT>{sub}</SUB_INTENT>\n"
            f"<NARRATION>{narration}</NARRATION>\n<PLAN>{json.dumps(plan)}</PLAN>")


async def _play(script: Iterable[Any]) -> AsyncIterator[Any]:
    for item in script:
        if item is HANG:
            await asyncio.Event().wait()  # never set: only cancellation ends it
        elif isinstance(item, BaseException) or (isinstance(item, type) and issubclass(item, BaseException)):
            raise item
        else:
            await asyncio.sleep(0)  # a real stream yields control between deltas
            yield item


class ScriptModels:
    """A role-addressed model client that plays scripts instead of calling a model (see module docstring).

    ``script``: played on every call with nothing pushed for its role; ``by_role``: role → scripts consumed
    one per call (the last one repeats); ``log``: a shared list that gets ``call`` / ``chunk`` / ``end``
    entries per role; ``chunk``: the delta size of pushed strings.
    """

    def __init__(self, script: Script | None = None, *, by_role: dict[str, list[Script]] | None = None,
                 log: Log | None = None, chunk: int = 7, **pushed: list[Any]) -> None:
        self._default = list(script) if script is not None else None
        self._by_role = {r: [list(s) for s in ss] for r, ss in (by_role or {}).items()}
        self.scripts: dict[str, list[Any]] = {k: list(v) for k, v in pushed.items()}
        self.log, self.chunk = log, chunk
        self.on_end: dict[str, Callable[[], Any]] = {}
        self.calls: list[tuple[str, ModelCall]] = []
        self.closed = 0  # streams closed before their end (cancelled or abandoned)

    def push(self, role: str, *items: Any) -> None:
        self.scripts.setdefault(role, []).extend(items)

    def _note(self, what: str, role: str) -> None:
        if self.log is not None:
            self.log.append((what, role))

    def _parts(self, role: str, call: ModelCall) -> Iterable[Any]:
        queue = self.scripts.get(role) or []
        if queue:
            item = queue.pop(0)
            if callable(item) and not isinstance(item, BaseException):
                item = item(call)
            if isinstance(item, BaseException):
                raise item
            if call.prefix and isinstance(item, str) and item.startswith(call.prefix):
                item = item[len(call.prefix):]  # the engine continues the reply's given prefix
            return item if isinstance(item, list) else chunks(item, self.chunk)
        scripts = self._by_role.get(role)
        if scripts:
            return scripts.pop(0) if len(scripts) > 1 else scripts[0]
        if self._default is not None:
            return self._default
        raise AssertionError(f"no scripted output left for role {role!r}")

    async def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        self.calls.append((role, call))
        self._note("call", role)
        finished = False
        try:
            async for part in _play(self._parts(role, call)):
                self._note("chunk", role)
                yield part
            finished = True
        finally:
            if not finished:
                self.closed += 1
        self._note("end", role)
        if role in self.on_end:
            self.on_end[role]()

    def roles(self) -> list[str]:
        return [r for r, _ in self.calls]

    def of(self, role: str) -> list[ModelCall]:
        return [c for r, c in self.calls if r == role]


#: The name the runner tests use for a model client playing one script on every call.
ScriptedModelClient = ScriptModels


@dataclass
class InMemorySessionStore:
    """Session history in a dict, numbered like the real stores; a :class:`~pipelines.sessions.TurnStore`
    (owners, turns saved by id, leases, idempotency keys). ``fail_appends`` makes every save raise it."""

    sessions: dict[str, list[TurnRecord]] = field(default_factory=dict)
    owners: dict[str, str] = field(default_factory=dict)
    leases: dict[str, str] = field(default_factory=dict)
    keys: dict[tuple[str, str], str] = field(default_factory=dict)
    history_calls: list[tuple[str, int | None]] = field(default_factory=list)
    append_calls: int = 0
    fail_appends: BaseException | None = None

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        self.history_calls.append((session_id, limit))
        turns = list(self.sessions.get(session_id, []))
        if limit is not None:
            turns = turns[-limit:] if limit > 0 else []
        return turns

    async def session_exists(self, session_id: str) -> bool:
        return session_id in self.sessions

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        await self.save_turn(session_id, record, principal=self.owners.get(session_id, "local"))

    async def owner(self, session_id: str) -> str | None:
        return self.owners.get(session_id)

    async def save_turn(self, session_id: str, record: TurnRecord, *, principal: str,
                        idempotency_key: str | None = None) -> TurnRecord:
        from pipelines.errors import NotFound

        self.append_calls += 1
        if self.fail_appends is not None:
            raise self.fail_appends
        if self.owners.get(session_id, principal) != principal:
            raise NotFound(f"no session {session_id!r}")
        turns = self.sessions.setdefault(session_id, [])
        self.owners[session_id] = principal
        for i, old in enumerate(turns):
            if old.turn_id == record.turn_id:
                turns[i] = record.model_copy(update={"index": i})
                return turns[i]
        turns.append(record.model_copy(update={"index": len(turns)}))
        if idempotency_key:
            self.keys[(session_id, idempotency_key)] = record.turn_id
        return turns[-1]

    async def find_turn(self, session_id: str, idempotency_key: str) -> TurnRecord | None:
        tid = self.keys.get((session_id, idempotency_key))
        return next((r for r in self.sessions.get(session_id, []) if r.turn_id == tid), None)

    async def acquire_lease(self, session_id: str, holder: str, ttl_s: float) -> bool:
        if self.leases.get(session_id, holder) != holder:
            return False
        self.leases[session_id] = holder
        return True

    async def release_lease(self, session_id: str, holder: str) -> None:
        if self.leases.get(session_id) == holder:
            del self.leases[session_id]

    def records(self, session_id: str) -> list[TurnRecord]:
        return list(self.sessions.get(session_id, []))

    @property
    def turns(self) -> dict[str, list[TurnRecord]]:
        """Session id → its stored turns (the same dict as ``sessions``)."""
        return self.sessions


@dataclass
class ListEventSink:
    """Keeps ``(kind, fields)`` for every emitted event."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def emit(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, fields))

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, f in self.events if k == kind]

    def dump(self) -> str:
        return json.dumps(self.events, default=str)


@dataclass
class TurnResult:
    """One turn: what the client got (``events``) and what was logged (``sink``)."""

    events: list[Any]
    sink: list[tuple[str, dict[str, Any]]]
    ctx: Any = None

    @property
    def reply(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ReplyDelta))

    @property
    def narration(self) -> str:
        return "".join(e.text for e in self.events if e.type == "narration.delta")

    @property
    def done(self) -> Any:
        return self.events[-1]

    @property
    def status(self) -> str:
        return self.done.status

    def of(self, kind: str) -> list[Any]:
        """The client events of a type (``reply.delta``…), or the fields of the logged events of a kind."""
        if kind in CLIENT_EVENTS:
            return [e for e in self.events if e.type == kind]
        return [f for k, f in self.sink if k == kind]


class ScriptedPipeline:
    """A turn pipeline that plays a script of events (and exceptions / :data:`HANG`)."""

    def __init__(self, script: Script, *, name: str = "scripted") -> None:
        self.name = name
        self.script = list(script)
        self.contexts: list[Any] = []

    async def run(self, ctx: Any) -> AsyncIterator[Any]:
        self.contexts.append(ctx)
        async for item in _play(self.script):
            yield item


async def collect(agen: AsyncIterator[Any]) -> list[Any]:
    """Every item of an async iterator, in order."""
    return [x async for x in agen]
