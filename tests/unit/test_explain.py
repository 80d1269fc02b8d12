"""serve.explain: the waterfall from spans, the turn's story from events, turn selection, the CLI."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.protocols import TurnRecord
from serve.explain import (
    Bar,
    draw_png,
    explain_turn,
    load_spans,
    main,
    pick_turn,
    render_waterfall,
    waterfall,
)

MS = 1_000_000  # ns per ms
TID = "ab" * 16


def span(name: str, sid: str, parent: str | None, start_ms: float, end_ms: float, kind: str = "CHAIN",
         status: str = "UNSET", trace_id: str = TID) -> dict[str, Any]:
    return {"name": name, "trace_id": trace_id, "span_id": sid, "parent_span_id": parent,
            "start_ns": int(1e12 + start_ms * MS), "end_ns": int(1e12 + end_ms * MS), "status": status,
            "attributes": {"openinference.span.kind": kind}}


SPANS = [
    span("tandem.generate", "c", "a", 50, 100),
    span("tandem.turn", "a", "p", 0, 100),  # its parent (the proxy) was not exported here: a root
    {**span("tandem.llm.generator", "d", "c", 60, 90, "LLM", "ERROR"),
     "attributes": {"openinference.span.kind": "LLM", "tandem.role": "generator", "llm.model_name": "m-1",
                    "llm.token_count.prompt": 40, "llm.token_count.completion": 9, "tandem.first_token_ms": 12.5,
                    "output.value": "Done, jane@example.org."}},
    span("tandem.pre_guard", "b", "a", 0, 10, "GUARDRAIL"),
]


def test_waterfall_is_depth_first_in_start_order() -> None:
    bars = waterfall(SPANS)
    assert [(b.name, b.depth) for b in bars] == [
        ("tandem.turn", 0), ("tandem.pre_guard", 1), ("tandem.generate", 1), ("tandem.llm.generator", 2)]
    gen = bars[2]
    assert (gen.start_ms, gen.end_ms, gen.ms) == (50.0, 100.0, 50.0)
    assert bars[3].kind == "LLM" and bars[3].error and not bars[0].error


def test_waterfall_skips_unfinished_spans_and_handles_none() -> None:
    assert waterfall([]) == []
    assert [b.name for b in waterfall([*SPANS, {**span("open", "e", "a", 5, 6), "end_ns": None}])] == [
        "tandem.turn", "tandem.pre_guard", "tandem.generate", "tandem.llm.generator"]


def test_render_waterfall_positions_bars_on_the_turn_axis() -> None:
    rows = render_waterfall([Bar("turn", 0, 0, 100), Bar("half", 1, 50, 100), Bar("tiny", 1, 0, 0.1, "TOOL", True)],
                            width=10)
    assert rows[0].startswith("  turn   |██████████|")
    assert rows[1].startswith("    half |     █████|")
    assert rows[2].startswith("    tiny |█         |")  # at least one cell
    assert rows[2].endswith("TOOL !") and "+     0.1 ms" in rows[2]
    assert render_waterfall([]) == ["  (no spans for this trace: tracing off, or not flushed yet)"]


def _record(**kw: Any) -> TurnRecord:
    base = dict(turn_id="t_1", index=1, user_text="I am jane@example.org", reply_text="Done, jane@example.org.",
                status="ok", trace_id=TID, pipeline="dr",
                meta={"dr": {"path": "action_card", "card_id": "card.cancel_order", "fallback": None}})
    return TurnRecord(**{**base, **kw})


EVENTS = [
    {"ts": 3.0, "kind": "dr.step", "turn_id": "t_1", "step": 1, "raw": '{"decision": "respond"}', "decision": {"decision": "respond"}},
    {"ts": 1.0, "kind": "turn.start", "turn_id": "t_1", "history_turns": 0},
    {"ts": 2.0, "kind": "dr.start", "turn_id": "t_1", "user_text": "I am [EMAIL_1]", "open_tools": ["search_help"]},
    {"ts": 4.0, "kind": "dr.guard", "turn_id": "t_1", "stage": "post", "decision": "block", "kinds": ["unknown_order_id"]},
    {"ts": 5.0, "kind": "contract.forward", "turn_id": "t_1",
     "contract": {"selected_path": "action_card", "eligible_actions": [{"id": "card.cancel_order"}], "sources": []}},
    {"ts": 6.0, "kind": "tandem.new_kind", "turn_id": "t_1", "widget": 7, "note": "call 415-555-0134"},
    {"ts": 7.0, "kind": "turn.end", "turn_id": "t_1",
     "timings": {"first_token_ms": 120.5, "end_ms": 900.0, "stages": {"orchestrate": 700.0}}},
]


def test_explain_turn_tells_the_story_generically() -> None:
    out = explain_turn(_record(), EVENTS, SPANS, session_id="s1", width=10)
    lines = out.splitlines()
    assert lines[0].startswith("session s1  turn 1  t_1  pipeline dr  status ok  trace " + TID)
    assert out.index("user (redacted)") < out.index("decisions") < out.index("forward contract") < out.index(
        "guard decisions") < out.index("delivered") < out.index("timings")
    assert "  I am [EMAIL_1]" in lines  # the pipeline's redacted copy of the text
    decisions = out[out.index("decisions"):out.index("forward contract")]
    assert decisions.index("dr.start") < decisions.index("dr.step") < decisions.index("tandem.new_kind")
    assert "widget=7" in decisions and "note=call [PHONE]" in decisions  # unknown kinds print, redacted
    assert "turn.start" not in decisions and "dr.guard" not in decisions
    assert "selected_path" in out and "card.cancel_order" in out
    guards = out[out.index("guard decisions"):out.index("delivered")]
    assert "dr.guard" in guards and "decision=block" in guards and "unknown_order_id" in guards
    assert "Done, [EMAIL]." in out and "jane@example.org" not in out
    calls = out[out.index("model calls"):out.index("delivered")]
    assert "generator      m-1  40+9 tok  first 12.5 ms  total 30.0 ms  -> Done, [EMAIL]." in calls
    assert "path=action_card  card_id=card.cancel_order" in out
    assert "first token 120.5 ms   end 900.0 ms   orchestrate 700.0 ms" in out
    assert any(line.strip().startswith("tandem.turn") and "██████████" in line for line in lines)


def test_explain_turn_without_events_or_spans() -> None:
    out = explain_turn(_record(meta={}), [], [], session_id="s1")
    assert "  I am [EMAIL]" in out.splitlines()  # the stored text, redacted here
    assert "(none logged)" in out and "(this pipeline logged none)" in out and "(no spans for this trace" in out
    assert "(none traced)" in out


def test_pick_turn() -> None:
    turns = [_record(turn_id=f"t_{i}", index=i) for i in range(3)]
    assert pick_turn(turns, None).turn_id == "t_2"
    assert pick_turn(turns, "0").turn_id == "t_0" and pick_turn(turns, "-2").turn_id == "t_1"
    assert pick_turn(turns, "t_1").index == 1
    for bad in ("3", "t_9"):
        with pytest.raises(LookupError):
            pick_turn(turns, bad)
    with pytest.raises(LookupError):
        pick_turn([], None)


def test_load_spans_reads_one_trace(tmp_path: Path) -> None:
    other = span("x", "z", None, 0, 1, trace_id="cd" * 16)
    (tmp_path / "spans-1.jsonl").write_text("".join(json.dumps(s) + "\n" for s in [SPANS[0], other]) + "not json\n")
    (tmp_path / "spans-2.jsonl").write_text(json.dumps(SPANS[1]) + "\n")
    assert sorted(s["name"] for s in load_spans(tmp_path, TID)) == ["tandem.generate", "tandem.turn"]


def test_draw_png(tmp_path: Path) -> None:
    out = draw_png(waterfall(SPANS), tmp_path / "w" / "turn.png", title="s1")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_cli_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from serve.stores.sqlite import SQLiteSessionStore

    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs" / "embedded.yaml").read_text())
    raw["applications"][0]["args"]["store"] = {"kind": "sqlite", "path": str(tmp_path / "s.db")}
    cfg = tmp_path / "app.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    tele = tmp_path / "tel"
    tele.mkdir()
    asyncio.run(SQLiteSessionStore(tmp_path / "s.db").append_turn("s1", _record(index=0)))
    (tele / "events-9.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    (tele / "spans-9.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SPANS))
    png = tmp_path / "turn.png"
    assert main(["s1", "--config", str(cfg), "--telemetry", str(tele), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "session s1  turn 0  t_1" in out and "dr.step" in out and png.is_file()
    assert main(["nobody", "--config", str(cfg), "--telemetry", str(tele)]) == 2
    assert "no stored turns" in capsys.readouterr().out
    assert main(["s1", "5", "--config", str(cfg), "--telemetry", str(tele)]) == 2
    assert main(["s1", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read config" in capsys.readouterr().out


def test_explain_turn_shows_the_cost_by_role_purpose_and_call() -> None:
    cost = {"calls": 2, "prompt_tokens": 340, "cached_prompt_tokens": 256, "decode_tokens": 14, "engine_ms": 85.0,
            "queue_ms": 0.0, "unreported": 1,
            "by_role": {"orchestrator": {"calls": 1, "prompt_tokens": 300, "cached_prompt_tokens": 256,
                                         "decode_tokens": 2, "engine_ms": 40.0},
                        "generator": {"calls": 1, "prompt_tokens": 40, "cached_prompt_tokens": 0,
                                      "decode_tokens": 12, "engine_ms": 45.0}},
            "by_purpose": {"w1.intent": {"calls": 1, "prompt_tokens": 300, "cached_prompt_tokens": 256,
                                         "decode_tokens": 2, "engine_ms": 40.0},
                           "generator.reply": {"calls": 1, "prompt_tokens": 40, "cached_prompt_tokens": 0,
                                               "decode_tokens": 12, "engine_ms": 45.0}}}
    calls = [{"role": "orchestrator", "purpose": "w1.intent", "prompt_tokens": 300, "cached_tokens": 256,
              "decode_tokens": 2, "engine_ms": 40.0, "wall_ms": 52.0, "reported": True},
             {"role": "generator", "purpose": "generator.reply", "prompt_tokens": 40, "cached_tokens": 0,
              "decode_tokens": 12, "engine_ms": None, "wall_ms": 45.0, "reported": False}]
    events = [*EVENTS[:-1], {**EVENTS[-1], "timings": {**EVENTS[-1]["timings"], "cost": cost}, "model_calls": calls}]
    out = explain_turn(_record(), events, SPANS, session_id="s1")
    part = out[out.index("cost (the engine's usage)"):out.index("timings")]
    lines = part.splitlines()
    assert ("  total          2 calls  prompt 340 (cached 256)  decode 14  engine 85.0 ms"
            "  (1 stopped early: running counts)") in lines
    assert "  role orchestrator 1 calls  prompt 300 (cached 256)  decode 2  engine 40.0 ms" in lines
    assert "  w1.intent      1 calls  prompt 300 (cached 256)  decode 2  engine 40.0 ms" in lines
    assert ("  call 1  orchestrator   w1.intent          prompt 300 (cached 256)  decode 2  engine 40.0 ms"
            "  wall 52.0 ms") in lines
    assert [x for x in lines if x][-1].endswith("engine - ms  wall 45.0 ms  (stopped early)")
    assert "(not recorded)" in explain_turn(_record(), EVENTS, SPANS, session_id="s1")  # an old turn.end
