"""The local cluster's node plan and placement check (serve/cluster.py), from the cluster-dev profile."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.errors import ConfigError
from serve.cluster import check_placement, placement_of, plan_nodes
from serve.config import ServeFile, load_serve_file

REPO = Path(__file__).resolve().parents[2]
CLUSTER_DEV = REPO / "configs" / "cluster-dev.yaml"


def test_the_profile_places_every_part_on_a_custom_resource():
    need = placement_of(load_serve_file(CLUSTER_DEV))
    assert need["ingress"] == {"CPU": 0.1, "cpu_worker": 0.1}
    assert need["tools"] == {"CPU": 0.1, "cpu_worker": 0.1}
    assert need["rule_kernels"] == {"CPU": 0.1, "cpu_worker": 0.1}
    assert "guardrails" not in need  # the guard runs in the ingress (the default placement)
    assert need["model:smollm2"] == {"CPU": 1.0, "model_node": 1.0}


def test_the_plan_is_a_head_without_work_a_model_node_and_cpu_nodes():
    nodes = plan_nodes(load_serve_file(CLUSTER_DEV), 2)
    assert [(n.name, n.role) for n in nodes] == [("head", "head"), ("model", "model"), ("cpu-1", "cpu"),
                                                  ("cpu-2", "cpu")]
    head, model, cpu1, cpu2 = nodes
    assert head.num_cpus == 0 and head.resources == {}
    assert model.resources == {"model_node": 1.0} and model.num_cpus == 1.0
    # one CPU node takes every CPU part when the other is lost (3 parts x 0.1, twice over: 0.6),
    # rounded up to Ray's whole quantities
    assert cpu1.resources == {"cpu_worker": 1.0} and cpu2 == type(cpu2)("cpu-2", "cpu", 1.0, {"cpu_worker": 1.0})


def test_placement_puts_the_ingress_on_cpu_nodes_only():
    sf = load_serve_file(CLUSTER_DEV)
    where = check_placement(sf, plan_nodes(sf, 2))
    assert where["ingress"] == ["cpu-1", "cpu-2"]
    assert where["tools"] == ["cpu-1", "cpu-2"]
    assert where["model:smollm2"] == ["model"]


def _raw() -> dict:
    return yaml.safe_load(CLUSTER_DEV.read_text())


def test_two_ingress_replicas_one_per_node_need_two_cpu_nodes():
    sf = load_serve_file(CLUSTER_DEV)
    with pytest.raises(ConfigError, match="2 replicas, at most 1 per node, on 1 node"):
        check_placement(sf, plan_nodes(sf, 1))


def test_a_file_that_pins_nothing_is_refused():
    raw = _raw()
    raw["applications"][0]["args"]["deployments"]["tools"]["resources"] = {}
    with pytest.raises(ConfigError, match="tools: no model_node / cpu_worker resource"):
        plan_nodes(ServeFile.model_validate(raw), 2)


def test_no_cpu_node_is_refused():
    with pytest.raises(ConfigError, match="at least one CPU node"):
        plan_nodes(load_serve_file(CLUSTER_DEV), 0)


def test_tandem_run_takes_a_cluster_size():
    from serve.cli import build_parser

    ns = build_parser().parse_args(["run", "configs/cluster-dev.yaml", "--cluster", "2", "--gcs-ft"])
    assert (ns.cluster, ns.gcs_ft, ns.config) == (2, True, "configs/cluster-dev.yaml")
    assert build_parser().parse_args(["run"]).cluster == 0  # one node, as before


class _FlakyRay:
    """Ray's ``Cluster.add_node`` failing ``fails`` times first, as a raylet that crashes while it starts."""

    def __init__(self, fails: int) -> None:
        self.fails, self.calls = fails, []

    def add_node(self, **kw):
        self.calls.append(kw)
        if len(self.calls) <= self.fails:
            raise Exception("The current node timed out during startup.")
        return "node-handle"


