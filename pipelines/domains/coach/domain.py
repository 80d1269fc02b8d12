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

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.domain import CardSpec, DomainTexts, TurnFacts
from pipelines.sgc.w2 import (
    LiveFacts,
    QuerySlots,
    constraints_of,
    diff,
    query_slots_schema,
    repair_slots,
)
from pipelines.sgc.w2_diff import CONFLICT_KINDS, DEFAULT_TIERS

from .labels import BRANCH_OF_INTENT, INTENT_LABELS
from .pack import BRANCHES, coach_rule_tables_dict, coach_tables_holder, load_coach_rule_tables
from .tools import build_registry
from .world import generate_coach_world

__all__ = ["DomainPack", "COACH_TEXTS", "rule_tables_holder", "load_rule_tables"]

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
)
_ARG_KINDS: dict[str, dict[str, str]] = {
    "get_inventory": {"user_id": "user_id"},
    "get_lineups": {"user_id": "user_id"},
    "get_opponent_info": {"opponent_id": "opponent_id"},
    "matchup_scores": {"user_id": "user_id", "opponent_id": "opponent_id"},
    "evolution_paths": {"user_id": "user_id", "species": "species"},
    "species_info": {"species": "species"},
    "skill_info": {"skill": "skill"},
}


def _names_in(text: str, names: Sequence[str]) -> list[str]:
    low = text.lower()
    return [n for n in names if re.search(r"(?<![\w])" + re.escape(n.lower()) + r"(?![\w])", low)]


class DomainPack:
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

    def __init__(self, seed: int = 7) -> None:
        self._registry = build_registry()
        world = generate_coach_world(seed)
        self.species = sorted(world.species)
        self.skills = sorted(world.skills)
        self.opponents = sorted({o.name for o in world.opponents.values()})

    @property
    def registry(self) -> Any:
        return self._registry

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

    def intent_prior(self, text: str) -> list[str] | None:
        return None

    def sub_intent_prior(self, text: str, intent: str) -> list[str] | None:
        return None

    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        return {"species": _names_in(text, self.species), "skill": _names_in(text, self.skills)}

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

    def session_fields(self, facts: TurnFacts) -> dict[str, Any]:
        return {"authenticated_user_id": facts.state.get("user_id"), "observed_ids": []}

    def summarize(self, tool: str, result: Mapping[str, Any] | None, limit: int = 360) -> str:
        text = json.dumps(self.user_state(tool, result), separators=(",", ":"), ensure_ascii=False, default=str)
        return text if len(text) <= limit else text[:limit] + "..."

    def user_state(self, tool: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
        from pipelines.sgc_turn.contract import compact

        if not result:
            return {}
        return {f"{tool}.{k}": compact(v, 6, 120) for k, v in result.items() if k not in ("user_id",)}

    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        return None

    def policy_lines(self, tool: str | None) -> Sequence[str]:
        return ("Only recommend creatures and skills the user owns.",)

    def entity_names(self, facts: TurnFacts) -> list[str]:
        return self.species + self.skills + self.opponents

    def snapshot_values(self, facts: TurnFacts) -> dict[str, Any]:
        out = {k: facts.state[k] for k in ("user_id", "opponent_id") if facts.state.get(k)}
        typed = self.extract_candidates(facts.user_text)
        if typed["species"]:
            out["focus_species"] = typed["species"][-1]
        if typed["skill"]:
            out["focus_skill"] = typed["skill"][-1]
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
        """A template answer from the observations: the best counters, the team size."""
        out: list[str] = []
        for o in facts.observations:
            res = o.get("result") or {}
            if not o.get("ok"):
                continue
            if o.get("tool") == "matchup_scores" and res.get("scores"):
                names = [e["species"] for e in res["scores"][:3]]
                out.append(f"Your best picks for this matchup are {', '.join(names)}.")
            elif o.get("tool") == "get_inventory" and res.get("creatures") is not None:
                out.append(f"You have {len(res['creatures'])} creatures on your team.")
        return out[:2]

    def reply_judges(self, facts: TurnFacts, contract: Any) -> list[Any]:
        from pipelines.sgc_turn.ports import CoachFacts

        live = facts.state.get("live") or {}
        coach_facts = CoachFacts.model_validate({"user_id": live.get("user_id"), "facts": live.get("facts") or {},
                                                 "known_skills": live.get("known_skills") or []})
        from pipelines.sgc_turn.contract import C2, ReplyContract
        from pipelines.sgc_turn.guard import CoachJudge, ReplyJudge

        c2 = contract.c2 or {}
        conflicts = [{k: c.get(k) for k in ("constraint_id", "kind", "tier", "entity", "detail")}
                     for c in c2.get("conflicts") or []]
        view = ReplyContract(user_text="", narration=contract.model_dump_json(),
                             c2=C2(conflicts=conflicts, plan=c2.get("plan") or []) if contract.c2 else None)
        return [CoachJudge(ReplyJudge(coach_facts, view), safe_unowned="", safe_contradiction="")]


def rule_tables_holder() -> Any:
    return coach_tables_holder()


def load_rule_tables(data: Any | None = None) -> Any:
    return load_coach_rule_tables(data)


__all__ += ["BRANCHES"]
