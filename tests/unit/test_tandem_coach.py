"""The tandem turn on the coach world: the same pipeline, the coach pack behind the Domain protocol."""

from __future__ import annotations

import json

from tests.doubles import j, w1

from .harnesses import TandemHarness


def _owned(h: TandemHarness) -> set[str]:
    return {c.species for c in h.world.users["u001"].creatures}


def _lead(h: TandemHarness) -> str:
    """The recommendation's lead sentence, written by hand from the world's best counters to o01."""
    from pipelines.domains.coach.world import best_counters

    a, b, c = (x.species for x, _ in best_counters(h.world, "u001", "o01", 3))
    return f"Your best pick for this matchup is {a}, then {b} and {c}."


def test_a_coach_turn_dispatches_phi_tools_streams_narration_first_and_writes_back_w3():
    h = TandemHarness("coach", user_id="u001")
    r = h.turn("Who should I use against my opponent?", orch=[w1("recommend", "lineup_for_opponent",
                                                                   "Let me look at your team."), j(decision="respond")],
               gen=["Good luck in your battle!"], slots=[json.dumps({"wanted_entities": []})])
    kinds = [e.type for e in r.events]
    assert kinds[0] == "narration.delta" and "reply.delta" in kinds and r.status == "ok"
    assert [c[0] for c in h.coach.calls[:3]] == ["get_inventory", "get_opponent_info", "matchup_scores"]
    assert h.meta["phi"]["kind"] == "hit" and "w3" in h.store.turns["s1"][-1].meta
    assert h.meta["c1"] == {"intent": "recommend", "sub_intent": "lineup_for_opponent"}


def test_an_unowned_recommendation_is_withheld_and_the_template_answers():
    h = TandemHarness("coach", user_id="u001")
    unowned = next(s for s in sorted(h.world.species) if s not in _owned(h))
    r = h.turn("Who should I bring?", orch=[w1("recommend", "lineup_for_opponent"), j(decision="respond")],
               gen=[f"Bring {unowned} to this fight."], slots=["{}"])
    assert unowned not in r.reply
    assert h.counters.get("blocked", "unowned_recommendation") == 1
    assert r.reply == _lead(h)  # the lead stands; the generator's unowned pick is withheld


def test_chitchat_answers_from_its_template_without_an_orchestrator_step():
    h = TandemHarness("coach", user_id="u001")
    r = h.turn("hello!", orch=[w1("chitchat", "greeting", "Hi there.")], slots=["{}"])
    assert r.reply == "Hi! I can help you build lineups, pick counters and plan your training."
    assert len(h.calls("orchestrator")) == 1


def test_coach_tool_arguments_are_enums_of_the_session_state_and_the_users_words():
    h = TandemHarness("coach", user_id="u001")
    species = sorted(h.world.species)[0]
    h.turn(f"Tell me about {species}", orch=[w1("knowledge_qa", "event_info"), j(decision="respond")],
           gen=["Here you go."], slots=["{}"])
    step = h.calls("orchestrator")[-1]
    branches = {b["properties"]["decision"]["const"]: b["properties"] for b in step.structured_output.spec["anyOf"]}
    assert branches["species_info"]["args"]["properties"]["species"]["enum"][0] == species
    assert branches["get_inventory"]["args"]["properties"]["user_id"] == {"enum": ["u001"]}


def _tool_events(h: TandemHarness, kind: str) -> list[dict]:
    return [f for k, f in h.sink.events if k == kind]


def test_asking_again_for_a_read_phi_already_ran_answers_from_it_instead_of_spending_steps():
    h = TandemHarness("coach", user_id="u001")
    r = h.turn("Can you teach me about type matchups?",
               orch=[w1("teaching", "type_matchups"), j(decision="get_inventory", args={"user_id": "u001"})],
               gen=["Type matchups decide most battles."], slots=["{}"])
    assert r.status == "ok" and h.meta["path"] == "answer" and h.meta["fallback"] is None
    assert [c[0] for c in h.coach.calls] == ["get_inventory"]  # Φ's call, not run a second time
    assert len(h.calls("orchestrator")) == 2  # W1 and one step: no step spent on the repeat
    assert [(e["step"], e["tool"], e["args"]) for e in _tool_events(h, "tandem.repeat_read")] == [
        (1, "get_inventory", {"user_id": "u001"})]
    assert "w3" in h.store.turns["s1"][-1].meta


def test_a_read_with_other_arguments_runs_and_only_its_exact_repeat_ends_the_gathering():
    h = TandemHarness("coach", user_id="u001")
    a, b = sorted(_owned(h))[:2]
    info = [j(decision="species_info", args={"species": s}) for s in (a, b, b)]
    h.turn(f"Can you teach me about type matchups of {a} and {b}?",
           orch=[w1("teaching", "type_matchups"), *info], gen=["Here is what matters."], slots=["{}"])
    assert [(c[0], c[1]) for c in h.coach.calls] == [
        ("get_inventory", {"user_id": "u001"}), ("species_info", {"species": a}), ("species_info", {"species": b})]
    assert h.meta["path"] == "answer" and h.meta["steps"] == 3 and h.meta["fallback"] is None
    assert [e["step"] for e in _tool_events(h, "tandem.repeat_read")] == [3]


def test_the_same_read_in_an_earlier_turn_is_not_a_repeat():
    h = TandemHarness("coach", user_id="u001")
    again = j(decision="get_lineups", args={"user_id": "u001"})
    h.turn("Can you teach me about type matchups?", orch=[w1("teaching", "type_matchups"), again,
                                                          j(decision="respond")], gen=["Sure."], slots=["{}"])
    h.turn("And about lineups?", orch=[w1("teaching", "type_matchups"), again, j(decision="respond")],
           gen=["Sure."], slots=["{}"])
    assert [c[0] for c in h.coach.calls].count("get_lineups") == 2  # fresh data each turn
    assert not _tool_events(h, "tandem.repeat_read")


def test_a_generator_narrating_its_prompt_is_cut_and_the_paths_template_answers():
    h = TandemHarness("coach", user_id="u001")
    r = h.turn("I face Rival Kai tonight. Who do I send out first?",
               orch=[w1("recommend", "lineup_for_opponent"), j(decision="respond")],
               gen=['The task is to answer the question "What can I eat for breakfast?" by providing an answer.'],
               slots=["{}"])
    assert "task" not in r.reply and "breakfast" not in r.reply and "providing an answer" not in r.reply
    assert r.reply == _lead(h)
    assert [f["released"] for f in _tool_events(h, "tandem.generator_stopped")] == [0]


def test_what_was_released_before_the_prompt_echo_stays_and_nothing_after_it():
    h = TandemHarness("coach", user_id="u001")
    r = h.turn("I face Rival Kai tonight. Who do I send out first?",
               orch=[w1("recommend", "lineup_for_opponent"), j(decision="respond")],
               gen=["Type advantage matters most. The user requests a plan. Bring your best team."], slots=["{}"])
    assert r.reply == _lead(h) + " Type advantage matters most."
    assert h.counters.get("blocked", "contract_echo") == 1


def test_a_repeated_sentence_is_withheld_but_the_reply_goes_on():
    h = TandemHarness("coach", user_id="u001")
    r = h.turn("I face Rival Kai tonight. Who do I send out first?",
               orch=[w1("recommend", "lineup_for_opponent"), j(decision="respond")],
               gen=["Type advantage matters most. Type advantage matters most. Stay focused."], slots=["{}"])
    assert r.reply == _lead(h) + " Type advantage matters most. Stay focused."
    assert not _tool_events(h, "tandem.generator_stopped")
