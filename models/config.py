"""Model-serving config: one model deployment (an ``LLMServer`` on vLLM through ``ray.serve.llm``)
and the Ray Serve options of a deployment.

Ray Serve silently drops unknown keys, so every block here refuses them; the values are
validated by Ray Serve's own pydantic models, so every Ray option is accepted:

    AutoscalingConfig     Ray's ``AutoscalingConfig`` (``policy``, ``aggregation_function``, the
                          factors ...) with unknown keys refused, ``policy`` strict too
    RequestRouterConfig   Ray's ``RequestRouterConfig`` (e.g. ``ray.serve.llm.request_router.
                          PrefixCacheAffinityRouter``); the class must import and be a RequestRouter
    DeploymentOptions     our short keys (``num_cpus``, ``num_gpus``, ``resources``, ``autoscaling``)
                          plus every other option of Ray's deployment schema by its Ray name; the
                          whole block is checked by Ray's ``DeploymentSchema`` (its cross-field rules)

``serve/config.py`` composes these into the application config; ``models/llm.py`` turns a
:class:`ModelDeploymentConfig` into a ``ray.serve.llm`` deployment; ``models/validate.py`` checks
its engine arguments with vLLM's own parser.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError
from ray.serve.config import AutoscalingConfig as RayAutoscalingConfig
from ray.serve.config import AutoscalingPolicy as RayAutoscalingPolicy
from ray.serve.config import BackpressureConfig as RayBackpressureConfig
from ray.serve.config import DeploymentActorConfig as RayDeploymentActorConfig
from ray.serve.config import GangSchedulingConfig as RayGangSchedulingConfig
from ray.serve.config import RequestRouterConfig as RayRequestRouterConfig
from ray.serve.schema import DeploymentSchema, LoggingConfig, RayActorOptionsSchema

__all__ = [
    "AutoscalingPolicy",
    "AutoscalingConfig",
    "RequestRouterConfig",
    "DeploymentOptions",
    "ModelDeploymentConfig",
    "NOT_DEPLOYMENT_OPTIONS",
]

FORBID = ConfigDict(extra="forbid")


class Strict(BaseModel):
    model_config = FORBID


class AutoscalingPolicy(RayAutoscalingPolicy):
    """Ray's autoscaling policy (``policy_function`` import path + ``policy_kwargs``), strict."""

    model_config = FORBID

    def __init__(self, **kwargs: Any) -> None:
        try:
            super().__init__(**kwargs)
        except (ImportError, AttributeError) as exc:  # Ray imports the policy function here
            raise PydanticCustomError("import_error", "cannot import {path}: {error}",
                                      {"path": kwargs.get("policy_function"), "error": str(exc)}) from exc


class AutoscalingConfig(RayAutoscalingConfig):
    """Ray Serve's ``AutoscalingConfig`` with unknown keys refused (Ray's own bounds and rules apply)."""

    model_config = FORBID
    policy: AutoscalingPolicy = Field(default_factory=AutoscalingPolicy)

    def to_ray(self) -> dict[str, Any]:
        """What was set, as Ray's ``autoscaling_config`` (Ray fills in its defaults)."""
        return self.model_dump(mode="json", exclude_unset=True)


class RequestRouterConfig(RayRequestRouterConfig):
    """Ray Serve's ``RequestRouterConfig``, strict; the router class must import and be a ``RequestRouter``."""

    model_config = FORBID

    def __init__(self, **kwargs: Any) -> None:
        from ray.serve.request_router import RequestRouter

        path = kwargs.get("request_router_class")
        try:
            super().__init__(**kwargs)  # Ray imports (and pickles) the router class here
        except (ImportError, AttributeError) as exc:
            raise PydanticCustomError("import_error", "cannot import {path}: {error}",
                                      {"path": path, "error": str(exc)}) from exc
        cls = self.get_request_router_class()
        if not (isinstance(cls, type) and issubclass(cls, RequestRouter)):
            raise PydanticCustomError("not_a_router", "{path} is not a ray.serve RequestRouter", {"path": path})


def _strict(model: type[BaseModel]) -> Any:
    """A subclass of one of Ray's option models that refuses unknown keys."""
    return type(model.__name__, (model,), {"model_config": FORBID, "__module__": __name__,
                                           "__doc__": f"Ray Serve's ``{model.__name__}``, unknown keys refused."})


