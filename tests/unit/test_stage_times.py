"""`make test`'s stage timer: each stage's seconds and exit status recorded, the command's status passed on."""

from __future__ import annotations

import json
import sys

from tests import stage_times


def test_stages_are_recorded_in_order_with_their_status(tmp_path, capsys):
    path = tmp_path / "times.json"
    stage_times.start(path)
    assert stage_times.main(["run", str(path), "ok", "--", sys.executable, "-c", "pass"]) == 0
    assert stage_times.main(["run", str(path), "bad", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    stages = json.loads(path.read_text())["stages"]
    assert [(s["stage"], s["rc"]) for s in stages] == [("ok", 0), ("bad", 3)]
    assert all(s["seconds"] >= 0 for s in stages)
    assert "(exit 3)" in capsys.readouterr().err  # a failing stage prints the table so far


def test_start_begins_a_fresh_record(tmp_path):
    path = tmp_path / "times.json"
    stage_times.start(path)
    stage_times.run(path, "one", [sys.executable, "-c", "pass"])
    stage_times.start(path)
    assert json.loads(path.read_text())["stages"] == []


def test_the_report_sums_the_stages(tmp_path):
    path = tmp_path / "times.json"
    path.write_text(json.dumps({"stages": [{"stage": "unit", "seconds": 30.0, "rc": 0},
                                           {"stage": "integration", "seconds": 90.0, "rc": 0}]}))
    lines = stage_times.report(path).splitlines()
    assert lines[1].split() == ["unit", "30.0", "25.0%"] and lines[2].split() == ["integration", "90.0", "75.0%"]
    assert lines[-1].split() == ["total", "120.0", "(2", "min", "0", "s)"]


def test_bad_usage_is_refused(tmp_path):
    assert stage_times.main([]) == 2
    assert stage_times.main(["run", str(tmp_path / "t.json"), "x"]) == 2  # no command
    assert stage_times.main(["frobnicate", str(tmp_path / "t.json")]) == 2
