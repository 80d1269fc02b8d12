"""sgc_w1w2: the independent slot-extraction call, grounding into c2, and the sentence post-guard
against adversarial generator output (unowned recommendations, praise + apology about one constraint)."""

from __future__ import annotations

import json
import re

from pipelines.annex.sgc_ladder import SgcSettings
from pipelines.domains.coach.judge import ReplyJudge, judge_kinds
from pipelines.domains.coach.runner import CoachFacts, LocalCoachTools
from pipelines.sgc.w2 import QuerySlots, query_slots_schema
from tests.doubles import stream

from .harnesses import LadderHarness as Harness

LINEUP = stream("recommend", "lineup_for_opponent", "Let me look at your team and at Rival Kai's lineup.",
                [{"tool": "get_inventory", "args": {}}])
TEXT = "Who should I bring against Rival Kai?"
OPP_SLOTS = QuerySlots(opponent_entities=("Rival Kai",))


def _no_unowned(h: Harness, reply: str) -> bool:
    mine = set(h.owned())
    names = [s for s in h.world.species if s not in mine]
    return not re.search(r"\b(" + "|".join(map(re.escape, names)) + r")\b", reply)


def test_slot_extraction_is_a_separate_call_started_during_the_stream():
    h = Harness("sgc_w1w2", settings=SgcSettings(stop_moot_plan=False))  # read to </PLAN>
    out = h.turn(TEXT, orch=LINEUP, slots=OPP_SLOTS, gen="Bring your best counter.")
    call = h.models.of("slot_extractor")[0]
    assert call.structured_output is not None and call.structured_output.kind == "json"
    assert call.structured_output.spec == query_slots_schema()
    text = " ".join(m.content for m in call.messages)
    assert TEXT in text and "recommend/lineup_for_opponent" in text
    assert "Rival Kai's lineup" not in text and len(call.messages) == 2  # no narration, no history
    assert h.log.index(("call", "slot_extractor")) < h.log.index(("end", "orchestrator"))
    assert out.of("sgc.w2")[0]["ok"] is True and "w2" in out.ctx.stage_ms
    gen = h.models.of("generator")[0].messages[-1].content
    contract = json.loads(gen.removeprefix("Contract: "))
    assert contract["c2"]["plan"] and contract["c1"]["sub_intent"] == "lineup_for_opponent"
    assert out.ctx.meta["sgc"]["w2"]["slots"]["opponent_entities"] == ["Rival Kai"]


def test_post_guard_withholds_an_unowned_recommendation():
    h = Harness("sgc_w1w2")
    owned = h.owned()[0]
    unowned = h.unowned(avoid=h.opponent_species())
    gen = f"Bring {owned} first. You should bring {unowned} too. Good luck!"
    out = h.turn(TEXT, orch=LINEUP, slots=OPP_SLOTS, gen=gen)
    s = h.pipeline.settings
    assert unowned not in out.reply and _no_unowned(h, out.reply)
    assert out.reply == f"Bring {owned} first. {s.safe_unowned} Good luck!"
    assert h.counters.get("blocked", "unowned_recommendation") == 1
    assert h.counters.get("guard", "post.block") == 1 and h.counters.get("guard", "post.pass") == 2
    block = [e for e in out.of("sgc.post_guard") if e["decision"] == "block"][0]
    assert block["details"] == [unowned] and block["kinds"] == ["unowned_recommendation"]
    assert out.ctx.meta["sgc"]["guard"]["withheld"] == 1


def test_post_guard_withholds_an_unreferenced_unowned_mention_and_never_repeats_the_safe_wording():
    h = Harness("sgc_w1w2")
    unowned = h.unowned(avoid=h.opponent_species())
    other = h.unowned(avoid=[*h.opponent_species(), unowned])
    gen = f"{unowned} is a fun creature. You should use {other}. Bring your best counter."
    out = h.turn(TEXT, orch=LINEUP, slots=OPP_SLOTS, gen=gen)
    assert _no_unowned(h, out.reply)
    assert out.reply.count(h.pipeline.settings.safe_unowned) == 1
    assert h.counters.get("blocked", "unreferenced_entity") == 1
    assert h.counters.get("blocked", "unowned_recommendation") == 1


