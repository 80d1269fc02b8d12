"""pe_agent: one plan call, the tools serially, one generator call; no narration before the reply."""

from __future__ import annotations

import json

from pipelines.annex.sgc_ladder.pe_agent import parse_plan, plan_schema
from pipelines.domains.coach import TOOL_NAMES

from .harnesses import LadderHarness as Harness

PLAN = json.dumps([{"tool": "get_inventory", "args": {}},
                   {"tool": "matchup_scores", "args": {"opponent_id": "o01"}},
                   {"tool": "get_opponent_info", "args": {"opponent_id": "o01"}}])


def test_plan_then_tools_serially_then_reply():
    h = Harness("pe_agent")
    out = h.turn("Who should I bring against Rival Kai?", orch=PLAN, gen="Bring your best counter. Good luck!")
    log = [e for e in h.log if e[0] in ("call", "end", "tool_start", "tool_done") and e[1] != "slot_extractor"]
    assert log == [
        ("call", "orchestrator"), ("end", "orchestrator"),
        ("tool_start", "get_inventory"), ("tool_done", "get_inventory"),
        ("tool_start", "matchup_scores"), ("tool_done", "matchup_scores"),
        ("tool_start", "get_opponent_info"), ("tool_done", "get_opponent_info"),
        ("call", "generator"), ("end", "generator"),
    ]
    assert [e.type for e in out.events] and all(e.type == "reply.delta" for e in out.events)
    assert out.reply == "Bring your best counter. Good luck!" and out.ctx.status == "ok"
    call = h.models.of("orchestrator")[0]
    assert call.structured_output is not None and call.structured_output.kind == "json"
    assert call.structured_output.spec == plan_schema(TOOL_NAMES)
    assert {"plan", "tools", "generate"} <= set(out.ctx.stage_ms)
    meta = out.ctx.meta["sgc"]
    assert meta["plan"] == ["get_inventory", "matchup_scores", "get_opponent_info"]
    assert all(t["ok"] for t in meta["tools"]) and "w3" not in out.ctx.meta
    contract = json.loads(h.models.of("generator")[0].messages[-1].content.removeprefix("Contract: "))
    assert "c1" not in contract and len(contract["observations"]) == 3
    assert out.of("sgc.pe.plan")[0]["tools"] == meta["plan"]


def test_invalid_plan_falls_back():
    h = Harness("pe_agent")
    out = h.turn("hi", orch='{"tool": "get_inventory"}', gen="unused")
    assert out.ctx.status == "fallback" and out.ctx.meta["sgc"]["fallback"] == "plan_invalid"
    assert h.counters.get("fallbacks", "plan_invalid") == 1 and h.models.of("generator") == []


def test_parse_plan_refuses_unknown_tools():
    assert [c.tool for c in parse_plan('[{"tool": "skill_info", "args": {"skill": "Gust"}}]', TOOL_NAMES)] == [
        "skill_info"]
    for bad in ('[{"tool": "delete_account", "args": {}}]', "{}", "nope"):
        try:
            parse_plan(bad, TOOL_NAMES)
        except ValueError:
            continue
        raise AssertionError(bad)


def test_pe_agent_audits_an_unowned_recommendation():
    h = Harness("pe_agent")
    unowned = h.unowned(avoid=h.opponent_species())
    out = h.turn("Who should I bring?", orch=PLAN, gen=f"You should bring {unowned}.")
    assert unowned in out.reply
    assert h.counters.get("delivered_violations", "unowned_recommendation") == 1
