"""Ψ by fixed examples: each coach rule fires once, and stays silent just outside each condition.

Expected values are read off ``pipelines/domains/coach/tables/psi.yaml`` by hand:
A = (allow ∪ require) − forbid, R = require − forbid, forbid wins; ``fired`` lists
the rules that had at least one target, in table order.
"""

from __future__ import annotations

import pytest

from pipelines.domains.coach.pack import load_coach_rule_tables
from pipelines.errors import ConfigError
from pipelines.sgc.psi import (
    Paragraph,
    ParagraphPlan,
    check_paragraph_contradictions,
    load_psi_table,
    plan_paragraphs,
    psi,
)
from pipelines.sgc.w2_diff import Conflict

PSI = load_coach_rule_tables().psi


def P(kind: str, cid: str | None = None) -> Paragraph:
    return Paragraph(kind=kind, constraint_id=cid)


def hard(cid: str = "want:Emberfox", kind: str = "entity_not_owned") -> Conflict:
    return Conflict(constraint_id=cid, kind=kind, tier="hard")


def soft(cid: str = "nature:Emberfox:brave", kind: str = "nature_mismatch") -> Conflict:
    return Conflict(constraint_id=cid, kind=kind, tier="soft")


def hint(cid: str = "style:aggressive") -> Conflict:
    return Conflict(constraint_id=cid, kind="style_unsupported", tier="hint")


def test_the_table_under_test() -> None:
    assert PSI.version == "coach-psi-1"
    assert [r.id for r in PSI.rules] == [
        "praise_satisfied", "hard_requires_account", "hard_offers_guidance", "soft_may_account",
        "hint_flavor_only", "empty_inventory_apology", "many_hard_apology", "clean_turn_praise",
        "advice_requires_guidance", "guidance_allowed", "flavor_allowed", "smalltalk_no_guidance",
    ]


# --- each rule: fires, and just outside each condition -----------------------------------------

def test_praise_satisfied_fires_per_satisfied_constraint() -> None:
    r = psi(PSI, [], "meta", ["want:Emberfox", "style:calm"])
    # meta: only praise_satisfied, clean_turn_praise and smalltalk_no_guidance fire
    assert r.fired == ("praise_satisfied", "clean_turn_praise", "smalltalk_no_guidance")
    assert r.eligible == {P("praise", "want:Emberfox"), P("praise", "style:calm"), P("praise")}
    assert r.required == frozenset()


def test_praise_satisfied_silent_without_a_satisfied_constraint() -> None:
    r = psi(PSI, [hint("style:calm")], "meta", ["style:calm"])  # its one constraint is conflicted
    assert "praise_satisfied" not in r.fired
    assert P("praise", "style:calm") not in r.eligible
    assert "praise_satisfied" not in psi(PSI, [], "meta", []).fired


def test_hard_requires_account_and_blocks_praise() -> None:
    r = psi(PSI, [hard()], "account", ["want:Emberfox"])
    assert r.fired == ("hard_requires_account", "hard_offers_guidance", "guidance_allowed")
    assert r.required == {P("constraint_account", "want:Emberfox")}
    assert r.eligible == {P("constraint_account", "want:Emberfox"), P("guidance", "want:Emberfox"),
                          P("guidance")}
    assert r.dropped_required == frozenset()


def test_hard_rules_silent_for_a_soft_conflict() -> None:
    r = psi(PSI, [soft()], "account", ["nature:Emberfox:brave"])
    assert "hard_requires_account" not in r.fired and "hard_offers_guidance" not in r.fired
    assert r.fired == ("soft_may_account", "guidance_allowed")
    assert r.eligible == {P("constraint_account", "nature:Emberfox:brave"), P("guidance")}
    assert r.required == frozenset()


def test_soft_may_account_silent_for_hint_and_hard() -> None:
    assert "soft_may_account" not in psi(PSI, [hint()], "account").fired
    assert "soft_may_account" not in psi(PSI, [hard()], "account").fired


