"""The coach's W1 labels: intent → sub-intents, the cues that narrow them, and the snapshot keys Φ rows read.

* :data:`INTENT_LABELS` — intent → sub-intents.
* :data:`INTENT_CUES` — explicit cues per intent: when any fires, W1's grammar may only
  choose among the intents whose cues fired (a union, so an ambiguous text keeps every
  reading it supports); none firing leaves every intent open.
* :data:`SUB_INTENT_CUES` — within an intent, cues per sub-intent, the same way: only the
  sub-intents whose cue fired, or every sub-intent when none did. The pack adds cues of its
  own world (a named species, skill, element or opponent, :mod:`.domain`).

The cues are generic English for what each label means (how a player asks for a pick, an
explanation, a fact, a count, a plan), never phrasings of an evaluation suite.
"""

from __future__ import annotations

import re

__all__ = ["INTENT_LABELS", "LABEL_PAIRS", "SNAPSHOT_KEYS", "PREWARM_KEYS", "FILL_KEYS", "BRANCH_OF_INTENT",
           "INTENT_CUES", "SUB_INTENT_CUES", "cued"]

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
FILL_KEYS: tuple[str, ...] = ("focus_species", "focus_skill", "focus_element")
SNAPSHOT_KEYS: tuple[str, ...] = PREWARM_KEYS + FILL_KEYS

#: Which W3 branch serves an intent (intents not listed get no guidance).
BRANCH_OF_INTENT: dict[str, str] = {
    "recommend": "recommend",
    "analysis": "recommend",
    "teaching": "teaching",
    "planning": "teaching",
    "knowledge_qa": "knowledge_qa",
}


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


_OPPONENT = r"\b(against|versus|vs\.?|counter\w*|beat(s|ing)?|fight\w*|face|facing|rival|opponent\w*|duel\w*)\b"
_EVOLVE = r"\bevol\w*"
_SKILL = r"\b(skills?|moves?|attacks?|abilit\w+)\b"
_NATURE = r"\bnatures?\b"
_LEVEL = r"\b(level\w*|train\w*|grind\w*|xp|experience)\b"
_LINEUP = r"\b(lineups?|line-ups?|teams?|squads?|rosters?|party)\b"
_SWAP = r"\b(swap\w*|bench\w*|substitut\w*|replace\w*|sub (in|out))\b"
_SCORE = r"\b(scores?|scoring|points|rating|rank\w*)\b"
_EVENT = r"\b(events?|tournament\w*|cup|league)\b"

# Explicit cues: when any fires, W1 may only choose among the intents it names.
INTENT_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("recommend", _rx(
        r"\b(recommend\w*|suggest\w*|advi[cs]e|should i\b|shall i\b|would you (use|pick|bring|choose)|"
        r"(who|which|what)\b.{0,40}\b(should|would|do i|to) (use|bring|send|pick|choose|play|field|take|lead|run|"
        r"start|put|go with)|best (pick|choice|option|counter|creature|member|lead|lineup|team)s?|"
        r"worth (it|a spot|keeping|using|training|a place)|send (out|in)|go with|pick for|good pick|"
        r"(do|does|did|would|will|could) (the )?(best|better|well)|best against|strongest against)\b")),
    ("analysis", _rx(
        r"\b(compar\w*|versus|vs\.?|weak(ness\w*|est|er|ly)?|gaps?|holes?|threat\w*|danger\w*|"
        r"how (strong|good|well|weak|bad)|strength\w*|coverage|breakdown|break down|analy[sz]\w*|stack up|"
        r"chances?|odds|match ?ups? (look|like))\b")),
    ("teaching", _rx(
        r"\b(explain\w*|teach\w*|how (do|does|did|can|would)\b.{0,40}\b(work|beat|change|affect|matter|"
        r"decide|count)|why (do|does|is|are|did)|what (beats|counters|is strong|is weak)|strong against|"
        r"weak against|effective against|type chart|the basics|tips?|learn\w*|understand\w*|rule of thumb|"
        r"in general|generally)\b")),
    ("knowledge_qa", _rx(
        r"\b(what (element|type|kind|stage|level)\b|tell me about|info\w* (on|about)|stats? (of|for|on)|"
        r"describe|what (is|are) (a |an |the )?(move|skill|species|creature)s?\b|what does\b.{0,40}\bdo\b|"
        r"(what|who) do(es)? \w+ evolve (into|to)|evolves? into)\b")),
    ("account", _rx(
        r"\b(how many|list (my|all|the|every)|show (me )?my|my (inventory|collection|box)|do i own|"
        r"what i (have|own)|i own|owned)\b")),
    ("planning", _rx(
        r"\b(plan\w*|schedul\w*|roadmap|this week|next week|coming (week|days|month)|weekly|daily|"
        r"prepar\w*|prep\b|get ready|evolv\w* (next|soon)|can evolve|next (step|steps)|what (should|do) i "
        r"(train|level|work on|focus on)|training)\b")),
    ("chitchat", _rx(
        r"^\W*(hi|hello|hey|hiya|yo|howdy|good (morning|afternoon|evening)|greetings)\b|"
        r"\b(thanks?|thank you|thx|cheers|appreciate\w*|(that was|that's|very|so|really) (useful|helpful)|"
        r"bye|goodbye|see you (later|soon|next|around|tomorrow)|talk later|nice to (meet|see) you|"
        r"how are you)\b")),
    ("meta", _rx(
        r"\b(what (kinds?|sorts?|types?) of (questions|things|stuff)|what can you|"
        r"how can you help|how do you work|your (capabilities|features|limits)|what do you do|who are you|"
        r"feedback|help me use)\b")),
)

