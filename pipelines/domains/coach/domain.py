"""The coach pack behind the :class:`pipelines.domain.Domain` protocol (the tandem turn on the coach world).

A coach session plays as its bound user (the request's ``user_id``); its live
state (user, opponent) and satisfiable facts (owned creatures, known species,
styles) come from the coach tools (the one tool port, with the coach's state
methods ``load_state`` / ``live_facts``) before W1 (:meth:`DomainPack.prepare`). Grounded candidates: the session's user
and opponent, the species / skills the user owns (records) or names (their
words). W2 conflicts are the coach diff of the slot model's repaired slots
against the live facts; W3 candidates are the user's best counters.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipelines.core.contract import C2, EligibleAction, ForwardContract, compact
from pipelines.domain import CardSpec, DomainTexts, PackBase, TurnFacts
from pipelines.sgc.w2 import (
    LiveFacts,
    QuerySlots,
    constraints_of,
    diff,
    query_slots_schema,
    repair_slots,
)
from pipelines.sgc.w2_diff import CONFLICT_KINDS, DEFAULT_TIERS

from .judge import CoachJudge, ReplyJudge
from .labels import BRANCH_OF_INTENT, INTENT_CUES, INTENT_LABELS, SUB_INTENT_CUES, cued
from .pack import BRANCHES, coach_rule_tables_dict
from .runner import CoachFacts, LocalCoachTools
from .tools import build_registry
from .world import ELEMENTS, CoachWorld, generate_coach_world

__all__ = ["DomainPack", "COACH_TEXTS"]

COACH_TEXTS = DomainTexts(
    safe_ack="Let me look at your team.",
    narration_completion="look at your team.",
    fallback="Sorry, I can't work that out right now. Could you ask me again in a moment?",
    handoff="A coach from our team will pick this up with you.",
    clarify={"details": "Could you tell me a bit more about what you'd like help with?",
             "choose": "Which one do you mean: {options}?"},
    templates={
        "chitchat/greeting": "Hi! I can help you build lineups, pick counters and plan your training.",
        "chitchat/thanks": "You're welcome! Good luck in your next battle.",
        "chitchat/farewell": "Good luck out there!",
        "chitchat/smalltalk": "I'm here to help with your team whenever you're ready.",
        "meta/help": "Ask me for a lineup against an opponent, a counter pick, or what to train next.",
        "meta/capabilities": "I can suggest lineups and counters from the creatures you own, and explain matchups.",
        "answer": "Here is what I found about your team.",
    },
    guidance={},
    refusals={"not_own_state": "I can only read your own team and lineups"},
)
_ARG_KINDS: dict[str, dict[str, str]] = {
    "get_inventory": {"user_id": "user_id"},
    "get_lineups": {"user_id": "user_id"},
    "get_opponent_info": {"opponent_id": "opponent_id"},
    "matchup_scores": {"user_id": "user_id", "opponent_id": "opponent_id"},
    "evolution_paths": {"user_id": "user_id", "species": "species"},
    "species_info": {"species": "species"},
    "skill_info": {"skill": "skill"},
    "type_chart": {"element": "element"},
}


_FACT_QUESTION = re.compile(r"\b(what|which|tell me|describe|info\w*|stats?)\b", re.I)
_EVOLVE_CUE = re.compile(r"\bevol\w*", re.I)


def _names_in(text: str, names: Sequence[str]) -> list[str]:
    low = text.lower()
    return [n for n in names if re.search(r"(?<![\w])" + re.escape(n.lower()) + r"(?![\w])", low)]


class DomainPack(PackBase):
    """The coach domain (see module docstring)."""

    name = "coach"
    labels: Mapping[str, Sequence[str]] = INTENT_LABELS
    cards: Sequence[CardSpec] = ()
    texts: DomainTexts = COACH_TEXTS
    orchestrator_policy = (
        "You are the orchestrator of a creature-battle coach. Recommend only creatures and skills the "
        "user owns. Read the user's team and the opponent before recommending. Never invent names or ids."
    )
    generator_persona = (
        "You are a friendly creature-battle coach. Write the reply from the facts below only: recommend only "
        "creatures and skills the user owns, and never invent names."
    )
    conflict_kinds: Sequence[str] = CONFLICT_KINDS
    branch_of_intent: Mapping[str, str] = BRANCH_OF_INTENT
    entity_kind: str | None = None  # a coach change names no record of the user's (it has no writes)
    transfer_tool: str | None = None
    transfer_reasons: Mapping[str, str] = {}
    binds_user: bool = True  # a coach session plays as the request's user (bound on the tools)

    def __init__(self, seed: int = 7) -> None:
        self._registry = build_registry()
        world = generate_coach_world(seed)
        self.species = sorted(world.species)
        self.skills = sorted(world.skills)
        self.opponents = sorted({o.name for o in world.opponents.values()})

    def evaluation(self) -> Any:
        """The pack's suite, turn judge and load scripts for ``tandem eval`` (:mod:`.evaluation`)."""
        from .evaluation import CoachEvaluation

        return CoachEvaluation()

    # -- serving (the tools deployment) -------------------------------------------------------

    persistent = False  # read-only game data: generated from the seed on every start

    def new_world(self, seed: int, dataset: str | None = None) -> CoachWorld:
        return generate_coach_world(seed)

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> CoachWorld:
        raise NotImplementedError("the coach world is not stored: it is generated from the seed")

    def tool_runner(self, world: Any, ledger: Any) -> LocalCoachTools:
        return LocalCoachTools(world)

    def arg_kinds(self, tool: str) -> Mapping[str, str]:
        return _ARG_KINDS.get(tool, {})

    def optional_empty(self, tool: str) -> frozenset[str]:
        return frozenset()

    def clarify_key(self, kind: str) -> str | None:
        return "details"

    def rule_tables(self) -> dict[str, Any]:
        return coach_rule_tables_dict()

    def read_tools(self, facts: TurnFacts) -> list[str]:
        return self._registry.names()

    def cards_for(self, intent: str, sub_intent: str, facts: TurnFacts) -> list[CardSpec]:
        return []

    def change_intents(self) -> set[str]:
        return set()

    def intent_prior(self, text: str) -> list[str] | None:
        """The intents the text's cues allow (:data:`.labels.INTENT_CUES`), in label order; ``None``: any.

        A species or skill of the world named in a question of fact ("what", "tell me",
        "describe") also allows ``knowledge_qa``.
        """
        hits = cued(INTENT_CUES, text)
        if hits and _FACT_QUESTION.search(text) and (_names_in(text, self.species) or _names_in(text, self.skills)):
            hits.add("knowledge_qa")
        return [i for i in INTENT_LABELS if i in hits] or None

    def sub_intent_prior(self, text: str, intent: str) -> list[str] | None:
        """The sub-intents of ``intent`` the text's cues allow, in label order; ``None``: any.

        Besides :data:`.labels.SUB_INTENT_CUES`, the world's own names cue: an opponent named
        is a question about that opponent, a skill named one about that skill, a species named
        (for a fact) one about that species, an element named one about the type chart.
        """
        hits = cued(SUB_INTENT_CUES.get(intent, ()), text)
        if _names_in(text, self.opponents):
            hits |= {"lineup_for_opponent", "counter_pick", "opponent_threats", "matchup_compare", "opponent_info"}
        if intent == "knowledge_qa" and _names_in(text, self.skills):
            hits = {"skill_info"}  # a fact about the skill named
        elif intent == "knowledge_qa" and _names_in(text, self.species):
            hits = {"evolution_info" if _EVOLVE_CUE.search(text) else "species_info"}
        elif _names_in(text, ELEMENTS) and intent in ("teaching", "knowledge_qa"):
            hits.add("type_matchups" if intent == "teaching" else "type_info")
        allowed = [s for s in INTENT_LABELS.get(intent, ()) if s in hits]
        return allowed or None

    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        return {"species": _names_in(text, self.species), "skill": _names_in(text, self.skills),
                "element": _names_in(text, ELEMENTS)}

    def fixed_candidates(self) -> dict[str, list[str]]:
        return {}

    def slot_schema(self) -> dict[str, Any] | None:
        return query_slots_schema()

    def needs_slots(self, facts: TurnFacts) -> bool:
        return True

    def absorb_slots(self, slots: Mapping[str, Any], facts: TurnFacts) -> dict[str, list[str]]:
        try:
            parsed = QuerySlots.model_validate(slots)
        except ValueError:
            return {}
        facts.state = {**facts.state, "slots": parsed.model_dump(mode="json")}
        named = [e for e in parsed.wanted_entities if e in self.species and _names_in(facts.user_text, [e])]
        return {"species": named}

    async def prepare(self, facts: TurnFacts, tools: Any) -> None:
        """Read the session's live state and facts from the coach tools (before W1)."""
        loaded = await tools.load_state(facts.session_id, ["user_id", "opponent_id"])
        values = dict(getattr(loaded, "values", None) or (loaded or {}).get("values", {}))
        live = await tools.live_facts(facts.session_id)
        live_dump = live.model_dump(mode="json") if hasattr(live, "model_dump") else dict(live)
        facts.state = {**facts.state, **{k: values.get(k) for k in ("user_id", "opponent_id")}, "live": live_dump}
        if values.get("user_id"):
            facts.candidates.add("user_id", values["user_id"], "record")
            facts.user_id = values["user_id"]
        if values.get("opponent_id"):
            facts.candidates.add("opponent_id", values["opponent_id"], "record")
        owned = (live_dump.get("facts") or {}).get("owned") or []
        facts.candidates.add_all({"species": [e["name"] for e in owned],
                                  "skill": [s for e in owned for s in e.get("skills", [])]}, "record")

    def restore(self, facts: TurnFacts) -> None:
        facts.state = {k: v for k, v in facts.state.items() if k not in ("slots", "live")}

    def users(self, world: Any) -> list[str]:
        return list(world.users)

    def owner_facts(self, world: Any, user_id: str, texts: Sequence[str] = ()) -> TurnFacts:
        """A session bound to ``user_id`` (and their first opponent), its live state read as a turn reads it."""
        tools = self.tool_runner(world, None)
        facts = TurnFacts(session_id=f"owner:{user_id}", user_text=texts[-1] if texts else "",
                          user_texts=list(texts), user_id=user_id)
        tools.bind_user(facts.session_id, user_id, next(iter(world.opponents), None))
        asyncio.run(self.prepare(facts, tools))
        return facts

    @property
    def sample_texts(self) -> tuple[str, ...]:
        """Words that name the world's species, skills and elements (what the extractors find)."""
        return (f"Is {self.species[0]} good against {ELEMENTS[0]} types with {self.skills[0]}?",)

    def session_fields(self, facts: TurnFacts) -> dict[str, Any]:
        return {"authenticated_user_id": facts.state.get("user_id"), "observed_ids": []}

    def summarize(self, tool: str, result: Mapping[str, Any] | None, limit: int = 360) -> str:
        text = json.dumps(self.user_state(tool, result), separators=(",", ":"), ensure_ascii=False, default=str)
        return text if len(text) <= limit else text[:limit] + "..."

    def user_state(self, tool: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
        if not result:
            return {}
        return {f"{tool}.{k}": compact(v, 6, 120) for k, v in result.items() if k not in ("user_id",)}

    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        return None

    def policy_lines(self, tool: str | None) -> Sequence[str]:
        return ("Only recommend creatures and skills the user owns.",)

    def refusal_line(self, refusal: Mapping[str, Any], title: str, contract: ForwardContract) -> str:
        why = self.texts.refusals.get(str(refusal.get("reason")), "") or "it is not allowed here"
        return f"I can't {title.lower()}: {why}."

    def executed_lines(self, action: EligibleAction, contract: ForwardContract) -> list[str]:
        return []  # the coach has no write tools

    def entity_names(self, facts: TurnFacts) -> list[str]:
        return self.species + self.skills + self.opponents

    def snapshot_values(self, facts: TurnFacts) -> dict[str, Any]:
        out = {k: facts.state[k] for k in ("user_id", "opponent_id") if facts.state.get(k)}
        typed = self.extract_candidates(facts.user_text)
        if typed["species"]:
            out["focus_species"] = typed["species"][-1]
        if typed["skill"]:
            out["focus_skill"] = typed["skill"][-1]
        if typed["element"]:
            out["focus_element"] = typed["element"][-1]
        return out

    def conflicts(self, facts: TurnFacts) -> list[dict[str, Any]]:
        live = LiveFacts.model_validate((facts.state.get("live") or {}).get("facts") or {})
        slots = QuerySlots.model_validate(facts.state.get("slots") or {})
        repaired, _ = repair_slots(slots, live.known_entities)
        facts.state = {**facts.state, "constraints": constraints_of(repaired)}
        return [c.model_dump() for c in diff(repaired, live, DEFAULT_TIERS)]

    def constraints(self, facts: TurnFacts) -> list[str]:
        return list(facts.state.get("constraints") or [])

    def w3_candidates(self, facts: TurnFacts) -> list[dict[str, Any]]:
        for o in facts.observations:
            if o.get("tool") == "matchup_scores" and o.get("ok") and o.get("result"):
                return [{"id": f"creature:{e['species']}", "weight": round(max(float(e["score"]), 1.0) / 50.0, 3)}
                        for e in (o["result"].get("scores") or [])[:5]]
        return []

    def answer_lines(self, facts: TurnFacts, contract: Any) -> list[str]:
        """A template answer from the observations, most specific first: the best counters, an
        element's row of the type chart, a species' element, a skill, who can evolve, the natures or levels
        of the team when the question is about those, the team size."""
        return _ranked_lines(facts, sub_intent=_sub_intent(contract))[:2]

    def lead_lines(self, facts: TurnFacts, contract: Any) -> list[str]:
        """What the reply states first, from the observations alone: the one fact that answers the
        question (the best counter, an element's matchups, a species' element, who can evolve now, the
        team's natures or levels asked about); the generator words the rest. Team-size and lineup reads
        lead with nothing."""
        return _ranked_lines(facts, below=_LEAD_BELOW, sub_intent=_sub_intent(contract))[:1]

    def reply_judges(self, facts: TurnFacts, contract: ForwardContract) -> list[Any]:
        """The ownership / contradiction judge over the session's live facts (read in :meth:`prepare`)."""
        live = facts.state.get("live") or {}
        coach_facts = CoachFacts.model_validate({"user_id": live.get("user_id"), "facts": live.get("facts") or {},
                                                 "known_skills": live.get("known_skills") or []})
        c2 = contract.c2 or {}
        conflicts = [{k: c.get(k) for k in ("constraint_id", "kind", "tier", "entity", "detail")}
                     for c in c2.get("conflicts") or []]
        view = C2(conflicts=conflicts, plan=c2.get("plan") or []) if contract.c2 else None
        return [CoachJudge(ReplyJudge(coach_facts, contract.model_dump_json(), view), safe_unowned="",
                           safe_contradiction="")]


#: ``_answer_line`` ranks below this lead a reply (the fact that answers); the others only stand in for one.
_LEAD_BELOW = 5


def _join(names: Sequence[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _a(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


#: Sub-intents whose question an inventory read answers with one field of the team (not its size).
_NATURE_SUBS = frozenset({"natures", "nature_choice", "nature_info"})
_LEVEL_SUBS = frozenset({"leveling", "level_priority", "level_plan"})


def _sub_intent(contract: Any) -> str:
    c1 = getattr(contract, "c1", None) or {}
    return str(c1.get("sub_intent") or "")


def _ranked_lines(facts: TurnFacts, below: int | None = None, sub_intent: str = "") -> list[str]:
    """The answer lines of the turn's successful observations, most specific first (ranks under ``below``)."""
    lines = [x for o in facts.observations if o.get("ok") and isinstance(o.get("result"), dict)
             for x in _answer_line(str(o.get("tool")), o["result"], sub_intent) if below is None or x[0] < below]
    return [text for _, text in sorted(lines, key=lambda x: x[0])]


def _team_line(creatures: Sequence[Any], sub_intent: str) -> list[tuple[int, str]]:
    """The team's natures or levels (its three highest-level creatures) when that is what was asked."""
    team = sorted((c for c in creatures if isinstance(c, Mapping) and c.get("species")),
                  key=lambda c: (-int(c.get("level") or 0), str(c.get("species"))))[:3]
    if not team:
        return []
    if sub_intent in _NATURE_SUBS and all(c.get("nature") for c in team):
        return [(4, "Your creatures' natures: " + _join([f"{c['species']} is {c['nature']}" for c in team]) + ".")]
    if sub_intent in _LEVEL_SUBS:
        return [(4, "Your highest-level creatures are "
                    + _join([f"{c['species']} (level {int(c.get('level') or 0)})" for c in team]) + ".")]
    return []


def _answer_line(tool: str, res: Mapping[str, Any], sub_intent: str = "") -> list[tuple[int, str]]:
    """(rank, sentence) stating what one successful observation answers (rank 0 most specific)."""
    if tool == "matchup_scores" and res.get("scores"):
        names = [e["species"] for e in res["scores"][:3]]
        return [(0, f"Your best pick for this matchup is {names[0]}"
                    + (f", then {_join(names[1:])}." if names[1:] else "."))]
    if tool == "type_chart" and res.get("element"):
        el = str(res["element"])
        return [(1, f"{el.capitalize()} creatures are beaten by {_join(res.get('weak_against') or [])} "
                    f"and strong against {_join(res.get('strong_against') or [])}.")]
    if tool == "species_info" and res.get("name") and res.get("element"):
        evolves = f", and it evolves into {res['evolves_to']}" if res.get("evolves_to") else ""
        return [(2, f"{res['name']} is {_a(str(res['element']))} creature{evolves}.")]
    if tool == "skill_info" and res.get("name") and res.get("element"):
        return [(2, f"{res['name']} is {_a(str(res['element']))} move with power {res.get('power')}.")]
    if tool == "evolution_paths" and res.get("paths") is not None:
        ready = sorted((p for p in res["paths"] if p.get("ready")),
                       key=lambda p: (-(p.get("owned_level") or 0), str(p.get("owned_creature_id"))))
        if ready:
            return [(3, f"{_join([p['species'] for p in ready][:3])} can evolve now.")]
        return [(6, "None of your creatures can evolve yet.")]
    if tool == "get_inventory" and res.get("creatures") is not None:
        n = len(res["creatures"])
        return [*_team_line(res["creatures"], sub_intent),
                (7, f"You have {n} creature{'' if n == 1 else 's'} on your team.")]
    return []


__all__ += ["BRANCHES"]
