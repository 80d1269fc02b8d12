"""The coach tools: typed read tools over a :class:`CoachWorld`, in a :class:`ToolRegistry`.

Every tool that reads a user's state takes an optional ``user_id``; when it is
left out, the authenticated user of the :class:`ToolContext` is used, and a
user may only read their own state.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.errors import IneligibleAction, InvalidInput
from pipelines.tools import ToolContext, ToolRegistry, ToolSpec

from .world import (
    ELEMENTS,
    STRONG_AGAINST,
    CoachWorld,
    Creature,
    Lineup,
    Opponent,
    Skill,
    Species,
    best_counters,
)

__all__ = [
    "TOOL_NAMES",
    "UserArgs",
    "OpponentArgs",
    "MatchupArgs",
    "EvolutionArgs",
    "SpeciesArgs",
    "SkillArgs",
    "ElementArgs",
    "TypeChartResult",
    "InventoryResult",
    "LineupsResult",
    "MatchupEntry",
    "MatchupResult",
    "EvolutionPath",
    "EvolutionResult",
    "build_registry",
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserArgs(_Args):
    user_id: str | None = None


class OpponentArgs(_Args):
    opponent_id: str = Field(..., min_length=1, description="Opponent id (o01) or name.")


class MatchupArgs(_Args):
    user_id: str | None = None
    opponent_id: str = Field(..., min_length=1)
    top_k: int = Field(5, ge=1, le=20)


class EvolutionArgs(_Args):
    user_id: str | None = None
    species: str | None = None


class SpeciesArgs(_Args):
    species: str = Field(..., min_length=1)


class SkillArgs(_Args):
    skill: str = Field(..., min_length=1)


class ElementArgs(_Args):
    element: str = Field(..., min_length=1, description="An element (fire, water, grass, ...).")


class TypeChartResult(_Args):
    element: str
    strong_against: list[str] = Field(..., description="Elements this element beats.")
    weak_against: list[str] = Field(..., description="Elements that beat this element.")


class InventoryResult(_Args):
    user_id: str
    creatures: list[Creature]


class LineupsResult(_Args):
    user_id: str
    lineups: list[Lineup]
    coach_score: float


class MatchupEntry(_Args):
    creature_id: str
    species: str
    element: str
    level: int
    score: float


class MatchupResult(_Args):
    opponent_id: str
    scores: list[MatchupEntry]


class EvolutionPath(_Args):
    species: str
    evolves_to: str
    evolve_level: int
    owned_creature_id: str | None = None
    owned_level: int | None = Field(None, description="The level of the user's highest-level creature of the species.")
    ready: bool = False


class EvolutionResult(_Args):
    paths: list[EvolutionPath]


def _user(args: Any, ctx: ToolContext, world: CoachWorld) -> str:
    uid = getattr(args, "user_id", None) or ctx.authenticated_user_id
    if uid is None:
        raise InvalidInput("user_id is required (no authenticated user)")
    if uid not in world.users:
        raise InvalidInput(f"unknown user {uid!r}", details={"user_id": uid})
    return uid


def _check_own(args: Any, ctx: ToolContext, world: CoachWorld) -> None:
    uid = getattr(args, "user_id", None)
    if uid is not None and ctx.authenticated_user_id is not None and uid != ctx.authenticated_user_id:
        raise IneligibleAction("a user may only read their own state", details={"reason": "not_own_state"})


def _opponent(world: CoachWorld, key: str) -> Opponent:
    opp = world.opponent_by_name(key)
    if opp is None:
        raise InvalidInput(f"unknown opponent {key!r}", details={"opponent_id": key})
    return opp


def get_inventory(args: UserArgs, ctx: ToolContext, world: CoachWorld) -> InventoryResult:
    uid = _user(args, ctx, world)
    return InventoryResult(user_id=uid, creatures=list(world.users[uid].creatures))


def get_lineups(args: UserArgs, ctx: ToolContext, world: CoachWorld) -> LineupsResult:
    uid = _user(args, ctx, world)
    user = world.users[uid]
    return LineupsResult(user_id=uid, lineups=list(user.lineups), coach_score=user.coach_score)


def get_opponent_info(args: OpponentArgs, ctx: ToolContext, world: CoachWorld) -> Opponent:
    return _opponent(world, args.opponent_id)


def matchup_scores(args: MatchupArgs, ctx: ToolContext, world: CoachWorld) -> MatchupResult:
    uid = _user(args, ctx, world)
    opp = _opponent(world, args.opponent_id)
    entries = [
        MatchupEntry(creature_id=c.creature_id, species=c.species, element=world.element_of(c.species),
                     level=c.level, score=s)
        for c, s in best_counters(world, uid, opp.opponent_id, args.top_k)
    ]
    return MatchupResult(opponent_id=opp.opponent_id, scores=entries)


def evolution_paths(args: EvolutionArgs, ctx: ToolContext, world: CoachWorld) -> EvolutionResult:
    if args.species is not None and args.species not in world.species:
        raise InvalidInput(f"unknown species {args.species!r}", details={"species": args.species})
    owned: dict[str, Creature] = {}
    if args.user_id is not None or ctx.authenticated_user_id is not None:
        for c in world.users[_user(args, ctx, world)].creatures:
            if c.species not in owned or c.level > owned[c.species].level:
                owned[c.species] = c
    paths = []
    for sp in sorted(world.species.values(), key=lambda s: s.name):
        if sp.evolves_to is None or (args.species is not None and args.species not in (sp.name, sp.evolves_to)):
            continue
        mine = owned.get(sp.name)
        paths.append(EvolutionPath(species=sp.name, evolves_to=sp.evolves_to, evolve_level=sp.evolve_level or 0,
                                   owned_creature_id=mine.creature_id if mine else None,
                                   owned_level=mine.level if mine else None,
                                   ready=bool(mine and mine.level >= (sp.evolve_level or 0))))
    return EvolutionResult(paths=paths)


def species_info(args: SpeciesArgs, ctx: ToolContext, world: CoachWorld) -> Species:
    try:
        return world.species[args.species]
    except KeyError:
        raise InvalidInput(f"unknown species {args.species!r}", details={"species": args.species}) from None


def skill_info(args: SkillArgs, ctx: ToolContext, world: CoachWorld) -> Skill:
    try:
        return world.skills[args.skill]
    except KeyError:
        raise InvalidInput(f"unknown skill {args.skill!r}", details={"skill": args.skill}) from None


def type_chart(args: ElementArgs, ctx: ToolContext, world: CoachWorld) -> TypeChartResult:
    element = args.element.strip().lower()
    if element not in ELEMENTS:
        raise InvalidInput(f"unknown element {args.element!r}", details={"element": args.element})
    return TypeChartResult(element=element, strong_against=list(STRONG_AGAINST[element]),
                           weak_against=sorted(e for e, beats in STRONG_AGAINST.items() if element in beats))


_SPECS: tuple[tuple[str, str, type[BaseModel], type[BaseModel], Any, bool], ...] = (
    ("get_inventory", "The user's creatures: species, level, evolved, nature, unlocked skills.",
     UserArgs, InventoryResult, get_inventory, True),
    ("get_lineups", "The user's lineups (members, swap group) and coach scores.",
     UserArgs, LineupsResult, get_lineups, True),
    ("get_opponent_info", "An opponent's team (species and levels), by id or name.",
     OpponentArgs, Opponent, get_opponent_info, False),
    ("matchup_scores", "The user's best creatures against an opponent, best first.",
     MatchupArgs, MatchupResult, matchup_scores, True),
    ("evolution_paths", "Evolution lines (optionally of one species) and which of the user's creatures are ready.",
     EvolutionArgs, EvolutionResult, evolution_paths, True),
    ("species_info", "One species: element, stage, evolution, base power.",
     SpeciesArgs, Species, species_info, False),
    ("skill_info", "One skill: element, power, and the rare event that unlocks it, if any.",
     SkillArgs, Skill, skill_info, False),
    ("type_chart", "One element's row of the type chart: the elements it beats and the elements that beat it.",
     ElementArgs, TypeChartResult, type_chart, False),
)
TOOL_NAMES: tuple[str, ...] = tuple(sorted(s[0] for s in _SPECS))


def build_registry() -> ToolRegistry[CoachWorld]:
    """A fresh registry holding every coach tool (all read tools)."""
    reg: ToolRegistry[CoachWorld] = ToolRegistry()
    for name, desc, args, result, handler, own in _SPECS:
        reg.register(ToolSpec(name=name, description=desc, args_model=args, result_model=result, handler=handler,
                              eligibility=_check_own if own else None))
    return reg
