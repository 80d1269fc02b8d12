"""tau2 task scoring: the database check, intent accuracy against a task's label, the summary block."""

from __future__ import annotations

import json

import pytest

from pipelines.domains import load_domain
from pipelines.domains.support.replay import default_tau2_dir
from serve.eval.evaluate import intent_matches
from serve.eval.report import markdown, summary_doc
from serve.eval.tau2_db import db_check, expected_world

TAU2 = default_tau2_dir()


@pytest.fixture(scope="module")
def data():
    if not (TAU2 / "db.json").is_file() or not (TAU2 / "tasks_train.json").is_file():
        pytest.skip(f"tau2-retail data not found in {TAU2} (set TANDEM_TAU2_DIR)")
    return json.loads((TAU2 / "db.json").read_text()), json.loads((TAU2 / "tasks_train.json").read_text())


def _task(order_id, reason="no longer needed"):
    return {"id": "x", "evaluation_criteria": {"actions": [
        {"action_id": "x0", "name": "cancel_pending_order", "arguments": {"order_id": order_id, "reason": reason}}]}}


def _pending(db):
    return next(o for o in db["orders"].values() if o["status"] == "pending")


def test_untouched_world_fails_and_the_replayed_world_passes(data):
    db, _ = data
    pack = load_domain("support")
    order = _pending(db)
    task = _task(order["order_id"])
    fresh = pack.new_world(0, dataset=str(TAU2 / "db.json"))
    untouched = db_check(pack, TAU2 / "db.json", task, lambda k, key: json.loads(fresh.entity_json(k, key)), db=db)
    assert untouched["passed"] is False and f"order:{order['order_id']}" in untouched["differ"]
    done = expected_world(pack, TAU2 / "db.json", task, db)
    assert done.orders[order["order_id"]].status == "cancelled"
    ok = db_check(pack, TAU2 / "db.json", task, lambda k, key: json.loads(done.entity_json(k, key)),
                  [("cancel_pending_order", {"order_id": order["order_id"], "reason": "no longer needed"})], db=db)
    assert ok["passed"] is True and ok["differ"] == []


def test_a_session_write_the_task_did_not_expect_fails_the_check(data):
    db, _ = data
    pack = load_domain("support")
    order = _pending(db)
    other = next(o for o in db["orders"].values() if o["status"] == "pending" and o["order_id"] != order["order_id"])
    live = expected_world(pack, TAU2 / "db.json", _task(other["order_id"]), db)  # the wrong order cancelled
    res = db_check(pack, TAU2 / "db.json", {"id": "y", "evaluation_criteria": {"actions": []}},
                   lambda k, key: json.loads(live.entity_json(k, key)),
                   [("cancel_pending_order", {"order_id": other["order_id"], "reason": "ordered by mistake"})], db=db)
    assert res["passed"] is False and res["differ"] == [f"order:{other['order_id']}"]


def test_intent_matches_the_label_through_the_pack_cards():
    pack = load_domain("support")
    assert intent_matches(pack, "cancel", "cancel", "order") is True
    assert intent_matches(pack, "modify address", "modify", "address") is True
    assert intent_matches(pack, "modify address", "modify", "items") is False
    assert intent_matches(pack, "modify address", "account", "address") is True
    assert intent_matches(pack, "return", "order_status", "status") is False
    assert intent_matches(pack, "status only", "order_status", "status") is True
    assert intent_matches(pack, "status only", "cancel", "order") is False
    assert intent_matches(pack, "exchange", None) is None


def test_summary_gains_tau2_tasks_and_intent_accuracy():
    def row(case, turn, **kw):
        return {"kind": "tandem", "suite": "tau2-tasks", "case": case, "turn": turn, "e2e_ms": 100.0 * (turn + 1),
                "first_token_ms": 10.0, **kw}

    rows = [row("task-1", 0, intent_ok=True), row("task-1", 1), row("task-1", 2, tau2_task={
                "passed": True, "actions_expected": 1, "actions_matched": 1, "cards_refused": 0,
                "repeated_asks": 1, "ended": "done"}),
            row("task-2", 0, intent_ok=False, tau2_task={
                "passed": False, "actions_expected": 2, "actions_matched": 0, "cards_refused": 1,
                "repeated_asks": 0, "ended": "escalated"})]
    doc = summary_doc(rows, {})
    t = doc["pipelines"]["tandem"]["tau2_tasks"]
    assert (t["tasks"], t["passed"], t["pass_rate"]) == (2, 1, 50.0)
    assert (t["actions_expected"], t["actions_matched"], t["cards_refused"], t["repeated_asks"]) == (3, 1, 1, 1)
    assert t["turns_p50"] == 2.0 and t["ended"] == {"done": 1, "escalated": 1}
    assert doc["pipelines"]["tandem"]["intent_accuracy"] == {"n": 2, "ok": 1, "pct": 50.0}


