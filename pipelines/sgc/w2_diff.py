"""W2 diff: repaired slots against the satisfiable live facts, conflicts graded by tier.

Every user constraint has a stable id (``want:Emberfox``, ``skill:Emberfox:Flare``,
``nature:Emberfox:brave``, ``style:aggressive``, ``global:min_level``…).
:func:`diff` returns one :class:`Conflict` per violated constraint (a constraint
may carry several, e.g. one per entity), graded by a versioned
:class:`TierTable`: **hard** blocks (an unowned wanted entity, a locked skill),
**soft** is a secondary mismatch (nature, evolution, level), **hint** is a
style preference the facts cannot honour.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from pipelines.errors import ConfigError
from pipelines.sgc.config import TableConfig, load_model
from pipelines.sgc.w2_slots import QuerySlots

__all__ = [
    "Tier",
    "ConflictKind",
    "CONFLICT_KINDS",
    "OwnedEntity",
    "LiveFacts",
    "Conflict",
    "TierTable",
    "DEFAULT_TIERS",
    "load_tier_table",
    "constraints_of",
    "diff",
]

Tier = Literal["hard", "soft", "hint"]
#: A conflict kind is a domain's label (``entity_not_owned``, ``action_refused``…): each pack
#: names its kinds and its tier table must grade every one (checked at bundle load).
ConflictKind = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
CoachConflictKind = Literal[
    "entity_not_owned",
    "entity_unknown",
    "skill_locked",
    "nature_mismatch",
    "not_evolved",
    "level_below",
    "swap_group_too_large",
    "inventory_empty",
    "opponent_unknown",
    "style_unsupported",
]
CONFLICT_KINDS: tuple[str, ...] = get_args(CoachConflictKind)


class OwnedEntity(BaseModel):
    """One thing the user owns, as the kernels see it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    level: int = 1
    evolved: bool = False
    nature: str | None = None
    skills: frozenset[str] = frozenset()


