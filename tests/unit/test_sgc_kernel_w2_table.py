"""W2 by fixed examples: every conflict at, just below and just above its boundary.

Expected conflicts are written from the rules in :mod:`pipelines.sgc.w2_diff`
and the coach tier table (``pipelines/domains/coach/tables/tiers.yaml``):
hard = entity_not_owned, entity_unknown, skill_locked, swap_group_too_large,
inventory_empty; soft = nature_mismatch, not_evolved, level_below,
opponent_unknown; hint = style_unsupported.
"""

from __future__ import annotations

import pytest

from pipelines.domains.coach.pack import load_coach_rule_tables
from pipelines.errors import ConfigError
from pipelines.sgc.psi import Paragraph
from pipelines.sgc.w2 import ground
from pipelines.sgc.w2_diff import (
    CONFLICT_KINDS,
    DEFAULT_TIERS,
    Conflict,
    LiveFacts,
    OwnedEntity,
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
    repair_attribute_change_not_exclusion,
    repair_entity_as_attribute,
    repair_slots,
)

TABLES = load_coach_rule_tables()
TIERS = TABLES.tiers

FOX = OwnedEntity(name="Emberfox", level=10, evolved=False, nature="brave", skills=frozenset({"Flare"}))
OWL = OwnedEntity(name="Tideowl", level=20, evolved=True, nature="calm", skills=frozenset({"Surf"}))
FACTS = LiveFacts(owned=(FOX, OWL), known_entities=frozenset({"Emberfox", "Tideowl", "Rockmole"}),
                  known_opponents=frozenset({"rival-1"}), supported_styles=frozenset({"aggressive"}))


def P(kind: str, cid: str | None = None) -> Paragraph:
    return Paragraph(kind=kind, constraint_id=cid)


def c(cid: str, kind: str, tier: str, entity: str | None = None, detail: str = "") -> Conflict:
    return Conflict(constraint_id=cid, kind=kind, tier=tier, entity=entity, detail=detail)


def test_the_coach_tiers_are_the_documented_ones() -> None:
    assert TIERS.tiers == {
        "entity_not_owned": "hard", "entity_unknown": "hard", "skill_locked": "hard",
        "swap_group_too_large": "hard", "inventory_empty": "hard", "nature_mismatch": "soft",
        "not_evolved": "soft", "level_below": "soft", "opponent_unknown": "soft",
        "style_unsupported": "hint",
    }
    assert DEFAULT_TIERS.tiers == TIERS.tiers


def test_nothing_asked_nothing_conflicts() -> None:
    assert diff(QuerySlots(), FACTS, TIERS) == []


# --- min_level: level < floor is a soft conflict; the floor itself is fine ------------------

@pytest.mark.parametrize(
    ("floor", "expected"),
    [
        (9, []),   # above: 10 >= 9
        (10, []),  # at the floor: 10 >= 10
        (11, [c("global:min_level", "level_below", "soft", "Emberfox", "level 10 < 11")]),  # just below
    ],
)
def test_min_level_boundary(floor: int, expected: list[Conflict]) -> None:
    slots = QuerySlots(wanted_entities=("Emberfox",),
                       global_constraints=(GlobalConstraint(key="min_level", value=str(floor)),))
    assert diff(slots, FACTS, TIERS) == expected


@pytest.mark.parametrize(("floor", "empty"), [(20, False), (21, True)])
def test_min_level_filters_the_pool_at_the_floor(floor: int, empty: bool) -> None:
    slots = QuerySlots(global_constraints=(GlobalConstraint(key="min_level", value=str(floor)),))
    expected = [c("inventory", "inventory_empty", "hard", None, "no owned entity satisfies the request")]
    assert diff(slots, FACTS, TIERS) == (expected if empty else [])


def test_min_level_must_be_a_number() -> None:
    slots = QuerySlots(wanted_entities=("Emberfox",),
                       global_constraints=(GlobalConstraint(key="min_level", value="high"),))
    assert diff(slots, FACTS, TIERS) == []


def test_level_uses_the_best_owned_instance() -> None:
    weak = OwnedEntity(name="Emberfox", level=3)
    facts = FACTS.model_copy(update={"owned": (weak, FOX, OwnedEntity(name="Emberfox", level=7))})
    assert facts.owned_by_name()["Emberfox"] == FOX
    slots = QuerySlots(wanted_entities=("Emberfox",),
                       global_constraints=(GlobalConstraint(key="min_level", value="10"),))
    assert diff(slots, facts, TIERS) == []


