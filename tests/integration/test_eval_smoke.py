"""``tandem eval`` on the real embedded app: two tau2 openings and two whole tau2 tasks through the tandem
pipeline, in one run (one app start).

One app start (real Ray Serve + vLLM on the CPU, the bundled model). Checks the wiring
the unit tests fake: real SSE timings, real ``tandem.*`` events found by turn id, the
stored metas read back over the API, every turn judged, the files written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.own_ray]


def test_two_openings_and_two_whole_tasks_through_tandem(tmp_path: Path) -> None:
    from pipelines.domains.support.replay import default_tau2_dir
    from serve.eval import main

    base = default_tau2_dir()
    if not (base / "tasks_train.json").is_file() or not (base / "db.json").is_file():
        pytest.skip(f"no tau2-retail tasks and db in {base}")
    out = tmp_path / "out"
    rc = main(["--pipelines", "tandem", "--suites", "tau2-openings,tau2-tasks", "--limit", "2", "--warmup", "0",
               "--max-user-turns", "4", "--num-cpus", "4", "--out", str(out), "--workdir", str(tmp_path / "work"),
               "--perception", "oracle"])
    assert rc == 0
    rows = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    for r in rows:
        assert not r.get("eval_error") and r["first_token_ms"] is not None, r
        assert r["first_token_ms"] <= r["e2e_ms"]
    doc = json.loads((out / "summary.json").read_text())
    tandem = doc["pipelines"]["tandem"]
    assert doc["run"]["apps"][0]["kind"] == "tandem" and "ready_s" in doc["run"]["apps"][0]
    assert (out / "summary.md").is_file() and (out / "first_token_cdf.png").is_file()

    # the openings: one turn each, every one judged from its events
    openings = [r for r in rows if r["suite"] == "tau2-openings"]
    assert len(openings) == 2 and tandem["suites"]["tau2-openings"]["turns"] == 2
    for r in openings:
        assert r["status"] in ("ok", "fallback"), r
        assert r["correct"] is not None and r["terminal"] is not None  # the events were found and judged
        assert r["phi"], r  # W1 ran and Φ was looked up
        assert r["invented"] == [] and r["unrequested"] == [] and r["unselected"] == []

    # the tasks: played by the scripted user, judged by the database check
    tasks = [r["tau2_task"] for r in rows if r.get("tau2_task")]
    assert len(tasks) == 2 and {t["task_id"] for t in tasks} == {"0", "1"}
    for t in tasks:
        assert t["passed"] in (True, False) and t["compared"] >= 1  # the expected exchange changes one order
        assert t["ended"] in ("done", "escalated", "turn_cap", "stuck")
        assert 1 <= t["user_turns"] <= 4
    tt = tandem["tau2_tasks"]
    assert tt["tasks"] == 2 and tt["actions_expected"] == 2
    # the instructed user, the request's own labels on every turn of the tasks (the app took them)
    assert (tt["user"], tt["perception"]) == ("instructed", "oracle")
    assert {"reoffered_after_no", "readback_missing", "first_card_ok", "halves"} <= set(tt)
    labelled = [r for r in rows if r["suite"] == "tau2-tasks" and r.get("oracle_labels")]
    assert labelled and all(r["status"] != "failed" or r.get("error") is None for r in labelled)
    assert {tuple(r["oracle_labels"]) for r in labelled} <= {("exchange", "items"), ("order_status", "status")}
    assert tandem["intent_accuracy"]["n"] == 2
