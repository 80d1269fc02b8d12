"""The coach's W1 labels: intent → sub-intents, and the snapshot keys Φ rows read."""

from __future__ import annotations

__all__ = ["INTENT_LABELS", "LABEL_PAIRS", "SNAPSHOT_KEYS", "PREWARM_KEYS", "FILL_KEYS", "BRANCH_OF_INTENT"]

INTENT_LABELS: dict[str, tuple[str, ...]] = {
    "recommend": (
        "lineup_for_opponent", "swap_member", "skill_choice", "nature_choice", "counter_pick",
        "team_from_scratch", "bench_choice", "evolve_first", "level_priority", "event_team",
    ),
    "teaching": (
        "type_matchups", "evolution", "skill_unlocks", "lineup_building", "natures",
        "leveling", "swap_strategy", "counter_theory", "scoring",
    ),
    "knowledge_qa": (
        "species_info", "skill_info", "opponent_info", "event_info", "type_info",
        "nature_info", "evolution_info", "lineup_rules", "score_rules",
    ),
    "account": (
        "inventory_overview", "lineup_overview", "owned_species_count", "skill_inventory",
        "evolution_status", "score_history",
    ),
    "analysis": (
        "opponent_threats", "lineup_weakness", "matchup_compare", "coverage_gaps",
        "score_breakdown", "swap_impact",
    ),
    "planning": ("weekly_plan", "event_prep", "evolution_plan", "skill_plan", "level_plan"),
    "chitchat": ("greeting", "thanks", "smalltalk", "farewell"),
    "meta": ("help", "capabilities", "feedback"),
}
LABEL_PAIRS: tuple[tuple[str, str], ...] = tuple((i, s) for i, subs in INTENT_LABELS.items() for s in subs)

#: Snapshot keys a Φ row may read. Prewarm loads the fast-path ones at session open;
#: fill loads the focus keys at tool time (they depend on what the user talks about).
PREWARM_KEYS: tuple[str, ...] = ("user_id", "opponent_id")
FILL_KEYS: tuple[str, ...] = ("focus_species", "focus_skill")
SNAPSHOT_KEYS: tuple[str, ...] = PREWARM_KEYS + FILL_KEYS

#: Which W3 branch serves an intent (intents not listed get no guidance).
BRANCH_OF_INTENT: dict[str, str] = {
    "recommend": "recommend",
    "analysis": "recommend",
    "teaching": "teaching",
    "planning": "teaching",
    "knowledge_qa": "knowledge_qa",
}
