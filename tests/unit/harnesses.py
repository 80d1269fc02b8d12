"""Whole turns of one pipeline family in process, from the one set of doubles (``tests/doubles.py``).

* :class:`TandemHarness` — the tandem turn over a pack (support over a seeded world, the coach with a
  bound session, or any pack given its tools), the real runner, guardrails and rule kernels.
* :class:`DRHarness` — the DR rung over the seeded retail world and the real runner.
* :class:`LadderHarness` — one SGC rung over the seeded coach world with an in-memory history, its tools
  logging their calls into the same log as the model (ordering asserted through the log).

Only the model is scripted (:class:`tests.doubles.ScriptModels`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from pipelines.annex.dr import DRPipeline, DRSettings
from pipelines.annex.sgc_ladder import SgcCounters, SgcSettings, build_sgc_pipeline
from pipelines.core.kernels import LocalRuleKernels
from pipelines.core.runner import LocalToolRunner
from pipelines.counters import Counters
from pipelines.domains import load_domain
from pipelines.domains.coach import coach_tables_holder, generate_coach_world
from pipelines.domains.coach.domain import DomainPack as CoachPack
from pipelines.domains.coach.runner import LocalCoachTools
from pipelines.domains.support import build_support_domain, generate_world
from pipelines.events import ReplyDelta, TurnRequest
from pipelines.guardrails import LocalGuardrails
from pipelines.protocols import TurnRecord
from pipelines.sgc.snapshot import LoadedState
from pipelines.sgc.w2 import QuerySlots
from pipelines.tandem.pipeline import TandemPipeline
from pipelines.tandem.settings import TandemSettings
from pipelines.tools import ToolObservation
from pipelines.turn import TurnContext, TurnRunner
from tests.doubles import InMemorySessionStore, ListEventSink, Log, ScriptModels, TurnResult

__all__ = ["TandemHarness", "DRHarness", "LadderHarness", "LoggingTools"]


class _Session:
    """A session of one pipeline through the real runner over an in-memory store."""

    meta_key = ""

    def _start(self, pipeline: Any, *, max_history_turns: int = 6) -> None:
        self.sink = ListEventSink()
        self.store = InMemorySessionStore()
        self.pipeline = pipeline
        self.runner = TurnRunner(pipeline, self.store, sink=self.sink, max_history_turns=max_history_turns)
        self.session = "s1"
        self.user_id: str | None = None
        self.n = 0

    def _run(self, text: str, request: TurnRequest | None = None) -> TurnResult:
        self.n += 1
        start = len(self.sink.events)

        async def go() -> list[Any]:
            req = request or TurnRequest(text=text, user_id=self.user_id)
            return [e async for e in self.runner.run(self.session, req, trace_id="tr", turn_id=f"t{self.n}")]

        events = asyncio.run(go())
        return TurnResult(events, self.sink.events[start:])

    @property
    def turns(self) -> list[TurnRecord]:
        return self.store.records(self.session)

    @property
    def last_meta(self) -> dict[str, Any]:
        return self.turns[-1].meta[self.meta_key]

    @property
    def meta(self) -> dict[str, Any]:
        return self.last_meta

    def calls(self, role: str) -> list[Any]:
        return self.models.of(role)


class TandemHarness(_Session):
    """One session of the tandem turn over a fresh world (support seed 7, or the coach world)."""

    meta_key = "tandem"

    def __init__(self, domain: str = "support", *, settings: TandemSettings | None = None,
                 tools: Any = None, guardrails: Any = None, user_id: str | None = None) -> None:
        self.domain = load_domain(domain)
        if tools is None and domain == "support":
            self.world = generate_world(7)
            tools = LocalToolRunner(build_support_domain(), self.world)
        elif tools is None and domain == "coach":
            self.world = generate_coach_world(7)
            self.coach = LocalCoachTools(self.world)
            self.coach.bind("s1", user_id or "u001", {"opponent_id": "o01"})
            tools = self.coach
        self.tools = tools
        self.kernels = LocalRuleKernels.of(self.domain)
        self.models = ScriptModels()
        self.counters = Counters()
        self._start(TandemPipeline(self.domain, self.models, tools, guardrails or LocalGuardrails(), self.kernels,
                                   settings=settings, counters=self.counters), max_history_turns=20)
        self.user_id = user_id

    def turn(self, text: str, *, orch: Sequence[Any] = (), gen: Sequence[Any] = (),
             slots: Sequence[Any] = ()) -> TurnResult:
        self.models.push("orchestrator", *orch)
        self.models.push("generator", *gen)
        self.models.push("slot_extractor", *slots)
        return self._run(text)

    def _run_request(self, request: TurnRequest, *, orch: Sequence[Any] = (), gen: Sequence[Any] = ()) -> TurnResult:
        """One turn of a whole request (its own fields: labels under oracle perception)."""
        self.models.push("orchestrator", *orch)
        self.models.push("generator", *gen)
        return self._run(request.text, request)


class DRHarness(_Session):
    """A DR session over a fresh seeded world, a scripted model and the real runner."""

    meta_key = "dr"

    def __init__(self, *, seed: int = 7, settings: DRSettings | None = None,
                 guardrails: LocalGuardrails | None = None, tools: Any = None,
                 wrap_tools: Callable[[Any], Any] | None = None) -> None:
        self.domain = build_support_domain()
        self.world = generate_world(seed)
        self.local_tools = LocalToolRunner(self.domain, self.world)
        self.tools = tools or (wrap_tools(self.local_tools) if wrap_tools else self.local_tools)
        self.models = ScriptModels()
        self.counters = Counters()
        self._start(DRPipeline(self.domain, self.models, self.tools, guardrails or LocalGuardrails(),
                               settings=settings, counters=self.counters))

    def turn(self, text: str, *, orch: Sequence[Any] = (), gen: Sequence[Any] = ()) -> TurnResult:
        self.models.push("orchestrator", *orch)
        self.models.push("generator", *gen)
        return self._run(text)


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

    async def call(self, name: str, args: dict[str, Any], session_id: Any) -> ToolObservation:
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

    async def precheck(self, name: str, args: dict[str, Any], session: Any) -> str | None:
        return None

    async def load_state(self, session_id: str, keys: Sequence[str]) -> LoadedState:
        self.log.append(("load_state", ",".join(keys)))
        return await self.inner.load_state(session_id, keys)

    async def live_facts(self, session_id: str) -> Any:
        return await self.inner.live_facts(session_id)


class LadderHarness:
    """One session of one SGC rung over the seeded coach world, with an in-memory history."""

    def __init__(self, kind: str, *, user_id: str = "u001", opponent_id: str = "o01", session_id: str = "s1",
                 settings: SgcSettings | None = None, world_seed: int = 7) -> None:
        self.log: Log = []
        self.world = generate_coach_world(world_seed)
        self.local = LocalCoachTools(self.world)
        self.tools = LoggingTools(self.local, self.log)
        self.holder = coach_tables_holder()
        self.kernels = LocalRuleKernels.of(CoachPack(), self.holder)
        self.models = ScriptModels(log=self.log, chunk=6)
        self.counters = SgcCounters()
        self.sink = ListEventSink()
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
             window: int = 20) -> TurnResult:
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
        return TurnResult(events, self.sink.events[start:], ctx)
