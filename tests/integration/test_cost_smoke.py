"""``tandem cost``'s measurement on the session's cluster: a tandem app and a prompting app on the shared engine,
two turns alone and one two-user load level each, then ``cost.json``, the table and the plot.

Checks the wiring the unit tests fake: the engine's usage reaches each turn's ``done`` event (cached prompt
tokens and engine time from vLLM itself), the tandem turn's W1 calls are accounted to the orchestrator role,
and the report holds every field ``tandem cost`` promises.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import start_app

pytestmark = pytest.mark.integration

FIELDS = ("turns", "calls_per_turn", "prompt_tokens_per_turn", "cached_prompt_tokens_per_turn",
          "decode_tokens_per_turn", "orchestrator_tokens_per_turn", "engine_s_per_turn", "turns_per_s",
          "goodput_at_slo")


def _measure(tmp: Path, kind: str, workload, ns, pricing) -> tuple[dict, list[dict]]:
    from serve.cost.cli import measure_app

    gen = start_app(tmp / kind, {"pipeline": {"kind": kind}})
    app = next(gen)
    try:
        return measure_app(app.http, kind, workload, ns, pricing=pricing, gpu_hour_usd=None)
    finally:
        gen.close()


def test_cost_of_tandem_and_prompting_turns(tmp_path: Path) -> None:
    from serve.cost.cli import _pricing, build_parser
    from serve.cost.measure import cost_workload
    from serve.cost.report import build_doc, format_table, plot_goodput

    ns = build_parser().parse_args(["--turns", "2", "--users", "2", "--load-turns", "2", "--warmup", "1",
                                    "--slo-ttft-ms", "5000", "--slo-e2e-ms", "120000"])
    pricing, _, _ = _pricing(ns.pricing)
    workload = cost_workload("support", pack_sessions=1)
    kinds, rows = {}, []
    for kind in ("tandem", "prompting"):
        kinds[kind], got = _measure(tmp_path, kind, workload, ns, pricing)
        rows += got
    doc = build_doc(kinds, {"slo": {"ttft_ms": ns.slo_ttft_ms, "e2e_ms": ns.slo_e2e_ms}})
    (tmp_path / "cost.json").write_text(json.dumps(doc))
    assert plot_goodput(tmp_path / "goodput.png", doc).stat().st_size > 1000
    print(format_table(doc))

    for r in rows:  # every turn alone came back with the engine's usage
        assert r["status"] in ("ok", "fallback") and r["error"] is None, r
        c = r["cost"]
        assert c["calls"] >= 1 and c["prompt_tokens"] > 0 and c["decode_tokens"] > 0 and c["engine_ms"] > 0, c
        assert sum(t["calls"] for t in c["by_purpose"].values()) == c["calls"]
    tandem = [r["cost"] for r in rows if r["kind"] == "tandem"]
    prompting = [r["cost"] for r in rows if r["kind"] == "prompting"]
    assert all("orchestrator" in c["by_role"] for c in tandem)  # W1 at least
    assert all(p.startswith(("w1.", "orchestrator.", "generator.", "w2.")) for c in tandem for p in c["by_purpose"])
    assert all(set(c["by_role"]) == {"generator"} and c["calls"] == 1 for c in prompting)
    assert any(c["cached_prompt_tokens"] > 0 for c in tandem)  # the head is served from the prefix cache

    for kind in ("tandem", "prompting"):
        k = doc["pipelines"][kind]
        assert all(f in k for f in FIELDS) and k["turns"] == 2
        assert k["engine_s_per_turn"]["mean"] > 0 and k["production"]["gpu_s_per_turn"]["mean"] > 0
        assert [lv["users"] for lv in k["load"]] == [1, 2] and k["load"][1]["requests"] == 2
    r = doc["ratios"]["tandem_over_prompting"]
    assert r["engine_s_per_turn"] is not None and r["orchestrator_tokens_per_turn"] is None
