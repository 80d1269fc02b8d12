"""W2: repairs, diff and tiers, every Ψ rule of the coach table, the paragraph scheduler."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.domains.coach.pack import load_coach_rule_tables
from pipelines.errors import ConfigError
from pipelines.sgc.w2 import (
    CONFLICT_KINDS,
    DEFAULT_TIERS,
    PARAGRAPH_KINDS,
    AttributePref,
    Conflict,
    GlobalConstraint,
    LiveFacts,
    NaturePref,
    OwnedEntity,
    Paragraph,
    QuerySlots,
    SwapGroup,
    check_paragraph_contradictions,
    constraints_of,
    diff,
    ground,
    load_tier_table,
    plan_paragraphs,
    psi,
    query_slots_schema,
    repair_attribute_change_not_exclusion,
    repair_entity_as_attribute,
)

TABLES = load_coach_rule_tables()
FACTS = LiveFacts(
    owned=(
        OwnedEntity(name="Emberfox", level=30, evolved=False, nature="brave", skills=frozenset({"Flare", "Blaze"})),
        OwnedEntity(name="Tidefin", level=12, evolved=True, nature="calm", skills=frozenset({"Ripple"})),
    ),
    known_entities=frozenset({"Emberfox", "Tidefin", "Voltwing"}),
    known_opponents=frozenset({"Rival Kai"}),
    supported_styles=frozenset({"aggressive"}),
)


def kinds(conflicts):
    return {(c.constraint_id, c.kind, c.tier) for c in conflicts}


def test_query_slots_schema_is_json_schema():
    schema = query_slots_schema()
    assert schema["type"] == "object" and "wanted_entities" in schema["properties"]
    assert schema["additionalProperties"] is False


def test_repair_rule_1_attribute_change_is_not_exclusion():
    slots = QuerySlots(excluded_entities=("Emberfox", "Tidefin"),
                       attribute_prefs=(AttributePref(entity="Emberfox", attribute="skill", value="Inferno", op="change"),))
    fixed, repairs = repair_attribute_change_not_exclusion(slots)
    assert fixed.excluded_entities == ("Tidefin",)
    assert [(r.rule, r.entity) for r in repairs] == [("attribute_change_not_exclusion", "Emberfox")]
    assert repair_attribute_change_not_exclusion(fixed) == (fixed, [])


def test_repair_rule_2_entity_parsed_as_attribute():
    slots = QuerySlots(
        attribute_prefs=(AttributePref(attribute="member", value="voltwing"),
                         AttributePref(attribute="Tidefin", op="avoid"),
                         AttributePref(attribute="skill", value="Flare")),
        style_prefs=("aggressive", "Emberfox"),
    )
    fixed, repairs = repair_entity_as_attribute(slots, FACTS.known_entities)
    assert fixed.wanted_entities == ("Voltwing", "Emberfox")
    assert fixed.excluded_entities == ("Tidefin",)
    assert fixed.attribute_prefs == (AttributePref(attribute="skill", value="Flare"),)
    assert fixed.style_prefs == ("aggressive",)
    assert {r.rule for r in repairs} == {"entity_as_attribute"} and len(repairs) == 3


def test_diff_hard_conflicts():
    slots = QuerySlots(wanted_entities=("Voltwing", "Nobody"),
                       attribute_prefs=(AttributePref(entity="Emberfox", attribute="skill", value="Inferno"),),
                       n_pick_k_swap_group=SwapGroup(n=5, k=1))
    assert kinds(diff(slots, FACTS)) == {
        ("want:Voltwing", "entity_not_owned", "hard"),
        ("want:Nobody", "entity_unknown", "hard"),
        ("skill:Emberfox:Inferno", "skill_locked", "hard"),
        ("swap_group", "swap_group_too_large", "hard"),
    }


def test_diff_soft_and_hint_conflicts():
    slots = QuerySlots(wanted_entities=("Tidefin",), opponent_entities=("Ghost",),
                       nature_prefs=(NaturePref(entity="Emberfox", nature="calm"), NaturePref(nature="brave")),
                       attribute_prefs=(AttributePref(entity="Emberfox", attribute="evolved", value="yes"),),
                       global_constraints=(GlobalConstraint(key="min_level", value="20"),),
                       style_prefs=("aggressive", "sneaky"))
    assert kinds(diff(slots, FACTS)) == {
        ("opponent:Ghost", "opponent_unknown", "soft"),
        ("nature:Emberfox:calm", "nature_mismatch", "soft"),
        ("attr:Emberfox:evolved", "not_evolved", "soft"),
        ("global:min_level", "level_below", "soft"),
        ("style:sneaky", "style_unsupported", "hint"),
    }


def test_diff_empty_inventory_and_satisfied_request():
    assert kinds(diff(QuerySlots(excluded_entities=("Emberfox", "Tidefin")), FACTS)) == {
        ("inventory", "inventory_empty", "hard")}
    ok = QuerySlots(wanted_entities=("Emberfox",), nature_prefs=(NaturePref(entity="Emberfox", nature="brave"),),
                    attribute_prefs=(AttributePref(entity="Emberfox", attribute="skill", value="Flare"),))
    assert diff(ok, FACTS) == []
    assert constraints_of(ok) == ["want:Emberfox", "skill:Emberfox:Flare", "nature:Emberfox:brave"]


def test_tiers_table_grades_and_must_be_complete():
    regraded = load_tier_table({"version": "t2", "tiers": {**DEFAULT_TIERS.tiers, "nature_mismatch": "hint"}})
    slots = QuerySlots(nature_prefs=(NaturePref(entity="Emberfox", nature="calm"),))
    assert diff(slots, FACTS, regraded)[0].tier == "hint"
    assert set(TABLES.tiers.tiers) == set(CONFLICT_KINDS)
    partial = dict(DEFAULT_TIERS.tiers)
    partial.pop("skill_locked")
    with pytest.raises(ConfigError, match="skill_locked"):
        load_tier_table({"version": "t3", "tiers": partial})
    with pytest.raises(ConfigError) as info:
        load_tier_table({"version": "t3", "tiers": {**DEFAULT_TIERS.tiers, "skill_locked": "fatal"}})
    assert info.value.details["path"] == "tiers.tiers.skill_locked"


def C(cid, kind, tier):
    return Conflict(constraint_id=cid, kind=kind, tier=tier)


P = Paragraph
HARD = C("want:Voltwing", "entity_not_owned", "hard")
HARD2 = C("skill:Emberfox:Inferno", "skill_locked", "hard")
SOFT = C("nature:Emberfox:calm", "nature_mismatch", "soft")
HINT = C("style:sneaky", "style_unsupported", "hint")
EMPTY = C("inventory", "inventory_empty", "hard")

# rule id -> (conflicts, intent, constraints, expected in A, expected in R, expected absent from A)
PSI_CASES = {
    "praise_satisfied": ([], "recommend", ["want:Emberfox"], [P(kind="praise", constraint_id="want:Emberfox")], [], []),
    "hard_requires_account": ([HARD], "recommend", ["want:Voltwing"], [],
                              [P(kind="constraint_account", constraint_id="want:Voltwing")],
                              [P(kind="praise", constraint_id="want:Voltwing")]),
    "hard_offers_guidance": ([HARD], "recommend", [], [P(kind="guidance", constraint_id="want:Voltwing")], [], []),
    "soft_may_account": ([SOFT], "recommend", [SOFT.constraint_id],
                         [P(kind="constraint_account", constraint_id=SOFT.constraint_id)], [],
                         [P(kind="praise", constraint_id=SOFT.constraint_id)]),
    "hint_flavor_only": ([HINT], "recommend", [], [P(kind="scene_flavor", constraint_id=HINT.constraint_id)], [],
                         [P(kind="apology", constraint_id=HINT.constraint_id)]),
    "empty_inventory_apology": ([EMPTY], "recommend", ["want:Emberfox"], [], [P(kind="apology", constraint_id="inventory")],
                                [P(kind="praise", constraint_id="want:Emberfox"),
                                 P(kind="guidance", constraint_id="inventory")]),
    "many_hard_apology": ([HARD, HARD2], "recommend", [], [], [P(kind="apology")], [P(kind="praise")]),
    "clean_turn_praise": ([], "knowledge_qa", [], [P(kind="praise")], [], []),
    "advice_requires_guidance": ([SOFT], "teaching", [], [], [P(kind="guidance")], []),
    "guidance_allowed": ([HARD], "account", [], [P(kind="guidance")], [], []),
    "flavor_allowed": ([], "knowledge_qa", [], [P(kind="scene_flavor")], [], []),
    "smalltalk_no_guidance": ([], "chitchat", [], [], [], [P(kind="guidance"), P(kind="constraint_account")]),
}


def test_every_psi_rule_has_a_case():
    assert {r.id for r in TABLES.psi.rules} == set(PSI_CASES)
    assert 8 <= len(TABLES.psi.rules) <= 12


@pytest.mark.parametrize("rule_id", sorted(PSI_CASES))
def test_psi_rule(rule_id):
    conflicts, intent, constraints, in_a, in_r, not_a = PSI_CASES[rule_id]
    res = psi(TABLES.psi, conflicts, intent, constraints)
    assert rule_id in res.fired
    assert set(in_a) <= res.eligible
    assert set(in_r) <= res.required
    assert not (set(not_a) & res.eligible)
    assert res.required <= res.eligible
    plan = plan_paragraphs(res.eligible, res.required, conflicts, incompatible=TABLES.psi.incompatible)
    assert check_paragraph_contradictions(plan) == []


def test_forbid_wins_over_require_and_is_reported():
    from pipelines.sgc.psi import load_psi_table

    table = load_psi_table({"version": "x", "rules": [
        {"id": "r", "scope": "turn", "require": ["praise"]},
        {"id": "f", "scope": "turn", "forbid": ["praise"]},
    ]})
    res = psi(table, [], "recommend")
    assert res.required == frozenset() and res.dropped_required == {P(kind="praise")}


def test_psi_table_validation_paths():
    from pipelines.sgc.psi import load_psi_table

    with pytest.raises(ConfigError) as info:
        load_psi_table({"version": "x", "rules": [{"id": "r", "allow": ["shouting"]}]})
    assert info.value.details["path"] == "psi.rules.0.allow.0"
    with pytest.raises(ConfigError, match="no effect"):
        load_psi_table({"version": "x", "rules": [{"id": "r"}]})


def test_scheduler_refuses_contradictory_requirements():
    a = {P(kind="praise", constraint_id="c"), P(kind="apology", constraint_id="c")}
    with pytest.raises(ConfigError, match="contradict"):
        plan_paragraphs(a, a)
    with pytest.raises(ConfigError, match="eligible"):
        plan_paragraphs(set(), {P(kind="praise")})


def test_check_contradictions_per_sentence_judgements():
    judgements = [("praise", "want:X"), ("guidance", None), ("constraint_account", "want:X"), ("praise", "want:Y")]
    pairs = check_paragraph_contradictions(judgements)
    assert [(a.kind, b.kind) for a, b in pairs] == [("praise", "constraint_account")]


CIDS = ["c1", "c2", "c3", None]
para_st = st.builds(lambda k, c: P(kind=k, constraint_id=c), st.sampled_from(PARAGRAPH_KINDS), st.sampled_from(CIDS))


@settings(max_examples=300, deadline=None)
@given(eligible=st.frozensets(para_st, max_size=14), data=st.data(),
       cap=st.one_of(st.none(), st.integers(min_value=0, max_value=8)))
def test_scheduler_never_selects_incompatible_pair(eligible, data, cap):
    required: set[Paragraph] = set()
    for p in data.draw(st.permutations(sorted(eligible, key=str))):
        if data.draw(st.booleans()) and not check_paragraph_contradictions([*required, p]):
            required.add(p)
    plan = plan_paragraphs(eligible, required, max_paragraphs=cap)
    chosen = set(plan.paragraphs)
    assert required <= chosen <= eligible
    assert check_paragraph_contradictions(plan) == []
    assert len(chosen) == len(plan.paragraphs)
    assert plan == plan_paragraphs(eligible, required, max_paragraphs=cap)


conflict_st = st.builds(
    lambda cid, kind: C(cid, kind, DEFAULT_TIERS.tiers[kind]),
    st.sampled_from(["want:A", "skill:A:x", "nature:A:calm", "style:s", "inventory", "swap_group"]),
    st.sampled_from(CONFLICT_KINDS),
)


@settings(max_examples=300, deadline=None)
@given(conflicts=st.lists(conflict_st, max_size=6),
       intent=st.sampled_from(sorted(["recommend", "teaching", "knowledge_qa", "chitchat", "meta", "account"])),
       constraints=st.lists(st.sampled_from(["want:A", "want:B", "style:s", "global:min_level"]), max_size=4))
def test_coach_psi_plus_scheduler_is_always_consistent(conflicts, intent, constraints):
    res = psi(TABLES.psi, conflicts, intent, constraints)
    plan = plan_paragraphs(res.eligible, res.required, conflicts, incompatible=TABLES.psi.incompatible)
    assert res.required <= set(plan.paragraphs) <= res.eligible
    assert check_paragraph_contradictions(plan, TABLES.psi.incompatible) == []
    for c in conflicts:
        if c.tier == "hard":
            assert P(kind="praise", constraint_id=c.constraint_id) not in plan.paragraphs
            assert P(kind="constraint_account", constraint_id=c.constraint_id) in plan.paragraphs


def test_ground_runs_the_whole_kernel():
    slots = QuerySlots(excluded_entities=("Emberfox",), style_prefs=("Voltwing",),
                       attribute_prefs=(AttributePref(entity="Emberfox", attribute="skill", value="Inferno", op="change"),))
    g = ground(slots, FACTS, "recommend", psi_table=TABLES.psi, tiers=TABLES.tiers)
    assert g.slots.excluded_entities == () and g.slots.wanted_entities == ("Voltwing",)
    assert {c.kind for c in g.conflicts} == {"entity_not_owned", "skill_locked"}
    assert P(kind="apology") in g.plan.paragraphs  # two hard conflicts
    assert check_paragraph_contradictions(g.plan) == []