# --- swap group: n > pool size is hard; exactly the pool size is fine -----------------------

@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, []),
        (2, []),  # exactly the pool (Emberfox, Tideowl)
        (3, [c("swap_group", "swap_group_too_large", "hard", None, "need 3, have 2")]),
    ],
)
def test_swap_group_boundary(n: int, expected: list[Conflict]) -> None:
    assert diff(QuerySlots(n_pick_k_swap_group=SwapGroup(n=n)), FACTS, TIERS) == expected


def test_swap_group_counts_the_pool_after_exclusions_and_filters() -> None:
    slots = QuerySlots(excluded_entities=("Tideowl",), n_pick_k_swap_group=SwapGroup(n=2))
    assert diff(slots, FACTS, TIERS) == [c("swap_group", "swap_group_too_large", "hard", None, "need 2, have 1")]
    only_evolved = QuerySlots(global_constraints=(GlobalConstraint(key="only_evolved", value="yes"),),
                              n_pick_k_swap_group=SwapGroup(n=1))
    assert diff(only_evolved, FACTS, TIERS) == []  # Tideowl is evolved: pool of 1


def test_empty_pool_reports_inventory_not_the_swap_group() -> None:
    slots = QuerySlots(excluded_entities=("Emberfox", "Tideowl"), n_pick_k_swap_group=SwapGroup(n=5))
    assert diff(slots, FACTS, TIERS) == [
        c("inventory", "inventory_empty", "hard", None, "no owned entity satisfies the request")]


def test_only_evolved_empties_a_pool_of_unevolved() -> None:
    facts = FACTS.model_copy(update={"owned": (FOX,)})
    slots = QuerySlots(global_constraints=(GlobalConstraint(key="only_evolved", value="YES"),))
    assert [x.kind for x in diff(slots, facts, TIERS)] == ["inventory_empty"]
    slots = QuerySlots(global_constraints=(GlobalConstraint(key="only_evolved", value="no"),))
    assert diff(slots, facts, TIERS) == []


# --- wanted entities --------------------------------------------------------------------------

def test_wanted_owned_unowned_and_unknown() -> None:
    slots = QuerySlots(wanted_entities=("Emberfox", "Rockmole", "Nopeling"))
    assert diff(slots, FACTS, TIERS) == [
        c("want:Rockmole", "entity_not_owned", "hard", "Rockmole"),
        c("want:Nopeling", "entity_unknown", "hard", "Nopeling"),
    ]


def test_without_a_catalogue_every_unowned_entity_is_not_owned() -> None:
    facts = FACTS.model_copy(update={"known_entities": frozenset()})
    assert diff(QuerySlots(wanted_entities=("Nopeling",)), facts, TIERS) == [
        c("want:Nopeling", "entity_not_owned", "hard", "Nopeling")]


def test_opponents() -> None:
    slots = QuerySlots(opponent_entities=("rival-1", "rival-2"))
    assert diff(slots, FACTS, TIERS) == [c("opponent:rival-2", "opponent_unknown", "soft", "rival-2")]
    unknown_list = FACTS.model_copy(update={"known_opponents": frozenset()})
    assert diff(slots, unknown_list, TIERS) == []  # nothing to check against


# --- skills, evolution, nature ------------------------------------------------------------------

@pytest.mark.parametrize(
    ("pref", "expected"),
    [
        (AttributePref(entity="Emberfox", attribute="skill", value="Flare"), []),
        (AttributePref(entity="Emberfox", attribute="skill", value="Surf"),
         [c("skill:Emberfox:Surf", "skill_locked", "hard", "Emberfox", "Surf")]),
        (AttributePref(entity="Emberfox", attribute="skill", value="Surf", op="avoid"), []),
        (AttributePref(entity="Emberfox", attribute="skill", value="Surf", op="change"),
         [c("skill:Emberfox:Surf", "skill_locked", "hard", "Emberfox", "Surf")]),
        (AttributePref(entity=None, attribute="skill", value="Surf"), []),  # Tideowl has it
        (AttributePref(entity=None, attribute="skill", value="Quake"),
         [c("skill:*:Quake", "skill_locked", "hard", None, "Quake")]),
        (AttributePref(entity="Rockmole", attribute="skill", value="Quake"), []),  # not owned: no check
        (AttributePref(entity="Emberfox", attribute="skill", value=None), []),
    ],
)
def test_skill_prefs(pref: AttributePref, expected: list[Conflict]) -> None:
    assert diff(QuerySlots(attribute_prefs=(pref,)), FACTS, TIERS) == expected


