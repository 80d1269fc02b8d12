"""Offline validation of serving configs with the real parsers: vLLM's and Ray Serve's.

Two checks, both runnable on a CPU box with no model weights:

* :func:`validate_engine_args` turns one :class:`~serve.config.ModelDeploymentConfig`
  into the ``vllm serve`` argv that its ``engine_kwargs`` stand for and runs vLLM's
  own argument parser and config builder on it::

      ns = make_arg_parser(FlexibleArgumentParser()).parse_args(argv)
      validate_parsed_serve_args(ns)
      AsyncEngineArgs.from_cli_args(ns).create_engine_config()

  The model folder needs only a ``config.json`` (``tests/fixtures/models/``).
  The CPU platform rewrites some fields of the *resolved* config (async
  scheduling off, device CPU), so :class:`ValidatedEngine` reports the
  *parsed* arguments, which is what a GPU node will start with.
* :func:`validate_serve_config_v2` checks a Serve config (a KubeRay
  ``serveConfigV2``) against Ray's ``ServeDeploySchema`` made strict: an unknown
  key is an error at every level (Ray drops it silently).

vLLM and Ray are imported lazily, inside the functions.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from pipelines.errors import ConfigError

if TYPE_CHECKING:
    from models.config import ModelDeploymentConfig

__all__ = [
    "ValidatedEngine",
    "engine_argv",
    "validate_engine_args",
    "validate_serve_config_v2",
    "RAY_MANAGED_ENGINE_KWARGS",
    "UnknownKey",
    "strict_unknown_keys",
]

# Ray Serve LLM sets these itself and refuses them in engine_kwargs.
RAY_MANAGED_ENGINE_KWARGS = ("model", "served_model_name")


@dataclasses.dataclass(frozen=True)
class ValidatedEngine:
    """What vLLM parsed and built for one model deployment (offline)."""

    model_id: str
    model: str
    argv: tuple[str, ...]
    tensor_parallel_size: int
    pipeline_parallel_size: int
    enable_expert_parallel: bool
    distributed_executor_backend: str | None
    async_scheduling: bool | None
    attention_backend: str | None
    speculative_method: str | None
    num_speculative_tokens: int | None
    speculative_model: str | None
    enable_prefix_caching: bool | None
    max_model_len: int
    seed: int | None
    architecture: str
    max_num_seqs: int | None


# --- engine_kwargs -> argv ---------------------------------------------------


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _scalar(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def engine_argv(engine_kwargs: Mapping[str, Any], model: str) -> list[str]:
    """The ``vllm serve`` argv for ``engine_kwargs`` (Python field names, as Ray passes them).

    ``True``/``False`` become ``--flag``/``--no-flag``; dicts become JSON; lists
    become one argument per item; ``None`` means "the default" and is left out.
    """
    argv = ["--model", model]
    for key, value in engine_kwargs.items():
        if value is None:
            continue
        flag = _flag(key)
        if value is True:
            argv.append(flag)
        elif value is False:
            argv.append("--no-" + flag[2:])
        elif isinstance(value, list):
            argv.append(flag)
            argv.extend(_scalar(v) for v in value)
        else:
            argv.extend([flag, _scalar(value)])
    return argv


# --- environment for an offline build ----------------------------------------


@contextlib.contextmanager
def _offline_env(extra: Mapping[str, str]) -> Iterator[None]:
    """Hub offline (no network look-ups for local folders) plus the model's env, restored after."""
    import huggingface_hub.constants as hf_constants

    updates = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra}
    saved = {k: os.environ.get(k) for k in updates}
    saved_flag = hf_constants.HF_HUB_OFFLINE
    os.environ.update(updates)
    hf_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        hf_constants.HF_HUB_OFFLINE = saved_flag
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _check_env_names(model_id: str, env: Mapping[str, str]) -> None:
    """Every ``VLLM_*`` variable must be one vLLM knows (a typo is otherwise silently ignored)."""
    import vllm.envs as vllm_envs

    known = set(vllm_envs.environment_variables)
    bad = sorted(k for k in env if k.startswith("VLLM_") and k not in known)
    if bad:
        raise ConfigError(f"model {model_id!r}: unknown vLLM environment variable(s): {', '.join(bad)}")


# --- the vLLM recipe -----------------------------------------------------------


def _parse(argv: list[str], model_id: str) -> argparse.Namespace:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(argv)
    except SystemExit as exc:
        raise ConfigError(
            f"model {model_id!r}: vLLM rejected the engine args: {_argparse_message(err.getvalue(), exc)}"
        ) from None


