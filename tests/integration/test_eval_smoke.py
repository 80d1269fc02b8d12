"""``tandem eval`` on the real embedded app: two tau2 openings through the tandem pipeline.

One app start (real Ray Serve + vLLM on the CPU, the bundled model). Checks the wiring
the unit tests fake: real SSE timings, real ``tandem.*`` events found by turn id, the
stored metas read back over the API, every turn judged, the files written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_two_tau2_openings_through_tandem(tmp_path: Path) -> None:
    from pipelines.domains.support.replay import default_tau2_dir
    from serve.eval import main

    base = default_tau2_dir()
    if not (base / "tasks_train.json").is_file():
        pytest.skip(f"no tau2-retail tasks in {base}")
    out = tmp_path / "out"
    rc = main(["--pipelines", "tandem", "--suites", "tau2-openings", "--limit", "2", "--warmup", "0",
               "--num-cpus", "4", "--out", str(out), "--workdir", str(tmp_path / "work")])
    assert rc == 0
    rows = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for r in rows:
        assert not r.get("eval_error") and r["status"] in ("ok", "fallback"), r
        assert r["first_token_ms"] is not None and r["first_token_ms"] <= r["e2e_ms"]
        assert r["correct"] is not None and r["terminal"] is not None  # the events were found and judged
        assert r["phi"], r  # W1 ran and Φ was looked up
        assert r["invented"] == [] and r["unrequested"] == [] and r["unselected"] == []
    doc = json.loads((out / "summary.json").read_text())
    tandem = doc["pipelines"]["tandem"]
    assert tandem["turns"] == 2 and tandem["first_token_ms"]["n"] == 2
    assert doc["run"]["apps"][0]["kind"] == "tandem" and "ready_s" in doc["run"]["apps"][0]
    assert (out / "summary.md").is_file() and (out / "first_token_cdf.png").is_file()
