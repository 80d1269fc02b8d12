"""Seeded multi-turn coach sessions: user texts, live-state snapshots, slots and reference directions.

:func:`generate_sessions` scripts sessions for tests and benchmarks. Each
:class:`ScriptTurn` carries what the pipeline would see (the user's text, the
live-state snapshot values and version, the slots an extractor would produce —
including the typical extraction mistakes the W2 repairs fix), a well-formed
perception stream, the W3 candidates, and the *reference direction* computed
from state (e.g. the best owned counter to the opponent in focus).
"""

from __future__ import annotations

import json
import random
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipelines.sgc.tables import RuleTables
from pipelines.sgc.w2 import (
    AttributePref,
    GlobalConstraint,
    LiveFacts,
    NaturePref,
    OwnedEntity,
    QuerySlots,
    SwapGroup,
)
from pipelines.sgc.w3 import Candidate, IntentContext

from .labels import BRANCH_OF_INTENT, INTENT_LABELS
from .world import NATURES, STRONG_AGAINST, CoachWorld, Creature, best_counters

__all__ = [
    "SUPPORTED_STYLES",
    "ReferenceDirection",
    "ScriptTurn",
    "CoachSession",
    "live_facts_for",
    "candidates_for",
    "generate_sessions",
]

SUPPORTED_STYLES = frozenset({"aggressive", "defensive", "balanced"})
_STYLES = ("aggressive", "defensive", "balanced", "flashy", "sneaky")
_INTENT_WEIGHTS = {"recommend": 5, "teaching": 3, "knowledge_qa": 3, "analysis": 2, "account": 1,
                   "planning": 1, "chitchat": 1, "meta": 1}


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReferenceDirection(_M):
    """What a correct answer should point to, computed from state (not from a model)."""

    kind: str
    subject: str | None = None
    detail: str = ""


class ScriptTurn(_M):
    index: int
    user_text: str
    intent: str
    sub_intent: str
    c1: IntentContext
    slots: QuerySlots
    snapshot: dict[str, Any]
    live_version: int
    stream: str
    candidates: tuple[Candidate, ...]
    reference: ReferenceDirection


class CoachSession(_M):
    session_id: str
    user_id: str
    turns: tuple[ScriptTurn, ...]


def live_facts_for(world: CoachWorld, user_id: str) -> LiveFacts:
    """The W2 facts of one user: owned creatures (by species), known species, opponents, styles."""
    owned = tuple(
        OwnedEntity(name=c.species, level=c.level, evolved=c.evolved, nature=c.nature, skills=frozenset(c.skills))
        for c in world.users[user_id].creatures
    )
    opponents = {o.name for o in world.opponents.values()} | set(world.opponents)
    return LiveFacts(owned=owned, known_entities=frozenset(world.species), known_opponents=frozenset(opponents),
                     supported_styles=SUPPORTED_STYLES)


def candidates_for(world: CoachWorld, tables: RuleTables, user_id: str, intent: str,
                   opponent_id: str | None) -> tuple[Candidate, ...]:
    """W3 candidates for the intent's branch: best counters (recommend) or the branch pool."""
    branch = BRANCH_OF_INTENT.get(intent)
    if branch is None:
        return ()
    table = tables.w3[branch]
    pool = [Candidate(id=e.id) for e in table.pool]
    if branch == "recommend" and opponent_id is not None:
        pool += [Candidate(id=f"creature:{c.species}", weight=round(max(s, 1.0) / 50.0, 3))
                 for c, s in best_counters(world, user_id, opponent_id, 5)]
    return tuple(pool)


def _slots(
    rng: random.Random, world: CoachWorld, sub: str, mine: list[Creature], opp_name: str
) -> tuple[str, QuerySlots]:
    x = rng.choice(mine)
    other = rng.choice(sorted(world.species))
    el = world.species[x.species].element
    if sub in ("lineup_for_opponent", "counter_pick", "opponent_threats", "lineup_weakness"):
        styles = (rng.choice(_STYLES),) if rng.random() < 0.5 else ()
        gc = (GlobalConstraint(key="min_level", value=str(rng.randrange(10, 50))),) if rng.random() < 0.3 else ()
        nat = (NaturePref(nature=rng.choice(NATURES)),) if rng.random() < 0.3 else ()
        text = f"Who should I bring against {opp_name}?" + (f" Something {styles[0]}." if styles else "")
        return text, QuerySlots(opponent_entities=(opp_name,), style_prefs=styles, global_constraints=gc,
                                nature_prefs=nat)
    if sub in ("swap_member", "skill_choice", "skill_plan"):
        skill = rng.choice([s.name for s in world.skills.values() if s.element == el])
        excl = (x.species,) if rng.random() < 0.6 else ()  # the extraction mistake repair rule 1 fixes
        pref = AttributePref(entity=x.species, attribute="skill", value=skill, op="change")
        text = f"Swap out {x.species}'s skill for {skill}."
        return text, QuerySlots(excluded_entities=excl, attribute_prefs=(pref,))
    if sub in ("team_from_scratch", "bench_choice", "level_plan"):
        wanted = (x.species, other) if rng.random() < 0.5 else (x.species,)
        styles: tuple[str, ...] = (other,) if rng.random() < 0.3 else ()  # entity parsed as a style (rule 2)
        prefs: tuple[AttributePref, ...] = ()
        if rng.random() < 0.3:  # an entity parsed as an attribute value (rule 2)
            prefs = (AttributePref(attribute="member", value=rng.choice(sorted(world.species))),)
        group = SwapGroup(n=rng.randrange(3, 9), k=rng.randrange(0, 3))
        excl = tuple(c.species for c in mine) if rng.random() < 0.05 else ()
        return (f"Build me a team with {' and '.join(wanted)}.",
                QuerySlots(wanted_entities=wanted, style_prefs=styles, attribute_prefs=prefs,
                           n_pick_k_swap_group=group, excluded_entities=excl))
    if sub in ("nature_choice", "natures"):
        return (f"Should {x.species} be {rng.choice(NATURES)}?",
                QuerySlots(nature_prefs=(NaturePref(entity=x.species, nature=rng.choice(NATURES)),)))
    if sub in ("evolve_first", "evolution", "evolution_plan", "evolution_status"):
        return (f"Should I evolve {x.species} first?",
                QuerySlots(attribute_prefs=(AttributePref(entity=x.species, attribute="evolved", value="yes"),)))
    if sub in ("species_info", "evolution_info"):
        return f"Tell me about {other}.", QuerySlots()
    if sub == "greeting":
        return "Hi coach!", QuerySlots()
    return f"A question about {sub.replace('_', ' ')}.", QuerySlots()


