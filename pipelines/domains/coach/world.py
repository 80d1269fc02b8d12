"""The coach world: a synthetic, seeded competitive creature-battle game.

Eight elements with a fixed type chart (each strong against two, weak against
two); species in evolution lines; skills per element, some unlocked only by a
rare event; users who own creatures (level, evolved or not, nature, unlocked
skills) and lineups (three members plus a swap group); opponents with teams;
coach scores. :func:`generate_coach_world` is deterministic in its seed, and
:func:`matchup_score` / :func:`best_counters` give the reference direction
("the best owned counter to this opponent") computed from state.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "WORLD_VERSION",
    "ELEMENTS",
    "STRONG_AGAINST",
    "NATURES",
    "Species",
    "Skill",
    "Creature",
    "Lineup",
    "User",
    "OpponentMember",
    "Opponent",
    "CoachWorld",
    "effectiveness",
    "matchup_score",
    "best_counters",
    "generate_coach_world",
]

WORLD_VERSION = "coach-world-1"
ELEMENTS: tuple[str, ...] = ("fire", "water", "grass", "electric", "earth", "air", "shadow", "light")
STRONG_AGAINST: dict[str, tuple[str, str]] = {
    "fire": ("grass", "shadow"),
    "water": ("fire", "earth"),
    "grass": ("water", "earth"),
    "electric": ("water", "air"),
    "earth": ("fire", "electric"),
    "air": ("grass", "light"),
    "shadow": ("light", "electric"),
    "light": ("shadow", "air"),
}
NATURES: tuple[str, ...] = ("brave", "calm", "timid", "jolly", "bold", "modest")
_PREFIX = {"fire": "Ember", "water": "Tide", "grass": "Leaf", "electric": "Volt",
           "earth": "Terra", "air": "Gale", "shadow": "Umbra", "light": "Lumi"}
_SUFFIX = ("fox", "wing", "drake", "shell", "mite", "horn", "claw", "fin", "paw", "fang")
_SKILL_WORDS = {
    "fire": ("Flare", "Blaze", "Cinder Veil", "Inferno"),
    "water": ("Ripple", "Torrent", "Mist Guard", "Tidal Crash"),
    "grass": ("Vine Lash", "Spore Cloud", "Root Hold", "Verdant Storm"),
    "electric": ("Spark", "Static Field", "Bolt Rush", "Thunderclap"),
    "earth": ("Rock Toss", "Quake", "Sand Wall", "Tectonic Slam"),
    "air": ("Gust", "Tailwind", "Cyclone", "Skyfall"),
    "shadow": ("Shade Bite", "Night Veil", "Hex", "Eclipse"),
    "light": ("Gleam", "Prism Ward", "Radiance", "Solar Lance"),
}
_OPPONENT_NAMES = ("Rival Kai", "Ace Mira", "Coach Oren", "Champion Vex", "Ranger Lio",
                   "Duelist Sora", "Captain Ida", "Warden Pax", "Mystic Nell", "Rookie Tam")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Species(_M):
    name: str
    element: str
    stage: int = Field(..., ge=1, le=2)
    evolves_to: str | None = None
    evolves_from: str | None = None
    evolve_level: int | None = None
    base_power: int


class Skill(_M):
    name: str
    element: str
    power: int
    rare: bool = False
    unlock_event: str | None = None


class Creature(_M):
    creature_id: str
    species: str
    level: int = Field(..., ge=1, le=100)
    evolved: bool
    nature: str
    skills: tuple[str, ...]


class Lineup(_M):
    lineup_id: str
    name: str
    members: tuple[str, ...] = Field(..., description="creature ids, in battle order")
    swap_group: tuple[str, ...] = Field(default=(), description="bench creature ids that may swap in")
    coach_score: float


class User(_M):
    user_id: str
    name: str
    creatures: tuple[Creature, ...]
    lineups: tuple[Lineup, ...]
    coach_score: float


class OpponentMember(_M):
    species: str
    level: int


class Opponent(_M):
    opponent_id: str
    name: str
    team: tuple[OpponentMember, ...]


class CoachWorld(_M):
    version: str = WORLD_VERSION
    seed: int
    species: dict[str, Species]
    skills: dict[str, Skill]
    users: dict[str, User]
    opponents: dict[str, Opponent]

    def element_of(self, species: str) -> str:
        return self.species[species].element

    def creature(self, user_id: str, creature_id: str) -> Creature:
        for c in self.users[user_id].creatures:
            if c.creature_id == creature_id:
                return c
        raise KeyError(creature_id)

    def opponent_by_name(self, name: str) -> Opponent | None:
        for o in self.opponents.values():
            if o.name == name or o.opponent_id == name:
                return o
        return None


def effectiveness(attacker: str, defender: str) -> float:
    """Damage multiplier of element ``attacker`` against element ``defender``."""
    if defender in STRONG_AGAINST[attacker]:
        return 2.0
    if attacker in STRONG_AGAINST[defender]:
        return 0.5
    return 1.0


def _score(world_species: dict[str, Species], species: str, level: int, opponent: Opponent) -> float:
    el = world_species[species].element
    raw = 0.0
    for m in opponent.team:
        oel = world_species[m.species].element
        mult = effectiveness(el, oel) / effectiveness(oel, el)
        raw += {4.0: 2.0, 2.0: 1.0, 1.0: 0.0, 0.5: -1.0, 0.25: -2.0}[mult] + (level - m.level) / 20.0
    return round(50.0 + 10.0 * raw / len(opponent.team), 2)


def matchup_score(world: CoachWorld, creature: Creature, opponent: Opponent) -> float:
    """0–100-ish score of one owned creature against an opponent's team (higher is better)."""
    return _score(world.species, creature.species, creature.level, opponent)


