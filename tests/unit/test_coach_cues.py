"""The coach pack's intent cues, the type chart, and the answer / lead lines — expected values by hand.

The phrasings here are written for these tests (none is a phrasing of the eval suite, whose
held-out check lives in ``test_eval_coach.py``).
"""

from __future__ import annotations

import pytest

from pipelines.domains.coach.domain import DomainPack, _answer_line
from pipelines.domains.coach.tools import ElementArgs, type_chart
from pipelines.domains.coach.world import generate_coach_world
from pipelines.errors import InvalidInput
from pipelines.tools import ToolContext
from tests.doubles import j, w1

from .harnesses import TandemHarness

PACK = DomainPack()


@pytest.mark.parametrize("text, prior", [
    ("Who's my strongest pick to take on Ace Mira?", ["recommend"]),
    ("Any suggestions for my lead slot?", ["recommend"]),
    ("Can you teach me what fire is weak to?", ["teaching", "analysis"]),
    ("Give me a rundown of everything in my collection", ["account"]),
    ("yo coach", ["chitchat"]),
    ("thx, bye", ["chitchat"]),
    ("Should I give Emberfox a calm nature?", ["recommend"]),
    ("Map out my prep for the spring tournament", ["planning"]),
    ("How can you help?", ["meta"]),
    # no cue: every intent stays open
    ("I keep losing to Captain Ida", None),
    ("Emberfox!", None),
    ("", None),
])
def test_intent_prior_is_the_union_of_the_cues_that_fire(text, prior):
    assert PACK.intent_prior(text) == prior


def test_a_named_species_in_a_question_of_fact_adds_knowledge_qa_but_a_name_alone_adds_nothing():
    assert PACK.intent_prior("Should I train Emberfox, and what is it?") == ["recommend", "knowledge_qa"]
    assert PACK.intent_prior("Should I train Emberfox?") == ["recommend"]  # no question of fact
    assert PACK.intent_prior("What is Emberfox?") is None  # no other cue: nothing to narrow


@pytest.mark.parametrize("text, intent, allowed", [
    ("Who beats Ace Mira?", "recommend", ["lineup_for_opponent", "counter_pick"]),  # the opponent named
    ("Who should I bench?", "recommend", ["swap_member", "bench_choice"]),
    ("Which move should Emberfox learn?", "recommend", ["skill_choice"]),
    ("Who should I level up?", "recommend", ["level_priority"]),
    ("Who should I pick?", "recommend", None),  # no sub-intent cue
    ("Tell me about Emberfox", "knowledge_qa", ["species_info"]),
    ("Tell me how Emberfox evolves", "knowledge_qa", ["evolution_info"]),
    ("Tell me about Blaze", "knowledge_qa", ["skill_info"]),  # a skill named wins over the generic cues
    ("Tell me about the water element", "knowledge_qa", ["type_info"]),
    ("Teach me about earth", "teaching", ["type_matchups"]),
    ("Teach me the basics", "teaching", None),
    ("hello and thanks", "chitchat", ["greeting", "thanks"]),
    ("Analyse my scores", "analysis", ["score_breakdown"]),
])
def test_sub_intent_prior_cues_and_the_worlds_names(text, intent, allowed):
    assert PACK.sub_intent_prior(text, intent) == allowed


@pytest.mark.parametrize("element, strong, weak", [
    ("fire", ["grass", "shadow"], ["earth", "water"]),
    ("water", ["fire", "earth"], ["electric", "grass"]),
    ("light", ["shadow", "air"], ["air", "shadow"]),
    (" Earth ", ["fire", "electric"], ["grass", "water"]),  # case and spaces do not matter
])
def test_type_chart_rows(element, strong, weak):
    out = type_chart(ElementArgs(element=element), ToolContext(), generate_coach_world(7))
    assert (out.element, out.strong_against, out.weak_against) == (element.strip().lower(), strong, weak)


def test_type_chart_refuses_an_unknown_element():
    with pytest.raises(InvalidInput):
        type_chart(ElementArgs(element="plasma"), ToolContext(), generate_coach_world(7))