BackpressureConfig = _strict(RayBackpressureConfig)
GangSchedulingConfig = _strict(RayGangSchedulingConfig)
DeploymentActorConfig = _strict(RayDeploymentActorConfig)
ActorOptions = _strict(RayActorOptionsSchema)
StrictLoggingConfig = _strict(LoggingConfig)

# Options of Ray's deployment schema that DeploymentOptions does not take under Ray's name, and why
# (a test fails when Ray adds an option that is neither a field here nor listed).
NOT_DEPLOYMENT_OPTIONS: dict[str, str] = {
    "name": "given by the app builder",
    "autoscaling_config": "spelled `autoscaling`",
    "user_config": "live rule tables come through the Serve file's `deployments:` list",
}


def _plain(value: Any) -> Any:
    """A Ray option value as plain data (nested option models dumped with only what was set)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# Our own keys (turned into Ray's by to_serve_options), not passed through under their names.
_SHORT_KEYS = {"num_cpus", "num_gpus", "resources", "ray_actor_options", "num_replicas", "autoscaling"}


class DeploymentOptions(Strict):
    """Ray Serve options of one deployment (ingress, CPU deployments, a model deployment).

    ``num_cpus`` / ``num_gpus`` / ``resources`` are the replica actor's resources (more actor
    options under ``ray_actor_options``); ``autoscaling`` is Ray's ``autoscaling_config``; every
    other key is Ray's own option of that name. Ray's ``DeploymentSchema`` checks the result.
    """

    num_cpus: float = Field(0.1, ge=0)
    num_gpus: float = Field(0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict)
    ray_actor_options: ActorOptions | None = Field(  # type: ignore[valid-type]
        None, description="Other replica actor options (memory, label_selector, runtime_env ...).")
    num_replicas: int | None = Field(None, ge=1)
    autoscaling: AutoscalingConfig | None = None
    max_ongoing_requests: int = Field(100, ge=1)
    max_queued_requests: int = Field(
        100, ge=1, description="Requests waiting for a replica beyond max_ongoing_requests; more are refused "
        "(503 / BackPressureError). Bounded always: an unbounded queue turns overload into timeouts.")
    health_check_period_s: float = Field(10.0, gt=0)
    graceful_shutdown_timeout_s: float = Field(5.0, ge=0)
    backpressure_retry_after_s: float = Field(
        1.0, ge=0, description="Retry-After of Ray Serve's own 503 when the queue above is full (HTTP).")
    request_router_config: RequestRouterConfig | None = Field(
        None, description="How handles pick a replica (e.g. ray.serve.llm.request_router.PrefixCacheAffinityRouter).")
    backpressure_config: BackpressureConfig | None = Field(  # type: ignore[valid-type]
        None, description="Ray's own; when unset: 503 with backpressure_retry_after_s.")
    health_check_timeout_s: float | None = Field(None, gt=0)
    graceful_shutdown_wait_loop_s: float | None = Field(None, ge=0)
    max_replicas_per_node: int | None = Field(None, ge=1)
    placement_group_bundles: list[dict[str, float]] | None = None
    placement_group_strategy: str | None = None
    placement_group_bundle_label_selector: list[dict[str, str]] | None = None
    logging_config: StrictLoggingConfig | None = None  # type: ignore[valid-type]
    gang_scheduling_config: GangSchedulingConfig | None = None  # type: ignore[valid-type]
    deployment_actors: list[DeploymentActorConfig] | None = None  # type: ignore[valid-type]
    rolling_update_percentage: float | None = Field(None, gt=0, le=1)
    max_surge_percent: int | None = Field(None, ge=0, le=100)

    @model_validator(mode="after")
    def _ray_accepts(self) -> DeploymentOptions:
        if self.num_replicas is not None and self.autoscaling is not None:
            raise ValueError("give num_replicas or autoscaling, not both")
        extra = self.ray_actor_options.model_fields_set if self.ray_actor_options is not None else set()
        both = sorted(extra & {"num_cpus", "num_gpus", "resources"})
        if both:
            raise ValueError(f"ray_actor_options.{both[0]}: give it as `{both[0]}` of the deployment")
        try:  # Ray's own cross-field rules over the options as Ray receives them
            DeploymentSchema.model_validate({"name": "check", **self.to_serve_options()})
        except ValidationError as exc:
            msgs = [": ".join(filter(None, (".".join(map(str, e["loc"])), e["msg"].removeprefix("Value error, "))))
                    for e in exc.errors(include_url=False)]
            raise ValueError("Ray Serve refuses these options: " + "; ".join(msgs)) from None
        return self

    def actor_options(self) -> dict[str, Any]:
        """The replica actor's options."""
        actor: dict[str, Any] = {"num_cpus": self.num_cpus}
        if self.num_gpus:
            actor["num_gpus"] = self.num_gpus
        if self.resources:
            actor["resources"] = dict(self.resources)
        if self.ray_actor_options is not None:
            actor.update(self.ray_actor_options.model_dump(mode="json", exclude_unset=True))
        return actor

    def to_serve_options(self) -> dict[str, Any]:
        """Keyword arguments of ``serve.deployment(...)`` / Ray LLM's ``deployment_config``."""
        opts: dict[str, Any] = {
            "ray_actor_options": self.actor_options(),
            "max_ongoing_requests": self.max_ongoing_requests,
            "max_queued_requests": self.max_queued_requests,
            "health_check_period_s": self.health_check_period_s,
            "graceful_shutdown_timeout_s": self.graceful_shutdown_timeout_s,
            "backpressure_config": (
                _plain(self.backpressure_config) if self.backpressure_config is not None
                else {"status_code": 503, "retry_after_s": self.backpressure_retry_after_s}),
        }
        if self.autoscaling is not None:
            opts["autoscaling_config"] = self.autoscaling.to_ray()
        else:
            opts["num_replicas"] = self.num_replicas or 1
        for name in type(self).model_fields:  # every other Ray option that was given
            value = getattr(self, name)
            if name not in _SHORT_KEYS and name not in opts and value is not None \
                    and name in DeploymentSchema.model_fields:  # a subclass's own keys are not Ray's
                opts[name] = _plain(value)
        return opts