@pytest.mark.parametrize(
    ("pref", "expected"),
    [
        (AttributePref(entity="Emberfox", attribute="evolved"),
         [c("attr:Emberfox:evolved", "not_evolved", "soft", "Emberfox")]),
        (AttributePref(entity="Emberfox", attribute="evolved", value="TRUE"),
         [c("attr:Emberfox:evolved", "not_evolved", "soft", "Emberfox")]),
        (AttributePref(entity="Emberfox", attribute="evolved", value="1"),
         [c("attr:Emberfox:evolved", "not_evolved", "soft", "Emberfox")]),
        (AttributePref(entity="Emberfox", attribute="evolved", value="no"), []),
        (AttributePref(entity="Tideowl", attribute="evolved", value="yes"), []),
        (AttributePref(entity=None, attribute="evolved"), []),  # Tideowl is evolved
        (AttributePref(entity="Rockmole", attribute="evolved"), []),
        (AttributePref(entity="Emberfox", attribute="level", value="50"), []),  # no rule for it
    ],
)
def test_evolved_prefs(pref: AttributePref, expected: list[Conflict]) -> None:
    assert diff(QuerySlots(attribute_prefs=(pref,)), FACTS, TIERS) == expected


def test_evolved_overall_conflicts_when_nothing_owned_is_evolved() -> None:
    facts = FACTS.model_copy(update={"owned": (FOX,)})
    slots = QuerySlots(attribute_prefs=(AttributePref(attribute="evolved"),))
    assert diff(slots, facts, TIERS) == [c("attr:*:evolved", "not_evolved", "soft", None)]


@pytest.mark.parametrize(
    ("pref", "expected"),
    [
        (NaturePref(entity="Emberfox", nature="brave"), []),
        (NaturePref(entity="Emberfox", nature="calm"),
         [c("nature:Emberfox:calm", "nature_mismatch", "soft", "Emberfox", "calm")]),
        (NaturePref(entity=None, nature="calm"), []),
        (NaturePref(entity=None, nature="timid"), [c("nature:*:timid", "nature_mismatch", "soft", None, "timid")]),
        (NaturePref(entity="Rockmole", nature="timid"), []),  # not owned: nothing to compare
    ],
)
def test_nature_prefs(pref: NaturePref, expected: list[Conflict]) -> None:
    assert diff(QuerySlots(nature_prefs=(pref,)), FACTS, TIERS) == expected


def test_styles() -> None:
    slots = QuerySlots(style_prefs=("aggressive", "stealthy"))
    assert diff(slots, FACTS, TIERS) == [c("style:stealthy", "style_unsupported", "hint", None, "stealthy")]


def test_a_regraded_table_moves_the_tier() -> None:
    regraded = load_tier_table({"version": "t2", "tiers": {**TIERS.tiers, "level_below": "hard",
                                                                 "style_unsupported": "soft"}})
    slots = QuerySlots(wanted_entities=("Emberfox",), style_prefs=("stealthy",),
                       global_constraints=(GlobalConstraint(key="min_level", value="11"),))
    assert [(x.kind, x.tier) for x in diff(slots, FACTS, regraded)] == [
        ("level_below", "hard"), ("style_unsupported", "soft")]


def test_tier_table_must_grade_every_kind() -> None:
    tiers = dict(TIERS.tiers)
    del tiers["level_below"]
    with pytest.raises(ConfigError, match="level_below"):
        load_tier_table({"version": "t", "tiers": tiers})
    assert len(CONFLICT_KINDS) == 10


def test_constraint_ids_in_order_without_duplicates() -> None:
    slots = QuerySlots(
        wanted_entities=("A", "A"), opponent_entities=("o",),
        attribute_prefs=(AttributePref(entity="A", attribute="skill", value="S"),
                         AttributePref(attribute="skill", value="T", op="avoid"),
                         AttributePref(attribute="evolved"),
                         AttributePref(entity="A", attribute="level", value="3")),
        nature_prefs=(NaturePref(nature="calm"),),
        global_constraints=(GlobalConstraint(key="min_level", value="5"),),
        n_pick_k_swap_group=SwapGroup(n=3), style_prefs=("x",),
    )
    assert constraints_of(slots) == ["want:A", "opponent:o", "skill:A:S", "attr:*:evolved", "nature:*:calm",
                                     "global:min_level", "swap_group", "style:x"]


