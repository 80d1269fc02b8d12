"""sgc_w1: the streaming 4-in-1 call, narration before tool results, Φ dispatch during the stream,
hit / miss / stale snapshot, a later PLAN never overriding a frozen set, prewarm and fill."""

from __future__ import annotations

import lark

from pipelines.annex.sgc_ladder import SgcCounters, SgcSettings
from tests.doubles import stream

from .harnesses import LadderHarness as Harness

NARRATION = "Let me look at your team and at Rival Kai's lineup."
LINEUP = stream("recommend", "lineup_for_opponent", NARRATION, [{"tool": "get_inventory", "args": {}}])
TEXT = "Who should I bring against Rival Kai?"
REPLY = "Bring your strongest counter. Good luck!"
PHI_TOOLS = ["get_inventory", "get_opponent_info", "matchup_scores"]


def _idx(log, entry):
    return [i for i, e in enumerate(log) if e == entry]


FULL_STREAM = SgcSettings(stop_moot_plan=False)  # read the 4-in-1 stream to </PLAN>


def test_narration_streams_while_phi_dispatched_tools_are_in_flight():
    h = Harness("sgc_w1", settings=FULL_STREAM)
    h.tools.hold = True  # the tools finish only once the orchestrator stream has ended
    h.models.on_end["orchestrator"] = h.tools.release
    out = h.turn(TEXT, orch=LINEUP, gen=REPLY)
    log = h.log
    starts = [log.index(("tool_start", t)) for t in PHI_TOOLS]
    narration = _idx(log, ("event", "narration.delta"))
    end = log.index(("end", "orchestrator"))
    done = [i for i, e in enumerate(log) if e[0] == "tool_done"]
    gen_call = log.index(("call", "generator"))
    assert narration and max(starts) < narration[0], "Φ dispatched the tools before any narration"
    assert narration[-1] < end < min(done), "narration kept streaming while the tools ran"
    assert max(done) < gen_call, "the tool results are used only after they arrive"
    assert out.narration == NARRATION and out.reply == REPLY
    assert out.events[0].type == "narration.delta"
    first_reply = next(i for i, e in enumerate(out.events) if e.type == "reply.delta")
    assert all(e.type == "narration.delta" for e in out.events[:first_reply])
    phi = out.of("sgc.phi")[0]
    assert phi["outcome"] == "hit" and phi["tools"] == PHI_TOOLS
    assert phi["dispatch"]["char_offset"] == LINEUP.index("</SUB_INTENT>") + len("</SUB_INTENT>") < len(LINEUP)
    assert {"w1_stream", "dispatch_at", "tools", "generate"} <= set(out.ctx.stage_ms)
    meta = out.ctx.meta["sgc"]
    assert meta["dispatch"]["source"] == "phi" and meta["phi"]["kind"] == "hit"
    assert meta["snapshot_version"] == 1 and meta["c1"] == {"intent": "recommend", "sub_intent": "lineup_for_opponent"}
    assert [c[0] for c in h.local.calls] == PHI_TOOLS
    assert h.counters.get("phi", "hit") == 1 and h.counters.get("dispatch", "phi") == 1


def test_orchestrator_call_is_grammar_constrained_and_the_grammar_accepts_the_stream():
    h = Harness("sgc_w1")
    h.turn(TEXT, orch=LINEUP, gen=REPLY)
    call = h.models.of("orchestrator")[0]
    assert call.structured_output is not None and call.structured_output.kind == "grammar"
    lark.Lark(call.structured_output.spec).parse(LINEUP)
    assert '"opponent_id": "o01"' in call.messages[0].content  # the prewarmed state is in the prompt


def test_miss_unmapped_waits_for_plan():
    h = Harness("sgc_w1")
    s = stream("recommend", "event_team", "Checking the event rules for you.",
               [{"tool": "get_lineups", "args": {}}])
    out = h.turn("Which team for the event?", orch=s, gen=REPLY)
    assert out.of("sgc.phi")[0]["outcome"] == "miss_unmapped" and out.of("sgc.phi")[0]["dispatch"] is None
    dispatch = out.of("sgc.dispatch")[0]
    assert dispatch["source"] == "plan" and dispatch["char_offset"] == len(s)
    start = h.log.index(("tool_start", "get_lineups"))
    assert max(_idx(h.log, ("event", "narration.delta"))) < start
    assert h.counters.get("fall_through", "unmapped") == 1
    assert out.ctx.meta["sgc"]["dispatch"]["source"] == "plan"
    assert [c[0] for c in h.local.calls] == ["get_lineups"]


def test_missing_state_falls_through_then_fill_makes_the_next_turn_hit():
    h = Harness("sgc_w1")
    species = sorted(h.world.species)[3]
    h.local.set_state("s1", {"user_id": "u001", "opponent_id": "o01", "focus_species": species}, version=1)
    s = stream("knowledge_qa", "species_info", f"Looking up {species}.",
               [{"tool": "species_info", "args": {"species": species}}])
    first = h.turn(f"Tell me about {species}.", orch=s, gen="Here it is.")
    phi = first.of("sgc.phi")[0]
    assert phi["outcome"] == "miss_state_unavailable" and phi["missing_keys"] == ["focus_species"]
    assert h.counters.get("fall_through", "state_unavailable") == 1
    assert "focus_species" in first.ctx.meta["sgc"]["snapshot"]["entries"]  # fill at tool time
    second = h.turn(f"Tell me about {species}.", orch=s, gen="Here it is.")
    assert second.of("sgc.phi")[0]["outcome"] == "hit"
    assert second.ctx.meta["sgc"]["dispatch"]["source"] == "phi"
    assert h.local.calls[-1] == ("species_info", {"species": species}, "s1")


