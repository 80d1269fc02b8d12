"""One registration record per pipeline kind: its typed settings, domains, CPU deployments and builder.

The builder (``serve/app.py``), the ingress and the config loader loop over
:data:`KINDS`; adding a kind touches its own module and one record here.

Every kind has its own settings model (a discriminated union on ``kind``), so a
setting a kind does not read is refused at load instead of silently ignored.

=============  ==================  ==========================================  ==================
kind           domains             CPU deployments                             what it is
=============  ==================  ==========================================  ==================
tandem         any pack            tools, guardrails, rule_kernels             the composed turn
dr             support             tools, guardrails                           DR rung
monolithic     support             tools, guardrails                           DR's predecessor
prompting      any                 —                                           first baseline
pe_agent       coach               tools                                       Plan-and-Execute
sgc_w1/w1w2/   coach               tools, rule_kernels                         the SGC ladder
sgc_full
=============  ==================  ==========================================  ==================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.modelrecord import RecordingModels
from pipelines.tandem.settings import TandemSettings

__all__ = [
    "RunnerSettings",
    "PromptingConfig",
    "MonolithicConfig",
    "DRConfig",
    "SgcConfig",
    "TandemSettings",
    "PipelineSettings",
    "Parts",
    "KindRecord",
    "KINDS",
    "DEPLOYMENTS",
    "kind_record",
    "build_pipeline",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are Tandem, a concise and friendly customer-support assistant. Answer in one to three short sentences."
)


class RunnerSettings(BaseModel):
    """What the turn runner reads, whatever the kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_history_turns: int = Field(6, ge=0, le=50)
    max_text_chars: int = Field(4000, ge=1)
    turn_deadline_s: float = Field(60.0, gt=0)


class _Gen(RunnerSettings):
    max_reply_tokens: int = Field(128, ge=1, le=4096)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    seed: int = 0


class PromptingConfig(_Gen):
    kind: Literal["prompting"] = "prompting"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT


class MonolithicConfig(_Gen):
    kind: Literal["monolithic"] = "monolithic"


class DRConfig(_Gen):
    kind: Literal["dr"] = "dr"
    max_steps: int = Field(3, ge=1, le=10, description="The orchestrator's step cap per turn.")
    orchestrator_max_tokens: int = Field(160, ge=16, le=2048)
    model_timeout_s: float = Field(30.0, gt=0)
    tool_timeout_s: float = Field(10.0, gt=0)


class SgcConfig(_Gen):
    kind: Literal["pe_agent", "sgc_w1", "sgc_w1w2", "sgc_full"] = "sgc_full"
    tool_timeout_s: float = Field(10.0, gt=0)


PipelineSettings = Annotated[
    PromptingConfig | MonolithicConfig | DRConfig | SgcConfig | TandemSettings, Field(discriminator="kind")
]

#: The CPU deployments a kind may need, by role name.
DEPLOYMENTS: tuple[str, ...] = ("tools", "guardrails", "rule_kernels")


@dataclass
class Parts:
    """What a builder may use: models, the domain's name, and the CPU deployments as ports."""

    models: Any
    domain: str
    tools: Any = None  # the one tool port (ToolRunner: call / precheck, with the domain's state methods)
    guardrails: Any = None
    kernels: Any = None
    counters: Any = None


@dataclass(frozen=True)
class KindRecord:
    """One pipeline kind: where it runs, what it needs, how it is built, what it counts."""

    name: str
    domains: tuple[str, ...] | None  # None: any domain
    deployments: tuple[str, ...]
    build: Callable[[Any, Parts], Any]
    #: Replays one logged turn of the kind against its pack (its events, the pack) → a report with ``identical``,
    #: ``logged`` (the decisions) and ``mismatches``; ``None``: the kind's turns are replayed otherwise.
    replay: Callable[[list[dict[str, Any]], Any], Awaitable[Any]] | None = None
    #: The decisions of one logged turn of the kind, read off its own events (its events, the step cap) → facts
    #: the evaluation harness scores; ``None``: the harness reads the turn otherwise.
    analyse: Callable[[list[dict[str, Any]], int], dict[str, Any]] | None = None