def test_answer_lines_rank_the_answering_fact_first_and_lead_only_with_it():
    scores = {"scores": [{"species": "A"}, {"species": "B"}, {"species": "C"}, {"species": "D"}]}
    assert _answer_line("matchup_scores", scores) == [(0, "Your best pick for this matchup is A, then B and C.")]
    assert _answer_line("matchup_scores", {"scores": [{"species": "A"}]}) == [
        (0, "Your best pick for this matchup is A.")]
    assert _answer_line("matchup_scores", {"scores": []}) == []
    assert _answer_line("type_chart", {"element": "fire", "strong_against": ["grass", "shadow"],
                                       "weak_against": ["earth", "water"]}) == [
        (1, "Fire creatures are beaten by earth and water and strong against grass and shadow.")]
    assert _answer_line("species_info", {"name": "Emberfox", "element": "fire", "evolves_to": "Emberfang"}) == [
        (2, "Emberfox is a fire creature, and it evolves into Emberfang.")]
    assert _answer_line("species_info", {"name": "Emberfang", "element": "fire"}) == [
        (2, "Emberfang is a fire creature.")]
    paths = {"paths": [{"species": "A", "ready": True, "owned_level": 20, "owned_creature_id": "c2"},
                       {"species": "B", "ready": True, "owned_level": 31, "owned_creature_id": "c9"},
                       {"species": "C", "ready": False, "owned_level": 50, "owned_creature_id": "c1"}]}
    assert _answer_line("evolution_paths", paths) == [(3, "B and A can evolve now.")]  # the highest level first
    assert _answer_line("evolution_paths", {"paths": []}) == [(6, "None of your creatures can evolve yet.")]
    assert _answer_line("get_inventory", {"creatures": [1, 2]}) == [(7, "You have 2 creatures on your team.")]
    assert _answer_line("get_lineups", {"lineups": []}) == []


def _facts(*observations):
    from pipelines.domain import TurnFacts

    return TurnFacts(session_id="s", user_text="x", observations=[
        {"tool": t, "args": {}, "ok": ok, "result": r} for t, r, ok in observations])


def test_lead_lines_take_the_one_answering_fact_and_never_a_count_or_a_failed_read():
    matchup = ("matchup_scores", {"scores": [{"species": "A"}]}, True)
    inventory = ("get_inventory", {"creatures": [1]}, True)
    none_ready = ("evolution_paths", {"paths": []}, True)
    assert PACK.lead_lines(_facts(inventory, matchup), None) == ["Your best pick for this matchup is A."]
    assert PACK.lead_lines(_facts(inventory), None) == []
    assert PACK.lead_lines(_facts(none_ready), None) == []  # rank 6: stands in, never leads
    assert PACK.lead_lines(_facts(("matchup_scores", {"scores": [{"species": "A"}]}, False)), None) == []
    assert PACK.answer_lines(_facts(inventory, matchup), None) == [
        "Your best pick for this matchup is A.", "You have 1 creature on your team."]


TEAM = {"creatures": [
    {"species": "Tidefin", "level": 12, "nature": "calm"},
    {"species": "Leafhorn", "level": 31, "nature": "brave"},
    {"species": "Emberfox", "level": 20, "nature": "timid"},
    {"species": "Aquapup", "level": 20, "nature": "bold"},
]}


def test_an_inventory_read_answers_a_natures_or_levels_question_with_that_field_of_the_team():
    natures = (4, "Your creatures' natures: Leafhorn is brave, Aquapup is bold and Emberfox is timid.")
    levels = (4, "Your highest-level creatures are Leafhorn (level 31), Aquapup (level 20) and Emberfox (level 20).")
    size = (7, "You have 4 creatures on your team.")
    for sub in ("natures", "nature_choice", "nature_info"):
        assert _answer_line("get_inventory", TEAM, sub) == [natures, size]
    for sub in ("leveling", "level_priority", "level_plan"):
        assert _answer_line("get_inventory", TEAM, sub) == [levels, size]
    for sub in ("", "inventory_overview", "evolution", "skill_choice"):
        assert _answer_line("get_inventory", TEAM, sub) == [size]
    one = {"creatures": [{"species": "Tidefin", "level": 12, "nature": "calm"}]}
    assert _answer_line("get_inventory", one, "natures") == [
        (4, "Your creatures' natures: Tidefin is calm."), (7, "You have 1 creature on your team.")]
    unnamed = {"creatures": [{"species": "Tidefin", "level": 12, "nature": ""}]}
    assert _answer_line("get_inventory", unnamed, "natures") == [(7, "You have 1 creature on your team.")]
    assert _answer_line("get_inventory", {"creatures": []}, "natures") == [(7, "You have 0 creatures on your team.")]


