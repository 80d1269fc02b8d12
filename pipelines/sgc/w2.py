"""W2 Grounding: slots → repairs → diff against live facts → Ψ → paragraph plan.

The pieces live in :mod:`pipelines.sgc.w2_slots` (slots and repairs),
:mod:`pipelines.sgc.w2_diff` (facts, conflicts, tiers) and
:mod:`pipelines.sgc.psi` (Ψ, scheduler, contradiction check); this module
re-exports them and adds :func:`ground`, the whole W2 kernel for one turn,
whose :class:`GroundingResult` is the contract's ``c2``.
"""

from __future__ import annotations

from collections.abc import Collection

from pydantic import BaseModel, ConfigDict

from pipelines.errors import ConfigError
from pipelines.sgc.psi import (
    DEFAULT_INCOMPATIBLE,
    PARAGRAPH_KINDS,
    Paragraph,
    ParagraphKind,
    ParagraphPlan,
    PsiResult,
    PsiRule,
    PsiTable,
    check_paragraph_contradictions,
    load_psi_table,
    plan_paragraphs,
    psi,
)
from pipelines.sgc.w2_diff import (
    CONFLICT_KINDS,
    DEFAULT_TIERS,
    Conflict,
    ConflictKind,
    LiveFacts,
    OwnedEntity,
    Tier,
    TierTable,
    constraints_of,
    diff,
    load_tier_table,
)
from pipelines.sgc.w2_slots import (
    AttributePref,
    GlobalConstraint,
    NaturePref,
    QuerySlots,
    Repair,
    SwapGroup,
    query_slots_schema,
    repair_attribute_change_not_exclusion,
    repair_entity_as_attribute,
    repair_slots,
)

__all__ = [
    "AttributePref",
    "GlobalConstraint",
    "NaturePref",
    "QuerySlots",
    "Repair",
    "SwapGroup",
    "query_slots_schema",
    "repair_attribute_change_not_exclusion",
    "repair_entity_as_attribute",
    "repair_slots",
    "CONFLICT_KINDS",
    "DEFAULT_TIERS",
    "Conflict",
    "ConflictKind",
    "LiveFacts",
    "OwnedEntity",
    "Tier",
    "TierTable",
    "constraints_of",
    "diff",
    "load_tier_table",
    "DEFAULT_INCOMPATIBLE",
    "PARAGRAPH_KINDS",
    "Paragraph",
    "ParagraphKind",
    "ParagraphPlan",
    "PsiResult",
    "PsiRule",
    "PsiTable",
    "check_paragraph_contradictions",
    "load_psi_table",
    "plan_paragraphs",
    "psi",
    "GroundingResult",
    "ground",
    "ParagraphResult",
    "plan_conflicts",
]


class GroundingResult(BaseModel):
    """One turn of W2: the repaired slots, what was repaired, the conflicts, Ψ and the plan (c2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slots: QuerySlots
    repairs: tuple[Repair, ...]
    conflicts: tuple[Conflict, ...]
    psi: PsiResult
    plan: ParagraphPlan


def ground(
    slots: QuerySlots,
    facts: LiveFacts,
    intent: str,
    *,
    psi_table: PsiTable,
    tiers: TierTable = DEFAULT_TIERS,
    known_entities: Collection[str] | None = None,
    max_paragraphs: int | None = None,
) -> GroundingResult:
    """Run W2 for one turn: repair, diff, Ψ and the paragraph plan.

    ``known_entities`` defaults to ``facts.known_entities`` (for repair rule 2).
    """
    names = facts.known_entities if known_entities is None else known_entities
    repaired, repairs = repair_slots(slots, names)
    conflicts = diff(repaired, facts, tiers)
    result = psi(psi_table, conflicts, intent, constraints_of(repaired))
    plan = plan_paragraphs(
        result.eligible, result.required, conflicts,
        incompatible=psi_table.incompatible, max_paragraphs=max_paragraphs,
    )
    return GroundingResult(
        slots=repaired, repairs=tuple(repairs), conflicts=tuple(conflicts), psi=result, plan=plan
    )


class ParagraphResult(BaseModel):
    """W2 for a domain that finds its conflicts itself: the graded conflicts, Ψ and the plan (c2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    conflicts: tuple[Conflict, ...]
    psi: PsiResult
    plan: ParagraphPlan


def plan_conflicts(
    raw: Collection[dict[str, object] | Conflict],
    intent: str,
    *,
    psi_table: PsiTable,
    tiers: TierTable,
    constraints: Collection[str] = (),
    max_paragraphs: int | None = None,
) -> ParagraphResult:
    """Grade ``raw`` conflicts (``{constraint_id, kind, entity?, detail?}``) with ``tiers``, then Ψ and the plan.

    A conflict whose kind the tier table does not grade raises :class:`ConfigError`.
    """
    graded: list[Conflict] = []
    for c in raw:
        if isinstance(c, Conflict):
            graded.append(c)
            continue
        kind = str(c.get("kind"))
        if kind not in tiers.tiers:
            raise ConfigError(f"conflict kind {kind!r} is not graded by tiers {tiers.version!r}")
        graded.append(Conflict(constraint_id=str(c.get("constraint_id")), kind=kind, tier=tiers.tiers[kind],
                               entity=c.get("entity"), detail=str(c.get("detail") or "")))  # type: ignore[arg-type]
    result = psi(psi_table, graded, intent, constraints)
    plan = plan_paragraphs(result.eligible, result.required, graded, incompatible=psi_table.incompatible,
                           max_paragraphs=max_paragraphs)
    return ParagraphResult(conflicts=tuple(graded), psi=result, plan=plan)
