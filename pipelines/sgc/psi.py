"""Ψ and the paragraph scheduler: which paragraphs a reply may hold and which it must.

Ψ is a versioned rule table (:class:`PsiTable`). Each :class:`PsiRule` has a
``scope`` — once per ``turn``, once per conflict (``per_conflict``, filtered
by tier / kind), or once per satisfied constraint (``per_satisfied``) — an
optional intent filter and turn conditions, and effects ``allow`` / ``require``
/ ``forbid`` over paragraph kinds {praise, apology, constraint_account,
guidance, scene_flavor}. :func:`psi` evaluates every rule: the eligible set A
is (allowed ∪ required) minus forbidden, the required set R is required minus
forbidden (forbid wins; dropped requirements are reported).

:func:`plan_paragraphs` picks P with R ⊆ P ⊆ A and never two incompatible
judgements about one constraint (praise/apology, praise/constraint_account).
:func:`check_paragraph_contradictions` is the same check, for the post-guard.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipelines.errors import ConfigError
from pipelines.sgc.config import TableConfig, load_model
from pipelines.sgc.w2_diff import Conflict, ConflictKind, Tier

__all__ = [
    "ParagraphKind",
    "PARAGRAPH_KINDS",
    "DEFAULT_INCOMPATIBLE",
    "Paragraph",
    "PsiRule",
    "PsiTable",
    "PsiResult",
    "ParagraphPlan",
    "load_psi_table",
    "psi",
    "plan_paragraphs",
    "check_paragraph_contradictions",
]

ParagraphKind = Literal["praise", "apology", "constraint_account", "guidance", "scene_flavor"]
PARAGRAPH_KINDS: tuple[str, ...] = get_args(ParagraphKind)
DEFAULT_INCOMPATIBLE: tuple[tuple[str, str], ...] = (("praise", "apology"), ("praise", "constraint_account"))
_ORDER = {k: i for i, k in enumerate(("apology", "constraint_account", "guidance", "praise", "scene_flavor"))}
_PRIORITY = {k: i for i, k in enumerate(("constraint_account", "apology", "guidance", "praise", "scene_flavor"))}
_SEVERITY = {"hard": 0, "soft": 1, "hint": 2}


class Paragraph(BaseModel):
    """One planned paragraph: a judgement kind about one constraint (or the turn, when None)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ParagraphKind
    constraint_id: str | None = None


class PsiRule(TableConfig):
    id: str = Field(..., min_length=1)
    description: str = ""
    scope: Literal["turn", "per_conflict", "per_satisfied"] = "turn"
    intents: list[str] | None = None
    tiers: list[Tier] | None = Field(None, description="per_conflict: only conflicts of these tiers.")
    kinds: list[ConflictKind] | None = Field(None, description="per_conflict: only conflicts of these kinds.")
    has_conflicts: bool | None = None
    min_hard: int | None = Field(None, ge=0)
    max_hard: int | None = Field(None, ge=0)
    allow: list[ParagraphKind] = Field(default_factory=list)
    require: list[ParagraphKind] = Field(default_factory=list)
    forbid: list[ParagraphKind] = Field(default_factory=list)
    forbid_everywhere: list[ParagraphKind] = Field(
        default_factory=list, description="Forbid these kinds for every constraint and the turn."
    )

    @model_validator(mode="after")
    def _effects(self) -> PsiRule:
        if not (self.allow or self.require or self.forbid or self.forbid_everywhere):
            raise ValueError(f"rule {self.id!r} has no effect")
        if self.scope != "per_conflict" and (self.tiers or self.kinds):
            raise ValueError(f"rule {self.id!r}: tiers/kinds only apply to scope per_conflict")
        return self


