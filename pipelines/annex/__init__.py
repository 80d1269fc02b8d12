"""The ablation rungs: each is the core (:mod:`pipelines.core`) with parts switched off or swapped.

Kept to measure what each layer of the ``tandem`` turn buys; nothing outside the annex imports it
except the kind registry (:mod:`pipelines.registry`) and the tests.

=============  ==========================================================================
rung           what it is
=============  ==========================================================================
prompting      one generator call with a system prompt and the history (first baseline)
monolithic     one generator call over pre-fetched context (DR's predecessor)
dr             bounded ReAct orchestrator + forward contract + three guardrail rings
pe_agent       plan call → tools serially → reply (Plan-and-Execute)
sgc_w1         + W1: the 4-in-1 stream, narration at once, Φ dispatch mid-stream
sgc_w1w2       + W2: slots, conflicts, paragraph plan, contradiction post-guard
sgc_full       + W3: cross-turn guidance with a session-seeded scheduler
=============  ==========================================================================
"""
