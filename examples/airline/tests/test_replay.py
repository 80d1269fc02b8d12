"""Every expected action of tau2-airline's train tasks replays through the pack's tools with the database
tau2 expects; the refusals are the reviewed findings below."""

import sys
from pathlib import Path

import pytest
from tandem_airline.data import default_data_dir
from tandem_airline.pack import AirlinePack
from tandem_airline.replay import AirlineReplay

from pipelines.domain import replay_file
from pipelines.domains import register, unregister

DATA = default_data_dir()
pytestmark = pytest.mark.skipif(not (DATA / "tasks_train.json").is_file(),
                                reason="tau2-airline data not found (set TANDEM_AIRLINE_DIR)")

# Refusals by the policy rules, each reviewed against policy.md: (task id, action id) -> reason.
# Task 7: XEHM4B is upgraded from basic economy to economy, then cancelled: booked 2024-05-01, no
# insurance, not business - outside every cancellation rule; 59XX6W is insured, but the reason
# (health / weather) is only in the conversation, never in the action. Task 9: NQNU5R's flights
# landed on 2024-05-13 / 14 (the policy: "if any portion of the flight has already been flown, the agent
# cannot help"). Task 39: MSJ4OA is insured economy booked 2024-05-05; no covered reason in the action.
EXPECTED_REFUSALS = {
    ("7", "7_3"): "not_cancellable",
    ("7", "7_4"): "not_cancellable",
    ("9", "9_0"): "already_flown",
    ("39", "39_10"): "not_cancellable",
}


@pytest.fixture(scope="module")
def report():
    return replay_file(DATA, AirlinePack().task_replay(DATA))


def test_no_task_mismatches(report):
    bad = [(t.task_id, a.action_id, a.reason, a.detail) for t in report.tasks for a in t.actions
           if a.status == "mismatch"]
    assert bad == [] and report.counts["mismatch"] == 0


def test_refusals_are_exactly_the_reviewed_ones(report):
    refusals = {(t.task_id, a.action_id): a.reason for t in report.tasks for a in t.actions if a.status == "refused"}
    assert refusals == EXPECTED_REFUSALS


def test_every_task_is_accounted_for(report):
    assert len(report.tasks) == 30
    assert report.counts["ok"] + report.counts["refused"] == 30


class _WrongOracle(AirlineReplay):
    """A hook whose oracle forgets the refunds of a cancellation: the replay must call that a mismatch."""

    def expected_changes(self, name, args, pre):
        out = super().expected_changes(name, args, pre)
        for res in out.get("reservations", {}).values():
            res["payment_history"] = res["payment_history"][:1]
        return out


class _Pack(AirlinePack):
    def task_replay(self, tau2_dir=None):
        return _WrongOracle(tau2_dir)


def test_the_script_exits_non_zero_on_a_mismatch(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    import tau2_replay

    assert tau2_replay.main(["--domain", "airline", "--tau2-dir", str(DATA), "--out", str(tmp_path / "a.json")]) == 0
    register("airline_wrong_oracle", _Pack)
    try:
        code = tau2_replay.main(["--domain", "airline_wrong_oracle", "--tau2-dir", str(DATA),
                                 "--out", str(tmp_path / "b.json")])
    finally:
        unregister("airline_wrong_oracle")
    assert code == 1
    assert tau2_replay.main(["--domain", "no_such_pack"]) == 2