def _bare_cluster(monkeypatch, fails: int, *, new_pids=(900, 901)):
    from serve import cluster as mod
    from serve.eval import runner

    lc = mod.LocalCluster.__new__(mod.LocalCluster)
    lc.cluster, lc.node_start_attempts = _FlakyRay(fails), 3
    seen = iter([{1}, {1, *new_pids}] * 5)  # before / after each failed attempt
    monkeypatch.setattr(runner, "descendants", lambda root: next(seen))
    killed, slept = [], []
    monkeypatch.setattr(mod.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    monkeypatch.setattr(mod.time, "sleep", slept.append)
    spec = mod.NodeSpec("cpu-1", "cpu", 1.0, {"cpu_worker": 1.0})
    return lc, spec, killed, slept


def test_a_node_that_crashes_while_starting_is_cleaned_up_and_started_again(monkeypatch):
    lc, spec, killed, slept = _bare_cluster(monkeypatch, fails=2)
    assert lc._start_node(spec, wait=True) == "node-handle"
    assert len(lc.cluster.calls) == 3 and lc.cluster.calls[0]["resources"] == {"cpu_worker": 1.0}
    assert lc.cluster.calls[0]["wait"] is True and lc.cluster.calls[0]["num_cpus"] == 1.0
    # only what each failed attempt started is killed, never this process or what was there before
    assert killed == [(901, 9), (900, 9)] * 2
    assert slept == [2.0, 4.0]


def test_a_node_that_never_starts_fails_after_the_bounded_attempts(monkeypatch):
    lc, spec, killed, slept = _bare_cluster(monkeypatch, fails=3)
    with pytest.raises(RuntimeError, match=r"node cpu-1 did not start in 3 attempts: The current node timed out"):
        lc._start_node(spec, wait=False)
    assert len(lc.cluster.calls) == 3 and all(c["wait"] is False for c in lc.cluster.calls)
    assert len(killed) == 6 and slept == [2.0, 4.0]


def test_shared_memory_seen_held_before_a_fault_is_removed_at_shutdown_though_its_holder_died(monkeypatch, tmp_path):
    from serve import cluster as mod
    from serve.eval import runner

    lc = mod.LocalCluster.__new__(mod.LocalCluster)
    lc.cluster, lc._shm_before, lc._shm_held, lc._env_before = None, {"psm_other"}, set(), {}
    lc._own_tmp, lc.workdir = False, tmp_path
    lc.redis = type("R", (), {"stop": lambda self: None})()
    held = iter([{"psm_engine", "psm_other"}, set()])  # before the fault: the engine's; at shutdown: nothing held
    monkeypatch.setattr(runner, "descendants", lambda root: {1})
    monkeypatch.setattr(runner, "shm_held_by", lambda pids: next(held))
    monkeypatch.setattr(runner, "shm_names", lambda: {"psm_engine", "psm_other", "psm_someone_elses"})
    monkeypatch.setattr(mod.time, "sleep", lambda s: None)
    removed = []
    monkeypatch.setattr(mod.os, "unlink", removed.append)
    lc.snapshot_shm()
    lc.shutdown()
    assert removed == ["/dev/shm/psm_engine"]  # never one there before, never one this tree never held


def test_the_shm_files_a_process_holds_are_found_by_their_kind(tmp_path):
    """psm_* (shared memory), sem.mp-* (multiprocessing) and sem.loky-* (loky) files this process holds open are
    found; another name in /dev/shm is never ours to remove."""
    import os
    import uuid

    from serve.eval.runner import shm_held_by, shm_held_here, shm_names

    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    tag = uuid.uuid4().hex[:8]
    names = [f"psm_t{tag}", f"sem.mp-t{tag}", f"sem.loky-t{tag}", f"other-t{tag}"]
    files = [open(os.path.join("/dev/shm", n), "w") for n in names]  # noqa: SIM115 - held open for the check
    try:
        held = shm_held_by({os.getpid()})
        assert {n for n in names if n in held} == set(names[:3])
        assert set(names[:3]) <= shm_held_here() and set(names[:3]) <= shm_names()
        assert names[3] not in shm_names()
    finally:
        for f, n in zip(files, names, strict=True):
            f.close()
            os.unlink(os.path.join("/dev/shm", n))
