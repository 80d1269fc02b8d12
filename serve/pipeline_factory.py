"""Config → pipeline object. The only place that knows every pipeline kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.prompting import PromptingPipeline, PromptingSettings
from pipelines.protocols import ModelClient
from pipelines.turn import Pipeline
from serve.config import PipelineConfig

__all__ = ["PipelineParts", "build_pipeline", "NEEDS_TOOLS", "NEEDS_COACH"]

NEEDS_TOOLS = frozenset({"monolithic", "dr"})
NEEDS_COACH = frozenset({"pe_agent", "sgc_w1", "sgc_w1w2", "sgc_full"})


@dataclass
class PipelineParts:
    """What a pipeline may need besides the models (handles already wrapped in Protocols)."""

    tools: Any = None
    guardrails: Any = None
    counters: Any = None
    kernels: Any = None


def build_pipeline(cfg: PipelineConfig, models: ModelClient, parts: PipelineParts | None = None) -> Pipeline:
    parts = parts or PipelineParts()
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
    if cfg.kind in NEEDS_COACH:
        from pipelines.sgc_turn import SgcSettings, build_sgc_pipeline

        settings = _settings(SgcSettings, cfg)
        return build_sgc_pipeline(cfg.kind, models, parts.tools, parts.kernels, settings=settings,
                                  counters=parts.counters)
    from pipelines.domains.support import build_support_domain

    domain = build_support_domain()
    if cfg.kind == "monolithic":
        from pipelines.monolithic import MonolithicPipeline, MonolithicSettings

        return MonolithicPipeline(
            domain, models, parts.tools, parts.guardrails,
            settings=_settings(MonolithicSettings, cfg),
        )
    if cfg.kind == "dr":
        from pipelines.dr.outcome import OrchestratorSettings
        from pipelines.dr.pipeline import DRPipeline, DRSettings

        orch = OrchestratorSettings(
            max_steps=cfg.max_steps, seed=cfg.seed, max_tokens=cfg.orchestrator_max_tokens,
            model_timeout_s=cfg.model_timeout_s, tool_timeout_s=cfg.tool_timeout_s,
        )
        settings = DRSettings(orchestrator=orch, max_reply_tokens=cfg.max_reply_tokens,
                              temperature=cfg.temperature, seed=cfg.seed)
        return DRPipeline(domain, models, parts.tools, parts.guardrails, settings=settings, counters=parts.counters)
    raise ValueError(f"unknown pipeline kind {cfg.kind!r}")  # unreachable: the config is a Literal


def _settings(cls: Any, cfg: PipelineConfig) -> Any:
    """Fill the settings fields that share a name with the pipeline config."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    known = {"max_reply_tokens": cfg.max_reply_tokens, "temperature": cfg.temperature, "seed": cfg.seed}
    return cls(**{k: v for k, v in known.items() if k in names})
