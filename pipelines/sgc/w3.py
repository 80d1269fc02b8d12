"""W3 Interaction: a pure, replayable guidance scheduler over cross-turn state.

Per turn: :func:`resolve_cross_turn_state` folds the last K (= 20)
:class:`AnswerMeta` records into cooldowns and counts; :func:`schedule` then

1. hard-filters candidates (cooling, over the per-window cap, excluded by the
   intent context, unlisted in the branch pool, and never the one issued in
   the previous turn),
2. draws a Bernoulli leak ``U_c < p_c`` for every candidate, in sorted order,
3. picks among the survivors with probability ∝ ``w_c``,
4. returns the pick (or ``None``: no guidance) and the meta to write back.

Randomness comes from one session seed fixed at session open
(:class:`SessionRng`, SHA-256 of the session id unless injected); each turn's
draws come from a :class:`random.Random` seeded with SHA-256(seed, turn), so
same seed + same prior metas ⇒ byte-identical :func:`canonical_json` output.
The three branches (recommend, teaching, knowledge_qa) share this kernel and
differ only in their :class:`BranchTable`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from pipelines.sgc.canonical import canonical_json, derive_seed, session_seed, stable_hash
from pipelines.sgc.config import TableConfig, load_model

__all__ = [
    "HISTORY_WINDOW",
    "BRANCHES",
    "Branch",
    "AnswerMeta",
    "IntentContext",
    "CrossTurnState",
    "Candidate",
    "PoolEntry",
    "BranchTable",
    "SessionRng",
    "load_branch_table",
    "resolve_cross_turn_state",
    "schedule",
    "schedule_turn",
]

HISTORY_WINDOW = 20
#: A W3 branch is a domain's label (the coach: recommend, teaching, knowledge_qa).
Branch = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
BRANCHES: tuple[str, ...] = ("recommend", "teaching", "knowledge_qa")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AnswerMeta(_Frozen):
    """``answer.meta``: what W3 decided in one turn (written back with the turn)."""

    turn_index: int = Field(..., ge=0)
    guidance_type: str = Field(..., description="The branch, or 'none' when nothing was issued.")
    subject_id: str | None = None
    cooldown_writeback: dict[str, int] = Field(default_factory=dict)
    seed: str = Field(..., description="Hex of the per-turn seed the draws used.")
    candidate_pool_hash: str
    table_version: str = ""

    def canonical(self) -> str:
        """Canonical JSON (byte-identical for equal metas)."""
        return canonical_json(self)


class IntentContext(_Frozen):
    """c1: the turn's intent context as W3 reads it."""

    intent: str
    sub_intent: str = ""
    excluded_subjects: tuple[str, ...] = ()


class CrossTurnState(_Frozen):
    turn_index: int = Field(..., ge=0)
    c1: IntentContext
    cooling: dict[str, int] = Field(default_factory=dict, description="candidate → turns of cooldown left")
    last_issued: str | None = None
    issued_counts: dict[str, int] = Field(default_factory=dict, description="issues within the window")


class Candidate(_Frozen):
    id: str = Field(..., min_length=1)
    weight: float = Field(1.0, gt=0.0, description="Multiplies the pool weight w_c (e.g. a matchup score).")


class PoolEntry(TableConfig):
    id: str = Field(..., min_length=1)
    p: float = Field(..., ge=0.0, le=1.0, description="Leak probability.")
    w: float = Field(..., gt=0.0, description="Pick weight.")
    cooldown: int | None = Field(None, ge=0, description="Turns it cools after being issued.")


