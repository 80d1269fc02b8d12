"""Model-serving config: one model deployment (an ``LLMServer`` on vLLM through ``ray.serve.llm``)
and the Ray Serve options of a deployment, each a strict pydantic model (unknown keys refused).

``serve/config.py`` composes these into the application config; ``models/llm.py`` turns a
:class:`ModelDeploymentConfig` into a ``ray.serve.llm`` deployment; ``models/validate.py`` checks
its engine arguments with vLLM's own parser.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["AutoscalingConfig", "DeploymentOptions", "ModelDeploymentConfig"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AutoscalingConfig(Strict):
    """The subset of Ray Serve's autoscaling config we set (unknown keys rejected)."""

    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(1, ge=1)
    initial_replicas: int | None = Field(None, ge=0)
    target_ongoing_requests: float = Field(2.0, gt=0)
    upscale_delay_s: float = Field(30.0, ge=0)
    downscale_delay_s: float = Field(600.0, ge=0)
    look_back_period_s: float = Field(30.0, gt=0)
    metrics_interval_s: float = Field(10.0, gt=0)

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingConfig:
        if self.max_replicas < self.min_replicas:
            raise ValueError("max_replicas must be >= min_replicas")
        return self


class DeploymentOptions(Strict):
    """Ray Serve options for one CPU deployment (ingress, guardrails, kernels...)."""

    num_cpus: float = Field(0.1, ge=0)
    num_gpus: float = Field(0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict)
    num_replicas: int | None = Field(None, ge=1)
    autoscaling: AutoscalingConfig | None = None
    max_ongoing_requests: int = Field(100, ge=1)
    max_queued_requests: int = Field(-1, ge=-1)
    health_check_period_s: float = Field(10.0, gt=0)
    graceful_shutdown_timeout_s: float = Field(5.0, ge=0)

    @model_validator(mode="after")
    def _one_scaling_mode(self) -> DeploymentOptions:
        if self.num_replicas is not None and self.autoscaling is not None:
            raise ValueError("give num_replicas or autoscaling, not both")
        return self

    def to_serve_options(self) -> dict[str, Any]:
        actor: dict[str, Any] = {"num_cpus": self.num_cpus}
        if self.num_gpus:
            actor["num_gpus"] = self.num_gpus
        if self.resources:
            actor["resources"] = dict(self.resources)
        opts: dict[str, Any] = {
            "ray_actor_options": actor,
            "max_ongoing_requests": self.max_ongoing_requests,
            "max_queued_requests": self.max_queued_requests,
            "health_check_period_s": self.health_check_period_s,
            "graceful_shutdown_timeout_s": self.graceful_shutdown_timeout_s,
        }
        if self.autoscaling is not None:
            opts["autoscaling_config"] = self.autoscaling.model_dump(exclude_none=True)
        else:
            opts["num_replicas"] = self.num_replicas or 1
        return opts


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