def test_hint_flavor_only_allows_flavor_forbids_apology() -> None:
    r = psi(PSI, [hint()], "account", ["style:aggressive"])
    assert r.fired == ("hint_flavor_only", "guidance_allowed")
    assert r.eligible == {P("scene_flavor", "style:aggressive"), P("guidance")}


def test_hint_flavor_only_silent_for_soft() -> None:
    r = psi(PSI, [soft("style:aggressive", "nature_mismatch")], "account")
    assert "hint_flavor_only" not in r.fired
    assert P("scene_flavor", "style:aggressive") not in r.eligible


def test_empty_inventory_requires_apology_forbids_guidance_and_all_praise() -> None:
    inv = hard("inventory", "inventory_empty")
    r = psi(PSI, [inv], "account", ["want:Emberfox"])
    assert r.fired == ("praise_satisfied", "hard_requires_account", "hard_offers_guidance",
                       "empty_inventory_apology", "guidance_allowed")
    assert r.required == {P("constraint_account", "inventory"), P("apology", "inventory")}
    # guidance for "inventory" (allowed by hard_offers_guidance) is forbidden; praise of the
    # satisfied want:Emberfox is forbidden everywhere; turn-level guidance stays
    assert r.eligible == {P("constraint_account", "inventory"), P("apology", "inventory"), P("guidance")}


def test_empty_inventory_rule_silent_for_another_hard_kind() -> None:
    r = psi(PSI, [hard("want:Emberfox", "entity_not_owned")], "account", ["want:Emberfox", "style:calm"])
    assert "empty_inventory_apology" not in r.fired
    assert P("praise", "style:calm") in r.eligible  # praise is not forbidden everywhere


@pytest.mark.parametrize(("n_hard", "fires"), [(1, False), (2, True), (3, True)])
def test_many_hard_apology_from_two_hard_conflicts(n_hard: int, fires: bool) -> None:
    conflicts = [hard(f"want:E{i}") for i in range(n_hard)]
    r = psi(PSI, conflicts, "account")
    assert ("many_hard_apology" in r.fired) is fires
    assert (P("apology") in r.required) is fires


def test_many_hard_apology_counts_only_hard_conflicts() -> None:
    r = psi(PSI, [hard(), soft(), hint()], "account")
    assert "many_hard_apology" not in r.fired


def test_clean_turn_praise_only_without_conflicts() -> None:
    assert "clean_turn_praise" in psi(PSI, [], "account").fired
    assert P("praise") in psi(PSI, [], "account").eligible
    r = psi(PSI, [hint()], "account")
    assert "clean_turn_praise" not in r.fired and P("praise") not in r.eligible


@pytest.mark.parametrize("intent", ["recommend", "teaching", "analysis", "planning"])
def test_advice_requires_guidance(intent: str) -> None:
    r = psi(PSI, [soft()], intent)  # soft only: zero hard conflicts
    assert "advice_requires_guidance" in r.fired
    assert P("guidance") in r.required


@pytest.mark.parametrize("intent", ["knowledge_qa", "account", "chitchat", "meta"])
def test_advice_requires_guidance_silent_for_other_intents(intent: str) -> None:
    r = psi(PSI, [], intent)
    assert "advice_requires_guidance" not in r.fired and P("guidance") not in r.required


def test_advice_requires_guidance_silent_with_one_hard_conflict() -> None:
    r = psi(PSI, [hard()], "recommend")
    assert "advice_requires_guidance" not in r.fired
    assert P("guidance") not in r.required and P("guidance") in r.eligible  # still allowed