def test_the_team_line_leads_only_for_the_sub_intent_that_asked_for_it():
    from types import SimpleNamespace

    inventory = ("get_inventory", TEAM, True)
    asked = SimpleNamespace(c1={"intent": "teaching", "sub_intent": "natures"})
    assert PACK.lead_lines(_facts(inventory), asked) == [
        "Your creatures' natures: Leafhorn is brave, Aquapup is bold and Emberfox is timid."]
    other = SimpleNamespace(c1={"intent": "account", "sub_intent": "inventory_overview"})
    assert PACK.lead_lines(_facts(inventory), other) == []
    assert PACK.lead_lines(_facts(inventory), SimpleNamespace(c1=None)) == []
    matchup = ("matchup_scores", {"scores": [{"species": "A"}]}, True)
    assert PACK.lead_lines(_facts(inventory, matchup), asked) == ["Your best pick for this matchup is A."]
    assert PACK.answer_lines(_facts(inventory), asked) == [
        "Your creatures' natures: Leafhorn is brave, Aquapup is bold and Emberfox is timid.",
        "You have 4 creatures on your team."]


def test_a_teaching_question_naming_an_element_reads_the_type_chart_and_the_reply_leads_with_it():
    h = TandemHarness("coach", user_id="u001")
    r = h.turn("Teach me what beats water", orch=[w1("teaching", "type_matchups"), j(decision="respond")],
               gen=["Plan your team around it."], slots=["{}"])
    assert [c[0] for c in h.coach.calls] == ["type_chart"]
    lead = "Water creatures are beaten by electric and grass and strong against fire and earth."
    assert r.reply == lead + " Plan your team around it."
    gen = h.calls("generator")[-1]
    assert gen.prefix == lead  # the generator continues after the lead, never re-decodes it


def test_without_an_element_the_type_matchups_row_falls_back_to_the_inventory():
    h = TandemHarness("coach", user_id="u001")
    h.turn("Teach me about matchups", orch=[w1("teaching", "type_matchups"), j(decision="respond")],
           gen=["Matchups decide battles."], slots=["{}"])
    assert [c[0] for c in h.coach.calls] == ["get_inventory"]


def test_a_recommendation_phi_answered_needs_no_orchestrator_step_and_leads_with_the_best_counter():
    from pipelines.domains.coach.world import best_counters

    h = TandemHarness("coach", user_id="u001")
    r = h.turn("Who beats Rival Kai?", orch=[w1("recommend", "counter_pick")], gen=["Good luck."], slots=["{}"])
    assert len(h.calls("orchestrator")) == 1  # W1 only: Φ's row says respond
    assert h.meta["phi"]["then"] == "respond" and h.meta["path"] == "answer"
    best = best_counters(h.world, "u001", "o01", 1)[0][0].species
    assert r.reply.startswith(f"Your best pick for this matchup is {best}, then ")


def test_a_row_without_then_still_orchestrates():
    h = TandemHarness("coach", user_id="u001")
    h.turn("Build me a team from scratch", orch=[w1("recommend", "team_from_scratch"), j(decision="respond")],
           gen=["Here is a start."], slots=["{}"])
    assert len(h.calls("orchestrator")) == 2 and h.meta["phi"]["then"] is None


def test_with_continue_after_lead_off_the_packs_lines_are_the_reply_and_no_generator_runs():
    from pipelines.tandem.settings import TandemSettings

    h = TandemHarness("coach", user_id="u001", settings=TandemSettings(continue_after_lead=False))
    r = h.turn("Teach me what beats water", orch=[w1("teaching", "type_matchups")], gen=["Invented stuff."],
               slots=["{}"])
    assert r.reply == "Water creatures are beaten by electric and grass and strong against fire and earth."
    assert h.calls("generator") == []


def test_with_continue_after_lead_off_an_answer_without_a_lead_is_still_generated():
    from pipelines.tandem.settings import TandemSettings

    h = TandemHarness("coach", user_id="u001", settings=TandemSettings(continue_after_lead=False))
    r = h.turn("Teach me about matchups", orch=[w1("teaching", "type_matchups"), j(decision="respond")],
               gen=["Matchups decide battles."], slots=["{}"])
    assert r.reply == "Matchups decide battles." and len(h.calls("generator")) == 1


def test_an_element_starting_with_a_vowel_takes_an():
    assert _answer_line("species_info", {"name": "Galedrake", "element": "air"}) == [
        (2, "Galedrake is an air creature.")]
    assert _answer_line("skill_info", {"name": "Gust", "element": "air", "power": 30}) == [
        (2, "Gust is an air move with power 30.")]
