"""The coach pack's suite and judges for ``tandem eval`` (pipelines/domains/coach/evaluation.py, eval_measures.py)."""

from __future__ import annotations

import re
from pathlib import Path

from pipelines.domains.coach.eval_measures import (
    consecutive_repeats,
    contradiction,
    grounding_ok,
    intent_ok,
    names_in,
    unowned_mentions,
)
from pipelines.domains.coach.evaluation import (
    PHRASINGS,
    CoachEvaluation,
    coach_suite,
    reference_for,
)

ROOT = Path(__file__).resolve().parents[2]


def test_names_are_whole_words_any_case():
    assert names_in("Send leafhorn first, then Tidefin.", ["Leafhorn", "Tidefin", "Tide"]) == ["Leafhorn", "Tidefin"]
    assert names_in("Leafhorns everywhere", ["Leafhorn"]) == []


def test_intent_accuracy_against_the_label():
    assert intent_ok({"intent": "recommend"}, "recommend") is True
    assert intent_ok({"intent": "recommend"}, "analysis") is False
    assert intent_ok({"intent": "recommend"}, None) is False
    assert intent_ok(None, "recommend") is None


def test_grounding_needs_a_reference_and_names_an_accepted_value():
    label = {"intent": "recommend", "reference": {"kind": "best_counter", "accept": ["Leafhorn"]}}
    assert grounding_ok(label, "I would lead with leafhorn.") is True
    assert grounding_ok(label, "I would lead with Leaffang.") is False
    assert grounding_ok({"intent": "meta", "reference": None}, "anything") is None


def test_unowned_mentions_leave_out_what_the_user_named_and_the_opponents_team():
    got = unowned_mentions("Use Aa, not Bb. Cc is their lead and Dd is cute.", species=["Aa", "Bb", "Cc", "Dd"],
                           owned=["Aa"], user_text="Tell me about Dd.", opponent_team=["Cc"])
    assert got == ["Bb"]
    assert unowned_mentions("Use Aa.", species=["Aa", "Bb"], owned=["Aa"], user_text="", opponent_team=[]) == []


def test_contradictions_are_about_one_subject():
    names = ["Leafhorn", "Tidefin"]
    assert contradiction("Leafhorn is a great pick. Sorry, Leafhorn is locked for now.", names) is True
    assert contradiction("Leafhorn is a great pick. Sorry, Tidefin is not available.", names) is False
    assert contradiction("Great choice! Unfortunately that will not work.", names) is True
    assert contradiction("Leafhorn is a great pick. Train it daily.", names) is False


def test_consecutive_repeats_of_an_issued_subject():
    a = {"guidance_type": "recommend", "subject_id": "creature:Leafhorn"}
    none = {"guidance_type": "none", "subject_id": None}
    assert consecutive_repeats([a, dict(a)]) == 1
    assert consecutive_repeats([a, none, dict(a)]) == 0
    assert consecutive_repeats([a, {**a, "subject_id": "creature:Tidefin"}]) == 0
    assert consecutive_repeats([None, a]) == 0


def test_the_suite_is_seeded_and_labelled():
    from pipelines.domains.coach import INTENT_LABELS

    one = coach_suite(7, seed=3, sessions=3, turns=4)
    assert one == coach_suite(7, seed=3, sessions=3, turns=4)
    assert one != coach_suite(7, seed=4, sessions=3, turns=4)
    assert [len(c.turns) for c in one] == [4, 4, 4]
    for case in one:
        assert case.info["opponent_id"] == "o01"
        for t in case.turns:
            assert t.label["intent"] in INTENT_LABELS and t.user_id == case.info["user_id"]
        for a, b in zip(case.turns, case.turns[1:], strict=False):
            if a.label["intent"] == b.label["intent"]:  # every intent has two phrasings or more
                assert a.text != b.text


