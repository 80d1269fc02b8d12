"""The coach domain pack: a seeded creature-battle world, its tools, labels, rule tables and sessions.

* :mod:`.world` — :func:`generate_coach_world` (deterministic), type chart, matchup scores.
* :mod:`.tools` — :func:`build_registry` (get_inventory, get_lineups, get_opponent_info,
  matchup_scores, evolution_paths, species_info, skill_info).
* :mod:`.labels` — W1 intent / sub-intent labels, snapshot keys, intent → W3 branch.
* :mod:`.pack` — the Φ / Ψ / tiers / W3 tables (``tables/*.yaml``) and their validated bundle.
* :mod:`.sessions` — scripted multi-turn sessions with reference directions.
"""

from .labels import BRANCH_OF_INTENT, FILL_KEYS, INTENT_LABELS, PREWARM_KEYS, SNAPSHOT_KEYS
from .pack import coach_rule_tables_dict, coach_tables_holder, load_coach_rule_tables
from .sessions import CoachSession, ScriptTurn, candidates_for, generate_sessions, live_facts_for
from .tools import TOOL_NAMES, build_registry
from .world import CoachWorld, best_counters, generate_coach_world

__all__ = [
    "BRANCH_OF_INTENT",
    "FILL_KEYS",
    "INTENT_LABELS",
    "PREWARM_KEYS",
    "SNAPSHOT_KEYS",
    "coach_rule_tables_dict",
    "coach_tables_holder",
    "load_coach_rule_tables",
    "CoachSession",
    "ScriptTurn",
    "candidates_for",
    "generate_sessions",
    "live_facts_for",
    "TOOL_NAMES",
    "build_registry",
    "CoachWorld",
    "best_counters",
    "generate_coach_world",
]
