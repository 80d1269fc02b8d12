"""The tandem turn on the coach world: the same pipeline, the coach pack behind the Domain protocol."""

from __future__ import annotations

import json

from .tandem_doubles import TandemHarness, j, w1


def _owned(h: TandemHarness) -> set[str]:
    return {c.species for c in h.world.users["u001"].creatures}


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
    assert "Your best picks for this matchup are" in r.reply


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
