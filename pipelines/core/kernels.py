"""The rule kernels in process (:class:`LocalRuleKernels`) and the one W3 decision function.

:class:`LocalRuleKernels` implements :class:`~pipelines.core.ports.RuleKernels` over a hot-reloadable
:class:`~pipelines.sgc.tables.RuleTablesHolder` for any pack (its labels, tool names and intent →
branch map); ``serve/`` hosts it as the ``RuleKernels`` deployment. :func:`decide_w3` is shared by
the kernels and the replay runner: it resolves the cross-turn state from the prior
:class:`~pipelines.sgc.w3.AnswerMeta` records (last K = 20), adds the branch
pool of the intent's branch to the state-derived candidates, and runs
:func:`~pipelines.sgc.w3.schedule_turn` with the session-seeded RNG. Running it
twice on the same inputs gives byte-identical canonical JSON.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipelines.sgc.canonical import session_seed
from pipelines.sgc.tables import ReloadOutcome, RuleTables, RuleTablesHolder, load_rule_tables
from pipelines.sgc.w2 import LiveFacts, QuerySlots, ground, plan_conflicts
from pipelines.sgc.w3 import (
    HISTORY_WINDOW,
    AnswerMeta,
    BranchTable,
    Candidate,
    IntentContext,
    SessionRng,
    resolve_cross_turn_state,
    schedule_turn,
)

from .domain import Domain
from .ports import W1Tables

__all__ = ["ScheduleResult", "branch_tables", "merged_candidates", "decide_w3", "prior_metas", "tables_holder", "load_bundle",
           "LocalRuleKernels"]


class ScheduleResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pick: str | None
    meta: AnswerMeta
    candidates: tuple[Candidate, ...]


def branch_tables(tables: RuleTables, branch_of_intent: Mapping[str, str]) -> dict[str, BranchTable]:
    """Intent → the branch table that serves it (intents without a branch are left out)."""
    return {i: tables.w3[b] for i, b in branch_of_intent.items() if b in tables.w3}


def merged_candidates(
    table: BranchTable | None, candidates: Iterable[Candidate | Mapping[str, Any] | str]
) -> list[Candidate]:
    """The branch pool first, then the state-derived candidates (the first of a repeated id wins)."""
    out: list[Candidate] = [Candidate(id=e.id) for e in table.pool] if table is not None else []
    for c in candidates:
        out.append(c if isinstance(c, Candidate) else Candidate(id=c) if isinstance(c, str)
                   else Candidate.model_validate(c))
    return out


def decide_w3(
    tables: RuleTables,
    branch_of_intent: Mapping[str, str],
    session_id: str,
    prior_metas: Sequence[AnswerMeta | Mapping[str, Any]],
    intent_ctx: IntentContext | Mapping[str, Any],
    candidates: Iterable[Candidate | Mapping[str, Any] | str],
    turn_index: int,
    *,
    seed: int | None = None,
    window: int = HISTORY_WINDOW,
) -> ScheduleResult:
    """Pick this turn's guidance and the meta to write back (pure; see module docstring)."""
    c1 = intent_ctx if isinstance(intent_ctx, IntentContext) else IntentContext.model_validate(intent_ctx)
    metas = [m if isinstance(m, AnswerMeta) else AnswerMeta.model_validate(m) for m in prior_metas]
    by_intent = branch_tables(tables, branch_of_intent)
    cands = merged_candidates(by_intent.get(c1.intent), candidates)
    state = resolve_cross_turn_state(metas, c1, turn_index=turn_index, window=window)
    rng = SessionRng(session_seed(session_id) if seed is None else seed)
    pick, meta = schedule_turn(state, cands, rng, by_intent)
    if not meta.table_version:
        meta = meta.model_copy(update={"table_version": tables.version})
    return ScheduleResult(pick=pick, meta=meta, candidates=tuple(cands))


def _checks(domain: Domain) -> dict[str, Any]:
    return {"labels": domain.labels, "tools": domain.registry.names(), "conflict_kinds": tuple(domain.conflict_kinds),
            "branches": set(domain.branch_of_intent.values())}