#: intent → (sub-intent, cue) in label order; none firing leaves every sub-intent of the intent open.
SUB_INTENT_CUES: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "recommend": (
        ("lineup_for_opponent", _rx(_OPPONENT)), ("swap_member", _rx(_SWAP)),
        ("skill_choice", _rx(_SKILL)), ("nature_choice", _rx(_NATURE)), ("counter_pick", _rx(_OPPONENT)),
        ("team_from_scratch", _rx(r"\b(build|from scratch|new (team|lineup)|start over|make (me )?a team)\b")),
        ("bench_choice", _rx(_SWAP)), ("evolve_first", _rx(_EVOLVE)), ("level_priority", _rx(_LEVEL)),
        ("event_team", _rx(_EVENT)),
    ),
    "teaching": (
        ("type_matchups", _rx(r"\b(elements?|types?|beats?|strong against|weak against|effective|type chart)\b")),
        ("evolution", _rx(_EVOLVE)), ("skill_unlocks", _rx(r"\b(unlock\w*|learn\w* (a |new )?(skill|move)s?)\b")),
        ("lineup_building", _rx(r"\b(build\w*|lineups?|team (building|composition))\b")),
        ("natures", _rx(_NATURE)), ("leveling", _rx(_LEVEL)), ("swap_strategy", _rx(_SWAP)),
        ("counter_theory", _rx(r"\bcounter\w*")), ("scoring", _rx(_SCORE)),
    ),
    "knowledge_qa": (
        ("skill_info", _rx(r"\b(move|skill|attack)\b")), ("opponent_info", _rx(r"\b(opponent|rival|trainer)\b")),
        ("event_info", _rx(_EVENT)), ("type_info", _rx(r"\b(element|type)s?\b")), ("nature_info", _rx(_NATURE)),
        ("evolution_info", _rx(_EVOLVE)), ("lineup_rules", _rx(r"\b(lineup|team) (rules?|size|limits?)\b")),
        ("score_rules", _rx(_SCORE)),
    ),
    "account": (
        ("inventory_overview", _rx(r"\b(inventory|collection|box|creatures|everything i own)\b")),
        ("lineup_overview", _rx(r"\b(lineups?|teams?)\b")),
        ("owned_species_count", _rx(r"\b(how many|count|number of)\b")),
        ("skill_inventory", _rx(_SKILL)), ("evolution_status", _rx(_EVOLVE)), ("score_history", _rx(_SCORE)),
    ),
    "analysis": (
        ("opponent_threats", _rx(r"\b(threat\w*|danger\w*|worr\w*)\b")),
        ("lineup_weakness", _rx(r"\b(weak\w*|gaps?|holes?)\b")),
        ("matchup_compare", _rx(r"\b(compar\w*|versus|vs\.?|stack up|how (strong|good|well)|chances?|odds)\b")),
        ("coverage_gaps", _rx(r"\b(coverage|gaps?|missing)\b")), ("score_breakdown", _rx(_SCORE)),
        ("swap_impact", _rx(_SWAP)),
    ),
    "planning": (
        ("weekly_plan", _rx(r"\b(week\w*|schedul\w*|daily|routine)\b")), ("event_prep", _rx(_EVENT)),
        ("evolution_plan", _rx(_EVOLVE)), ("skill_plan", _rx(_SKILL)), ("level_plan", _rx(_LEVEL)),
    ),
    "chitchat": (
        ("greeting", _rx(r"^\W*(hi|hello|hey|hiya|yo|howdy|good (morning|afternoon|evening)|greetings)\b|"
                         r"\bnice to (meet|see) you\b")),
        ("thanks", _rx(r"\b(thanks?|thank you|thx|cheers|appreciate\w*|useful|helpful)\b")),
        ("smalltalk", _rx(r"\b(how are you|how's it going|what's up)\b")),
        ("farewell", _rx(r"\b(bye|goodbye|see you (later|soon|next|around|tomorrow)|talk later|good night)\b")),
    ),
    "meta": (
        ("help", _rx(r"\b(help|how do i use|how does this work)\b")),
        ("capabilities", _rx(r"\b(can you|what (kinds?|sorts?|types?) of|capabilit\w*|features?|do you do)\b")),
        ("feedback", _rx(r"\b(feedback|suggestion for you|complain\w*|bug)\b")),
    ),
}


def cued(cues: tuple[tuple[str, re.Pattern[str]], ...], text: str) -> set[str]:
    """The labels whose cue fires on ``text``."""
    return {label for label, rx in cues if rx.search(text)}
