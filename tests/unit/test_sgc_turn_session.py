"""A generated 5-turn coach session through sgc_full with the meta records stored; the real TurnRunner;
the factory; the ports' JSON boundary and rule-table reload through ``reconfigure``."""

from __future__ import annotations

import asyncio
import json

import pytest

from pipelines.annex.sgc_ladder import (
    SGC_KINDS,
    PlanExecutePipeline,
    SgcCounters,
    SgcPipeline,
    build_sgc_pipeline,
)
from pipelines.core.kernels import LocalRuleKernels
from pipelines.core.ports import W1Tables
from pipelines.core.replay import replay_w3
from pipelines.domains.coach import (
    BRANCH_OF_INTENT,
    coach_rule_tables_dict,
    coach_tables_holder,
    generate_coach_world,
    generate_sessions,
    load_coach_rule_tables,
)
from pipelines.domains.coach.domain import DomainPack as CoachPack
from pipelines.domains.coach.runner import LocalCoachTools
from pipelines.events import DoneEvent, NarrationDelta, TurnRequest
from pipelines.protocols import TurnRecord
from pipelines.sgc.w2 import GroundingResult, QuerySlots
from pipelines.sgc.w3 import AnswerMeta
from pipelines.turn import TurnRunner
from tests.doubles import ListEventSink, ScriptModels, stream

from .harnesses import LadderHarness as Harness

WORLD = generate_coach_world(7)
TABLES = load_coach_rule_tables()


def test_five_turn_generated_session_through_sgc_full_stores_every_meta():
    session = generate_sessions(WORLD, TABLES, seed=11, n_sessions=1, turns_per_session=5)[0]
    h = Harness("sgc_full", user_id=session.user_id, session_id=session.session_id)
    for turn in session.turns:
        h.local.set_state(session.session_id, turn.snapshot, version=turn.live_version)
        out = h.turn(turn.user_text, orch=turn.stream, slots=turn.slots, gen="Here is what I would do. Have fun!")
        assert out.narration == f"Looking at {turn.sub_intent.replace('_', ' ')} for you."
        assert out.ctx.rules_version == TABLES.version
        assert {"w1_stream", "dispatch_at", "tools", "w2", "w3", "generate"} <= set(out.ctx.stage_ms)
        kinds = [k for k, _ in out.sink]
        for kind in ("sgc.phi", "sgc.dispatch", "sgc.w1.parsed", "sgc.tools", "sgc.w2", "sgc.w3",
                     "contract.forward", "sgc.post_guard", "stage.generate"):
            assert kind in kinds, kind
        assert all(f["turn_id"] == out.ctx.turn_id for _, f in out.sink)
    assert len(h.history) == 5
    for i, (record, turn) in enumerate(zip(h.history, session.turns, strict=True)):
        meta = record.meta
        assert json.loads(json.dumps(meta)) == meta  # storable as JSON
        sgc = meta["sgc"]
        assert sgc["turn_index"] == i and sgc["pipeline"] == "sgc_full" and sgc["fallback"] is None
        assert sgc["c1"] == {"intent": turn.intent, "sub_intent": turn.sub_intent}
        assert sgc["snapshot"]["session_id"] == session.session_id
        assert sgc["snapshot_version"] == turn.live_version
        assert AnswerMeta.model_validate(meta["w3"]).turn_index == i
        assert sgc["w2"]["plan"] and sgc["guard"]["mode"] == "enforce"
    assert h.counters.total("phi") == 5 and h.counters.get("snapshot", "prewarm") == 1
    assert all(r.identical for r in replay_w3(h.history, None, tables=TABLES, session_id=session.session_id,
                                                     branch_of_intent=BRANCH_OF_INTENT))


class _Store:
    def __init__(self) -> None:
        self.turns: dict[str, list[TurnRecord]] = {}

    async def get_history(self, session_id: str, limit: int | None = None) -> list[TurnRecord]:
        turns = self.turns.get(session_id, [])
        return list(turns[-limit:] if limit else turns)

    async def session_exists(self, session_id: str) -> bool:
        return session_id in self.turns

    async def append_turn(self, session_id: str, record: TurnRecord) -> None:
        turns = self.turns.setdefault(session_id, [])
        turns.append(record.model_copy(update={"index": len(turns)}))