def best_counters(world: CoachWorld, user_id: str, opponent_id: str, k: int = 5) -> list[tuple[Creature, float]]:
    """The user's ``k`` best creatures against the opponent, best first (ties by creature id)."""
    opp = world.opponents[opponent_id]
    scored = [(c, matchup_score(world, c, opp)) for c in world.users[user_id].creatures]
    scored.sort(key=lambda cs: (-cs[1], cs[0].creature_id))
    return scored[:k]


def _species_and_skills(rng: random.Random) -> tuple[dict[str, Species], dict[str, Skill]]:
    species: dict[str, Species] = {}
    skills: dict[str, Skill] = {}
    for el in ELEMENTS:
        suffixes = rng.sample(_SUFFIX, 3)
        base, evolved, solo = (_PREFIX[el] + s for s in suffixes)
        lvl = rng.randrange(16, 36)
        species[base] = Species(name=base, element=el, stage=1, evolves_to=evolved, evolve_level=lvl,
                                base_power=rng.randrange(40, 60))
        species[evolved] = Species(name=evolved, element=el, stage=2, evolves_from=base,
                                   base_power=rng.randrange(65, 90))
        species[solo] = Species(name=solo, element=el, stage=1, base_power=rng.randrange(50, 75))
        for i, word in enumerate(_SKILL_WORDS[el]):
            rare = i == 3
            skills[word] = Skill(name=word, element=el, power=40 + 15 * i + rng.randrange(0, 10), rare=rare,
                                 unlock_event=f"event:{word.lower().replace(' ', '_')}" if rare else None)
    return species, skills


def generate_coach_world(seed: int = 7, *, n_users: int = 12, n_opponents: int = 10) -> CoachWorld:
    """A deterministic coach world: the same seed always gives the same world."""
    rng = random.Random(f"coach-world:{seed}")
    species, skills = _species_and_skills(rng)
    names = sorted(species)
    opponents: dict[str, Opponent] = {}
    for i in range(n_opponents):
        oid = f"o{i + 1:02d}"
        team = tuple(OpponentMember(species=s, level=rng.randrange(20, 61)) for s in rng.sample(names, 3))
        opponents[oid] = Opponent(opponent_id=oid, name=_OPPONENT_NAMES[i % len(_OPPONENT_NAMES)], team=team)
    users: dict[str, User] = {}
    for u in range(n_users):
        uid = f"u{u + 1:03d}"
        creatures = []
        for j, sp in enumerate(sorted(rng.sample(names, rng.randrange(6, 13)))):
            el = species[sp].element
            common = [w for w in _SKILL_WORDS[el][:3]]
            unlocked = sorted(rng.sample(common, rng.randrange(1, 4)))
            if rng.random() < 0.12:
                unlocked.append(_SKILL_WORDS[el][3])
            creatures.append(Creature(creature_id=f"c-{uid}-{j + 1:02d}", species=sp, level=rng.randrange(5, 61),
                                      evolved=species[sp].stage == 2, nature=rng.choice(NATURES),
                                      skills=tuple(unlocked)))
        lineups = []
        for k in range(rng.randrange(2, 4)):
            picked = rng.sample(creatures, min(len(creatures), 5))
            members, bench = tuple(c.creature_id for c in picked[:3]), tuple(c.creature_id for c in picked[3:])
            avg = sum(_score(species, c.species, c.level, o) for c in picked[:3] for o in opponents.values())
            lineups.append(Lineup(lineup_id=f"L-{uid}-{k + 1}", name=f"Team {k + 1}", members=members,
                                  swap_group=bench, coach_score=round(avg / (3 * len(opponents)), 2)))
        users[uid] = User(user_id=uid, name=f"Trainer {u + 1}", creatures=tuple(creatures), lineups=tuple(lineups),
                          coach_score=max(lu.coach_score for lu in lineups))
    return CoachWorld(seed=seed, species=species, skills=skills, users=users, opponents=opponents)