@pytest.mark.parametrize(
    ("intent", "guidance", "flavor"),
    [
        ("recommend", True, True), ("teaching", True, True), ("knowledge_qa", True, True),
        ("analysis", True, False), ("planning", True, False), ("account", True, False),
        ("chitchat", False, True), ("meta", False, False), ("unknown_intent", False, False),
    ],
)
def test_turn_level_guidance_and_flavor_by_intent(intent: str, guidance: bool, flavor: bool) -> None:
    r = psi(PSI, [], intent)
    assert ("guidance_allowed" in r.fired) is (intent not in ("chitchat", "meta", "unknown_intent"))
    assert ("flavor_allowed" in r.fired) is flavor
    assert (P("guidance") in r.eligible) is guidance
    assert (P("scene_flavor") in r.eligible) is flavor


def test_smalltalk_forbids_turn_guidance_and_account() -> None:
    r = psi(PSI, [], "chitchat")
    assert "smalltalk_no_guidance" in r.fired
    assert r.eligible == {P("praise"), P("scene_flavor")}
    assert "smalltalk_no_guidance" not in psi(PSI, [], "account").fired


# --- the evaluation rules, on small tables ---------------------------------------------------

def _table(*rules: dict) -> object:
    return load_psi_table({"version": "t", "rules": list(rules)})


def test_forbid_wins_and_dropped_requirements_are_reported() -> None:
    t = _table({"id": "need", "scope": "turn", "require": ["apology"]},
               {"id": "no", "scope": "turn", "forbid": ["apology"]})
    r = psi(t, [], "x")
    assert r.required == frozenset() and r.eligible == frozenset()
    assert r.dropped_required == {P("apology")}
    assert r.fired == ("need", "no") and r.table_version == "t"


@pytest.mark.parametrize(("n_hard", "fires"), [(0, False), (1, True), (2, True), (3, False)])
def test_min_and_max_hard_are_inclusive(n_hard: int, fires: bool) -> None:
    t = _table({"id": "r", "scope": "turn", "min_hard": 1, "max_hard": 2, "allow": ["praise"]})
    assert (psi(t, [hard(f"want:{i}") for i in range(n_hard)], "x").fired == ("r",)) is fires


def test_has_conflicts_true_needs_a_conflict() -> None:
    t = _table({"id": "r", "scope": "turn", "has_conflicts": True, "allow": ["praise"]})
    assert psi(t, [], "x").fired == ()
    assert psi(t, [hint()], "x").fired == ("r",)


def test_per_conflict_filters_by_tier_and_kind_together() -> None:
    t = _table({"id": "r", "scope": "per_conflict", "tiers": ["hard"], "kinds": ["skill_locked"],
                "allow": ["guidance"]})
    assert psi(t, [hard("skill:*:Flare", "skill_locked")], "x").eligible == {P("guidance", "skill:*:Flare")}
    assert psi(t, [hard("want:A")], "x").fired == ()  # hard, wrong kind
    assert psi(t, [Conflict(constraint_id="s", kind="skill_locked", tier="soft")], "x").fired == ()


def test_per_conflict_without_filters_takes_every_conflict_once() -> None:
    t = _table({"id": "r", "scope": "per_conflict", "require": ["constraint_account"]})
    r = psi(t, [hard("a"), hard("a", "entity_unknown"), soft("b")], "x")
    assert r.required == {P("constraint_account", "a"), P("constraint_account", "b")}


def test_forbid_everywhere_reaches_the_turn_and_every_constraint() -> None:
    t = _table({"id": "p", "scope": "per_satisfied", "allow": ["praise", "guidance"]},
               {"id": "t", "scope": "turn", "allow": ["praise"], "forbid_everywhere": ["praise"]})
    r = psi(t, [], "x", ["c1", "c2"])
    assert r.eligible == {P("guidance", "c1"), P("guidance", "c2")}


def test_rule_validation() -> None:
    with pytest.raises(ConfigError, match="no effect"):
        _table({"id": "r", "scope": "turn"})
    with pytest.raises(ConfigError, match="only apply to scope per_conflict"):
        _table({"id": "r", "scope": "turn", "tiers": ["hard"], "allow": ["praise"]})
    with pytest.raises(ConfigError, match="duplicate rule ids"):
        _table({"id": "r", "allow": ["praise"]}, {"id": "r", "allow": ["guidance"]})


