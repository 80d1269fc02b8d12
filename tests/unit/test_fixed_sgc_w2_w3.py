"""W2/W3 kernels by fixed examples: the arguments each step hands on, and the small rules between them.

Pins, with expected values written by hand from the rules in :mod:`pipelines.sgc.w2`,
:mod:`pipelines.sgc.w2_diff`, :mod:`pipelines.sgc.w2_slots` and :mod:`pipelines.sgc.w3`:

* :func:`ground` diffs with the caller's tier table and plans with the conflicts
  (harder conflicts first) and the Ψ table's own incompatible pairs;
  :func:`plan_conflicts` keeps every pre-graded conflict and uses the table's pairs too;
* ``constraints_of``/``diff`` ids for an attribute wish about no entity use ``*``;
  ``only_evolved`` accepts yes/true/1 (any case); ``owned_by_name`` keeps the first
  of equal-level instances;
* repair rule 2 only reads attribute names/values of entity-less wishes, and a
  missing value matches no name;
* W3: dict metas are validated, cooldown write-back and the weighted pick's running
  sum, the fallback to the last survivor, and the defaults of an unlisted entry.
"""

from __future__ import annotations

import pytest

from pipelines.sgc.psi import Paragraph, PsiTable
from pipelines.sgc.w2 import ground, plan_conflicts
from pipelines.sgc.w2_diff import (
    DEFAULT_TIERS,
    Conflict,
    LiveFacts,
    OwnedEntity,
    TierTable,
    constraints_of,
    diff,
)
from pipelines.sgc.w2_slots import (
    AttributePref,
    GlobalConstraint,
    QuerySlots,
    Repair,
    repair_entity_as_attribute,
)
from pipelines.sgc.w3 import IntentContext, resolve_cross_turn_state, schedule
from tests.unit import test_sgc_kernel_w3_table as w3_table

draws = w3_table.draws  # the scripted-draws fixture of the W3 table
table = w3_table.table

FOX = OwnedEntity(name="Emberfox", level=10, evolved=False, nature="brave", skills=frozenset({"Flare"}))
OWL = OwnedEntity(name="Tideowl", level=20, evolved=True, nature="calm", skills=frozenset({"Surf"}))
FACTS = LiveFacts(owned=(FOX, OWL), known_entities=frozenset({"Emberfox", "Tideowl", "Rockmole"}),
                  known_opponents=frozenset({"rival-1"}), supported_styles=frozenset({"aggressive"}))
INVENTORY_EMPTY = Conflict(constraint_id="inventory", kind="inventory_empty", tier="hard",
                           detail="no owned entity satisfies the request")

# Every optional paragraph is a constraint_account per conflict, or guidance + flavor per turn.
ACCOUNT_PER_CONFLICT = PsiTable.model_validate(
    {"version": "t", "rules": [{"id": "acc", "scope": "per_conflict", "allow": ["constraint_account"]}]})
GUIDANCE_OR_FLAVOR = PsiTable.model_validate(
    {"version": "t", "incompatible": [["guidance", "scene_flavor"]],
     "rules": [{"id": "turn", "allow": ["guidance", "scene_flavor"]}]})


def P(kind: str, cid: str | None = None) -> Paragraph:
    return Paragraph(kind=kind, constraint_id=cid)


# --- ground: tiers, conflicts and incompatible pairs are passed on ---------------------------

def test_ground_grades_conflicts_with_the_given_tier_table() -> None:
    soft = TierTable(version="soft-1", tiers={**DEFAULT_TIERS.tiers, "entity_not_owned": "soft"})
    out = ground(QuerySlots(wanted_entities=("Rockmole",)), FACTS, "recommend",
                 psi_table=ACCOUNT_PER_CONFLICT, tiers=soft)
    assert out.conflicts == (Conflict(constraint_id="want:Rockmole", kind="entity_not_owned", tier="soft",
                                      entity="Rockmole"),)


def test_ground_plans_harder_conflicts_first() -> None:
    # want:Rockmole is hard (not owned), opponent:zz soft (unknown); by id alone opponent:zz would sort first
    slots = QuerySlots(wanted_entities=("Rockmole",), opponent_entities=("zz",))
    out = ground(slots, FACTS, "recommend", psi_table=ACCOUNT_PER_CONFLICT, max_paragraphs=1)
    assert out.plan.paragraphs == (P("constraint_account", "want:Rockmole"),)


def test_ground_uses_the_psi_tables_incompatible_pairs() -> None:
    out = ground(QuerySlots(), FACTS, "recommend", psi_table=GUIDANCE_OR_FLAVOR)
    assert out.plan.paragraphs == (P("guidance"),)  # scene_flavor clashes with guidance in this table


# --- plan_conflicts -------------------------------------------------------------------------

def test_plan_conflicts_keeps_every_pre_graded_conflict() -> None:
    a = Conflict(constraint_id="want:A", kind="entity_not_owned", tier="hard", entity="A")
    b = Conflict(constraint_id="want:B", kind="entity_not_owned", tier="soft", entity="B")
    out = plan_conflicts([a, b, {"constraint_id": "style:x", "kind": "style_unsupported"}], "recommend",
                         psi_table=ACCOUNT_PER_CONFLICT, tiers=DEFAULT_TIERS)
    assert out.conflicts == (a, b, Conflict(constraint_id="style:x", kind="style_unsupported", tier="hint"))
    assert out.plan.kinds() == ["constraint_account"] * 3


