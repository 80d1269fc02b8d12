"""Deployment, autoscaling and request-router options: Ray Serve's own models, unknown keys refused."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from ray.serve.schema import DeploymentSchema, RayActorOptionsSchema

from models.config import (
    NOT_DEPLOYMENT_OPTIONS,
    AutoscalingConfig,
    DeploymentOptions,
    ModelDeploymentConfig,
)
from pipelines.errors import ConfigError
from serve.config import load_serve_file, parse_app_config

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "configs" / "embedded.yaml"
H100 = ROOT / "configs" / "h100.yaml"
AFFINITY = "ray.serve.llm.request_router.PrefixCacheAffinityRouter"


def _args() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(EMBEDDED.read_text())["applications"][0]["args"])


def _parse_error(args: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as ei:
        parse_app_config(args)
    return ei.value.message


# -- autoscaling -------------------------------------------------------------------------


def test_every_ray_autoscaling_option_is_accepted_and_passed_on() -> None:
    given = {
        "min_replicas": 0, "max_replicas": 4, "initial_replicas": 1, "target_ongoing_requests": 3.0,
        "upscale_delay_s": 1.0, "downscale_delay_s": 20.0, "downscale_to_zero_delay_s": 300.0,
        "upscaling_factor": 1.5, "downscaling_factor": 0.5, "aggregation_function": "max",
        "policy": {"policy_function": "ray.serve.autoscaling_policy:default_autoscaling_policy",
                   "policy_kwargs": {"k": 1}},
    }
    assert AutoscalingConfig(**given).to_ray() == given
    opts = DeploymentOptions(autoscaling=given).to_serve_options()
    assert opts["autoscaling_config"] == given and "num_replicas" not in opts


def test_only_what_was_set_reaches_ray() -> None:
    assert AutoscalingConfig(max_replicas=2).to_ray() == {"max_replicas": 2}


@pytest.mark.parametrize("where, bad", [
    (("ingress", "autoscaling"), "aggregation_functon"),
    (("ingress", "autoscaling", "policy"), "policy_fn"),
    (("ingress",), "request_router"),
    (("models", "smollm2", "deployment"), "max_replica_per_node"),
])
def test_a_misspelt_ray_option_fails_with_its_path(where: tuple[str, ...], bad: str) -> None:
    args = _args()
    node = args
    for key in where:
        node = node.setdefault(key, {})
    node[bad] = 1
    assert f"args.{'.'.join(where)}.{bad}: unknown key" in _parse_error(args)


def test_ray_value_rules_apply() -> None:
    with pytest.raises(ValidationError, match="must be greater than"):
        AutoscalingConfig(min_replicas=3, max_replicas=2)
    with pytest.raises(ValidationError):
        AutoscalingConfig(aggregation_function="median")  # not one of Ray's aggregation functions
    assert AutoscalingConfig(min_replicas=2, max_replicas=2).max_replicas == 2  # the boundary


def test_an_autoscaling_policy_that_does_not_import_is_refused() -> None:
    args = _args()
    args["ingress"]["autoscaling"]["policy"] = {"policy_function": "no_such_module_xyz:policy"}
    assert "cannot import no_such_module_xyz:policy" in _parse_error(args)


# -- request router ----------------------------------------------------------------------


def test_the_prefix_cache_affinity_router_is_accepted_with_its_kwargs() -> None:
    opts = DeploymentOptions(num_cpus=0, request_router_config={
        "request_router_class": AFFINITY, "request_router_kwargs": {"imbalanced_threshold": 8}}).to_serve_options()
    assert opts["request_router_config"] == {"request_router_class": AFFINITY,
                                             "request_router_kwargs": {"imbalanced_threshold": 8}}


@pytest.mark.parametrize("cls, problem", [
    ("no_such_module_xyz.Router", "cannot import no_such_module_xyz.Router"),
    ("ray.serve.config.NoSuchRouter", "cannot import ray.serve.config.NoSuchRouter"),
    ("ray.serve.config.AutoscalingConfig", "is not a ray.serve RequestRouter"),
])
def test_a_router_class_must_import_and_be_a_request_router(cls: str, problem: str) -> None:
    args = _args()
    args["models"]["smollm2"]["deployment"]["request_router_config"] = {"request_router_class": cls}
    msg = _parse_error(args)
    assert "args.models.smollm2.deployment.request_router_config" in msg and problem in msg


def test_router_keys_are_strict() -> None:
    args = _args()
    args["models"]["smollm2"]["deployment"]["request_router_config"] = {"request_router_clas": AFFINITY}
    assert "deployment.request_router_config.request_router_clas: unknown key" in _parse_error(args)


def test_the_router_reaches_the_model_deployment() -> None:
    from models.llm import llm_config

    cfg = ModelDeploymentConfig(model_id="m", source="/nonexistent", deployment={
        "num_cpus": 0, "request_router_config": {"request_router_class": AFFINITY}})
    conf = llm_config(cfg, model_source="/nonexistent")
    assert conf.deployment_config["request_router_config"]["request_router_class"] == AFFINITY


# -- the deployment block ----------------------------------------------------------------


def test_every_option_of_rays_deployment_schema_is_accepted_or_named() -> None:
    ours = set(DeploymentOptions.model_fields)
    missing = set(DeploymentSchema.model_fields) - ours - set(NOT_DEPLOYMENT_OPTIONS)
    assert missing == set(), f"Ray deployment options not accepted: {sorted(missing)}"
    assert set(NOT_DEPLOYMENT_OPTIONS) <= set(DeploymentSchema.model_fields)  # no stale entries


def test_ray_options_pass_through_by_their_ray_names() -> None:
    opts = DeploymentOptions(
        num_cpus=0.5, ray_actor_options={"memory": 2e9, "label_selector": {"tier": "cpu"}},
        max_replicas_per_node=2, health_check_timeout_s=7, graceful_shutdown_wait_loop_s=1,
        backpressure_config={"status_code": 429, "retry_after_s": 2}, max_surge_percent=50,
    ).to_serve_options()
    assert opts["ray_actor_options"] == {"num_cpus": 0.5, "memory": 2e9, "label_selector": {"tier": "cpu"}}
    assert opts["max_replicas_per_node"] == 2 and opts["health_check_timeout_s"] == 7
    assert opts["graceful_shutdown_wait_loop_s"] == 1 and opts["max_surge_percent"] == 50
    assert opts["backpressure_config"] == {"status_code": 429, "retry_after_s": 2}
    DeploymentSchema.model_validate({"name": "x", **opts})  # what Ray receives, Ray accepts


def test_every_actor_option_but_the_short_ones_goes_under_ray_actor_options() -> None:
    short = {"num_cpus", "num_gpus", "resources"}
    assert short <= set(RayActorOptionsSchema.model_fields)
    with pytest.raises(ValidationError, match="give it as `num_gpus`"):
        DeploymentOptions(ray_actor_options={"num_gpus": 1})
    with pytest.raises(ValidationError, match="extra"):
        DeploymentOptions(ray_actor_options={"memry": 1})


@pytest.mark.parametrize("opts, ok", [
    ({"max_queued_requests": 1}, True),
    ({"max_replicas_per_node": 2, "placement_group_bundles": [{"CPU": 1}]}, False),
    ({"max_replicas_per_node": 2}, True),
])
def test_rays_cross_field_rules_apply(opts: dict[str, Any], ok: bool) -> None:
    if ok:
        DeploymentOptions(**opts)
    else:
        with pytest.raises(ValidationError, match="Ray Serve refuses"):
            DeploymentOptions(**opts)


@pytest.mark.parametrize("queued", [0, -1])
def test_a_queue_is_bounded_always(queued: int) -> None:
    # Ray takes -1 (unbounded); we refuse it, and 0, which Ray refuses too
    with pytest.raises(ValidationError, match="max_queued_requests"):
        DeploymentOptions(max_queued_requests=queued)


def test_a_model_deployment_is_placed_by_its_placement_bundles_only() -> None:
    with pytest.raises(ValidationError, match="placement_bundles"):
        ModelDeploymentConfig(model_id="m", source="embedded", deployment={"placement_group_bundles": [{"CPU": 1}]})


@pytest.mark.parametrize("key", ["VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_NUM_OF_RESERVED_CPU"])
@pytest.mark.parametrize("value", ["0.1", "1.5", "one", "", "-1"])
def test_an_engine_env_vllm_reads_as_a_whole_number_refuses_anything_else(key: str, value: str) -> None:
    # vLLM int()s these at start: "0.1" GiB of KV cache left a deployment that never became ready
    with pytest.raises(ValidationError, match=f"env.{key} must be a whole number"):
        ModelDeploymentConfig(model_id="m", source="embedded", env={key: value})


@pytest.mark.parametrize("value", ["0", "1", "8", " 2 "])
def test_a_whole_number_of_gib_is_taken(value: str) -> None:
    cfg = ModelDeploymentConfig(model_id="m", source="embedded", env={"VLLM_CPU_KVCACHE_SPACE": value, "X": "0.1"})
    assert cfg.env["VLLM_CPU_KVCACHE_SPACE"] == value and cfg.env["X"] == "0.1"  # other variables: as given


# -- the profiles ------------------------------------------------------------------------


def test_h100_routes_orchestrator_calls_by_prefix_and_schedules_by_priority() -> None:
    args = load_serve_file(H100).applications[0].args
    orch = args.model_for_role("orchestrator")
    router = orch.deployment.to_serve_options()["request_router_config"]
    assert router["request_router_class"] == AFFINITY
    assert orch.engine_kwargs["scheduling_policy"] == "priority"
    assert args.pipeline.first_call_priority < args.pipeline.later_call_priority
    assert "request_router_config" not in args.model_for_role("generator").deployment.to_serve_options()


def test_embedded_schedules_by_priority_with_one_replica() -> None:
    args = load_serve_file(EMBEDDED).applications[0].args
    m = args.model_for_role("orchestrator")
    assert m.engine_kwargs["scheduling_policy"] == "priority"
    assert "request_router_config" not in m.deployment.to_serve_options()
    assert args.pipeline.first_call_priority < args.pipeline.later_call_priority
