"""The Dynamic Response (DR) turn: a bounded ReAct orchestrator over typed tools, a generator that
writes only from a validated forward contract, guardrails before / inside / after the loop, a
conservative fallback, and structured events that replay the decisions.

Public API for ``serve/``::

    from pipelines.dr import DRPipeline, DRSettings, LocalToolRunner, Counters
    from pipelines.guardrails import LocalGuardrails

    domain = build_support_domain()
    pipeline = DRPipeline(domain, models, LocalToolRunner(domain, world), LocalGuardrails(),
                          settings=DRSettings(), counters=Counters())

Modules: :mod:`.ports` (ToolRunner / Guardrails protocols and local implementations),
:mod:`.state` (session facts in ``meta["dr"]``), :mod:`.decisions` (schema + parser),
:mod:`.orchestrator` / :mod:`.actions` (the loop), :mod:`.contract` / :mod:`.assemble`
(forward and return contracts, closure), :mod:`.generator` (guarded streaming),
:mod:`.fallback` (triggers, counters), :mod:`.replay`, :mod:`.pipeline`.
"""

from __future__ import annotations

from .contract import ForwardContract, ReturnContract, build_return, check_closure
from .decisions import REASON_CODES, decision_schema, parse_decision
from .fallback import FALLBACK_TRIGGERS, Counters, Fallback
from .orchestrator import Orchestrator
from .outcome import OrchestratorInput, OrchestratorSettings, Outcome
from .pipeline import DRPipeline, DRSettings
from .ports import (
    Guardrails,
    LocalGuardrails,
    LocalToolRunner,
    ToolCallResult,
    ToolRunner,
    ToolSession,
)
from .state import META_KEY, PendingAction, SessionFacts, load_facts

__all__ = [
    "DRPipeline",
    "DRSettings",
    "Orchestrator",
    "OrchestratorInput",
    "OrchestratorSettings",
    "Outcome",
    "ToolRunner",
    "ToolSession",
    "ToolCallResult",
    "LocalToolRunner",
    "Guardrails",
    "LocalGuardrails",
    "Counters",
    "Fallback",
    "FALLBACK_TRIGGERS",
    "ForwardContract",
    "ReturnContract",
    "build_return",
    "check_closure",
    "REASON_CODES",
    "decision_schema",
    "parse_decision",
    "SessionFacts",
    "PendingAction",
    "load_facts",
    "META_KEY",
]