#: Engine environment variables vLLM parses as whole numbers (GiB of KV cache, reserved cores).
_VLLM_INT_ENV = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_NUM_OF_RESERVED_CPU")


class ModelDeploymentConfig(Strict):
    """One model deployment (an ``LLMServer`` on vLLM through ``ray.serve.llm``)."""

    model_id: str = Field(..., min_length=1)
    source: str = Field(
        ..., description="'embedded' (the bundled small model), a local folder, or a hub id."
    )
    accelerator: Literal["cpu", "gpu"] = "cpu"
    accelerator_type: str | None = None
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    placement_bundles: list[dict[str, float]] | None = None
    placement_strategy: Literal["PACK", "STRICT_PACK", "SPREAD", "STRICT_SPREAD"] | None = Field(
        None, description="STRICT_PACK keeps a tensor-parallel group on one node (PACK is best effort)."
    )
    deployment: DeploymentOptions = Field(default_factory=lambda: DeploymentOptions(num_cpus=0))
    stream_batching_interval_ms: int = Field(0, ge=0)
    check_async_scheduling: bool = False
    server_cls: str | None = Field(
        None,
        description="Import path of an LLMServer subclass to host instead of TandemLLMServer "
        "(tests use it for a scripted model deployment).",
    )
    server_options: dict[str, Any] = Field(default_factory=dict, description="Passed to server_cls.")
    shared_app: str | None = Field(
        None, min_length=1,
        description="Name of another Serve application in this cluster that serves this model (one built by "
        "`serve.app:build_models_app` from the same model entry): this application calls its "
        "`LLMServer:<model_id>` deployment instead of starting an engine of its own. Several assistants "
        "(or test modules) on one engine.",
    )

    @model_validator(mode="after")
    def _whole_numbers_where_vllm_reads_them(self) -> ModelDeploymentConfig:
        # vLLM reads these with int(): "0.1" would stop the engine at start, the deployment never ready
        for key in _VLLM_INT_ENV:
            value = self.env.get(key)
            if value is not None and not value.strip().isdigit():
                raise ValueError(f"env.{key} must be a whole number (vLLM reads it as an int), got {value!r}")
        return self

    @model_validator(mode="after")
    def _placement_in_one_place(self) -> ModelDeploymentConfig:
        d = self.deployment
        if d.placement_group_bundles is not None or d.placement_group_strategy is not None:
            raise ValueError("a model deployment's placement is `placement_bundles` / `placement_strategy` "
                             "(Ray Serve LLM's placement group), not deployment.placement_group_*")
        return self