def test_turn_runner_stamps_rules_version_and_stores_the_meta():
    log: list = []
    models = ScriptModels(log=log, chunk=6)
    tools = LocalCoachTools(WORLD)
    tools.bind("s1", "u001", {"opponent_id": "o01"})
    kernels = LocalRuleKernels.of(CoachPack(), coach_tables_holder())
    pipeline = build_sgc_pipeline("sgc_full", models, tools, kernels)
    store = _Store()
    runner = TurnRunner(pipeline, store, sink=ListEventSink(), max_history_turns=pipeline.history_turns)
    s = stream("recommend", "lineup_for_opponent", "Checking Rival Kai.", [])
    for _ in range(2):
        models.push("orchestrator", s)
        models.push("slot_extractor", QuerySlots(opponent_entities=("Rival Kai",)).model_dump_json())
        models.push("generator", "Bring your best counter.")

    async def go() -> list:
        return [e async for e in runner.run("s1", TurnRequest(text="Who vs Rival Kai?"), trace_id="tr")]

    for i in range(2):
        events = asyncio.run(go())
        done = events[-1]
        assert isinstance(done, DoneEvent) and done.status == "ok" and done.rules_version == TABLES.version
        assert isinstance(events[0], NarrationDelta) and done.timings.first_token_ms is not None
        assert "dispatch_at" in done.timings.stages
        assert store.turns["s1"][-1].meta["sgc"]["turn_index"] == i
    assert store.turns["s1"][1].meta["w3"]["turn_index"] == 1


def test_factory_builds_every_rung_and_refuses_unknown_kinds():
    models, tools, kernels = ScriptModels(log=[], chunk=6), LocalCoachTools(WORLD), LocalRuleKernels.of(CoachPack(), coach_tables_holder())
    counters = SgcCounters()
    built = {k: build_sgc_pipeline(k, models, tools, kernels, counters=counters) for k in SGC_KINDS}
    assert isinstance(built["pe_agent"], PlanExecutePipeline)
    assert [p.name for p in built.values()] == list(SGC_KINDS)
    assert isinstance(built["sgc_full"], SgcPipeline) and built["sgc_full"].w3 and not built["sgc_w1"].w2
    assert all(p.counters is counters for p in built.values())
    with pytest.raises(ValueError):
        build_sgc_pipeline("sgc_w9", models, tools, kernels)
    with pytest.raises(ValueError):
        build_sgc_pipeline("sgc_w1", models, tools, None)


def test_kernel_ports_speak_json():
    kernels = LocalRuleKernels.of(CoachPack(), coach_tables_holder())
    tools = LocalCoachTools(WORLD)
    tools.bind("s1", "u001", {"opponent_id": "o01"})

    async def go():
        facts = await tools.live_facts("s1")
        g = await kernels.ground(QuerySlots(wanted_entities=("Nope",)).model_dump(mode="json"),
                                 facts.facts.model_dump(mode="json"), "recommend")
        pick, meta = await kernels.schedule("s1", [], {"intent": "teaching", "sub_intent": "evolution"}, [], 0)
        w1 = await kernels.w1_tables()
        state = await tools.load_state("s1", ["user_id", "focus_skill"])
        return facts, g, pick, meta, w1, state

    facts, g, pick, meta, w1, state = asyncio.run(go())
    assert json.loads(json.dumps(g)) == g and GroundingResult.model_validate(g).conflicts[0].kind == "entity_unknown"
    assert json.loads(json.dumps(meta)) == meta and AnswerMeta.model_validate(meta).subject_id == pick
    assert W1Tables.model_validate_json(w1.model_dump_json()) == w1
    assert type(facts).model_validate_json(facts.model_dump_json()) == facts
    assert state.values == {"user_id": "u001"} and state.version == 1


def test_reconfigure_hot_reloads_tables_and_the_pipeline_follows():
    h = Harness("sgc_w1")
    s = stream("recommend", "lineup_for_opponent", "Checking.", [])
    first = h.turn("Who?", orch=s, gen="Bring your best.")
    assert first.of("sgc.phi")[0]["table_version"] == "coach-phi-4"
    data = coach_rule_tables_dict()
    data["phi"]["version"] = "coach-phi-4"
    data["version"] = "coach:test-2"
    assert h.kernels.reconfigure({"rules": data}).applied
    bad = h.kernels.reconfigure({"rules": {"version": "x"}})
    assert not bad.applied and bad.active_version == "coach:test-2"
    second = h.turn("Who?", orch=s, gen="Bring your best.")
    assert second.of("sgc.phi")[0]["table_version"] == "coach-phi-4"
    assert second.ctx.rules_version == "coach:test-2"