def prior_metas(ctx: Any, window: int) -> list[dict[str, Any]]:
    """The AnswerMetas stored in ``ctx.history``'s ``meta["w3"]`` (a turn context), last ``window`` of them."""
    metas = [t.meta["w3"] for t in ctx.history if isinstance(t.meta.get("w3"), dict)]
    return metas[-window:] if window else []


def tables_holder(domain: Domain) -> RuleTablesHolder:
    """A hot-reload holder primed with ``domain``'s packaged rule bundle, checked against its labels, tools,
    conflict kinds and W3 branches (a reload is checked the same way)."""
    return RuleTablesHolder(domain.rule_tables(), **_checks(domain))


def load_bundle(domain: Domain, data: Any) -> RuleTables:
    """Validate a rule bundle (a ``user_config``'s ``rules``) against ``domain`` (raises ConfigError)."""
    return load_rule_tables(data, **_checks(domain))


class LocalRuleKernels:
    """W2 grounding and W3 scheduling over a :class:`RuleTablesHolder` (hot-reloadable)."""

    def __init__(
        self,
        holder: RuleTablesHolder,
        *,
        labels: Mapping[str, Collection[str]],
        tools: Collection[str],
        branch_of_intent: Mapping[str, str],
        max_paragraphs: int | None = None,
    ) -> None:
        self.holder = holder
        self.labels = {k: list(v) for k, v in labels.items()}
        self.tool_names = sorted(tools)
        self.branch_of_intent = dict(branch_of_intent)
        self.max_paragraphs = max_paragraphs

    @classmethod
    def of(cls, domain: Domain, holder: RuleTablesHolder | None = None, *,
           max_paragraphs: int | None = None) -> LocalRuleKernels:
        """The kernels of ``domain`` (its labels, tool names and branches), over ``holder`` (default: its
        packaged tables)."""
        return cls(holder if holder is not None else tables_holder(domain), labels=domain.labels,
                   tools=domain.registry.names(), branch_of_intent=domain.branch_of_intent,
                   max_paragraphs=max_paragraphs)

    def reconfigure(self, user_config: Mapping[str, Any]) -> ReloadOutcome:
        """Ray Serve ``user_config`` hook: ``{"rules": {...bundle...}}`` or the bundle itself."""
        data = user_config.get("rules", user_config)
        return self.holder.reload(data)

    async def tables_version(self) -> str:
        return self.holder.version

    async def w1_tables(self) -> W1Tables:
        t = self.holder.active
        return W1Tables(version=t.version, phi=t.phi, labels=self.labels, tools=self.tool_names)

    async def ground(self, slots: dict[str, Any], facts: dict[str, Any], intent: str) -> dict[str, Any]:
        t = self.holder.active
        result = ground(QuerySlots.model_validate(slots), LiveFacts.model_validate(facts), intent,
                        psi_table=t.psi, tiers=t.tiers, max_paragraphs=self.max_paragraphs)
        return result.model_dump(mode="json")

    async def paragraphs(self, conflicts: list[dict[str, Any]], intent: str,
                         constraints: list[str] | None = None) -> dict[str, Any]:
        t = self.holder.active
        res = plan_conflicts(conflicts, intent, psi_table=t.psi, tiers=t.tiers, constraints=constraints or (),
                             max_paragraphs=self.max_paragraphs)
        return res.model_dump(mode="json")

    async def schedule(
        self,
        session_id: str,
        prior_metas: list[dict[str, Any]],
        intent_ctx: dict[str, Any],
        candidates: list[dict[str, Any]],
        turn_index: int,
        *,
        seed: int | None = None,
    ) -> tuple[str | None, dict[str, Any]]:
        res = decide_w3(
            self.holder.active, self.branch_of_intent, session_id, prior_metas, intent_ctx, candidates,
            turn_index, seed=seed,
        )
        return res.pick, res.meta.model_dump(mode="json")
