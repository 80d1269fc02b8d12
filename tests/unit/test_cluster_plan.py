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
