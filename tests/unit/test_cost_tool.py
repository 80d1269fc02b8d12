"""serve.cost: the workload, the per-turn figures, production prices, ratios, the table, the plot, the CLI's checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve.cost.cli import main, parse_variant
from serve.cost.measure import TurnCostRecord, cost_workload, goodput_of, server_split
from serve.cost.report import (
    build_doc,
    dist,
    format_table,
    plot_goodput,
    price_turn,
    summarize_kind,
    turn_values,
)
from serve.loadtest import SLO

PRICING = {"orchestrator": {"prefill_gpu_s_per_token": 0.001, "cached_gpu_s_per_token": 0.0001,
                            "decode_gpu_s_per_token": 0.01},
           "generator": {"prefill_gpu_s_per_token": 0.0, "cached_gpu_s_per_token": 0.0, "decode_gpu_s_per_token": 0.002}}


def _block(orch: tuple[int, int, int, float] | None, gen: tuple[int, int, int, float] | None) -> dict:
    roles, purposes = {}, {}
    for role, purpose, t in (("orchestrator", "w1.intent", orch), ("generator", "generator.reply", gen)):
        if t is None:
            continue
        d = {"calls": 1, "prompt_tokens": t[0], "cached_prompt_tokens": t[1], "decode_tokens": t[2], "engine_ms": t[3]}
        roles[role] = purposes[purpose] = d
    tot = {k: sum(d[k] for d in roles.values()) for k in ("calls", "prompt_tokens", "cached_prompt_tokens",
                                                           "decode_tokens", "engine_ms")}
    return {**tot, "queue_ms": 0.0, "unreported": 0, "by_role": roles, "by_purpose": purposes}


def _rec(cost, *, e2e=1000.0, ttft=100.0, status="ok", error=None) -> TurnCostRecord:
    return TurnCostRecord(session=0, index=0, status=status, first_token_ms=ttft, e2e_ms=e2e, cost=cost, error=error)


def test_dist_is_the_interpolated_median_and_the_mean() -> None:
    assert dist([]) == {"p50": None, "mean": None}
    assert dist([3.0]) == {"p50": 3.0, "mean": 3.0}
    assert dist([1.0, 2.0, 10.0]) == {"p50": 2.0, "mean": 4.3333}
    assert dist([4.0, 1.0, 2.0, 10.0]) == {"p50": 3.0, "mean": 4.25}


def test_turn_values_count_the_orchestrator_role_alone() -> None:
    v = turn_values(_block((900, 768, 10, 2000.0), (120, 0, 40, 1500.0)))
    assert v == {"calls": 2.0, "prompt_tokens": 1020.0, "cached_prompt_tokens": 768.0, "decode_tokens": 50.0,
                 "orchestrator_tokens": 910.0, "orchestrator_uncached_tokens": 142.0, "engine_s": 3.5}
    assert turn_values(_block(None, (120, 0, 40, 1500.0)))["orchestrator_tokens"] == 0.0


def test_price_turn_by_role_uncached_cached_and_decode() -> None:
    p = price_turn(_block((900, 768, 10, 1.0), (120, 0, 40, 1.0)), PRICING)
    assert p["orchestrator"] == pytest.approx(132 * 0.001 + 768 * 0.0001 + 10 * 0.01)
    assert p["generator"] == pytest.approx(40 * 0.002)
    assert p["total"] == pytest.approx(p["orchestrator"] + p["generator"])
    assert price_turn(_block((10, 0, 1, 1.0), None), {}) == {"total": 0.0}  # a role without a price is free


def test_summarize_kind_ratios_and_table() -> None:
    tandem = [_rec(_block((900, 768, 10, 2000.0), (120, 0, 40, 1500.0))),
              _rec(_block((880, 768, 6, 1000.0), None)),
              _rec(None, status="failed", error="http_503")]
    prompting = [_rec(_block(None, (100, 0, 50, 700.0))), _rec(_block(None, (110, 0, 60, 900.0)))]
    load = [{"users": 4, "turns_per_s": 0.5, "goodput_rps": 0.2, "goodput_fraction": 0.4}]
    alone = {"users": 1, "turns_per_s": 0.3, "goodput_rps": 0.3, "goodput_fraction": 1.0}
    t = summarize_kind(tandem, load, users=4, alone=alone, pricing=PRICING, gpu_hour_usd=3.6)
    assert (t["turns"], t["turns_failed"]) == (2, 1)
    assert t["calls_per_turn"] == {"p50": 1.5, "mean": 1.5}
    assert t["orchestrator_tokens_per_turn"] == {"p50": 898.0, "mean": 898.0}
    assert t["engine_s_per_turn"] == {"p50": 2.25, "mean": 2.25}
    assert t["by_purpose"]["generator.reply"]["calls_per_turn"] == 0.5
    assert (t["turns_per_s"], t["goodput_at_slo"], t["goodput_fraction_at_slo"]) == (0.5, 0.2, 0.4)
    assert [lv["users"] for lv in t["load"]] == [1, 4]
    assert t["production"]["usd_per_1k_turns"] == pytest.approx(t["production"]["gpu_s_per_turn"]["mean"], abs=1e-3)
    p = summarize_kind(prompting, [{"users": 4, "turns_per_s": 2.0, "goodput_rps": 1.0, "goodput_fraction": 0.9}],
                       users=4, alone=alone, pricing=PRICING)
    doc = build_doc({"tandem": t, "prompting": p}, {"slo": {"ttft_ms": 1000, "e2e_ms": 15000}})
    r = doc["ratios"]["tandem_over_prompting"]
    assert r["engine_s_per_turn"] == round(2.25 / 0.8, 4) and r["goodput_at_slo"] == 0.2
    assert r["orchestrator_tokens_per_turn"] is None  # prompting makes no orchestrator-role call
    assert r["tokens_per_turn"] == round((1070 + 886) / 2 / ((150 + 170) / 2), 4)
    table = format_table(doc)
    assert table.splitlines()[0].split()[:3] == ["kind", "turns", "calls"]
    assert "tandem_over_prompting: engine_s_per_turn 2.812" in table
    assert build_doc({"tandem": t}, {})["ratios"] == {}  # no prompting in the run: no ratios


def test_the_plot_is_written(tmp_path: Path) -> None:
    k = {"load": [{"users": 1, "goodput_rps": 0.3, "turns_per_s": 0.3}, {"users": 4, "goodput_rps": 0.2,
                                                                         "turns_per_s": 0.5}]}
    out = plot_goodput(tmp_path / "g.png", {"run": {"slo": {"ttft_ms": 1000, "e2e_ms": 15000}},
                                            "pipelines": {"tandem": k, "prompting": k}})
    assert out.stat().st_size > 1000


def test_goodput_of_turns_alone() -> None:
    recs = [_rec({}, e2e=1000.0, ttft=100.0), _rec({}, e2e=2000.0, ttft=1500.0),  # first token too late
            _rec({}, e2e=1000.0, ttft=None), _rec(None, e2e=1000.0, status="failed", error="x")]
    g = goodput_of(recs, SLO(ttft_ms=1000.0, e2e_ms=15000.0))
    assert g == {"users": 1, "requests": 4, "turns_per_s": 3 / 5.0, "goodput_rps": 1 / 5.0, "goodput_fraction": 0.25}
    assert goodput_of([], SLO())["goodput_fraction"] == 0.0


def test_a_load_level_keeps_the_server_side_split_of_its_turns() -> None:
    nan = float("nan")
    lat = {"ttft_ms": {"n": 4, "p50": 4600.0, "p90": 9000.0},
           "queue_ms": {"n": 4, "p50": 12.3456, "p90": 40.0},
           "server_first_token_ms": {"n": 4, "p50": 4500.0, "p90": 8800.0},
           "server_end_ms": {"n": 0, "p50": nan, "p90": nan},  # none reported it: left out
           "stage.w1": {"n": 3, "p50": 4100.0, "p90": 8000.0},
           "itl_ms": {"n": 9, "p50": 150.0, "p90": 300.0}}  # a client-side measure: not the server's
    assert server_split(lat) == {"queue_ms": {"p50": 12.346, "p90": 40.0},
                                 "server_first_token_ms": {"p50": 4500.0, "p90": 8800.0},
                                 "stage.w1": {"p50": 4100.0, "p90": 8000.0}}


def test_the_workload_interleaves_openings_with_whole_pack_sessions() -> None:
    from pipelines.domains import load_domain
    from serve.eval.suites import tau2_dir_of

    base = tau2_dir_of(load_domain("support"))
    if base is None or not (base / "tasks_train.json").is_file():
        pytest.skip("no tau2-retail tasks")
    w = cost_workload("support", pack_sessions=2)
    lens = [len(s) for s in w.sessions]
    assert lens[:2] == [1, 1] and lens[2] > 1  # two openings, then a whole session
    assert sum(1 for n in lens if n > 1) == 2
    assert all(n == 1 for n in (len(s) for s in cost_workload("support", pack_sessions=0).sessions))


@pytest.mark.parametrize(("text", "expected"), [
    ("before=tandem:w1_skip_forced_labels=false", ("before", "tandem", {"w1_skip_forced_labels": False})),
    ("b=tandem:max_steps=2, history_turns=0", ("b", "tandem", {"max_steps": 2, "history_turns": 0})),
    ("plain=prompting", ("plain", "prompting", {})),
])
def test_parse_variant(text: str, expected: tuple) -> None:
    assert parse_variant(text) == expected


@pytest.mark.parametrize("text", ["tandem", "=tandem", "x=", "x=tandem:oops"])
def test_a_bad_variant_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_variant(text)


def test_the_cli_refuses_bad_arguments_before_starting_anything(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--variant", "broken", "--out", str(tmp_path)]) == 2
    assert "expected LABEL=KIND" in capsys.readouterr().err
    assert main(["--pipelines", "tandem", "--variant", "tandem=prompting", "--out", str(tmp_path)]) == 2
    assert "its own label" in capsys.readouterr().err
    assert not (tmp_path / "cost.json").exists()


def test_the_pricing_table_of_the_h100_profile_is_read() -> None:
    from serve.cost.cli import _pricing

    table, usd, basis = _pricing(str(Path(__file__).resolve().parents[2] / "configs" / "h100.yaml"))
    assert set(table) == {"orchestrator", "generator", "slot_extractor"}
    assert table["orchestrator"]["decode_gpu_s_per_token"] > table["generator"]["decode_gpu_s_per_token"] > 0
    assert usd is None and "gpu-estimate" in basis
    json.dumps(table)


def test_a_price_for_a_role_that_does_not_exist_is_refused() -> None:
    from pydantic import ValidationError

    from serve.config import CostConfig

    with pytest.raises(ValidationError, match="unknown roles"):
        CostConfig.model_validate({"pricing": {"judge": {"decode_gpu_s_per_token": 0.1}}})
    with pytest.raises(ValidationError):
        CostConfig.model_validate({"pricing": {"generator": {"decode_gpu_s_per_token": -1}}})
    assert CostConfig.model_validate({}).pricing == {}


def test_what_was_measured_is_written_after_every_kind(tmp_path: Path) -> None:
    from serve.cost.cli import _write

    k = summarize_kind([_rec(_block(None, (100, 0, 50, 700.0)))], [], users=4,
                       alone={"users": 1, "turns_per_s": 1.0, "goodput_rps": 1.0, "goodput_fraction": 1.0},
                       pricing=PRICING)
    doc = _write(tmp_path / "out", {"prompting": k}, [{"kind": "prompting", "status": "ok"}],
                 {"slo": {"ttft_ms": 1000, "e2e_ms": 15000}})
    assert json.loads((tmp_path / "out" / "cost.json").read_text())["pipelines"]["prompting"]["turns"] == 1
    assert (tmp_path / "out" / "turns.jsonl").read_text().count("\n") == 1
    assert (tmp_path / "out" / "goodput.png").is_file() and doc["ratios"] == {}
