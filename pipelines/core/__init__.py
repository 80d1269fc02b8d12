"""The neutral core every turn builds on: the contract, the ports, outcome and fallback, one turn.

::

    contract    ForwardContract (c1, c2, c3) → ReturnContract; reference closure
    fallback    triggers and classes; Stop ends a decision with one
    outcome     where a decision ended (path, card, executed write, clarify, escalation)
    ports       ToolRunner / Guardrails / RuleKernels / LiveStateTools, the write ledger
    runner      LocalToolRunner: a pack's tools in process, exactly-once writes
    kernels     LocalRuleKernels and the W3 decision
    decisions   the grounded offer, its decoding schema and its parser
    tools       ToolCaller: one turn's tool calls through the port, observations folded
    domain      the Domain protocol a pack implements (re-exported for packs by pipelines.domain)

The core imports no domain pack and no pipeline family; the ``tandem`` turn
(:mod:`pipelines.tandem`) is built on it and on the ``Domain`` protocol alone, and the ablation
rungs (:mod:`pipelines.annex`) are the core with parts switched off or swapped.
"""
