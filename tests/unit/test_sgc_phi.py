"""Φ table validation and lookup, the W1 driver policy, and snapshot prewarm / fill."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.errors import ConfigError
from pipelines.sgc.phi import PhiTable, load_phi_table, phi_lookup
from pipelines.sgc.snapshot import LoadedState, Snapshot, StateLoader, fill, prewarm
from pipelines.sgc.w1 import ToolCall
from pipelines.sgc.w1_run import FallThroughCounters, PerceptionRun

LABELS = {"recommend": ["lineup_for_opponent", "swap_member", "skill_choice"], "chitchat": ["greeting"]}
TOOLS = ["get_inventory", "get_opponent_info", "matchup_scores"]
TABLE = {
    "version": "phi-test-1",
    "max_age_turns": 2,
    "rows": [
        {"intent": "recommend", "sub_intent": "lineup_for_opponent", "requires_state": ["user_id"],
         "tools": [{"tool": "get_inventory", "args_from": {"user_id": "user_id"}},
                   {"tool": "matchup_scores", "args": {"top_k": 3},
                    "args_from": {"user_id": "user_id", "opponent_id": "opponent_id"}}]},
        {"intent": "chitchat", "sub_intent": "greeting", "tools": []},
    ],
}


def stream(intent: str, sub: str, plan: str = '[{"tool": "get_opponent_info", "args": {"opponent_id": "o1"}}]') -> str:
    return f"<INTENT>{intent}</INTENT><SUB_INTENT>{sub}</SUB_INTENT><NARRATION>One moment.</NARRATION><PLAN>{plan}</PLAN>"


@pytest.fixture
def table() -> PhiTable:
    return load_phi_table(TABLE, labels=LABELS, tools=TOOLS)


def test_hit_freezes_tools_with_args_from_snapshot(table):
    snap = Snapshot.of({"user_id": "u1", "opponent_id": "o2"}, version=3, turn=1)
    out = phi_lookup(table, "recommend", "lineup_for_opponent", snap, turn=1, live_version=3)
    assert out.kind == "hit" and out.table_version == "phi-test-1"
    assert out.tools == (ToolCall(tool="get_inventory", args={"user_id": "u1"}),
                         ToolCall(tool="matchup_scores", args={"top_k": 3, "user_id": "u1", "opponent_id": "o2"}))


def test_miss_unmapped(table):
    out = phi_lookup(table, "recommend", "swap_member", Snapshot.of({"user_id": "u1"}))
    assert out.kind == "miss_unmapped" and out.tools == ()


def test_miss_state_missing_key(table):
    out = phi_lookup(table, "recommend", "lineup_for_opponent", Snapshot.of({"user_id": "u1"}))
    assert out.kind == "miss_state_unavailable" and out.missing_keys == ("opponent_id",)


def test_stale_snapshot_by_version_is_not_fresh(table):
    snap = Snapshot.of({"user_id": "u1", "opponent_id": "o2"}, version=3, turn=5)
    out = phi_lookup(table, "recommend", "lineup_for_opponent", snap, turn=5, live_version=4)
    assert out.kind == "miss_state_unavailable" and set(out.stale_keys) == {"user_id", "opponent_id"}


def test_stale_snapshot_by_age(table):
    snap = Snapshot.of({"user_id": "u1", "opponent_id": "o2"}, version=3, turn=1)
    assert phi_lookup(table, "recommend", "lineup_for_opponent", snap, turn=3).kind == "hit"
    out = phi_lookup(table, "recommend", "lineup_for_opponent", snap, turn=4)
    assert out.kind == "miss_state_unavailable" and out.missing_keys == ()


def test_empty_tool_row_is_a_hit(table):
    assert phi_lookup(table, "chitchat", "greeting", Snapshot()).kind == "hit"


@pytest.mark.parametrize("mutate, path", [
    (lambda t: t["rows"][0].update(intent="nope"), "phi.rows.0.intent"),
    (lambda t: t["rows"][1].update(sub_intent="nope"), "phi.rows.1.sub_intent"),
    (lambda t: t["rows"][0]["tools"][1].update(tool="rm_rf"), "phi.rows.0.tools.1.tool"),
])
def test_unknown_label_or_tool_names_the_row(mutate, path):
    import copy

    bad = copy.deepcopy(TABLE)
    mutate(bad)
    with pytest.raises(ConfigError) as info:
        load_phi_table(bad, labels=LABELS, tools=TOOLS)
    assert info.value.details["path"] == path
    assert "phi.rows." in info.value.message


def test_malformed_and_duplicate_rows_refused():
    with pytest.raises(ConfigError) as info:
        load_phi_table({"version": "x", "rows": [{"intent": "a", "sub_intent": "b", "extra": 1}]})
    assert info.value.details["path"] == "phi.rows.0.extra"
    row = {"intent": "chitchat", "sub_intent": "greeting"}
    with pytest.raises(ConfigError, match="duplicates"):
        load_phi_table({"version": "x", "rows": [row, row]})


def _run(table, snap, text, counters, chunk=7, **kw):
    fired = []
    run = PerceptionRun(table, snap, counters=counters, on_dispatch=fired.append, **kw)
    steps = []
    for i in range(0, len(text), chunk):
        steps += run.feed(text[i:i + chunk])
    return run.finish(), fired, steps


def test_run_hit_dispatches_at_sub_intent_and_ignores_later_plan(table):
    counters = FallThroughCounters()
    text = stream("recommend", "lineup_for_opponent")
    out, fired, steps = _run(table, Snapshot.of({"user_id": "u1", "opponent_id": "o2"}), text, counters)
    assert len(fired) == 1 and fired[0].source == "phi"
    assert fired[0].point.char_offset == text.index("</SUB_INTENT>") + len("</SUB_INTENT>")
    assert fired[0].point.chunk_index == (fired[0].point.char_offset - 1) // 7
    assert out.dispatched == fired[0] and [c.tool for c in out.dispatched.calls] == ["get_inventory", "matchup_scores"]
    assert out.plan_ignored and out.result.plan[0].tool == "get_opponent_info"  # the plan never overrides
    assert counters.as_dict() == {"hits": 1, "unmapped": 0, "state_unavailable": 0, "plan_ignored": 1}
    # dispatch comes before any narration of this turn
    kinds = [getattr(s, "kind", "") for s in steps]
    assert kinds.index("dispatch") < kinds.index("narration")


def test_run_miss_waits_for_plan_and_counts(table):
    counters = FallThroughCounters()
    out, fired, _ = _run(table, Snapshot.of({"user_id": "u1"}), stream("recommend", "swap_member"), counters)
    assert fired[0].source == "plan" and fired[0].calls[0].tool == "get_opponent_info"
    out2, fired2, _ = _run(table, Snapshot.of({"user_id": "u1"}), stream("recommend", "lineup_for_opponent"), counters)
    assert out2.phi.kind == "miss_state_unavailable" and fired2[0].source == "plan"
    assert counters.unmapped == 1 and counters.state_unavailable == 1 and counters.hits == 0
    assert not out.plan_ignored


def test_run_drive_async(table):
    async def chunks():
        text = stream("chitchat", "greeting", "[]")
        for i in range(0, len(text), 5):
            yield text[i:i + 5]

    async def main():
        run = PerceptionRun(table, Snapshot())
        steps = [s async for s in run.drive(chunks())]
        return run.finish(), steps

    out, steps = asyncio.run(main())
    assert out.phi.hit and out.dispatched.calls == ()
    assert "".join(s.text for s in steps if s.kind == "narration") == "One moment."


class FakeLoader:
    def __init__(self):
        self.version = 1
        self.state = {"user_id": "u1", "opponent_id": "o2", "focus_species": "Emberfox"}
        self.calls: list[list[str]] = []

    async def load(self, session_id, keys):
        self.calls.append(list(keys))
        return LoadedState(version=self.version, values={k: self.state[k] for k in keys if k in self.state})


def test_prewarm_then_fill_only_missing_keys():
    loader = FakeLoader()
    assert isinstance(loader, StateLoader)

    async def main():
        snap = await prewarm(loader, "s1", ["user_id", "opponent_id", "absent"], turn=0)
        loader.version = 2
        snap2 = await fill(snap, loader, ["user_id", "focus_species"], turn=1)
        return snap, snap2

    snap, snap2 = asyncio.run(main())
    assert snap.values() == {"user_id": "u1", "opponent_id": "o2"} and snap.version == 1
    assert loader.calls == [["user_id", "opponent_id", "absent"], ["focus_species"]]
    assert snap2.entries["focus_species"].version == 2 and snap2.entries["user_id"].version == 1
    assert snap2.stale_keys(["user_id", "focus_species"], live_version=2) == ["user_id"]
    assert snap.values() == {"user_id": "u1", "opponent_id": "o2"}  # immutable
