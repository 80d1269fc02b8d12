"""The SGC turn pipelines and the ablation ladder (coach domain).

Rungs: ``pe_agent`` (Plan-and-Execute baseline), ``sgc_w1`` (+ W1 perception:
streaming 4-in-1 call, Φ dispatch during narration), ``sgc_w1w2`` (+ W2
grounding: slot extraction, conflicts, paragraph plan, sentence post-guard),
``sgc_full`` (+ W3 guidance with the session-seeded scheduler).

* :mod:`.ports` — :class:`LiveStateTools` / :class:`RuleKernels` and their local implementations.
* :mod:`.perception`, :mod:`.grounding`, :mod:`.guard`, :mod:`.steps` — the turn's steps.
* :mod:`.pipeline`, :mod:`.pe_agent`, :mod:`.factory` — the pipelines and :func:`build_sgc_pipeline`.

Nothing here imports Ray or vLLM.
"""

from pipelines.annex.sgc_ladder.contract import SgcSettings, ladder_contract, sgc_view
from pipelines.annex.sgc_ladder.guard import guard_gate
from pipelines.annex.sgc_ladder.ports import ToolsStateLoader
from pipelines.core.contract import C1, C2, C3
from pipelines.core.kernels import LocalRuleKernels, ScheduleResult, decide_w3
from pipelines.core.ports import LiveStateTools, RuleKernels, W1Tables
from pipelines.domains.coach.judge import GUARD_KINDS, CoachJudge, ReplyJudge
from pipelines.domains.coach.runner import CoachFacts, LocalCoachTools

from .counters import SgcCounters
from .factory import SGC_KINDS, SgcKind, build_sgc_pipeline
from .pe_agent import PlanExecutePipeline
from .pipeline import SgcPipeline

__all__ = [
    "C1",
    "C2",
    "C3",
    "ladder_contract",
    "sgc_view",
    "SgcSettings",
    "SgcCounters",
    "SGC_KINDS",
    "SgcKind",
    "build_sgc_pipeline",
    "GUARD_KINDS",
    "CoachJudge",
    "guard_gate",
    "ReplyJudge",
    "PlanExecutePipeline",
    "SgcPipeline",
    "CoachFacts",
    "LiveStateTools",
    "LocalCoachTools",
    "LocalRuleKernels",
    "RuleKernels",
    "ToolsStateLoader",
    "W1Tables",
    "ScheduleResult",
    "decide_w3",
]
