"""Every whole tau2 task starts from the seeded world: the evaluator resets it first, and a reset that fails is
reported on the task (never played on a world another task changed) while the run goes on."""

from __future__ import annotations

import pytest

from pipelines.core.evaluation import Case
from pipelines.domains import load_domain
from serve.eval.evaluate import Evaluator
from serve.eval.runner import EventLog
from serve.eval.suites import tau2_dir_of

TAU2 = tau2_dir_of(load_domain("support"))
pytestmark = pytest.mark.skipif(TAU2 is None or not (TAU2 / "tasks_train.json").is_file(),
                                reason="tau2-retail data not found")


def test_a_failed_world_reset_is_reported_on_its_task_and_nothing_is_played(tmp_path):
    import json

    task_id = json.loads((TAU2 / "tasks_train.json").read_text())[0]["id"]
    played = []

    def reset():
        raise RuntimeError("the tools deployment is gone")

    ev = Evaluator("tandem", "support", "http://127.0.0.1:9", EventLog(tmp_path), reset=reset)
    ev._turn = lambda *a, **k: played.append(a)  # type: ignore[method-assign]
    seen = []
    rows = ev.run_task(Case("tau2-tasks", "task-x", (), {"tau2_dir": str(TAU2), "task_id": str(task_id)}),
                       on_row=seen.append)
    ev.close()
    assert played == [] and rows == seen
    [row] = rows
    assert row["eval_error"].startswith("world reset failed: RuntimeError")
    assert row["tau2_task"] == {"task_id": str(task_id), "passed": None, "ended": "reset_failed"}


def test_an_app_without_a_tools_deployment_has_no_world_to_reset(monkeypatch, tmp_path):
    from serve.eval.runner import LocalApps

    apps = LocalApps(tmp_path / "c.yaml", tmp_path)

    def missing(method, *args, **kw):
        raise KeyError("Deployment(name='ToolsServer', app='tandem') does not exist.")

    monkeypatch.setattr(apps, "_tools", missing)
    apps.reset_world()  # the prompting kind: nothing to reset, the task is played

    def other(method, *args, **kw):
        raise KeyError("something else")

    monkeypatch.setattr(apps, "_tools", other)
    with pytest.raises(KeyError):
        apps.reset_world()
