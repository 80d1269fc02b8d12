"""serve.config: the strict Serve-file loader and the app config."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.errors import ConfigError
from serve.config import (
    AppConfig,
    AutoscalingConfig,
    DeploymentOptions,
    ServeFile,
    load_serve_file,
    parse_app_config,
)

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "configs" / "embedded.yaml"
RAW: dict[str, Any] = yaml.safe_load(EMBEDDED.read_text())


def _write(tmp_path: Path, raw: Any, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


def _raw() -> dict[str, Any]:
    return copy.deepcopy(RAW)


def _args(raw: dict[str, Any]) -> dict[str, Any]:
    return raw["applications"][0]["args"]


# -- the shipped file -----------------------------------------------------------


def test_embedded_yaml_loads() -> None:
    sf = load_serve_file(EMBEDDED)
    assert isinstance(sf, ServeFile)
    [app] = sf.applications
    assert app.import_path == "serve.app:build_app"
    cfg = app.args
    assert isinstance(cfg, AppConfig) and cfg.profile == "embedded"
    assert set(cfg.models) == {"smollm2"}
    for role in ("orchestrator", "generator", "slot_extractor"):
        assert cfg.model_for_role(role).model_id == "smollm2-135m-instruct"
    assert cfg.store.kind == "sqlite" and cfg.pipeline.kind == "tandem" and cfg.domain.name == "support"
    assert cfg.ingress.autoscaling is not None and cfg.ingress.autoscaling.max_replicas == 2
    assert sf.grpc_options.port == 9000 and sf.http_options.host == "127.0.0.1"


def test_embedded_args_parse_on_their_own() -> None:
    cfg = parse_app_config(_args(_raw()))
    assert parse_app_config(cfg) is cfg


# -- misspelt keys, named by their dotted path ----------------------------------

MISSPELLINGS = [
    (lambda r: r.__setitem__("proxy_locaton", "HeadOnly"), "proxy_locaton"),
    (lambda r: r["http_options"].__setitem__("prot", 1), "http_options.prot"),
    (lambda r: r["applications"][0].__setitem__("route_prefx", "/"), "applications.0.route_prefx"),
    (lambda r: _args(r).__setitem__("pipline", {}), "applications.0.args.pipline"),
    (lambda r: _args(r)["pipeline"].__setitem__("max_histroy_turns", 3), "applications.0.args.pipeline.max_histroy_turns"),
    (lambda r: _args(r)["models"]["smollm2"].__setitem__("engine_kwarg", {}), "applications.0.args.models.smollm2.engine_kwarg"),
    (lambda r: _args(r)["models"]["smollm2"]["deployment"].__setitem__("num_replica", 1),
     "applications.0.args.models.smollm2.deployment.num_replica"),
    (lambda r: _args(r)["ingress"]["autoscaling"].__setitem__("max_replica", 3),
     "applications.0.args.ingress.autoscaling.max_replica"),
    (lambda r: _args(r)["store"].__setitem__("pth", "x.db"), "applications.0.args.store.pth"),
    (lambda r: _args(r)["telemetry"].__setitem__("otlp", "x"), "applications.0.args.telemetry.otlp"),
    (lambda r: _args(r)["auth"].__setitem__("api_keys", []), "applications.0.args.auth.api_keys"),
    (lambda r: _args(r)["roles"].__setitem__("genrator", "smollm2"), "applications.0.args.roles.genrator"),
]


@pytest.mark.parametrize("mutate,path", MISSPELLINGS, ids=[p for _, p in MISSPELLINGS])
def test_misspelt_key_fails_with_its_path(tmp_path: Path, mutate, path: str) -> None:
    raw = _raw()
    mutate(raw)
    with pytest.raises(ConfigError) as ei:
        load_serve_file(_write(tmp_path, raw))
    assert f"{path}: unknown key" in ei.value.message
    assert str(tmp_path) in ei.value.message  # the file is named too


def test_misspelt_key_in_args_via_parse_app_config() -> None:
    args = _args(_raw())
    args["models"]["smollm2"]["deployment"]["autoscaling"] = {"min_replica": 1}
    del args["models"]["smollm2"]["deployment"]["num_replicas"]
    with pytest.raises(ConfigError) as ei:
        parse_app_config(args)
    assert "args.models.smollm2.deployment.autoscaling.min_replica: unknown key" in ei.value.message


def test_every_problem_is_reported(tmp_path: Path) -> None:
    raw = _raw()
    raw["oops"] = 1
    _args(raw)["pipeline"]["temprature"] = 0.1
    with pytest.raises(ConfigError) as ei:
        load_serve_file(_write(tmp_path, raw))
    assert "oops: unknown key" in ei.value.message
    assert "applications.0.args.pipeline.temprature: unknown key" in ei.value.message


def test_bad_value_names_its_path(tmp_path: Path) -> None:
    raw = _raw()
    _args(raw)["pipeline"]["max_history_turns"] = -1
    with pytest.raises(ConfigError) as ei:
        load_serve_file(_write(tmp_path, raw))
    assert "applications.0.args.pipeline.max_history_turns:" in ei.value.message


# -- cross-field rules ---------------------------------------------------------------


def test_roles_must_reference_existing_models() -> None:
    args = _args(_raw())
    args["roles"]["generator"] = "qwen"
    with pytest.raises(ConfigError) as ei:
        parse_app_config(args)
    assert "roles.generator" in ei.value.message and "'qwen'" in ei.value.message


def test_model_ids_must_be_unique() -> None:
    args = _args(_raw())
    args["models"]["other"] = copy.deepcopy(args["models"]["smollm2"])
    with pytest.raises(ConfigError) as ei:
        parse_app_config(args)
    assert "model_id" in ei.value.message


def test_num_replicas_and_autoscaling_together_fail(tmp_path: Path) -> None:
    raw = _raw()
    _args(raw)["ingress"]["num_replicas"] = 2
    with pytest.raises(ConfigError) as ei:
        load_serve_file(_write(tmp_path, raw))
    assert "applications.0.args.ingress" in ei.value.message and "not both" in ei.value.message


def test_autoscaling_bounds() -> None:
    with pytest.raises(ValueError):
        AutoscalingConfig(min_replicas=3, max_replicas=2)
    assert AutoscalingConfig(min_replicas=0, max_replicas=1).min_replicas == 0


def test_redis_store_needs_a_url() -> None:
    args = _args(_raw())
    args["store"] = {"kind": "redis"}
    with pytest.raises(ConfigError) as ei:
        parse_app_config(args)
    assert "url" in ei.value.message
    args["store"] = {"kind": "redis", "url_env": "TANDEM_REDIS_URL"}
    with pytest.raises(ConfigError) as ei:  # replicas must share the vault key
        parse_app_config(args)
    assert "vault_key" in ei.value.message
    args["store"] = {"kind": "redis", "url_env": "TANDEM_REDIS_URL", "vault_key_env": "TANDEM_VAULT_KEY"}
    assert parse_app_config(args).store.url_env == "TANDEM_REDIS_URL"


# -- file-level errors ---------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_serve_file(tmp_path / "nope.yaml")


def test_not_yaml(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("applications: [\n  - name: x\n  bad")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_serve_file(p)


@pytest.mark.parametrize("content", ["- a\n- b\n", "just text\n", ""])
def test_top_level_must_be_a_mapping(tmp_path: Path, content: str) -> None:
    p = tmp_path / "list.yaml"
    p.write_text(content)
    with pytest.raises(ConfigError, match="mapping"):
        load_serve_file(p)


def test_no_applications(tmp_path: Path) -> None:
    raw = _raw()
    raw["applications"] = []
    with pytest.raises(ConfigError, match="applications"):
        load_serve_file(_write(tmp_path, raw))


# -- Serve options ----------------------------------------------------------------------


def test_to_serve_options_with_autoscaling() -> None:
    cfg = load_serve_file(EMBEDDED).applications[0].args
    opts = cfg.ingress.to_serve_options()
    assert opts == {
        "ray_actor_options": {"num_cpus": 0.1},
        "max_ongoing_requests": 64,
        "max_queued_requests": 16,
        "health_check_period_s": 10.0,
        "graceful_shutdown_timeout_s": 5.0,
        "backpressure_config": {"status_code": 503, "retry_after_s": 1.0},
        "autoscaling_config": {
            "min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 16.0, "upscale_delay_s": 2.0,
            "downscale_delay_s": 10.0, "look_back_period_s": 3.0, "metrics_interval_s": 1.0,
        },
    }
    assert "num_replicas" not in opts


@pytest.mark.parametrize("profile", ["embedded.yaml", "cpu-dev.yaml"])
def test_the_cpu_profiles_admit_turns_by_measured_capacity_not_a_hand_sized_queue(profile: str) -> None:
    """Turns are admitted by the box's measured rate and the deadline; Serve's own bounds sit above the
    admission's largest limit, so the admission (503 + Retry-After at once) decides, not a queue."""
    ingress = load_serve_file(EMBEDDED.parent / profile).applications[0].args.ingress
    adm = ingress.admission
    assert adm.mode == "adaptive"
    assert (adm.target, adm.initial_limit, adm.min_limit, adm.max_limit) == (0.5, 4, 2, 32)
    assert ingress.max_ongoing_requests >= adm.max_limit