def _reference(world: CoachWorld, user_id: str, sub: str, opp_id: str, slots: QuerySlots,
               focus: str) -> ReferenceDirection:
    if sub in ("lineup_for_opponent", "counter_pick", "opponent_threats", "lineup_weakness", "matchup_compare"):
        c, s = best_counters(world, user_id, opp_id, 1)[0]
        return ReferenceDirection(kind="best_counter", subject=c.species, detail=f"score {s}")
    if sub in ("swap_member", "skill_choice") and slots.attribute_prefs:
        ent = slots.attribute_prefs[0].entity
        best = max((c for c in world.users[user_id].creatures if c.species == ent), key=lambda c: c.level)
        skill = max(best.skills, key=lambda k: (world.skills[k].power, k))
        return ReferenceDirection(kind="best_unlocked_skill", subject=skill, detail=ent or "")
    if sub in ("evolve_first", "evolution", "evolution_plan", "evolution_status"):
        ready = [c for c in world.users[user_id].creatures
                 if world.species[c.species].evolves_to and c.level >= (world.species[c.species].evolve_level or 0)]
        top = max(ready, key=lambda c: (c.level, c.creature_id), default=None)
        return ReferenceDirection(kind="evolve", subject=top.species if top else None)
    if sub == "type_matchups":
        lead = world.species[world.opponents[opp_id].team[0].species].element
        beats = sorted(e for e, strong in STRONG_AGAINST.items() if lead in strong)
        return ReferenceDirection(kind="type_advice", subject=lead, detail=",".join(beats))
    if sub == "species_info":
        return ReferenceDirection(kind="species_fact", subject=focus, detail=world.species[focus].element)
    return ReferenceDirection(kind="none")


def _stream(tables: RuleTables, intent: str, sub: str, snapshot: dict[str, Any], narration: str) -> str:
    row = tables.phi_index.get((intent, sub))
    calls = []
    for t in row.tools if row else []:
        args = dict(t.args)
        args.update({k: snapshot.get(v) for k, v in (t.args_from or {}).items()})
        calls.append({"tool": t.tool, "args": args})
    if row is None:
        calls = [{"tool": "get_inventory", "args": {"user_id": snapshot.get("user_id")}}]
    plan = json.dumps(calls)  # "tool" before "args", as the grammar orders them
    return (f"<INTENT>{intent}</INTENT>\n<SUB_INTENT>{sub}</SUB_INTENT>\n"
            f"<NARRATION>{narration}</NARRATION>\n<PLAN>{plan}</PLAN>")


def generate_sessions(world: CoachWorld, tables: RuleTables, *, seed: int = 0, n_sessions: int = 20,
                      turns_per_session: int = 12) -> list[CoachSession]:
    """Deterministic scripted sessions over ``world`` (same arguments ⇒ same sessions)."""
    rng = random.Random(f"coach-sessions:{world.seed}:{seed}")
    intents = sorted(INTENT_LABELS)
    weights = [_INTENT_WEIGHTS[i] for i in intents]
    sessions = []
    for s in range(n_sessions):
        user_id = rng.choice(sorted(world.users))
        mine = list(world.users[user_id].creatures)
        opp_id = rng.choice(sorted(world.opponents))
        version = 1
        turns = []
        for t in range(turns_per_session):
            if rng.random() < 0.15:
                version += 1  # live state moved on (a level-up, a new unlock…)
            if rng.random() < 0.1:
                opp_id = rng.choice(sorted(world.opponents))
            intent = rng.choices(intents, weights)[0]
            sub = rng.choice(INTENT_LABELS[intent])
            focus_species = rng.choice(sorted(world.species))
            snapshot: dict[str, Any] = {"user_id": user_id, "focus_species": focus_species,
                                        "focus_skill": rng.choice(sorted(world.skills))}
            if rng.random() < 0.85:
                snapshot["opponent_id"] = opp_id
            opp_name = world.opponents[opp_id].name
            text, slots = _slots(rng, world, sub, mine, opp_name)
            c1 = IntentContext(intent=intent, sub_intent=sub, excluded_subjects=tuple(
                f"creature:{e}" for e in slots.excluded_entities))
            turns.append(ScriptTurn(
                index=t, user_text=text, intent=intent, sub_intent=sub, c1=c1, slots=slots, snapshot=snapshot,
                live_version=version,
                stream=_stream(tables, intent, sub, snapshot, f"Looking at {sub.replace('_', ' ')} for you."),
                candidates=candidates_for(world, tables, user_id, intent, opp_id),
                reference=_reference(world, user_id, sub, opp_id, slots, focus_species),
            ))
        sessions.append(CoachSession(session_id=f"coach-{seed}-{s:03d}", user_id=user_id, turns=tuple(turns)))
    return sessions