def test_stale_snapshot_misses_then_refreshes():
    h = Harness("sgc_w1")
    assert h.turn(TEXT, orch=LINEUP, gen=REPLY).of("sgc.phi")[0]["outcome"] == "hit"
    h.local.set_state("s1", {"user_id": "u001", "opponent_id": "o02"}, version=2)  # live state moved on
    second = h.turn(TEXT, orch=LINEUP, gen=REPLY)
    phi = second.of("sgc.phi")[0]
    assert phi["outcome"] == "miss_state_unavailable" and set(phi["stale_keys"]) == {"user_id", "opponent_id"}
    assert phi["live_version"] == 2 and phi["snapshot_version"] == 1
    assert second.ctx.meta["sgc"]["dispatch"]["source"] == "plan"
    assert second.ctx.meta["sgc"]["snapshot_version"] == 2
    third = h.turn(TEXT, orch=LINEUP, gen=REPLY)
    assert third.of("sgc.phi")[0]["outcome"] == "hit"
    assert ("get_opponent_info", {"opponent_id": "o02"}, "s1") in h.local.calls  # the refreshed value
    assert h.counters.get("snapshot", "refresh") == 1 and h.counters.get("snapshot", "prewarm") == 1


def test_snapshot_never_ages_out_while_turns_dispatch():
    h = Harness("sgc_w1")
    outcomes = [h.turn(TEXT, orch=LINEUP, gen=REPLY).of("sgc.phi")[0]["outcome"] for _ in range(6)]
    assert outcomes == ["hit"] * 6


def test_later_plan_never_overrides_the_frozen_set():
    h = Harness("sgc_w1", settings=FULL_STREAM)
    s = stream("recommend", "lineup_for_opponent", NARRATION, [{"tool": "skill_info", "args": {"skill": "Flare"}}])
    out = h.turn(TEXT, orch=s, gen=REPLY)
    assert [c[0] for c in h.local.calls] == PHI_TOOLS
    assert out.ctx.meta["sgc"]["plan_ignored"] is True
    assert out.of("sgc.w1.plan_ignored")[0]["plan"] == ["skill_info"]
    assert h.counters.get("plan_ignored", "recommend/lineup_for_opponent") == 1


def test_prewarm_only_at_session_open_then_restore_and_probe():
    h = Harness("sgc_w1")
    first = h.turn(TEXT, orch=LINEUP, gen=REPLY)
    assert [e["action"] for e in first.of("sgc.snapshot")][:1] == ["prewarm"]
    assert ("load_state", "user_id,opponent_id") in h.log
    mark = len(h.log)
    second = h.turn(TEXT, orch=LINEUP, gen=REPLY)
    assert "prewarm" not in [e["action"] for e in second.of("sgc.snapshot")]
    assert ("load_state", "") in h.log[mark:]  # the version probe
    assert second.ctx.meta["sgc"]["turn_index"] == 1
    assert h.counters.get("snapshot", "restored") == 1


def test_malformed_stream_falls_back():
    h = Harness("sgc_w1")
    out = h.turn(TEXT, orch="<INTENT>recommend</INTENT><SUB_INTENT>not_a_label</SUB_INTENT>", gen=REPLY)
    assert out.ctx.status == "fallback" and out.reply == h.pipeline.settings.fallback_reply
    assert out.ctx.meta["sgc"]["fallback"] == "perception_error"
    assert h.counters.get("fallbacks", "perception_error") == 1


def test_counters_snapshot_has_every_family():
    snap = SgcCounters().snapshot()
    assert set(snap) == set(SgcCounters.FAMILIES) and all(v == {} for v in snap.values())


def test_narration_is_capped_even_from_an_unconstrained_engine():
    from pipelines.annex.sgc_ladder import SgcSettings

    h = Harness("sgc_w1", settings=SgcSettings(narration_max_chars=10))
    out = h.turn(TEXT, orch=LINEUP, gen=REPLY)
    assert out.narration == NARRATION[:10]
    assert "NARRATION_TEXT: /[^<]{1,10}/" in h.models.of("orchestrator")[0].structured_output.spec


def test_a_moot_plan_is_not_decoded_after_a_phi_hit():
    """Φ froze the tool set and the narration closed: the rest of the stream (a PLAN that could
    change nothing) is not read; the turn uses the frozen tools and replies as usual."""
    h = Harness("sgc_w1")
    s = stream("recommend", "lineup_for_opponent", NARRATION, [{"tool": "skill_info", "args": {"skill": "Flare"}}])
    out = h.turn(TEXT, orch=s, gen=REPLY)
    assert [c[0] for c in h.local.calls] == PHI_TOOLS
    assert out.of("sgc.w1.early_stop") and not out.of("sgc.w1.plan_ignored")
    assert out.narration == NARRATION and out.reply == REPLY
    assert out.ctx.status == "ok"


def test_a_miss_still_reads_the_plan():
    h = Harness("sgc_w1")
    s = stream("recommend", "event_team", "Checking the event rules for you.", [{"tool": "get_lineups", "args": {}}])
    out = h.turn("Which team for the event?", orch=s, gen=REPLY)
    assert not out.of("sgc.w1.early_stop")
    assert out.of("sgc.dispatch")[0]["source"] == "plan"
