"""Model deployments through ``ray.serve.llm``: a model config → ``LLMConfig`` → ``LLMServer``.

    ModelDeploymentConfig ──llm_config()──► LLMConfig ──build_model_deployment()──► LLMServer:<model_id>

``TandemLLMServer`` is the stock ``LLMServer`` plus a clean shutdown (the stock
one leaves vLLM's shared-memory files behind) and an optional start-up check
that the engine really runs with async scheduling (production profile).
vLLM itself is only imported inside the replica, by Ray Serve LLM.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray.serve.llm import LLMConfig, build_llm_deployment
from ray.serve.llm.deployment import LLMServer

from models.prepare import prepare_embedded_model

if TYPE_CHECKING:
    from ray.serve.deployment import Application

    from models.config import ModelDeploymentConfig

__all__ = [
    "MODEL_DEPLOYMENT_PREFIX",
    "SharedModel",
    "resolve_model_source",
    "llm_config",
    "build_model_deployment",
    "model_card",
    "TandemLLMServer",
    "ASYNC_SCHEDULING_WARNING",
]

logger = logging.getLogger(__name__)

ASYNC_SCHEDULING_WARNING = (
    "ASYNC SCHEDULING IS OFF for model %s: vLLM disabled it (set "
    "VLLM_USE_RAY_V2_EXECUTOR_BACKEND=1 for tensor-parallel engines under Ray)"
)


def resolve_model_source(source: str) -> str:
    """``embedded`` → the prepared local folder; a folder → its absolute path; else a hub id."""
    if source == "embedded":
        return str(prepare_embedded_model().path)
    p = Path(source).expanduser()
    if p.exists():
        return str(p.resolve())
    return source


def llm_config(cfg: ModelDeploymentConfig, *, model_source: str | None = None) -> LLMConfig:
    """The ``LLMConfig`` for one model deployment."""
    deployment = cfg.deployment.to_serve_options()
    # Placement bundles belong to placement_group_config, not to deployment_config.
    kwargs: dict[str, Any] = {
        "model_loading_config": {
            "model_id": cfg.model_id,
            "model_source": model_source or resolve_model_source(cfg.source),
        },
        "engine_kwargs": dict(cfg.engine_kwargs),
        "deployment_config": deployment,
        "runtime_env": {"env_vars": dict(cfg.env)} if cfg.env else None,
        "experimental_configs": {"stream_batching_interval_ms": cfg.stream_batching_interval_ms},
        "log_engine_metrics": True,
    }
    if cfg.accelerator == "cpu":
        kwargs["accelerator_config"] = {"kind": "cpu"}
    if cfg.accelerator_type:
        kwargs["accelerator_type"] = cfg.accelerator_type
    if cfg.placement_bundles:
        pg: dict[str, Any] = {"bundles": [dict(b) for b in cfg.placement_bundles]}
        if cfg.placement_strategy:
            pg["strategy"] = cfg.placement_strategy
        kwargs["placement_group_config"] = pg
    return LLMConfig(**kwargs)


def model_card(config: LLMConfig) -> Any:
    """The OpenAI model card for ``/v1/models`` (Ray's helper is internal; isolated here)."""
    from ray.llm._internal.serve.core.configs.openai_api_models import to_model_metadata

    return to_model_metadata(config.model_id, config)


class TandemLLMServer(LLMServer):
    """``LLMServer`` that shuts vLLM's engine client down and checks async scheduling."""

    async def __init__(self, llm_config: LLMConfig, **kwargs: Any) -> None:  # type: ignore[override]
        await super().__init__(llm_config, **kwargs)
        if llm_config.experimental_configs.get("tandem_check_async_scheduling"):
            self._check_async_scheduling(llm_config)

    def _check_async_scheduling(self, config: LLMConfig) -> None:
        client = getattr(getattr(self, "engine", None), "_engine_client", None)
        vconf = getattr(client, "vllm_config", None)
        sched = getattr(vconf, "scheduler_config", None)
        enabled = bool(getattr(sched, "async_scheduling", False))
        if enabled:
            logger.info("async scheduling is on for %s", config.model_id)
        else:
            logger.warning(ASYNC_SCHEDULING_WARNING, config.model_id)

    async def __del__(self) -> None:  # type: ignore[override]
        client = getattr(getattr(self, "engine", None), "_engine_client", None)
        if client is not None and hasattr(client, "shutdown"):
            try:
                client.shutdown()
            except Exception:  # shutting down: never raise from a finaliser
                logger.exception("engine client shutdown failed")
        await super().__del__()


#: Every model deployment is named ``LLMServer:<model_id>`` (in its own application or in a models application).
MODEL_DEPLOYMENT_PREFIX = "LLMServer:"


@dataclass(frozen=True)
class SharedModel:
    """A model served by another application of the cluster (``ModelDeploymentConfig.shared_app``).

    Bound into the ingress in place of a deployment; the replica resolves it to a handle when it starts.
    """

    app: str
    model_id: str

    @property
    def deployment(self) -> str:
        return MODEL_DEPLOYMENT_PREFIX + self.model_id

    def handle(self) -> Any:
        from ray import serve

        return serve.get_deployment_handle(self.deployment, app_name=self.app)


def build_model_deployment(cfg: ModelDeploymentConfig) -> tuple[Application, LLMConfig]:
    """Bind one ``TandemLLMServer`` deployment named ``LLMServer:<model_id>``."""
    cls: type[LLMServer] = TandemLLMServer
    if cfg.server_cls:
        from ray._common.utils import import_attr

        cls = import_attr(cfg.server_cls)
    conf = llm_config(cfg)
    if cfg.check_async_scheduling:
        conf.experimental_configs["tandem_check_async_scheduling"] = True
    if cfg.server_options:
        conf.experimental_configs["tandem_server_options"] = dict(cfg.server_options)
    app = build_llm_deployment(conf, name_prefix=MODEL_DEPLOYMENT_PREFIX, deployment_cls=cls)
    return app, conf
