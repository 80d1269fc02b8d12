"""Kind → SGC pipeline: the ablation ladder ``pe_agent`` < ``sgc_w1`` < ``sgc_w1w2`` < ``sgc_full``."""

from __future__ import annotations

from typing import Literal

from pipelines.annex.sgc_ladder.contract import SgcSettings
from pipelines.core.ports import LiveStateTools, RuleKernels
from pipelines.protocols import ModelClient
from pipelines.turn import Pipeline

from .counters import SgcCounters
from .pe_agent import PlanExecutePipeline
from .pipeline import SgcPipeline

__all__ = ["SGC_KINDS", "SgcKind", "build_sgc_pipeline"]

SgcKind = Literal["pe_agent", "sgc_w1", "sgc_w1w2", "sgc_full"]
SGC_KINDS: tuple[str, ...] = ("pe_agent", "sgc_w1", "sgc_w1w2", "sgc_full")


def build_sgc_pipeline(
    kind: str,
    models: ModelClient,
    tools: LiveStateTools,
    kernels: RuleKernels | None,
    *,
    settings: SgcSettings | None = None,
    counters: SgcCounters | None = None,
) -> Pipeline:
    """One rung of the ladder; every rung shares ``counters`` when given (one per replica).

    ``kernels`` may be None only for ``pe_agent``. Raises ValueError for an unknown kind.
    """
    settings = settings or SgcSettings()
    counters = counters or SgcCounters()
    if kind == "pe_agent":
        return PlanExecutePipeline(models, tools, settings=settings, counters=counters)
    if kind in ("sgc_w1", "sgc_w1w2", "sgc_full"):
        if kernels is None:
            raise ValueError(f"pipeline kind {kind!r} needs the rule kernels")
        return SgcPipeline(kind, models, tools, kernels, settings=settings, counters=counters)  # type: ignore[arg-type]
    raise ValueError(f"unknown SGC pipeline kind {kind!r}; expected one of {', '.join(SGC_KINDS)}")