# --- repairs --------------------------------------------------------------------------------------

def test_repair_rule_1_keeps_an_entity_whose_attribute_changes() -> None:
    slots = QuerySlots(excluded_entities=("Emberfox", "Tideowl", "Rockmole"),
                       attribute_prefs=(AttributePref(entity="Emberfox", attribute="skill", value="Flare",
                                                       op="change"),),
                       nature_prefs=(NaturePref(entity="Tideowl", nature="calm"),))
    fixed, repairs = repair_attribute_change_not_exclusion(slots)
    assert fixed.excluded_entities == ("Rockmole",)
    assert repairs == [Repair(rule="attribute_change_not_exclusion", entity="Emberfox", detail="attribute-level change"),
                       Repair(rule="attribute_change_not_exclusion", entity="Tideowl", detail="attribute-level change")]
    untouched = QuerySlots(excluded_entities=("Rockmole",))
    assert repair_attribute_change_not_exclusion(untouched) == (untouched, [])


def test_repair_rule_2_moves_known_names_back_to_entities() -> None:
    slots = QuerySlots(
        wanted_entities=("Tideowl",),
        attribute_prefs=(AttributePref(attribute="skill", value="emberfox"),
                         AttributePref(attribute="ROCKMOLE", op="avoid"),
                         AttributePref(entity="Tideowl", attribute="skill", value="Emberfox"),
                         AttributePref(attribute="skill", value="Surf")),
        style_prefs=("tideowl", "aggressive"),
    )
    fixed, repairs = repair_entity_as_attribute(slots, ["Emberfox", "Tideowl", "Rockmole"])
    assert fixed.wanted_entities == ("Tideowl", "Emberfox")
    assert fixed.excluded_entities == ("Rockmole",)
    assert fixed.attribute_prefs == (AttributePref(entity="Tideowl", attribute="skill", value="Emberfox"),
                                     AttributePref(attribute="skill", value="Surf"))
    assert fixed.style_prefs == ("aggressive",)
    assert repairs == [
        Repair(rule="entity_as_attribute", entity="Emberfox", detail="from attribute 'skill'"),
        Repair(rule="entity_as_attribute", entity="Rockmole", detail="from attribute 'ROCKMOLE'"),
        Repair(rule="entity_as_attribute", entity="Tideowl", detail="from style_prefs"),
    ]
    assert repair_entity_as_attribute(QuerySlots(style_prefs=("x",)), ["A"]) == (QuerySlots(style_prefs=("x",)), [])


def test_repair_rule_2_an_avoided_name_leaves_the_wanted_list() -> None:
    slots = QuerySlots(wanted_entities=("Emberfox",),
                       attribute_prefs=(AttributePref(attribute="skill", value="Emberfox", op="avoid"),))
    fixed, _ = repair_entity_as_attribute(slots, ["Emberfox"])
    assert (fixed.wanted_entities, fixed.excluded_entities) == ((), ("Emberfox",))


def test_repair_order_rule_2_then_rule_1() -> None:
    # "avoid Emberfox" lands as an attribute; rule 2 excludes Emberfox; rule 1 then keeps it,
    # because a nature preference talks about it
    slots = QuerySlots(attribute_prefs=(AttributePref(attribute="emberfox", op="avoid"),),
                       nature_prefs=(NaturePref(entity="Emberfox", nature="brave"),))
    fixed, repairs = repair_slots(slots, ["Emberfox"])
    assert fixed.excluded_entities == ()
    assert [r.rule for r in repairs] == ["entity_as_attribute", "attribute_change_not_exclusion"]


# --- one whole W2 turn, by hand ------------------------------------------------------------------