def test_post_guard_withholds_praise_and_apology_about_the_same_constraint():
    h = Harness("sgc_w1w2")
    owned = h.owned()[0]
    slots = QuerySlots(wanted_entities=(owned,), opponent_entities=("Rival Kai",))
    gen = f"{owned} is a great pick. Sorry, {owned} is a weak pick here. Keep training!"
    out = h.turn(TEXT, orch=LINEUP, slots=slots, gen=gen)
    s = h.pipeline.settings
    assert out.reply == f"{owned} is a great pick. {s.safe_contradiction} Keep training!"
    assert h.counters.get("blocked", "contradiction") == 1
    plan = out.ctx.meta["sgc"]["w2"]["plan"]
    assert {"kind": "praise", "constraint_id": f"want:{owned}"} in plan


def test_post_guard_forbids_praise_of_a_conflicted_constraint():
    h = Harness("sgc_w1w2")
    unowned = h.unowned(avoid=h.opponent_species())
    slots = QuerySlots(wanted_entities=(unowned,))
    gen = f"{unowned} would be a great idea. Sorry, you don't own {unowned} yet."
    out = h.turn(f"Can I use {unowned}?", orch=LINEUP, slots=slots, gen=gen)
    conflicts = out.ctx.meta["sgc"]["w2"]["conflicts"]
    assert conflicts[0]["kind"] == "entity_not_owned" and conflicts[0]["tier"] == "hard"
    assert "great idea" not in out.reply and f"you don't own {unowned}" in out.reply
    assert h.counters.get("blocked", "forbidden_praise") == 1


def test_unguarded_rung_delivers_but_counts_the_same_violation():
    h = Harness("sgc_w1")
    owned = h.owned()[0]
    unowned = h.unowned(avoid=h.opponent_species())
    out = h.turn(TEXT, orch=LINEUP, gen=f"Bring {owned} first. You should bring {unowned} too.")
    assert unowned in out.reply  # the ablation: without W2 nothing is withheld
    assert h.counters.get("delivered_violations", "unowned_recommendation") == 1
    assert h.counters.total("blocked") == 0 and out.ctx.meta["sgc"]["guard"]["mode"] == "observe"
    assert h.models.of("slot_extractor") == []


def test_invalid_slots_degrade_to_empty_slots():
    h = Harness("sgc_w1w2")
    out = h.turn(TEXT, orch=LINEUP, slots="not json at all", gen="Bring your best counter.")
    assert out.ctx.status == "ok" and h.counters.get("w2", "slots_invalid") == 1
    assert out.ctx.meta["sgc"]["w2"]["slots"]["opponent_entities"] == []


def test_facts_unavailable_is_a_conservative_fallback():
    h = Harness("sgc_w1w2")

    async def down(session_id: str) -> CoachFacts:
        raise ConnectionError("tools deployment down")

    h.tools.live_facts = down  # type: ignore[method-assign]
    out = h.turn(TEXT, orch=LINEUP, slots=OPP_SLOTS, gen="Bring your best counter.")
    assert out.ctx.status == "fallback" and out.ctx.meta["sgc"]["fallback"] == "facts_unavailable"
    assert out.reply == h.pipeline.settings.fallback_reply and h.models.of("generator") == []


def test_judge_is_pure_and_keyword_based():
    assert judge_kinds("Great pick!") == ["praise"]
    assert judge_kinds("Sorry, that skill is locked.") == ["apology", "constraint_account"]
    h = Harness("sgc_w1w2")
    facts = LocalCoachTools(h.world)
    facts.bind("x", "u001")
    import asyncio

    judge = ReplyJudge(asyncio.run(facts.live_facts("x")), "hi")
    owned, unowned = h.owned()[0], h.unowned()
    assert judge.check(f"Use {owned}.").violations == []
    assert judge.check(f"Use {unowned}.").violations == ["unowned_recommendation"]
    assert judge.check(f"Do not use {unowned}.").violations == ["unreferenced_entity"]
