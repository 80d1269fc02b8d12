"""W2 slots: what the slot-extraction call fills, and the two pure repair rules.

:class:`QuerySlots` is the structured output of the independent slot
extraction call (its JSON schema, :func:`query_slots_schema`, goes to the
decoder). Two repairs fix what extraction typically gets wrong:

1. **attribute change is not exclusion** — "swap out X's skill" extracted as
   ``excluded_entities=[X]`` plus an attribute preference about X: X is a keeper,
   so it leaves ``excluded_entities``.
2. **entity parsed as attribute** — a known entity name that landed in an
   attribute value or in ``style_prefs`` goes back to the entity slots.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipelines.schema_bounds import bound_schema

__all__ = [
    "AttributePref",
    "NaturePref",
    "SwapGroup",
    "GlobalConstraint",
    "QuerySlots",
    "Repair",
    "query_slots_schema",
    "repair_attribute_change_not_exclusion",
    "repair_entity_as_attribute",
    "repair_slots",
]


class _Slot(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AttributePref(_Slot):
    """A wish about one attribute (``skill``, ``evolved``, ``level``…), of one entity or overall."""

    entity: str | None = None
    attribute: str = Field(..., min_length=1)
    value: str | None = None
    op: Literal["want", "avoid", "change"] = "want"


class NaturePref(_Slot):
    entity: str | None = None
    nature: str = Field(..., min_length=1)


class SwapGroup(_Slot):
    """Pick ``n`` members, keeping ``k`` of them swappable."""

    n: int = Field(..., ge=1, le=12)
    k: int = Field(0, ge=0, le=12)


class GlobalConstraint(_Slot):
    key: str = Field(..., min_length=1, description="e.g. min_level, only_evolved, element")
    value: str


class QuerySlots(_Slot):
    """The user's request as typed slots (W2 input)."""

    wanted_entities: tuple[str, ...] = ()
    excluded_entities: tuple[str, ...] = ()
    opponent_entities: tuple[str, ...] = ()
    nature_prefs: tuple[NaturePref, ...] = ()
    attribute_prefs: tuple[AttributePref, ...] = ()
    style_prefs: tuple[str, ...] = ()
    n_pick_k_swap_group: SwapGroup | None = None
    global_constraints: tuple[GlobalConstraint, ...] = ()


class Repair(_Slot):
    """A record of one repair applied (for the event log)."""

    rule: Literal["attribute_change_not_exclusion", "entity_as_attribute"]
    entity: str
    detail: str = ""


def query_slots_schema() -> dict[str, Any]:
    """JSON schema of :class:`QuerySlots` for a ``json`` structured-output constraint (bounded,
    so a small model's slot call always closes inside its token budget)."""
    return bound_schema(QuerySlots.model_json_schema(), max_chars=40, max_items=4)


def _dedupe(items: Collection[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def repair_attribute_change_not_exclusion(slots: QuerySlots) -> tuple[QuerySlots, list[Repair]]:
    """Rule 1: an entity whose attributes the user talks about (swap its skill…) is not excluded."""
    referenced = {p.entity for p in slots.attribute_prefs if p.entity}
    referenced |= {p.entity for p in slots.nature_prefs if p.entity}
    moved = [e for e in slots.excluded_entities if e in referenced]
    if not moved:
        return slots, []
    kept = tuple(e for e in slots.excluded_entities if e not in referenced)
    repairs = [Repair(rule="attribute_change_not_exclusion", entity=e, detail="attribute-level change") for e in moved]
    return slots.model_copy(update={"excluded_entities": kept}), repairs


def repair_entity_as_attribute(slots: QuerySlots, known_entities: Collection[str]) -> tuple[QuerySlots, list[Repair]]:
    """Rule 2: a known entity name parsed as an attribute value or a style goes back to the entity slots."""
    by_fold = {name.casefold(): name for name in known_entities}
    wanted = list(slots.wanted_entities)
    excluded = list(slots.excluded_entities)
    prefs: list[AttributePref] = []
    repairs: list[Repair] = []
    for p in slots.attribute_prefs:
        name = by_fold.get((p.value or "").casefold()) if p.entity is None else None
        name = name or (by_fold.get(p.attribute.casefold()) if p.entity is None else None)
        if name is None:
            prefs.append(p)
            continue
        (excluded if p.op == "avoid" else wanted).append(name)
        repairs.append(Repair(rule="entity_as_attribute", entity=name, detail=f"from attribute {p.attribute!r}"))
    styles: list[str] = []
    for s in slots.style_prefs:
        name = by_fold.get(s.casefold())
        if name is None:
            styles.append(s)
        else:
            wanted.append(name)
            repairs.append(Repair(rule="entity_as_attribute", entity=name, detail="from style_prefs"))
    if not repairs:
        return slots, []
    excluded_t = _dedupe(excluded)
    wanted_t = tuple(e for e in _dedupe(wanted) if e not in excluded_t)
    update = {
        "wanted_entities": wanted_t,
        "excluded_entities": excluded_t,
        "attribute_prefs": tuple(prefs),
        "style_prefs": tuple(styles),
    }
    return slots.model_copy(update=update), repairs


def repair_slots(slots: QuerySlots, known_entities: Collection[str]) -> tuple[QuerySlots, list[Repair]]:
    """Apply rule 2 then rule 1 (an entity restored by rule 2 can still be a keeper under rule 1)."""
    slots, r2 = repair_entity_as_attribute(slots, known_entities)
    slots, r1 = repair_attribute_change_not_exclusion(slots)
    return slots, r2 + r1