class LiveFacts(BaseModel):
    """The satisfiable facts of the user's live state (built by a domain pack from tool results)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    owned: tuple[OwnedEntity, ...] = ()
    known_entities: frozenset[str] = frozenset()
    known_opponents: frozenset[str] = frozenset()
    supported_styles: frozenset[str] = frozenset()

    def owned_by_name(self) -> dict[str, OwnedEntity]:
        """Name → best owned instance (highest level)."""
        out: dict[str, OwnedEntity] = {}
        for e in self.owned:
            if e.name not in out or e.level > out[e.name].level:
                out[e.name] = e
        return out


class Conflict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    constraint_id: str
    kind: ConflictKind
    tier: Tier
    entity: str | None = None
    detail: str = ""


class TierTable(TableConfig):
    """Versioned grading: conflict kind → tier (every kind of the domain must be graded)."""

    version: str = Field(..., min_length=1)
    tiers: dict[ConflictKind, Tier]

    def missing(self, kinds: Collection[str]) -> list[str]:
        """The kinds of ``kinds`` this table does not grade."""
        return [k for k in kinds if k not in self.tiers]


DEFAULT_TIERS = TierTable(
    version="tiers-default-1",
    tiers={
        "entity_not_owned": "hard",
        "entity_unknown": "hard",
        "skill_locked": "hard",
        "swap_group_too_large": "hard",
        "inventory_empty": "hard",
        "nature_mismatch": "soft",
        "not_evolved": "soft",
        "level_below": "soft",
        "opponent_unknown": "soft",
        "style_unsupported": "hint",
    },
)


def load_tier_table(data: Any, kinds: Collection[str] = CONFLICT_KINDS) -> TierTable:
    """Validate a tier table from a dict (grading every one of ``kinds``); raises ConfigError with the path."""
    table = load_model(TierTable, data, "tiers")
    missing = table.missing(kinds)
    if missing:
        raise ConfigError(f"tiers: tiers missing for conflict kinds {missing}", details={"path": "tiers.tiers"})
    return table


def constraints_of(slots: QuerySlots) -> list[str]:
    """Every constraint id the slots express, in a stable order (duplicates removed).

    The implicit ``inventory`` constraint (something owned must satisfy the
    request) only appears as a conflict, never as a praisable constraint.
    """
    ids = [f"want:{e}" for e in slots.wanted_entities]
    ids += [f"opponent:{o}" for o in slots.opponent_entities]
    for p in slots.attribute_prefs:
        if p.attribute == "skill" and p.value and p.op != "avoid":
            ids.append(f"skill:{p.entity or '*'}:{p.value}")
        elif p.attribute == "evolved":
            ids.append(f"attr:{p.entity or '*'}:evolved")
    ids += [f"nature:{p.entity or '*'}:{p.nature}" for p in slots.nature_prefs]
    ids += [f"global:{g.key}" for g in slots.global_constraints]
    if slots.n_pick_k_swap_group is not None:
        ids.append("swap_group")
    ids += [f"style:{s}" for s in slots.style_prefs]
    return list(dict.fromkeys(ids))


def diff(slots: QuerySlots, facts: LiveFacts, tiers: TierTable = DEFAULT_TIERS) -> list[Conflict]:
    """Conflicts between (repaired) slots and the live facts, graded by ``tiers``."""
    grade = tiers.tiers
    owned = facts.owned_by_name()
    out: list[Conflict] = []

    def add(cid: str, kind: ConflictKind, entity: str | None = None, detail: str = "") -> None:
        out.append(Conflict(constraint_id=cid, kind=kind, tier=grade[kind], entity=entity, detail=detail))

    for e in slots.wanted_entities:
        if e not in owned:
            known = not facts.known_entities or e in facts.known_entities
            add(f"want:{e}", "entity_not_owned" if known else "entity_unknown", e)
    for o in slots.opponent_entities:
        if facts.known_opponents and o not in facts.known_opponents:
            add(f"opponent:{o}", "opponent_unknown", o)
    for p in slots.attribute_prefs:
        targets = [owned[p.entity]] if p.entity in owned else ([] if p.entity else list(owned.values()))
        if p.attribute == "skill" and p.value and p.op != "avoid":
            if (p.entity is None or p.entity in owned) and not any(p.value in t.skills for t in targets):
                add(f"skill:{p.entity or '*'}:{p.value}", "skill_locked", p.entity, p.value)
        elif p.attribute == "evolved" and (p.value or "yes").lower() in ("yes", "true", "1"):
            if (p.entity is None or p.entity in owned) and not any(t.evolved for t in targets):
                add(f"attr:{p.entity or '*'}:evolved", "not_evolved", p.entity)
    for n in slots.nature_prefs:
        targets = [owned[n.entity]] if n.entity in owned else ([] if n.entity else list(owned.values()))
        if targets and not any(t.nature == n.nature for t in targets):
            add(f"nature:{n.entity or '*'}:{n.nature}", "nature_mismatch", n.entity, n.nature)
    excluded = set(slots.excluded_entities)
    pool = [e for e in owned.values() if e.name not in excluded]
    for g in slots.global_constraints:
        if g.key == "min_level" and g.value.isdigit():
            floor = int(g.value)
            for e in slots.wanted_entities:
                if e in owned and owned[e].level < floor:
                    add("global:min_level", "level_below", e, f"level {owned[e].level} < {floor}")
            pool = [e for e in pool if e.level >= floor]
        elif g.key == "only_evolved" and g.value.lower() in ("yes", "true", "1"):
            pool = [e for e in pool if e.evolved]
    if not pool:
        add("inventory", "inventory_empty", None, "no owned entity satisfies the request")
    group = slots.n_pick_k_swap_group
    if group is not None and pool and group.n > len(pool):
        add("swap_group", "swap_group_too_large", None, f"need {group.n}, have {len(pool)}")
    for s in slots.style_prefs:
        if s not in facts.supported_styles:
            add(f"style:{s}", "style_unsupported", None, s)
    return out
