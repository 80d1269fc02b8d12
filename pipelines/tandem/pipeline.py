"""The ``tandem`` turn of the design: perception, grounding and orchestration composed, on any domain.

::

    prologue          the core's: limits and pre-guard, the PII vault, the event log, counters
                      (the rule tables' version check runs beside it: only W1's labels need them)
    facts             the pack's extractors over every user text of the session + the owner's records
                      (session facts of the last turn) + the pack's vocabularies; the pack prepares
    routes            human / safety → escalate; blocked → fallback; a pending card + "yes" → the
                      confirmed write (once; checkpointed before the reply); + "no" → declined
    perceive, decide  W1 (narration → gate → client at once; labels → Φ's reads while it streams),
                      W2's slot call beside it, then Φ's ``then`` or the bounded orchestrator over the
                      grounded offer                                               (:mod:`.decide`)
    respond           the kernels' c2 / c3, one forward contract, the reply through the sentence gate,
                      the closure check, ``meta["tandem"]`` and ``meta["w3"]``     (:mod:`.respond`)

The turn depends on the core (:mod:`pipelines.core`) and the ``Domain`` protocol alone. Events:
``tandem.*`` per stage, ``contract.forward`` / ``contract.return``; every field redacted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from pipelines.core.domain import Domain, TurnFacts
from pipelines.core.ports import Guardrails, RuleKernels, ToolRunner, W1Tables
from pipelines.core.prologue import open_turn
from pipelines.core.tools import ToolCaller
from pipelines.counters import Counters
from pipelines.grounding import appears_in
from pipelines.protocols import ModelClient
from pipelines.turn import TurnContext

from .asking import asked_of, declined_of
from .decide import perceive_and_decide
from .orchestrate import Orchestrator
from .prompts import orchestrator_head
from .respond import respond
from .routes import decided_by_route, route
from .settings import TandemSettings
from .state import META_KEY, TandemState, quiet

__all__ = ["TandemPipeline", "META_KEY", "stated_fixed"]


class TandemPipeline:
    """The composed turn (see module docstring); ``history_turns`` is what the runner should load."""

    name = "tandem"

    def __init__(self, domain: Domain, models: ModelClient, tools: ToolRunner, guardrails: Guardrails,
                 kernels: RuleKernels, *, settings: TandemSettings | None = None, counters: Counters | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.domain, self.models, self.tools, self.guardrails, self.kernels = domain, models, tools, guardrails, kernels
        self.settings = settings or TandemSettings()
        self.counters = counters or Counters()
        self.clock = clock
        self.history_turns = self.settings.max_history_turns
        self.head = orchestrator_head(domain, self.settings.tags)
        self._tables: W1Tables | None = None

    async def _w1_tables(self) -> W1Tables:
        version = await self.kernels.tables_version()
        if self._tables is None or self._tables.version != version:
            raw = await self.kernels.w1_tables()
            self._tables = raw if isinstance(raw, W1Tables) else W1Tables.model_validate(raw)
        return self._tables

    @staticmethod
    def _previous(ctx: TurnContext) -> tuple[dict[str, Any], int]:
        """The session facts the last recorded turn left, and this turn's index."""
        for t in reversed(ctx.history):
            m = t.meta.get(META_KEY)
            if isinstance(m, dict) and isinstance(m.get("state"), dict):
                return dict(m["state"]), int(m.get("turn_index", len(ctx.history) - 1)) + 1
        return {}, len(ctx.history)

    async def run(self, ctx: TurnContext) -> AsyncIterator[Any]:
        state, turn_index = self._previous(ctx)
        # The rule tables' version check runs beside the pre-guard and the narration: only the labels (and Φ
        # on their close) need the tables, so the hop is never on the way to the first narration token.
        tables = asyncio.create_task(self._w1_tables())
        try:
            st = await open_turn(ctx, self.guardrails, self.counters, pipeline=self.name, prefix="tandem",
                                 clock=self.clock, state=TandemState, tables=tables, turn_index=turn_index)
        except BaseException:
            tables.cancel()
            raise
        quiet(tables)
        typed = set(st.vault.ids())  # the user's own values: rebuilt from their texts on every turn
        st.vault.adopt(_observed_pii(ctx))  # values of their records observed earlier (a pending card names them)
        st.phi = quiet(asyncio.ensure_future(_phi(tables)))  # what W1's labels wait for
        # The session facts cross turns by value (the record holds values; a redacting store seals them under its
        # own placeholders): this turn's placeholders name them again, so a card shown then is the card now.
        state = st.vault.conceal(state)
        st.meta = {"turn_index": turn_index, "rules_version": ctx.rules_version, "domain": self.domain.name,
                   **st.vault.conceal({"declined": declined_of(ctx.history), "asked": asked_of(ctx.history),
                                       "done": declined_of(ctx.history, "done")})}
        try:
            async for event in self._turn(st, state):
                yield event
            # observed values come back next turn (the store seals them with the session's vault)
            st.meta["observed_pii"] = {p: v for p, v in st.vault.entries().items() if p not in typed}
        finally:
            if isinstance(ctx.meta.get(META_KEY), dict):  # also a turn that fails: the record holds values
                st.record(ctx.meta[META_KEY])
            for task in (st.phi, tables):
                if not task.done():
                    task.cancel()

    async def _turn(self, st: TandemState, state: dict[str, Any]) -> AsyncIterator[Any]:
        d, s = self.domain, self.settings
        st.facts = facts = TurnFacts(session_id=st.session_id, user_text=st.pre.text,
                                     user_texts=[*st.pre.history, st.pre.text], user_id=st.ctx.request.user_id,
                                     state=state)
        for text in facts.user_texts:
            facts.candidates.add_all(d.extract_candidates(text), "user")
        # a fixed vocabulary value (a cancellation reason…) fills a card only once the user has said it:
        # picked from the allowed values it would be invented, so the card waits and the turn asks
        facts.candidates.add_all(stated_fixed(d.fixed_candidates(), facts.user_texts), "user")
        d.restore(facts)
        await d.prepare(facts, self.tools)
        st.ctx.stage_ms["prepare"] = st.elapsed_ms() - st.ctx.stage_ms["pre_guard"]
        st.ctx.meta[META_KEY] = st.meta
        if decided_by_route(st):
            await st.versioned()  # decided without W1: known before anything is recorded
        st.caller = ToolCaller(d, self.tools, facts, st.vault, locale=st.ctx.request.locale, timeout_s=s.tool_timeout_s,
                               counters=self.counters, emit=st.emit, fence=st.ctx.fence)
        st.orch = Orchestrator(d, self.models, s, facts=facts, caller=st.caller, vault=st.vault,
                               counters=self.counters, emit=st.emit, turn_id=st.turn_id)
        st.orch.declined, st.orch.done = st.meta["declined"], st.meta["done"]
        st.outcome = await route(st)
        if st.outcome is None:
            async for event in perceive_and_decide(st, d, self.models, s, self.head):
                yield event
        await st.versioned()  # W1's labels awaited the tables, unless they failed first
        async for event in respond(st, d, self.models, self.guardrails, self.kernels, s):
            yield event


def stated_fixed(fixed: dict[str, list[str]], texts: list[str]) -> dict[str, list[str]]:
    """The pack's fixed vocabulary values that occur, as whole words, in the user's texts."""
    out = {kind: [v for v in values if appears_in(v, texts)] for kind, values in fixed.items()}
    return {k: v for k, v in out.items() if v}


def _observed_pii(ctx: TurnContext) -> dict[str, str]:
    """The placeholders the last recorded turn issued for values of the user's records (``meta.observed_pii``)."""
    for t in reversed(ctx.history):
        m = t.meta.get(META_KEY)
        if isinstance(m, dict) and isinstance(m.get("observed_pii"), dict):
            return {str(k): str(v) for k, v in m["observed_pii"].items()}
    return {}


async def _phi(tables: asyncio.Future[W1Tables]) -> Any:
    return (await tables).phi