def _argparse_message(stderr: str, exc: SystemExit) -> str:
    """The ``error:`` part of argparse's output on one line (usage and doc links dropped)."""
    text = stderr.split(": error: ", 1)[1] if ": error: " in stderr else stderr
    text = _clean(text)
    return text or f"argparse exit {exc.code}"


def _clean(text: str) -> str:
    text = re.sub(r"For further information visit \S+", "", text)
    text = re.sub(r"\[type=[^\]]*\]", "", text)
    return " ".join(text.split())


def _known_engine_fields() -> set[str]:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import FrontendArgs

    return {f.name for f in dataclasses.fields(AsyncEngineArgs)} | {
        f.name for f in dataclasses.fields(FrontendArgs)
    }


def _rewrite_draft(kwargs: dict[str, Any], draft_dir_override: str | None) -> None:
    spec = kwargs.get("speculative_config")
    if draft_dir_override and isinstance(spec, dict) and spec.get("model"):
        kwargs["speculative_config"] = {**spec, "model": str(Path(draft_dir_override).resolve())}


def validate_engine_args(
    model_cfg: ModelDeploymentConfig,
    model_dir_override: str | os.PathLike[str] | None = None,
    *,
    draft_dir_override: str | os.PathLike[str] | None = None,
) -> ValidatedEngine:
    """Validate one model deployment's engine args with vLLM's own parser and config builder.

    ``model_dir_override`` replaces the model source (a hub id or a folder on the
    cluster) by a local folder holding the model's ``config.json``;
    ``draft_dir_override`` does the same for ``speculative_config.model``.
    Raises :class:`ConfigError` naming the model and the offending argument
    (an unknown or misspelt arg, a bad type, a TP size that does not divide the
    heads, an unknown attention backend, a draft that cannot be found, ...).
    """
    model_id = model_cfg.model_id
    kwargs = dict(model_cfg.engine_kwargs)
    for key in RAY_MANAGED_ENGINE_KWARGS:
        if key in kwargs:
            raise ConfigError(
                f"model {model_id!r}: engine arg {key!r} is set by Ray Serve LLM "
                "(use model_id / source instead)"
            )
    # What Ray Serve LLM adds: the executor backend follows the accelerator.
    backend = "mp" if model_cfg.accelerator == "cpu" else "ray"
    given = kwargs.get("distributed_executor_backend")
    if model_cfg.accelerator == "gpu" and given not in (None, "ray"):
        raise ConfigError(
            f"model {model_id!r}: distributed_executor_backend={given!r}; Ray Serve LLM only allows 'ray' on GPU"
        )
    kwargs["distributed_executor_backend"] = backend
    _rewrite_draft(kwargs, str(draft_dir_override) if draft_dir_override else None)
    if model_dir_override is not None:
        model = str(Path(model_dir_override).resolve())
    else:
        p = Path(model_cfg.source).expanduser()
        model = str(p.resolve()) if p.exists() else model_cfg.source
    argv = engine_argv(kwargs, model)

    with _offline_env(model_cfg.env):
        _check_env_names(model_id, model_cfg.env)
        ns = _parse(argv, model_id)
        unknown = sorted(set(model_cfg.engine_kwargs) - _known_engine_fields())
        if unknown:
            # argparse accepts unambiguous prefixes; Ray Serve LLM does not.
            raise ConfigError(f"model {model_id!r}: unknown engine arg(s): {', '.join(unknown)}")
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

        try:
            validate_parsed_serve_args(ns)
            vconf = AsyncEngineArgs.from_cli_args(ns).create_engine_config()
        except ConfigError:
            raise
        except Exception as exc:  # vLLM raises ValueError, TypeError, pydantic errors, OSError...
            msg = _clean(str(exc))
            raise ConfigError(f"model {model_id!r}: vLLM rejected the engine config: {msg}") from exc

    spec = ns.speculative_config or {}
    attn = ns.attention_config
    attn_backend = getattr(getattr(attn, "backend", None), "name", None)
    if attn_backend is None and ns.attention_backend is not None:
        attn_backend = getattr(ns.attention_backend, "name", str(ns.attention_backend))
    archs = getattr(vconf.model_config.hf_config, "architectures", None) or ["?"]
    return ValidatedEngine(
        model_id=model_id,
        model=model,
        argv=tuple(argv),
        tensor_parallel_size=int(ns.tensor_parallel_size),
        pipeline_parallel_size=int(ns.pipeline_parallel_size),
        enable_expert_parallel=bool(ns.enable_expert_parallel),
        distributed_executor_backend=ns.distributed_executor_backend,
        async_scheduling=ns.async_scheduling,
        attention_backend=attn_backend,
        speculative_method=spec.get("method"),
        num_speculative_tokens=spec.get("num_speculative_tokens"),
        speculative_model=spec.get("model"),
        enable_prefix_caching=ns.enable_prefix_caching,
        max_model_len=int(vconf.model_config.max_model_len),
        seed=ns.seed,
        architecture=archs[0],
        max_num_seqs=ns.max_num_seqs,
    )


