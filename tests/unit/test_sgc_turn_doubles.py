"""Doubles for the SGC turn tests: a scripted role-addressed model that logs call order, logging tools,
a list sink, and a :class:`Harness` that runs turns of one session with an in-memory history.

Ordering is asserted through one shared ``log`` of ``(what, detail)`` entries, never through timings.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.annex.sgc_ladder import SgcCounters, SgcSettings, build_sgc_pipeline
from pipelines.core.kernels import LocalRuleKernels
from pipelines.domains.coach import coach_tables_holder, generate_coach_world
from pipelines.domains.coach.domain import DomainPack as CoachPack
from pipelines.domains.coach.runner import LocalCoachTools
from pipelines.events import NarrationDelta, ReplyDelta, TurnRequest
from pipelines.protocols import ModelCall, TurnRecord
from pipelines.sgc.snapshot import LoadedState
from pipelines.sgc.w2 import QuerySlots
from pipelines.tools import ToolObservation
from pipelines.turn import TurnContext

__all__ = ["Log", "ScriptModels", "LoggingTools", "ListSink", "Harness", "TurnOut", "stream", "chunks"]

Log = list[tuple[str, str]]


def chunks(text: str, n: int = 6) -> list[str]:
    return [text[i: i + n] for i in range(0, len(text), n)] or [""]


def stream(intent: str, sub: str, narration: str, plan: list[dict[str, Any]]) -> str:
    """A well-formed 4-in-1 perception stream."""
    return (f"<INTENT>{intent}</INTENT>\n<SUB_INTENT>{sub}</SUB_INTENT>\n"
            f"<NARRATION>{narration}</NARRATION>\n<PLAN>{json.dumps(plan)}</PLAN>")


class ScriptModels:
    """A ModelClient playing per-role scripts; logs ``call`` / ``chunk`` / ``end`` per role.

    A script item is a ``str`` (yielded in 6-character chunks), a ``list[str]``,
    an exception instance (raised), or a callable ``(ModelCall) -> str``.
    """

    def __init__(self, log: Log) -> None:
        self.log = log
        self.scripts: dict[str, list[Any]] = {}
        self.on_end: dict[str, Any] = {}
        self.calls: list[tuple[str, ModelCall]] = []

    def push(self, role: str, *items: Any) -> None:
        self.scripts.setdefault(role, []).extend(items)

    async def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        self.calls.append((role, call))
        self.log.append(("call", role))
        queue = self.scripts.get(role) or []
        if not queue:
            raise AssertionError(f"no scripted output left for role {role!r}")
        item = queue.pop(0)
        if callable(item) and not isinstance(item, BaseException):
            item = item(call)
        if isinstance(item, BaseException):
            raise item
        for part in item if isinstance(item, list) else chunks(item):
            await asyncio.sleep(0)
            self.log.append(("chunk", role))
            yield part
        self.log.append(("end", role))
        if role in self.on_end:
            self.on_end[role]()

    def of(self, role: str) -> list[ModelCall]:
        return [c for r, c in self.calls if r == role]


class LoggingTools:
    """Wraps :class:`LocalCoachTools`; logs ``tool_start`` / ``tool_done``; optionally holds tools on a gate."""

    def __init__(self, inner: LocalCoachTools, log: Log) -> None:
        self.inner = inner
        self.log = log
        self.gate: asyncio.Event | None = None
        self.hold = False
        self.released = False

    def release(self) -> None:
        """Let held tool calls finish (e.g. from ``ScriptModels.on_end``)."""
        self.released = True
        self.log.append(("release", "tools"))
        if self.gate is not None:
            self.gate.set()

    async def call(self, name: str, args: dict[str, Any], session_id: str) -> ToolObservation:
        self.log.append(("tool_start", name))
        if self.hold and not self.released:
            if self.gate is None:
                self.gate = asyncio.Event()
            await self.gate.wait()
        for _ in range(3):
            await asyncio.sleep(0)
        out = await self.inner.call(name, args, session_id)
        self.log.append(("tool_done", name))
        return out

    async def load_state(self, session_id: str, keys: Sequence[str]) -> LoadedState:
        self.log.append(("load_state", ",".join(keys)))
        return await self.inner.load_state(session_id, keys)

    async def live_facts(self, session_id: str) -> Any:
        return await self.inner.live_facts(session_id)


@dataclass
class ListSink:
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def emit(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, fields))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, f in self.events if k == kind]


@dataclass
class TurnOut:
    events: list[Any]
    ctx: TurnContext
    sink: list[tuple[str, dict[str, Any]]]

    @property
    def reply(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ReplyDelta))

    @property
    def narration(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, NarrationDelta))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, f in self.sink if k == kind]


class Harness:
    """One session of one rung over the seeded coach world, with an in-memory history."""

    def __init__(self, kind: str, *, user_id: str = "u001", opponent_id: str = "o01", session_id: str = "s1",
                 settings: SgcSettings | None = None, world_seed: int = 7) -> None:
        self.log: Log = []
        self.world = generate_coach_world(world_seed)
        self.local = LocalCoachTools(self.world)
        self.tools = LoggingTools(self.local, self.log)
        self.holder = coach_tables_holder()
        self.kernels = LocalRuleKernels.of(CoachPack(), self.holder)
        self.models = ScriptModels(self.log)
        self.counters = SgcCounters()
        self.sink = ListSink()
        self.session_id = session_id
        self.user_id = user_id
        self.local.bind(session_id, user_id, {"opponent_id": opponent_id})
        self.pipeline = build_sgc_pipeline(kind, self.models, self.tools, self.kernels,
                                           settings=settings or SgcSettings(), counters=self.counters)
        self.history: list[TurnRecord] = []

    # -- world helpers ------------------------------------------------------------------------
    def owned(self) -> list[str]:
        return sorted({c.species for c in self.world.users[self.user_id].creatures})

    def unowned(self, *, avoid: Sequence[str] = ()) -> str:
        mine = set(self.owned())
        return next(s for s in sorted(self.world.species) if s not in mine and s not in avoid)

    def opponent_species(self, opponent_id: str = "o01") -> list[str]:
        return [m.species for m in self.world.opponents[opponent_id].team]

    # -- turns --------------------------------------------------------------------------------
    def turn(self, text: str, *, orch: Any = None, slots: QuerySlots | str | None = None, gen: Any = None,
             window: int = 20) -> TurnOut:
        if orch is not None:
            self.models.push("orchestrator", orch)
        if slots is not None:
            self.models.push("slot_extractor", slots if isinstance(slots, str) else slots.model_dump_json())
        if gen is not None:
            self.models.push("generator", gen)
        n = len(self.history)
        ctx = TurnContext(self.session_id, f"t{n}", "trace", TurnRequest(text=text), list(self.history[-window:]),
                          self.sink)
        start = len(self.sink.events)

        async def go() -> list[Any]:
            out = []
            async for e in self.pipeline.run(ctx):
                self.log.append(("event", e.type))
                out.append(e)
            return out

        events = asyncio.run(asyncio.wait_for(go(), 30))  # a hang guard only, never a latency check
        reply = "".join(e.text for e in events if isinstance(e, ReplyDelta))
        self.history.append(TurnRecord(turn_id=ctx.turn_id, index=n, user_text=text, reply_text=reply,
                                       status=ctx.status, pipeline=self.pipeline.name, meta=ctx.meta))  # type: ignore[arg-type]
        return TurnOut(events, ctx, self.sink.events[start:])


def test_script_models_log_order() -> None:
    log: Log = []
    m = ScriptModels(log)
    m.push("generator", ["a", "b"])

    async def go() -> str:
        return "".join([d async for d in m.stream("generator", ModelCall(messages=[]))])

    assert asyncio.run(go()) == "ab"
    assert log == [("call", "generator"), ("chunk", "generator"), ("chunk", "generator"), ("end", "generator")]