def test_plan_conflicts_uses_the_psi_tables_incompatible_pairs() -> None:
    out = plan_conflicts([], "recommend", psi_table=GUIDANCE_OR_FLAVOR, tiers=DEFAULT_TIERS)
    assert out.plan.paragraphs == (P("guidance"),)


# --- constraint ids and diff ------------------------------------------------------------------

def test_constraint_ids_of_entity_less_wishes_use_a_star() -> None:
    slots = QuerySlots(attribute_prefs=(AttributePref(attribute="skill", value="Flare"),
                                        AttributePref(entity="Emberfox", attribute="skill", value="Surf")))
    assert constraints_of(slots) == ["skill:*:Flare", "skill:Emberfox:Surf"]


@pytest.mark.parametrize(
    ("value", "filters"),
    [("yes", True), ("true", True), ("TRUE", True), ("True", True), ("1", True),
     ("no", False), ("0", False), ("truee", False)],
)
def test_only_evolved_accepts_yes_true_one_in_any_case(value: str, filters: bool) -> None:
    # Emberfox is the only owned entity and is not evolved: filtering empties the pool
    facts = LiveFacts(owned=(FOX,))
    slots = QuerySlots(global_constraints=(GlobalConstraint(key="only_evolved", value=value),))
    assert diff(slots, facts) == ([INVENTORY_EMPTY] if filters else [])


def test_owned_by_name_keeps_the_first_of_equal_levels() -> None:
    first = OwnedEntity(name="Emberfox", level=10, nature="brave")
    second = OwnedEntity(name="Emberfox", level=10, nature="calm")
    higher = OwnedEntity(name="Emberfox", level=11, nature="timid")
    assert LiveFacts(owned=(first, second)).owned_by_name() == {"Emberfox": first}
    assert LiveFacts(owned=(first, second, higher)).owned_by_name() == {"Emberfox": higher}


# --- repair rule 2: entity parsed as attribute ------------------------------------------------

def test_a_missing_attribute_value_matches_no_entity_name() -> None:
    slots = QuerySlots(attribute_prefs=(AttributePref(attribute="skill"),))
    assert repair_entity_as_attribute(slots, ["XXXX", "Emberfox"]) == (slots, [])


def test_an_entity_name_as_the_attribute_is_repaired_only_without_an_entity() -> None:
    owned = QuerySlots(attribute_prefs=(AttributePref(entity="Emberfox", attribute="tideowl"),))
    assert repair_entity_as_attribute(owned, ["Emberfox", "Tideowl"]) == (owned, [])
    loose = QuerySlots(attribute_prefs=(AttributePref(attribute="tideowl"),))
    repaired, repairs = repair_entity_as_attribute(loose, ["Emberfox", "Tideowl"])
    assert repaired == QuerySlots(wanted_entities=("Tideowl",))
    assert repairs == [Repair(rule="entity_as_attribute", entity="Tideowl", detail="from attribute 'tideowl'")]


# --- W3 ---------------------------------------------------------------------------------------

C1 = IntentContext(intent="teaching")


EMPTY = resolve_cross_turn_state([], C1)


def test_dict_metas_are_validated_into_answer_metas() -> None:
    raw = [{"turn_index": 4, "guidance_type": "teaching", "subject_id": "a", "cooldown_writeback": {"a": 2},
            "seed": "0", "candidate_pool_hash": "h"}]
    state = resolve_cross_turn_state(raw, C1)
    assert (state.turn_index, state.cooling, state.last_issued, state.issued_counts) == (5, {"a": 2}, "a", {"a": 1})


@pytest.mark.parametrize(("r", "expected"), [(0.3333, "a"), (0.5, "b"), (0.6666, "b"), (0.6667, "c")])
def test_the_pick_follows_the_running_sum_of_weights(draws, r: float, expected: str) -> None:
    # three equal weights: target = 3r; a covers [0, 1), b [1, 2), c [2, 3)
    t = table(pool=[{"id": i, "p": 1.0, "w": 1.0} for i in "abc"])
    draws([0.0, 0.0, 0.0, r])
    assert schedule(EMPTY, ["a", "b", "c"], 1, t)[0] == expected


def test_when_no_running_sum_exceeds_the_target_the_last_survivor_is_picked(draws) -> None:
    # the weights sum to inf, so target = 0.1 * inf = inf and no running sum is strictly above it
    t = table(pool=[{"id": "a", "p": 1.0, "w": 1e308}, {"id": "b", "p": 1.0, "w": 1e308}])
    draws([0.0, 0.0, 0.1])
    pick, m = schedule(EMPTY, ["a", "b"], 1, t)
    assert (pick, m.subject_id) == ("b", "b")


@pytest.mark.parametrize("default_cooldown", [0, 3])
def test_an_unlisted_entry_takes_the_table_defaults(default_cooldown: int) -> None:
    t = table(allow_unlisted=True, default_p=0.25, default_w=2.0, default_cooldown=default_cooldown)
    e = t.entry("x")
    assert (e.id, e.p, e.w, e.cooldown) == ("x", 0.25, 2.0, default_cooldown)
    assert table(pool=[{"id": "a", "p": 1.0, "w": 1.0}]).entry("x") is None