def test_summary_keeps_the_user_the_perception_the_new_measures_and_each_half():
    def row(case, half, **task):
        return {"kind": "tandem", "suite": "tau2-tasks", "case": case, "turn": 0, "e2e_ms": 10.0, "first_token_ms": 1.0,
                "info": {"half": half}, "tau2_task": {"user": "instructed", "perception": "oracle", "half": half,
                                                      "actions_expected": 1, **task}}

    rows = [row("a", "studied", passed=True, first_card_ok=True, reoffered_after_no=0, readback_missing=1),
            row("b", "studied", passed=False, first_card_ok=False, reoffered_after_no=2, readback_missing=0),
            row("c", "measured", passed=True, first_card_ok=None, reoffered_after_no=0, readback_missing=0)]
    t = summary_doc(rows, {})["pipelines"]["tandem"]["tau2_tasks"]
    assert (t["user"], t["perception"]) == ("instructed", "oracle")
    assert (t["reoffered_after_no"], t["readback_missing"]) == (2, 1)
    assert t["first_card_ok"] == {"n": 2, "ok": 1, "pct": 50.0}  # a task with no write is not judged
    assert {h: (v["tasks"], v["passed"]) for h, v in t["halves"].items()} == {"measured": (1, 1), "studied": (2, 1)}
    assert "halves" not in t["halves"]["studied"]
    mixed = summary_doc([*rows, {**row("d", "measured", passed=True), "tau2_task": {
        "user": "informed", "perception": "oracle", "half": "measured", "passed": True}}], {})
    assert list(mixed["pipelines"]["tandem"]["tau2_tasks"]["by_run"]) == ["instructed/oracle", "informed/oracle"]


def test_intent_accuracy_comes_from_the_openings_suite_without_whole_tasks():
    def row(suite, case, turn, **kw):
        return {"kind": "tandem", "suite": suite, "case": case, "turn": turn, "e2e_ms": 100.0,
                "first_token_ms": 10.0, **kw}

    openings = [row("tau2-openings", "task-1", 0, intent_label="cancel", intent_ok=True),
                row("tau2-openings", "task-2", 0, intent_label="return", intent_ok=False),
                row("tau2-openings", "task-3", 0, intent_label="return", intent_ok=True),
                row("tau2-openings", "task-4", 0)]  # a task without a label: not judged
    doc = summary_doc(openings, {})
    assert doc["pipelines"]["tandem"]["intent_accuracy"] == {"n": 3, "ok": 2, "pct": 66.7}
    assert doc["pipelines"]["tandem"]["suites"]["tau2-openings"]["intent_accuracy"] == {"n": 3, "ok": 2, "pct": 66.7}
    from serve.eval.report import markdown

    table = markdown(doc)
    assert "| intent acc |" in table and "2/3 (66.7%)" in table
    # with whole tasks in the same run, the pipeline's figure is the tasks' openings (the same texts)
    tasks = [row("tau2-tasks", "task-1", 0, intent_ok=False), row("tau2-tasks", "task-1", 1, intent_ok=True)]
    doc = summary_doc(openings + tasks, {})
    assert doc["pipelines"]["tandem"]["intent_accuracy"] == {"n": 1, "ok": 0, "pct": 0.0}


def test_the_openings_suite_carries_each_tasks_intent_label(data):
    from pipelines.core.evaluation import PackEvaluation, evaluation_of
    from pipelines.domains.support.tau2_user import intent_label
    from serve.eval.suites import tau2_suite

    _, tasks = data
    kit = evaluation_of(load_domain("support"))
    cases = tau2_suite(TAU2, 3, kit=kit)
    assert [c.info["intent_label"] for c in cases] == [
        intent_label(t["evaluation_criteria"]["actions"] or []) for t in tasks[:3]]
    assert all("intent_label" not in c.info for c in tau2_suite(TAU2, 3, kit=PackEvaluation()))  # no labels
    assert all("intent_label" not in c.info for c in tau2_suite(TAU2, 3))


def test_several_users_and_perceptions_in_one_run_are_summarised_apart_under_by_run():
    def task(case, user, perception, passed):
        run = f"{user}/{perception}"
        return [{"kind": "tandem", "suite": "tau2-tasks", "case": case, "turn": 0, "e2e_ms": 1.0, "run": run,
                 "first_token_ms": 1.0, "tau2_task": {"user": user, "perception": perception, "passed": passed,
                                                      "actions_expected": 1}}]

    rows = [*task("a", "instructed", "oracle", True), *task("a", "instructed", "model", False),
            *task("b", "instructed", "oracle", True), *task("b", "instructed", "model", True)]
    t = summary_doc(rows, {})["pipelines"]["tandem"]["tau2_tasks"]
    assert (t["user"], t["perception"], t["passed"], t["tasks"]) == ("instructed", "oracle", 2, 2)  # the first played
    assert {r: (v["passed"], v["tasks"]) for r, v in t["by_run"].items()} == {
        "instructed/oracle": (2, 2), "instructed/model": (1, 2)}
    md = markdown(summary_doc(rows, {}))
    assert "| tandem | instructed | oracle | all | 2 | 2/2 (100%) |" in md
    assert "| tandem | instructed | model | all | 2 | 1/2 (50%) |" in md