# --- the paragraph plan ---------------------------------------------------------------------

def test_plan_order_and_priority_by_hand() -> None:
    # A: account(want:A, required), guidance(want:A), guidance(turn), praise(turn),
    #    praise(style:x), flavor(turn)
    eligible = {P("constraint_account", "want:A"), P("guidance", "want:A"), P("guidance"), P("praise"),
                P("praise", "style:x"), P("scene_flavor")}
    required = {P("constraint_account", "want:A")}
    plan = plan_paragraphs(eligible, required, [hard("want:A")])
    # everything fits (no incompatible pair per constraint); order: apology, account, guidance,
    # praise, flavor; within a kind the turn (None) first, then by constraint id
    assert plan.paragraphs == (P("constraint_account", "want:A"), P("guidance"), P("guidance", "want:A"),
                               P("praise"), P("praise", "style:x"), P("scene_flavor"))
    assert plan.required == frozenset(required)
    assert plan.kinds() == ["constraint_account", "guidance", "guidance", "praise", "praise", "scene_flavor"]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (1, {P("constraint_account", "want:A")}),  # required always in, even past the limit
        (2, {P("constraint_account", "want:A"), P("apology", "want:B")}),
        (3, {P("constraint_account", "want:A"), P("apology", "want:B"), P("guidance", "want:A")}),
        (4, {P("constraint_account", "want:A"), P("apology", "want:B"), P("guidance", "want:A"),
             P("guidance", "want:B")}),
    ],
)
def test_max_paragraphs_greedy_by_priority_then_severity(limit: int, expected: set[Paragraph]) -> None:
    # priority: account < apology < guidance < praise < flavor; then harder conflict first
    eligible = {P("constraint_account", "want:A"), P("apology", "want:B"), P("guidance", "want:A"),
                P("guidance", "want:B"), P("scene_flavor")}
    plan = plan_paragraphs(eligible, {P("constraint_account", "want:A")},
                           [soft("want:B"), hard("want:A")], max_paragraphs=limit)
    assert set(plan.paragraphs) == expected


def test_plan_never_pairs_praise_with_apology_or_account_on_one_constraint() -> None:
    eligible = {P("apology", "c"), P("praise", "c"), P("praise", "d"), P("constraint_account", "d")}
    plan = plan_paragraphs(eligible, set())
    # apology(c) outranks praise(c); account(d) outranks praise(d)
    assert set(plan.paragraphs) == {P("apology", "c"), P("constraint_account", "d")}
    assert check_paragraph_contradictions(plan) == []
    # the turn and a constraint are different subjects: both may be praised/apologised
    both = plan_paragraphs({P("apology"), P("praise", "c")}, set())
    assert set(both.paragraphs) == {P("apology"), P("praise", "c")}


def test_plan_refuses_bad_requirements() -> None:
    with pytest.raises(ConfigError, match="not all eligible"):
        plan_paragraphs({P("guidance")}, {P("apology")})
    with pytest.raises(ConfigError, match="contradict"):
        plan_paragraphs({P("praise", "c"), P("apology", "c")}, {P("praise", "c"), P("apology", "c")})


def test_contradiction_check_on_sentences_and_custom_pairs() -> None:
    sentences = [("praise", "c"), ("guidance", "c"), ("constraint_account", "c"), ("apology", None)]
    assert check_paragraph_contradictions(sentences) == [(P("praise", "c"), P("constraint_account", "c"))]
    assert check_paragraph_contradictions(sentences, incompatible=[("guidance", "praise")]) == [
        (P("praise", "c"), P("guidance", "c"))]
    assert check_paragraph_contradictions(ParagraphPlan(paragraphs=())) == []
