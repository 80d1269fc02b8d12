"""Test doubles for the Protocols of :mod:`pipelines.protocols` (no Ray, no engine).

* :class:`ScriptedModelClient` — a :class:`~pipelines.protocols.ModelClient` that
  plays a script per call: ``str`` items are yielded as deltas, exception
  instances (or classes) are raised, :data:`HANG` blocks until cancelled.
* :class:`InMemorySessionStore` — a :class:`~pipelines.protocols.SessionStore` on a dict.
* :class:`ListEventSink` — an :class:`~pipelines.protocols.EventSink` that keeps every event.
* :class:`ScriptedPipeline` — a turn pipeline that yields (or raises) a fixed script.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.protocols import ModelCall, TurnRecord

__all__ = [
    "HANG",
    "ScriptedModelClient",
    "InMemorySessionStore",
    "ListEventSink",
    "ScriptedPipeline",
    "collect",
]


class _Hang:
    """Script item: block until the caller cancels (a model that never answers)."""

    def __repr__(self) -> str:
        return "HANG"


HANG: Any = _Hang()

Script = Sequence[Any]


async def _play(script: Iterable[Any]) -> AsyncIterator[Any]:
    for item in script:
        if item is HANG:
            await asyncio.Event().wait()  # never set: only cancellation ends it
        elif isinstance(item, BaseException) or (isinstance(item, type) and issubclass(item, BaseException)):
            raise item
        else:
            await asyncio.sleep(0)  # a real stream yields control between deltas
            yield item


class ScriptedModelClient:
    """Role-addressed model client that plays scripts instead of calling a model.

    ``scripts`` is either one script used for every call, or a mapping of role →
    list of scripts consumed one per call (the last one repeats).
    """

    def __init__(self, script: Script | None = None, *, by_role: dict[str, list[Script]] | None = None) -> None:
        self._default = list(script) if script is not None else []
        self._by_role = {r: [list(s) for s in ss] for r, ss in (by_role or {}).items()}
        self.calls: list[tuple[str, ModelCall]] = []
        self.closed = 0  # streams closed before their end (cancelled or abandoned)

    def _script_for(self, role: str) -> list[Any]:
        scripts = self._by_role.get(role)
        if not scripts:
            return self._default
        return scripts.pop(0) if len(scripts) > 1 else scripts[0]

    async def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        self.calls.append((role, call))
        finished = False
        try:
            async for item in _play(self._script_for(role)):
                yield item
            finished = True
        finally:
            if not finished:
                self.closed += 1


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