def _prompting(s: PromptingConfig, p: Parts) -> Any:
    from pipelines.annex.prompting import PromptingPipeline, PromptingSettings

    return PromptingPipeline(p.models, PromptingSettings(system_prompt=s.system_prompt,
                                                         max_reply_tokens=s.max_reply_tokens,
                                                         temperature=s.temperature, seed=s.seed))


def _monolithic(s: MonolithicConfig, p: Parts) -> Any:
    from pipelines.annex.monolithic import MonolithicPipeline, MonolithicSettings
    from pipelines.domains.support import build_support_domain

    settings = MonolithicSettings(max_reply_tokens=s.max_reply_tokens, temperature=s.temperature, seed=s.seed)
    return MonolithicPipeline(build_support_domain(), p.models, p.tools, p.guardrails, settings=settings,
                              counters=p.counters)


def _dr(s: DRConfig, p: Parts) -> Any:
    from pipelines.annex.dr.inputs import OrchestratorSettings
    from pipelines.annex.dr.pipeline import DRPipeline, DRSettings
    from pipelines.domains import load_domain

    orch = OrchestratorSettings(max_steps=s.max_steps, seed=s.seed, max_tokens=s.orchestrator_max_tokens,
                                model_timeout_s=s.model_timeout_s, tool_timeout_s=s.tool_timeout_s)
    settings = DRSettings(orchestrator=orch, max_reply_tokens=s.max_reply_tokens, temperature=s.temperature,
                          seed=s.seed)
    return DRPipeline(load_domain("support"), p.models, p.tools, p.guardrails, settings=settings,
                      counters=p.counters)


async def _dr_replay(events: list[dict[str, Any]], pack: Any) -> Any:
    from pipelines.annex.dr.replay import replay_turn

    return await replay_turn(events, pack)


def _dr_analyse(events: list[dict[str, Any]], max_steps: int) -> dict[str, Any]:
    from pipelines.annex.dr.analysis import turn_facts

    return turn_facts(events, max_steps)


def _sgc(s: SgcConfig, p: Parts) -> Any:
    from pipelines.annex.sgc_ladder import SgcSettings, build_sgc_pipeline

    settings = SgcSettings(max_reply_tokens=s.max_reply_tokens, temperature=s.temperature, seed=s.seed,
                           tool_timeout_s=s.tool_timeout_s)
    return build_sgc_pipeline(s.kind, p.models, p.tools, p.kernels, settings=settings, counters=p.counters)


def _tandem(s: TandemSettings, p: Parts) -> Any:
    from pipelines.domains import load_domain
    from pipelines.tandem.pipeline import TandemPipeline

    return TandemPipeline(load_domain(p.domain), p.models, p.tools, p.guardrails, p.kernels, settings=s,
                          counters=p.counters)


KINDS: dict[str, KindRecord] = {
    "tandem": KindRecord("tandem", None, ("tools", "guardrails", "rule_kernels"), _tandem),
    "dr": KindRecord("dr", ("support",), ("tools", "guardrails"), _dr, replay=_dr_replay, analyse=_dr_analyse),
    "monolithic": KindRecord("monolithic", ("support",), ("tools", "guardrails"), _monolithic),
    "prompting": KindRecord("prompting", None, (), _prompting),
    "pe_agent": KindRecord("pe_agent", ("coach",), ("tools",), _sgc),
    "sgc_w1": KindRecord("sgc_w1", ("coach",), ("tools", "rule_kernels"), _sgc),
    "sgc_w1w2": KindRecord("sgc_w1w2", ("coach",), ("tools", "rule_kernels"), _sgc),
    "sgc_full": KindRecord("sgc_full", ("coach",), ("tools", "rule_kernels"), _sgc),
}


def kind_record(kind: str) -> KindRecord:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown pipeline kind {kind!r}; known: {', '.join(sorted(KINDS))}") from None


def build_pipeline(settings: Any, parts: Parts) -> Any:
    """The pipeline object for ``settings`` (its ``kind`` picks the record); its model calls are logged in each
    turn's event log (``model.call``: :class:`~pipelines.core.modelrecord.RecordingModels`)."""
    if not isinstance(parts.models, RecordingModels):
        parts = replace(parts, models=RecordingModels(parts.models))
    return kind_record(settings.kind).build(settings, parts)