def test_to_serve_options_with_fixed_replicas_and_resources() -> None:
    opts = DeploymentOptions(num_cpus=2, num_gpus=1, resources={"H100": 1}, num_replicas=3).to_serve_options()
    assert opts["ray_actor_options"] == {"num_cpus": 2, "num_gpus": 1, "resources": {"H100": 1}}
    assert opts["num_replicas"] == 3 and "autoscaling_config" not in opts


def test_to_serve_options_defaults() -> None:
    opts = DeploymentOptions().to_serve_options()
    assert opts["ray_actor_options"] == {"num_cpus": 0.1}
    assert opts["num_replicas"] == 1
    assert set(opts) == {"ray_actor_options", "max_ongoing_requests", "max_queued_requests",
                         "health_check_period_s", "graceful_shutdown_timeout_s", "backpressure_config",
                         "num_replicas"}


def test_model_deployment_defaults_to_zero_cpus() -> None:
    cfg = load_serve_file(EMBEDDED).applications[0].args
    m = cfg.models["smollm2"]
    assert m.deployment.to_serve_options()["ray_actor_options"] == {"num_cpus": 0}
    assert m.deployment.num_replicas == 1
    assert m.placement_bundles == [{"CPU": 1}]


def test_model_deployment_without_options_takes_no_cpu_of_its_own() -> None:
    args = _args(_raw())
    del args["models"]["smollm2"]["deployment"]
    m = parse_app_config(args).models["smollm2"]
    assert m.deployment.num_cpus == 0  # the engine's placement bundles hold the CPUs
    assert m.deployment.to_serve_options()["num_replicas"] == 1
