"""Config → pipeline object. The only place that knows every pipeline kind."""

from __future__ import annotations

from pipelines.prompting import PromptingPipeline, PromptingSettings
from pipelines.protocols import ModelClient
from pipelines.turn import Pipeline
from serve.config import PipelineConfig

__all__ = ["build_pipeline"]


def build_pipeline(cfg: PipelineConfig, models: ModelClient) -> Pipeline:
    if cfg.kind == "prompting":
        return PromptingPipeline(
            models,
            PromptingSettings(
                system_prompt=cfg.system_prompt,
                max_reply_tokens=cfg.max_reply_tokens,
                temperature=cfg.temperature,
                seed=cfg.seed,
            ),
        )
    raise ValueError(f"unknown pipeline kind {cfg.kind!r}")  # unreachable: the config is a Literal