class PsiTable(TableConfig):
    version: str = Field(..., min_length=1)
    incompatible: list[tuple[ParagraphKind, ParagraphKind]] = Field(
        default_factory=lambda: [tuple(p) for p in DEFAULT_INCOMPATIBLE]
    )
    rules: list[PsiRule] = Field(..., min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> PsiTable:
        ids = [r.id for r in self.rules]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate rule ids {dupes}")
        return self


class PsiResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    eligible: frozenset[Paragraph]
    required: frozenset[Paragraph]
    fired: tuple[str, ...]
    dropped_required: frozenset[Paragraph] = frozenset()
    table_version: str


class ParagraphPlan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    paragraphs: tuple[Paragraph, ...]
    required: frozenset[Paragraph] = frozenset()

    def kinds(self) -> list[str]:
        return [p.kind for p in self.paragraphs]


def load_psi_table(data: Any) -> PsiTable:
    """Validate a Ψ table from a dict; raises ConfigError with the path."""
    return load_model(PsiTable, data, "psi")


def _turn_ok(rule: PsiRule, intent: str, conflicts: list[Conflict], n_hard: int) -> bool:
    if rule.intents is not None and intent not in rule.intents:
        return False
    if rule.has_conflicts is not None and rule.has_conflicts != bool(conflicts):
        return False
    if rule.min_hard is not None and n_hard < rule.min_hard:
        return False
    return rule.max_hard is None or n_hard <= rule.max_hard


def psi(
    table: PsiTable, conflicts: Iterable[Conflict], intent: str, constraints: Collection[str] = ()
) -> PsiResult:
    """Ψ(conflicts, intent) → eligible A and required R (``constraints``: all constraint ids, for praise)."""
    conflicts = list(conflicts)
    n_hard = sum(1 for c in conflicts if c.tier == "hard")
    conflicted = {c.constraint_id for c in conflicts}
    satisfied = [c for c in constraints if c not in conflicted]
    allow: set[Paragraph] = set()
    require: set[Paragraph] = set()
    forbid: set[Paragraph] = set()
    forbid_all: set[str] = set()
    fired: list[str] = []
    for rule in table.rules:
        if not _turn_ok(rule, intent, conflicts, n_hard):
            continue
        if rule.scope == "turn":
            targets: list[str | None] = [None]
        elif rule.scope == "per_satisfied":
            targets = list(satisfied)
        else:
            targets = list(dict.fromkeys(
                c.constraint_id
                for c in conflicts
                if (rule.tiers is None or c.tier in rule.tiers) and (rule.kinds is None or c.kind in rule.kinds)
            ))
        if not targets:
            continue
        fired.append(rule.id)
        forbid_all.update(rule.forbid_everywhere)
        for cid in targets:
            allow.update(Paragraph(kind=k, constraint_id=cid) for k in rule.allow)
            require.update(Paragraph(kind=k, constraint_id=cid) for k in rule.require)
            forbid.update(Paragraph(kind=k, constraint_id=cid) for k in rule.forbid)

    def blocked(p: Paragraph) -> bool:
        return p in forbid or p.kind in forbid_all

    eligible = frozenset(p for p in allow | require if not blocked(p))
    required = frozenset(p for p in require if not blocked(p))
    dropped = frozenset(p for p in require if blocked(p))
    return PsiResult(
        eligible=eligible, required=required, fired=tuple(fired), dropped_required=dropped,
        table_version=table.version,
    )


def _pairs(incompatible: Iterable[tuple[str, str]]) -> set[frozenset[str]]:
    return {frozenset(p) for p in incompatible}


def check_paragraph_contradictions(
    items: ParagraphPlan | Iterable[Paragraph | tuple[str, str | None]],
    incompatible: Iterable[tuple[str, str]] = DEFAULT_INCOMPATIBLE,
) -> list[tuple[Paragraph, Paragraph]]:
    """Pairs of incompatible judgements about the same constraint (empty when consistent).

    Accepts a plan, paragraphs, or per-sentence ``(kind, constraint_id)`` judgements.
    """
    seq = items.paragraphs if isinstance(items, ParagraphPlan) else items
    paras = [p if isinstance(p, Paragraph) else Paragraph(kind=p[0], constraint_id=p[1]) for p in seq]
    bad = _pairs(incompatible)
    seen: dict[str | None, list[Paragraph]] = {}
    out: list[tuple[Paragraph, Paragraph]] = []
    for p in paras:
        for q in seen.get(p.constraint_id, []):
            if frozenset((p.kind, q.kind)) in bad:
                out.append((q, p))
        seen.setdefault(p.constraint_id, []).append(p)
    return out


def plan_paragraphs(
    eligible: Collection[Paragraph],
    required: Collection[Paragraph],
    conflicts: Iterable[Conflict] = (),
    *,
    incompatible: Iterable[tuple[str, str]] = DEFAULT_INCOMPATIBLE,
    max_paragraphs: int | None = None,
) -> ParagraphPlan:
    """Pick P with R ⊆ P ⊆ A and no incompatible pair per constraint.

    Required paragraphs always go in; optional ones are added greedily by
    priority (account, apology, guidance, praise, flavor; harder conflicts
    first) while compatible and under ``max_paragraphs``. Raises
    :class:`ConfigError` when R itself is contradictory or not inside A.
    """
    bad = _pairs(incompatible)
    req = set(required)
    if not req <= set(eligible):
        raise ConfigError("paragraph plan: required paragraphs are not all eligible",
                          details={"missing": sorted(str(p) for p in req - set(eligible))})
    clash = check_paragraph_contradictions(sorted(req, key=_plan_key), incompatible)
    if clash:
        raise ConfigError("paragraph plan: required paragraphs contradict each other",
                          details={"pairs": [[a.model_dump(), b.model_dump()] for a, b in clash]})
    severity = {}
    for c in conflicts:
        severity[c.constraint_id] = min(severity.get(c.constraint_id, 3), _SEVERITY[c.tier])
    by_cid: dict[str | None, set[str]] = {}
    for p in req:
        by_cid.setdefault(p.constraint_id, set()).add(p.kind)
    chosen = set(req)
    optional = sorted(
        set(eligible) - req,
        key=lambda p: (_PRIORITY[p.kind], severity.get(p.constraint_id, 3), p.constraint_id or ""),
    )
    for p in optional:
        if max_paragraphs is not None and len(chosen) >= max_paragraphs:
            break
        kinds = by_cid.setdefault(p.constraint_id, set())
        if any(frozenset((p.kind, k)) in bad for k in kinds):
            continue
        kinds.add(p.kind)
        chosen.add(p)
    return ParagraphPlan(paragraphs=tuple(sorted(chosen, key=_plan_key)), required=frozenset(req))


def _plan_key(p: Paragraph) -> tuple[int, int, str]:
    return (_ORDER[p.kind], 0 if p.constraint_id is None else 1, p.constraint_id or "")