def test_best_counter_reference_is_computed_from_state():
    from pipelines.domains.coach import best_counters, generate_coach_world

    world = generate_coach_world(7)
    ref = reference_for("best_counter", world, "u001", "o01", {})
    assert ref["accept"] == [best_counters(world, "u001", "o01", 1)[0][0].species]
    assert reference_for("counter_elements", world, "u001", "o01", {"element": "earth"})["accept"] == ["grass", "water"]
    assert reference_for(None, world, "u001", "o01", {}) is None


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def test_phrasings_are_held_out_of_every_prompt_and_name_no_intent():
    """No three consecutive words of a phrasing occur in a prompt, table or scripted text of the coach."""
    from pipelines.domains.coach import INTENT_LABELS
    from pipelines.domains.coach.domain import DomainPack
    from pipelines.tandem.prompts import orchestrator_head

    files = [ROOT / "pipelines/tandem/prompts.py", ROOT / "pipelines/annex/sgc_ladder/contract.py",
             *sorted(f for f in (ROOT / "pipelines/domains/coach").rglob("*.py")
                     if f.name != "evaluation.py"),  # the suite itself
             *sorted((ROOT / "pipelines/domains/coach/tables").glob("*.yaml"))]
    corpus = " " + " ".join(" ".join(_words(f.read_text())) for f in files) + " "
    corpus += " ".join(_words(orchestrator_head(DomainPack()))) + " "
    for intent, phrasings in PHRASINGS.items():
        assert intent in INTENT_LABELS
        for template, _ in phrasings:
            assert not set(_words(template)) & set(INTENT_LABELS), template
            for run in re.split(r"\{\w+\}", template):
                w = _words(run)
                for i in range(len(w) - 2):
                    assert f" {' '.join(w[i:i + 3])} " not in corpus, (template, w[i:i + 3])


def test_the_turn_judge_measures_one_session_and_remembers_the_last_guidance():
    from pipelines.core.evaluation import TurnView
    from pipelines.domains.coach import generate_coach_world

    world = generate_coach_world(7)
    case = coach_suite(7, seed=0, sessions=1, turns=2)[0]
    user = world.users[case.info["user_id"]]
    owned = {c.species for c in user.creatures}
    stranger = next(s for s in sorted(world.species) if s not in owned and all(
        m.species != s for m in world.opponents[case.info["opponent_id"]].team))
    judge = CoachEvaluation().turn_judge(case, 7)
    w3 = {"guidance_type": "tip", "subject_id": "c1"}
    turn = case.turns[0]
    v = TurnView(case=case, turn=turn, delivered=f"Try {stranger}.", reply=f"Try {stranger}.", meta={"w3": w3},
                 own={"c1": {"intent": turn.label["intent"]}}, perceives=True)
    measures, fields = judge(v)
    assert measures["intent_accuracy"] is True and measures["unowned_mentions"] == [stranger]
    assert measures["consecutive_repeats"] == [] and measures["contradictions"] == []
    assert fields["intent"] == turn.label["intent"] and fields["named"] == [stranger] and fields["w3"] == w3
    again, _ = judge(TurnView(case=case, turn=case.turns[1], delivered="", reply="", meta={"w3": w3},
                              own={}, perceives=False))
    assert again["consecutive_repeats"] == ["c1"]  # the same subject two turns running
    assert again["intent_accuracy"] is None  # a kind that records no perception is not judged
    none, _ = judge(TurnView(case=case, turn=case.turns[1], delivered="", reply="", meta={}, own={}, perceives=False))
    assert none["consecutive_repeats"] is None


def test_the_coach_suite_is_the_packs_own():
    from pipelines.core.evaluation import SuiteOptions, evaluation_of
    from pipelines.domains import load_domain

    kit = evaluation_of(load_domain("coach"))
    assert list(kit.suites()) == ["coach"] and kit.plays_tasks is False
    assert kit.suites()["coach"](SuiteOptions(world_seed=7, seed=3, sessions=3, turns=4)) == coach_suite(
        7, seed=3, sessions=3, turns=4)
    assert len(kit.load_sessions(1, 2, 3)) == 2
