"""Scripted doubles for the DR tests: a role-addressed scripted model, a list sink, a memory store,
and a :class:`Harness` that runs whole turns through the real :class:`TurnRunner`.

A script item for one model call is a ``str`` (yielded in small chunks), a
``list[str]`` (yielded as given), an exception instance (raised), or a
callable ``(ModelCall) -> str``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from pipelines.annex.dr import DRPipeline, DRSettings
from pipelines.core.runner import LocalToolRunner
from pipelines.counters import Counters
from pipelines.domains.support import build_support_domain, generate_world
from pipelines.events import ReplyDelta, TurnRequest
from pipelines.guardrails import LocalGuardrails
from pipelines.protocols import ModelCall, TurnRecord
from pipelines.turn import TurnRunner

__all__ = ["ScriptModels", "ListSink", "MemStore", "Harness", "TurnResult", "j", "chunks"]


def j(**obj: Any) -> str:
    """A decision as JSON text."""
    return json.dumps(obj)


def chunks(text: str, n: int = 7) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)] or [""]


class ScriptModels:
    """A ModelClient that plays per-role scripts and records every call."""

    def __init__(self, **scripts: list[Any]) -> None:
        self.scripts: dict[str, list[Any]] = {k: list(v) for k, v in scripts.items()}
        self.calls: list[tuple[str, ModelCall]] = []

    def push(self, role: str, *items: Any) -> None:
        self.scripts.setdefault(role, []).extend(items)

    async def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        self.calls.append((role, call))
        queue = self.scripts.get(role) or []
        if not queue:
            raise AssertionError(f"no scripted output left for role {role!r}")
        item = queue.pop(0)
        if callable(item) and not isinstance(item, BaseException):
            item = item(call)
        if isinstance(item, BaseException):
            raise item
        if call.prefix and isinstance(item, str) and item.startswith(call.prefix):
            item = item[len(call.prefix):]  # the engine continues the reply's given prefix
        for part in item if isinstance(item, list) else chunks(item):
            await asyncio.sleep(0)
            yield part

    def roles(self) -> list[str]:
        return [r for r, _ in self.calls]


@dataclass
class ListSink:
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def emit(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, fields))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, f in self.events if k == kind]

    def dump(self) -> str:
        return json.dumps(self.events, default=str)


class MemStore:
    def __init__(self) -> None:
        self.turns: dict[str, list[TurnRecord]] = {}

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        turns = self.turns.get(session_id, [])
        return list(turns[-limit:] if limit else turns)

    async def session_exists(self, session_id: str) -> bool:
        return session_id in self.turns

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        turns = self.turns.setdefault(session_id, [])
        turns.append(record.model_copy(update={"index": len(turns)}))


@dataclass
class TurnResult:
    events: list[Any]
    sink: list[tuple[str, dict[str, Any]]]

    @property
    def reply(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ReplyDelta))

    @property
    def done(self) -> Any:
        return self.events[-1]

    @property
    def status(self) -> str:
        return self.done.status

    def of(self, type_: str) -> list[Any]:
        return [e for e in self.events if e.type == type_]


class Harness:
    """A session over a fresh seeded world, a scripted model and the real runner."""

    def __init__(self, *, seed: int = 7, settings: DRSettings | None = None,
                 guardrails: LocalGuardrails | None = None, tools: Any = None,
                 wrap_tools: Callable[[Any], Any] | None = None) -> None:
        self.domain = build_support_domain()
        self.world = generate_world(seed)
        self.local_tools = LocalToolRunner(self.domain, self.world)
        self.tools = tools or (wrap_tools(self.local_tools) if wrap_tools else self.local_tools)
        self.models = ScriptModels()
        self.sink = ListSink()
        self.store = MemStore()
        self.counters = Counters()
        self.pipeline = DRPipeline(self.domain, self.models, self.tools, guardrails or LocalGuardrails(),
                                   settings=settings, counters=self.counters)
        self.runner = TurnRunner(self.pipeline, self.store, sink=self.sink)
        self.session = "s1"
        self.n = 0

    def turn(self, text: str, *, orch: list[Any] = (), gen: list[Any] = ()) -> TurnResult:
        self.models.push("orchestrator", *orch)
        self.models.push("generator", *gen)
        self.n += 1
        start = len(self.sink.events)

        async def go() -> list[Any]:
            out = []
            async for e in self.runner.run(self.session, TurnRequest(text=text), trace_id="tr",
                                           turn_id=f"t{self.n}"):
                out.append(e)
            return out

        events = asyncio.run(go())
        return TurnResult(events, self.sink.events[start:])

    @property
    def last_meta(self) -> dict[str, Any]:
        return self.store.turns[self.session][-1].meta["dr"]
