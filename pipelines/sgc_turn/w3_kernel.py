"""The one W3 decision function shared by the kernels deployment and the replay runner.

:func:`decide_w3` resolves the cross-turn state from the prior
:class:`~pipelines.sgc.w3.AnswerMeta` records (last K = 20), adds the branch
pool of the intent's branch to the state-derived candidates, and runs
:func:`~pipelines.sgc.w3.schedule_turn` with the session-seeded RNG. Running it
twice on the same inputs gives byte-identical canonical JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipelines.sgc.canonical import session_seed
from pipelines.sgc.tables import RuleTables
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

__all__ = ["ScheduleResult", "branch_tables", "merged_candidates", "decide_w3"]


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
