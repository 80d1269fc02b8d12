"""The Dynamic Response (DR) rung: a bounded ReAct orchestrator over typed tools, a generator that
writes only from a validated forward contract, guardrails before / inside / after the loop, a
conservative fallback, and structured events that replay the decisions.

It is built on the core (:mod:`pipelines.core`): the forward contract and its closure check, the
tool port, outcome and fallback. What is DR's own: its session facts (``meta["dr"]``,
:mod:`.state`), its orchestrator and terminal handlers
(:mod:`.orchestrator`, :mod:`.actions`), its prompts (:mod:`.prompts`), the contract's assembly
(:mod:`.assemble`), the guarded generator step (:mod:`.generator`), replay (:mod:`.replay`) and
the pipeline (:mod:`.pipeline`)::

    from pipelines.annex.dr import DRPipeline, DRSettings
    pipeline = DRPipeline(domain, models, LocalToolRunner(domain, world), LocalGuardrails(),
                          settings=DRSettings(), counters=Counters())
"""

from __future__ import annotations

from pipelines.annex.dr.state import META_KEY, SessionFacts, load_facts

from .inputs import OrchestratorInput, OrchestratorSettings
from .orchestrator import Orchestrator
from .pipeline import DRPipeline, DRSettings

__all__ = [
    "DRPipeline",
    "DRSettings",
    "Orchestrator",
    "OrchestratorInput",
    "OrchestratorSettings",
    "SessionFacts",
    "load_facts",
    "META_KEY",
]
