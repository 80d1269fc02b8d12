"""``tandem eval`` on the real embedded app: two tau2 openings through the tandem pipeline.

One app start (real Ray Serve + vLLM on the CPU, the bundled model). Checks the wiring
the unit tests fake: real SSE timings, real ``tandem.*`` events found by turn id, the
stored metas read back over the API, every turn judged, the files written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.own_ray]


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


def test_two_tau2_tasks_played_by_the_scripted_user(tmp_path: Path) -> None:
    """Whole tau2 tasks on the real app: the scripted user answers, the database check judges every task."""
    from pipelines.domains.support.replay import default_tau2_dir
    from serve.eval import main

    base = default_tau2_dir()
    if not (base / "tasks_train.json").is_file() or not (base / "db.json").is_file():
        pytest.skip(f"no tau2-retail tasks and db in {base}")
    out = tmp_path / "out"
    rc = main(["--pipelines", "tandem", "--suites", "tau2-tasks", "--limit", "2", "--warmup", "0",
               "--max-user-turns", "4", "--num-cpus", "4", "--out", str(out), "--workdir", str(tmp_path / "work")])
    assert rc == 0
    rows = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    tasks = [r["tau2_task"] for r in rows if r.get("tau2_task")]
    assert len(tasks) == 2 and {t["task_id"] for t in tasks} == {"0", "1"}
    for r in rows:
        assert not r.get("eval_error") and r["first_token_ms"] is not None, r
    for t in tasks:
        assert t["passed"] in (True, False) and t["compared"] >= 1  # the expected exchange changes one order
        assert t["ended"] in ("done", "escalated", "turn_cap", "stuck")
        assert 1 <= t["user_turns"] <= 4
    doc = json.loads((out / "summary.json").read_text())
    tt = doc["pipelines"]["tandem"]["tau2_tasks"]
    assert tt["tasks"] == 2 and tt["actions_expected"] == 2
    assert doc["pipelines"]["tandem"]["intent_accuracy"]["n"] == 2