# --- Ray Serve's ServeDeploySchema, strict ------------------------------------


def _model_classes(annotation: Any) -> list[type]:
    """The pydantic model classes inside an annotation (Optional, Union, List, Dict...)."""
    from pydantic import BaseModel

    out: list[type] = []
    stack = [annotation]
    while stack:
        ann = stack.pop()
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.append(ann)
        else:
            stack.extend(get_args(ann))
    return out


@dataclasses.dataclass(frozen=True)
class UnknownKey:
    """A key that a strict reading of a pydantic schema refuses (the schema itself ignores it)."""

    path: tuple[str | int, ...]  # where the key sits: ("applications", 0, "deployments", 1)
    key: str
    model: str  # the schema class that does not know it
    allowed: tuple[str, ...]  # the keys that class knows (field names and aliases)

    def __str__(self) -> str:
        return f"{_dotted((*self.path, self.key))}: unknown key (not in {self.model})"


def _dotted(parts: tuple[str | int, ...]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def strict_unknown_keys(model: type, data: Any, path: tuple[str | int, ...] = ()) -> list[UnknownKey]:
    """Every key of ``data`` that ``model`` (a pydantic class) and its nested models do not define."""
    if not isinstance(data, Mapping):
        return []
    fields = model.model_fields  # type: ignore[attr-defined]
    names = {name: name for name in fields}
    names.update({f.alias: name for name, f in fields.items() if f.alias})
    out: list[UnknownKey] = []
    for key, value in data.items():
        if key not in names:
            out.append(UnknownKey(path, str(key), model.__name__, tuple(names)))
            continue
        classes = _model_classes(fields[names[key]].annotation)
        if not classes:
            continue
        sub = classes[0]
        if isinstance(value, list):
            for i, item in enumerate(value):
                out += strict_unknown_keys(sub, item, (*path, key, i))
        else:
            out += strict_unknown_keys(sub, value, (*path, key))
    return out


def validate_serve_config_v2(
    config: Mapping[str, Any] | str,
    *,
    app_args_validator: Callable[[Any], Any] | None = None,
    app_import_path: str = "serve.app:build_app",
) -> Any:
    """Validate a Serve config (dict or YAML string) as Ray's ``ServeDeploySchema``, strictly.

    Unknown keys are rejected at every level Ray models (top level, http/grpc
    options, applications, deployments, ray_actor_options, autoscaling_config,
    logging_config...). ``app_args_validator`` (e.g. ``serve.config.parse_app_config``)
    checks the ``args`` of every application whose import path is
    ``app_import_path`` (Ray treats ``args`` as a free-form dict). Returns the
    ``ServeDeploySchema`` object;
    raises :class:`ConfigError` with the dotted path of every problem.
    """
    import yaml
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    data = yaml.safe_load(config) if isinstance(config, str) else config
    if not isinstance(data, Mapping):
        raise ConfigError("serveConfigV2 must be a mapping")
    errors = [str(u) for u in strict_unknown_keys(ServeDeploySchema, data)]
    if errors:
        raise ConfigError("serveConfigV2 is not strictly valid: " + "; ".join(errors))
    try:
        schema = ServeDeploySchema.model_validate(dict(data))
    except ValidationError as exc:
        lines = [
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
        ]
        raise ConfigError("serveConfigV2 is not a valid ServeDeploySchema: " + "; ".join(lines)) from exc
    if app_args_validator is not None:
        for i, app in enumerate(data.get("applications") or []):
            if app.get("import_path") == app_import_path:
                try:
                    app_args_validator(app.get("args") or {})
                except ConfigError as exc:
                    raise ConfigError(f"applications[{i}]: {exc.message}") from exc
    return schema
