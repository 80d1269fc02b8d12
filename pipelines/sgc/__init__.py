"""State-Grounded Conditioning: the pure rule kernels W1 (perception + Φ), W2 (grounding + Ψ), W3 (guidance).

Modules:

* :mod:`pipelines.sgc.w1` — incremental parser of the 4-in-1 perception stream;
  :mod:`pipelines.sgc.w1_grammar` — its Lark grammar;
  :mod:`pipelines.sgc.phi` — Φ table and lookup;
  :mod:`pipelines.sgc.snapshot` — live-state snapshot, prewarm / fill;
  :mod:`pipelines.sgc.w1_run` — the W1 policy driver (freeze, dispatch, counters).
* :mod:`pipelines.sgc.w2` — slots, repairs, diff, tiers, Ψ, paragraph plan (``ground``).
* :mod:`pipelines.sgc.w3` — cross-turn state and the seeded guidance scheduler.
* :mod:`pipelines.sgc.tables` — the rule-table bundle and its hot-reload holder.

Nothing here imports Ray or vLLM.
"""

from pipelines.sgc.canonical import canonical_json, session_seed
from pipelines.sgc.phi import PhiOutcome, PhiTable, load_phi_table, phi_lookup
from pipelines.sgc.snapshot import LoadedState, Snapshot, StateLoader, fill, prewarm
from pipelines.sgc.tables import ReloadOutcome, RuleTables, RuleTablesHolder, load_rule_tables
from pipelines.sgc.w1 import (
    IntentParsed,
    NarrationDelta,
    PerceptionParser,
    PerceptionResult,
    PlanParsed,
    SubIntentParsed,
    ToolCall,
)
from pipelines.sgc.w1_grammar import grammar
from pipelines.sgc.w1_run import (
    DispatchTools,
    FallThroughCounters,
    PerceptionOutcome,
    PerceptionRun,
)
from pipelines.sgc.w2 import GroundingResult, LiveFacts, QuerySlots, ground
from pipelines.sgc.w3 import (
    AnswerMeta,
    BranchTable,
    IntentContext,
    SessionRng,
    resolve_cross_turn_state,
    schedule,
    schedule_turn,
)

__all__ = [
    "canonical_json",
    "session_seed",
    "PhiOutcome",
    "PhiTable",
    "load_phi_table",
    "phi_lookup",
    "LoadedState",
    "Snapshot",
    "StateLoader",
    "fill",
    "prewarm",
    "ReloadOutcome",
    "RuleTables",
    "RuleTablesHolder",
    "load_rule_tables",
    "IntentParsed",
    "NarrationDelta",
    "PerceptionParser",
    "PerceptionResult",
    "PlanParsed",
    "SubIntentParsed",
    "ToolCall",
    "grammar",
    "DispatchTools",
    "FallThroughCounters",
    "PerceptionOutcome",
    "PerceptionRun",
    "GroundingResult",
    "LiveFacts",
    "QuerySlots",
    "ground",
    "AnswerMeta",
    "BranchTable",
    "IntentContext",
    "SessionRng",
    "resolve_cross_turn_state",
    "schedule",
    "schedule_turn",
]