class BranchTable(TableConfig):
    """One branch's versioned pool and probabilities."""

    version: str = Field(..., min_length=1)
    branch: Branch
    default_p: float = Field(0.5, ge=0.0, le=1.0)
    default_w: float = Field(1.0, gt=0.0)
    default_cooldown: int = Field(2, ge=0)
    allow_unlisted: bool = Field(False, description="Unlisted candidates use the defaults (else filtered).")
    max_per_window: int | None = Field(None, ge=1)
    pool: list[PoolEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> BranchTable:
        ids = [e.id for e in self.pool]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate pool ids in branch {self.branch!r}")
        if not ids and not self.allow_unlisted:
            raise ValueError(f"branch {self.branch!r} has an empty pool and allow_unlisted is false")
        return self

    def entry(self, cid: str) -> PoolEntry | None:
        for e in self.pool:
            if e.id == cid:
                return e
        if self.allow_unlisted:
            return PoolEntry(id=cid, p=self.default_p, w=self.default_w, cooldown=self.default_cooldown)
        return None


class SessionRng:
    """The session's one seed (from the session id at open, or injected); per-turn RNGs derive from it."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)

    @classmethod
    def for_session(cls, session_id: str) -> SessionRng:
        return cls(session_seed(session_id))

    def turn_seed(self, turn_index: int, stream: str = "w3") -> int:
        return derive_seed(self.seed, stream, turn_index)

    def for_turn(self, turn_index: int, stream: str = "w3") -> random.Random:
        """A fresh RNG for one turn: same seed and turn ⇒ same draws."""
        return random.Random(self.turn_seed(turn_index, stream))


def load_branch_table(data: Any, where: str = "w3") -> BranchTable:
    """Validate one branch table from a dict; raises ConfigError with the path."""
    return load_model(BranchTable, data, where)


def resolve_cross_turn_state(
    metas: Sequence[AnswerMeta | dict[str, Any]],
    c1: IntentContext,
    *,
    turn_index: int | None = None,
    window: int = HISTORY_WINDOW,
) -> CrossTurnState:
    """Fold the last ``window`` metas into cooldowns, window counts and the previous turn's pick.

    ``turn_index`` defaults to one past the newest meta. A meta issued at turn
    ``t`` with cooldown ``n`` for ``c`` keeps ``c`` cooling through turn ``t + n``.
    """
    recent = [m if isinstance(m, AnswerMeta) else AnswerMeta.model_validate(m) for m in metas][-window:]
    turn = turn_index if turn_index is not None else (recent[-1].turn_index + 1 if recent else 0)
    cooling: dict[str, int] = {}
    counts: dict[str, int] = {}
    last: str | None = None
    for m in recent:
        for cid, n in m.cooldown_writeback.items():
            left = n - (turn - m.turn_index) + 1
            if left > 0:
                cooling[cid] = max(cooling.get(cid, 0), left)
        if m.subject_id is not None:
            counts[m.subject_id] = counts.get(m.subject_id, 0) + 1
            if m.turn_index == turn - 1:
                last = m.subject_id
    return CrossTurnState(turn_index=turn, c1=c1, cooling=cooling, last_issued=last, issued_counts=counts)


def _candidates(raw: Iterable[str | Candidate]) -> list[Candidate]:
    seen: dict[str, Candidate] = {}
    for c in raw:
        cand = Candidate(id=c) if isinstance(c, str) else c
        seen.setdefault(cand.id, cand)
    return [seen[k] for k in sorted(seen)]


def schedule(
    state: CrossTurnState,
    candidates: Iterable[str | Candidate],
    rng: SessionRng | int,
    table: BranchTable,
) -> tuple[str | None, AnswerMeta]:
    """Pick this turn's guidance subject (or None) and the meta to write back.

    ``rng`` is the session's :class:`SessionRng` or its integer seed.
    """
    srng = rng if isinstance(rng, SessionRng) else SessionRng(rng)
    cands = _candidates(candidates)
    pool_hash = stable_hash([table.branch, table.version, [[c.id, c.weight] for c in cands]])
    turn_seed = srng.turn_seed(state.turn_index)
    draw = random.Random(turn_seed)
    excluded = set(state.c1.excluded_subjects)
    survivors: list[tuple[Candidate, PoolEntry]] = []
    for c in cands:
        u = draw.random()  # drawn for every candidate: the stream never depends on the filter
        entry = table.entry(c.id)
        if (
            entry is None
            or c.id == state.last_issued
            or c.id in state.cooling
            or c.id in excluded
            or (table.max_per_window is not None and state.issued_counts.get(c.id, 0) >= table.max_per_window)
        ):
            continue
        if u < entry.p:
            survivors.append((c, entry))
    pick: str | None = None
    cooldown: dict[str, int] = {}
    r = draw.random()
    if survivors:
        weights = [e.w * c.weight for c, e in survivors]
        target = r * sum(weights)
        acc = 0.0
        chosen = survivors[-1]
        for item, w in zip(survivors, weights, strict=True):
            acc += w
            if target < acc:
                chosen = item
                break
        pick = chosen[0].id
        n = chosen[1].cooldown if chosen[1].cooldown is not None else table.default_cooldown
        if n:
            cooldown[pick] = n
    meta = AnswerMeta(
        turn_index=state.turn_index,
        guidance_type=table.branch if pick is not None else "none",
        subject_id=pick,
        cooldown_writeback=cooldown,
        seed=f"{turn_seed:016x}",
        candidate_pool_hash=pool_hash,
        table_version=table.version,
    )
    return pick, meta


def schedule_turn(
    state: CrossTurnState,
    candidates: Iterable[str | Candidate],
    rng: SessionRng | int,
    tables: Mapping[str, BranchTable],
) -> tuple[str | None, AnswerMeta]:
    """:func:`schedule` with the branch table chosen by ``state.c1.intent``.

    An intent with no branch (chitchat…) gets no guidance, with a meta that
    still records the turn, its seed and the (empty) pool.
    """
    table = tables.get(state.c1.intent)
    if table is not None:
        return schedule(state, candidates, rng, table)
    srng = rng if isinstance(rng, SessionRng) else SessionRng(rng)
    meta = AnswerMeta(
        turn_index=state.turn_index,
        guidance_type="none",
        seed=f"{srng.turn_seed(state.turn_index):016x}",
        candidate_pool_hash=stable_hash(["none", "", []]),
    )
    return None, meta