def test_ground_one_turn_by_hand() -> None:
    # "a team with Rockmole, Emberfox at level 11+, aggressive style" — intent recommend
    slots = QuerySlots(wanted_entities=("Rockmole", "Emberfox"), style_prefs=("aggressive",),
                       global_constraints=(GlobalConstraint(key="min_level", value="11"),))
    g = ground(slots, FACTS, "recommend", psi_table=TABLES.psi, tiers=TIERS)
    assert g.repairs == ()
    assert g.conflicts == (
        c("want:Rockmole", "entity_not_owned", "hard", "Rockmole"),
        c("global:min_level", "level_below", "soft", "Emberfox", "level 10 < 11"),
    )
    # Ψ: one hard (want:Rockmole) -> account required, guidance allowed, praise forbidden;
    # soft (global:min_level) -> account allowed; satisfied want:Emberfox, style:aggressive ->
    # praise allowed; advice_requires_guidance needs zero hard: silent; turn guidance and
    # flavour allowed for recommend
    assert g.psi.fired == ("praise_satisfied", "hard_requires_account", "hard_offers_guidance",
                           "soft_may_account", "guidance_allowed", "flavor_allowed")
    assert g.psi.required == {P("constraint_account", "want:Rockmole")}
    assert g.plan.paragraphs == (
        P("constraint_account", "global:min_level"),
        P("constraint_account", "want:Rockmole"),
        P("guidance"),
        P("guidance", "want:Rockmole"),
        P("praise", "style:aggressive"),
        P("praise", "want:Emberfox"),
        P("scene_flavor"),
    )
    assert len(ground(slots, FACTS, "recommend", psi_table=TABLES.psi, max_paragraphs=2).plan.paragraphs) == 2


def test_ground_uses_the_given_catalogue_for_repairs() -> None:
    slots = QuerySlots(style_prefs=("rockmole",))
    assert ground(slots, FACTS, "recommend", psi_table=TABLES.psi).slots.wanted_entities == ("Rockmole",)
    kept = ground(slots, FACTS, "recommend", psi_table=TABLES.psi, known_entities=[])
    assert kept.slots.style_prefs == ("rockmole",) and kept.repairs == ()


def test_tier_table_missing_kinds_error_names_the_path() -> None:
    with pytest.raises(ConfigError) as info:
        load_tier_table({"version": "t", "tiers": {"a": "hard"}}, kinds=["a", "b", "c"])
    assert info.value.message == "tiers: tiers missing for conflict kinds ['b', 'c']"
    assert info.value.details == {"path": "tiers.tiers"}
    assert load_tier_table({"version": "t", "tiers": {"a": "hard"}}, kinds=["a"]).tiers == {"a": "hard"}


# --- plan_conflicts: a domain's raw conflicts graded, then Ψ and the plan ---------------------

def test_plan_conflicts_by_hand() -> None:
    from pipelines.sgc.w2 import plan_conflicts

    raw = [{"constraint_id": "want:A", "kind": "entity_not_owned", "entity": "A"},
           {"constraint_id": "style:x", "kind": "style_unsupported", "detail": "x"}]
    out = plan_conflicts(raw, "account", psi_table=TABLES.psi, tiers=TIERS, constraints=["want:A", "style:x", "want:B"])
    assert out.conflicts == (c("want:A", "entity_not_owned", "hard", "A"),
                             c("style:x", "style_unsupported", "hint", None, "x"))
    assert out.psi.fired == ("praise_satisfied", "hard_requires_account", "hard_offers_guidance",
                             "hint_flavor_only", "guidance_allowed")
    assert out.plan.paragraphs == (P("constraint_account", "want:A"), P("guidance"), P("guidance", "want:A"),
                                   P("praise", "want:B"), P("scene_flavor", "style:x"))
    two = plan_conflicts(raw, "account", psi_table=TABLES.psi, tiers=TIERS, max_paragraphs=2)
    assert set(two.plan.paragraphs) == {P("constraint_account", "want:A"), P("guidance", "want:A")}


def test_plan_conflicts_keeps_graded_conflicts_and_refuses_ungraded_kinds() -> None:
    from pipelines.sgc.w2 import plan_conflicts

    given = c("want:A", "entity_not_owned", "soft", "A")  # already graded: kept as is
    out = plan_conflicts([given], "meta", psi_table=TABLES.psi, tiers=TIERS)
    assert out.conflicts == (given,) and out.psi.required == frozenset()
    with pytest.raises(ConfigError) as info:
        plan_conflicts([{"constraint_id": "x", "kind": "nope"}], "meta", psi_table=TABLES.psi, tiers=TIERS)
    assert info.value.message == "conflict kind 'nope' is not graded by tiers 'coach-tiers-1'"
    out = plan_conflicts([{"constraint_id": "x", "kind": "style_unsupported", "detail": None}], "meta",
                         psi_table=TABLES.psi, tiers=TIERS)
    assert out.conflicts == (c("x", "style_unsupported", "hint", None, ""),)
