"""What the coach pack gives ``tandem eval`` and the load generator. The ``coach`` suite: labelled coach sessions generated with a seed, and their reference directions.

The session skeleton — which player, and the intent of every turn — comes from
:func:`pipelines.domains.coach.generate_sessions` (seeded, intent-weighted). Its own
texts are not sent: several of them repeat one sentence under different labels, and
its fallback phrasing echoes the sub-intent's name. Each turn's text is drawn instead
from :data:`PHRASINGS`, written for this suite (held out: no prompt, table or scripted
text of the packs uses them, and none names an intent label — a unit test checks
both), one list per intent, filled from the seeded world.

Every turn is labelled with its intent (what ``intent_accuracy`` compares W1's intent
with) and, where the world determines one, a *reference direction* computed from state
alone (what ``grounding_accuracy`` checks the delivered text names):

* ``best_counter`` — the player's best owned counter to the session's opponent;
* ``counter_elements`` — an element strong against the named element (any of them);
* ``element`` — the element of the named species;
* ``evolve`` — the player's highest-level creature that can evolve now.

Sessions play against the opponent the app binds to a new coach session
(:data:`pipelines.domains.coach.runner.DEFAULT_OPPONENT`), so the references use it too.

Each turn is judged by :class:`CoachEvaluation`'s turn judge with the measures of
:mod:`.eval_measures`; the load generator's ``coach`` mix replays the seeded sessions' own texts.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from pipelines.core.evaluation import (
    Case,
    EvalTurn,
    PackEvaluation,
    SuiteOptions,
    TurnJudge,
    TurnView,
)

from .eval_measures import (
    consecutive_repeats,
    contradiction,
    grounding_ok,
    intent_ok,
    names_in,
    unowned_mentions,
)

__all__ = ["PHRASINGS", "Phrasing", "coach_suite", "reference_for", "CoachEvaluation"]

Phrasing = tuple[str, str | None]  # (template, reference kind)

#: intent → (template, reference kind). Fields: {opponent} {mine} {species} {skill} {element}.
PHRASINGS: dict[str, tuple[Phrasing, ...]] = {
    "recommend": (
        ("Which of my creatures would do best against {opponent}?", "best_counter"),
        ("I face {opponent} tonight. Who do I send out first?", "best_counter"),
        ("Is {mine} worth a spot in my battle team right now?", None),
    ),
    "analysis": (
        ("How strong is my roster compared to {opponent}'s squad?", None),
        ("Where are the gaps in my team when I fight {opponent}?", None),
    ),
    "teaching": (
        ("What beats {element} creatures?", "counter_elements"),
        ("Explain to me how the elements beat each other.", None),
        ("How do creature natures change a battle?", None),
    ),
    "knowledge_qa": (
        ("What element is {species}?", "element"),
        ("What does the move {skill} do?", None),
    ),
    "account": (
        ("How many creatures do I have right now?", None),
        ("List the moves my {mine} knows.", None),
    ),
    "planning": (
        ("Which of my creatures is ready to evolve next?", "evolve"),
        ("Lay out my training schedule for the coming week.", None),
    ),
    "chitchat": (
        ("Hey there, good to see you!", None),
        ("Cheers, that was useful.", None),
    ),
    "meta": (
        ("What kinds of questions can you answer for me?", None),
        ("What are you able to do?", None),
    ),
}


def reference_for(kind: str | None, world: Any, user_id: str, opponent_id: str,
                  fields: dict[str, str]) -> dict[str, Any] | None:
    """The reference direction of one turn, from state alone (``None``: none determined)."""
    from .world import STRONG_AGAINST, best_counters

    if kind == "best_counter":
        creature, score = best_counters(world, user_id, opponent_id, 1)[0]
        return {"kind": kind, "accept": [creature.species], "detail": f"score {score}"}
    if kind == "counter_elements":
        beats = sorted(e for e, strong in STRONG_AGAINST.items() if fields["element"] in strong)
        return {"kind": kind, "accept": beats, "detail": fields["element"]}
    if kind == "element":
        return {"kind": kind, "accept": [world.species[fields["species"]].element], "detail": fields["species"]}
    if kind == "evolve":
        ready = [c for c in world.users[user_id].creatures
                 if world.species[c.species].evolves_to and c.level >= (world.species[c.species].evolve_level or 0)]
        top = max(ready, key=lambda c: (c.level, c.creature_id), default=None)
        return None if top is None else {"kind": kind, "accept": [top.species], "detail": ""}
    return None


def coach_suite(world_seed: int, *, seed: int = 0, sessions: int = 4, turns: int = 5,
                opponent_id: str | None = None) -> list[Case]:
    """``sessions`` labelled sessions of ``turns`` turns each (same arguments ⇒ same cases)."""
    from . import coach_tables_holder, generate_coach_world, generate_sessions
    from .runner import DEFAULT_OPPONENT

    world = generate_coach_world(world_seed)
    opp = opponent_id or DEFAULT_OPPONENT
    skeleton = generate_sessions(world, coach_tables_holder().active, seed=seed, n_sessions=sessions,
                                 turns_per_session=turns)
    rng = random.Random(f"tandem-eval-coach:{world_seed}:{seed}")
    species = sorted(world.species)
    out: list[Case] = []
    for s in skeleton:
        mine = list(world.users[s.user_id].creatures)
        last = ""
        eval_turns: list[EvalTurn] = []
        for t in s.turns:
            options = [p for p in PHRASINGS[t.intent] if not eval_turns or p[0] != last] or list(PHRASINGS[t.intent])
            template, ref_kind = rng.choice(options)
            last = template
            pick = rng.choice(mine)
            fields = {"opponent": world.opponents[opp].name, "mine": pick.species,
                      "species": rng.choice(species), "skill": rng.choice(sorted(pick.skills)),
                      "element": world.species[rng.choice(species)].element}
            label = {"intent": t.intent, "reference": reference_for(ref_kind, world, s.user_id, opp, fields)}
            eval_turns.append(EvalTurn(template.format(**fields), label=label, user_id=s.user_id))
        out.append(Case("coach", s.session_id, tuple(eval_turns),
                        info={"user_id": s.user_id, "opponent_id": opp, "world_seed": world_seed}))
    return out


class CoachEvaluation(PackEvaluation):
    """The coach pack's evaluation hooks: its suite, its turn judge, its load scripts."""

    def suites(self) -> Mapping[str, Callable[[SuiteOptions], list[Case]]]:
        return {"coach": lambda o: coach_suite(o.world_seed, seed=o.seed, sessions=o.sessions, turns=o.turns)}

    def turn_judge(self, case: Case, world_seed: int) -> TurnJudge:
        """The coach measures of one session's turns (the previous turn's W3 meta kept for repeats)."""
        from . import generate_coach_world

        world = generate_coach_world(world_seed)
        prev: list[Any] = [None]

        def judge(v: TurnView) -> tuple[dict[str, bool | list[Any] | None], dict[str, Any]]:
            intent = (v.own.get("c1") or {}).get("intent")
            user = world.users.get(v.case.info.get("user_id") or v.turn.user_id or "")
            opp = world.opponents.get(v.case.info.get("opponent_id") or "")
            unowned = None if user is None else unowned_mentions(
                v.delivered, species=world.species, owned=[c.species for c in user.creatures],
                user_text=v.turn.text, opponent_team=[m.species for m in opp.team] if opp else [])
            w3 = v.meta.get("w3")
            repeat = None if w3 is None else (
                [str(w3.get("subject_id"))] if consecutive_repeats([prev[0], w3]) else [])
            prev[0] = w3
            measures: dict[str, bool | list[Any] | None] = {
                "intent_accuracy": intent_ok(v.turn.label, intent) if v.perceives else None,
                "grounding_accuracy": grounding_ok(v.turn.label, v.delivered),
                "unowned_mentions": unowned,
                "consecutive_repeats": repeat,
                "contradictions": ["reply"] if contradiction(v.reply, list(world.species) + list(world.skills))
                else [],
            }
            return measures, {"intent": intent, "named": names_in(v.delivered, world.species), "w3": w3}

        return judge

    def load_sessions(self, seed: int, n_sessions: int, turns: int) -> list[tuple[str, ...]]:
        """The user texts of the pack's seeded session scripts."""
        from . import generate_coach_world, generate_sessions, load_coach_rule_tables

        sessions = generate_sessions(generate_coach_world(7), load_coach_rule_tables(), seed=seed,
                                     n_sessions=n_sessions, turns_per_session=turns)
        return [tuple(t.user_text for t in s.turns) for s in sessions]
