"""Request mixes: scripts of multi-turn sessions the load generator replays.

A *session* is an ordered tuple of user texts sent one after the other on one
session id (so the server's history grows as in a real conversation). Sources:

* ``tau2``   — tau2-format task openings: per task ``reason_for_call`` then
  ``known_info`` (``user_scenario.instructions``), from ``--tau2 DIR``, else
  ``$TANDEM_TAU2_DIR``, else the task folder of the default config's pack;
* a pack's name — that pack's own seeded multi-turn scripts
  (``PackEvaluation.load_sessions``, :mod:`pipelines.core.evaluation`);
* ``jsonl``  — a file with one ``{"session": [texts...]}`` or ``{"text": ...}`` per line;
* ``simple`` — a few built-in single-turn support questions (always available);
* ``auto``   — tau2 when its data is present, else the first installed pack with scripts.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipelines.core.evaluation import PackEvaluation

__all__ = [
    "Workload",
    "WorkloadUnavailable",
    "default_tau2_dir",
    "tau2_workload",
    "pack_workload",
    "pack_mixes",
    "jsonl_workload",
    "simple_workload",
    "load_workload",
    "MIXES",
]

REPO = Path(__file__).resolve().parents[2]
#: The built-in mixes; an installed pack with session scripts is a mix too (:func:`pack_mixes`).
MIXES = ("auto", "tau2", "jsonl", "simple")
SIMPLE_PROMPTS = (
    "Where is my order?",
    "How do I return a pair of shoes?",
    "Can I change the shipping address of my order?",
    "What payment methods do you accept?",
    "I want to cancel my order, it is still pending.",
    "Do you ship to Canada?",
)


class WorkloadUnavailable(RuntimeError):
    """The data a mix needs is absent (callers skip cleanly)."""


@dataclass(frozen=True)
class Workload:
    """A named list of session scripts."""

    name: str
    sessions: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        if not self.sessions or any(not s for s in self.sessions):
            raise ValueError(f"workload {self.name!r} needs at least one non-empty session")

    @property
    def n_turns(self) -> int:
        return sum(len(s) for s in self.sessions)

    def truncated(self, max_turns: int | None) -> Workload:
        """Keep at most ``max_turns`` turns of every session (``None``: unchanged)."""
        if not max_turns:
            return self
        return Workload(self.name, tuple(s[:max_turns] for s in self.sessions))

    def cycle(self, seed: int = 0) -> Iterator[tuple[str, ...]]:
        """Endless sessions: seeded shuffles of the whole list, one after another."""
        rng = random.Random(f"tandem-workload:{self.name}:{seed}")
        order = list(range(len(self.sessions)))
        while True:
            rng.shuffle(order)
            for i in order:
                yield self.sessions[i]


def default_tau2_dir() -> Path:
    """``$TANDEM_TAU2_DIR``, else the task folder of the default config's pack."""
    env = os.environ.get("TANDEM_TAU2_DIR")
    if env:
        return Path(env)
    from pipelines.domains import load_domain
    from serve.eval.suites import default_domain, tau2_dir_of

    name = default_domain(REPO / "configs" / "embedded.yaml")
    found = tau2_dir_of(load_domain(name)) if name else None
    if found is None:
        raise WorkloadUnavailable(f"the default pack {name!r} has no tau2-format tasks (set --tau2 or TANDEM_TAU2_DIR)")
    return found


def tau2_workload(path: str | Path | None = None) -> Workload:
    """Openings of tau2-format tasks: ``reason_for_call`` then ``known_info``."""
    d = Path(path) if path else default_tau2_dir()
    f = d / "tasks_train.json" if d.is_dir() or not d.suffix else d
    if not f.is_file():
        raise WorkloadUnavailable(f"tau2 tasks not found at {f} (set --tau2 or TANDEM_TAU2_DIR)")
    tasks = json.loads(f.read_text())
    sessions = []
    for task in tasks:
        ins = ((task.get("user_scenario") or {}).get("instructions") or {})
        turns = tuple(t.strip() for t in (ins.get("reason_for_call"), ins.get("known_info"))
                      if isinstance(t, str) and t.strip())
        if turns:
            sessions.append(turns)
    if not sessions:
        raise WorkloadUnavailable(f"no task openings in {f}")
    return Workload("tau2", tuple(sessions))


def pack_mixes() -> list[str]:
    """The installed packs that have session scripts for the load generator."""
    from pipelines.core.evaluation import evaluation_of
    from pipelines.domains import load_domain, pack_names

    return [n for n in pack_names()
            if type(evaluation_of(load_domain(n))).load_sessions is not PackEvaluation.load_sessions]


def pack_workload(name: str, *, seed: int = 0, n_sessions: int = 20, turns_per_session: int = 4) -> Workload:
    """The user texts of a pack's seeded session scripts."""
    from pipelines.core.evaluation import evaluation_of
    from pipelines.domains import load_domain

    sessions = evaluation_of(load_domain(name)).load_sessions(seed, n_sessions, turns_per_session)
    if not sessions:
        raise WorkloadUnavailable(f"the {name} pack has no session scripts")
    return Workload(name, tuple(tuple(s) for s in sessions))


def jsonl_workload(path: str | Path) -> Workload:
    """``{"session": [...]}`` or ``{"text": ...}`` per line; blank and ``#`` lines are skipped."""
    p = Path(path)
    if not p.is_file():
        raise WorkloadUnavailable(f"JSONL mix {p} not found")
    sessions: list[tuple[str, ...]] = []
    for no, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{p}:{no}: not JSON ({exc})") from exc
        if isinstance(obj, dict) and isinstance(obj.get("text"), str) and obj["text"].strip():
            sessions.append((obj["text"],))
        elif (isinstance(obj, dict) and isinstance(obj.get("session"), list) and obj["session"]
              and all(isinstance(t, str) and t.strip() for t in obj["session"])):
            sessions.append(tuple(obj["session"]))
        else:
            raise ValueError(f'{p}:{no}: expected {{"text": str}} or {{"session": [non-empty str, ...]}}')
    if not sessions:
        raise ValueError(f"{p}: no sessions")
    return Workload(f"jsonl:{p.name}", tuple(sessions))


def simple_workload() -> Workload:
    return Workload("simple", tuple((t,) for t in SIMPLE_PROMPTS))


def load_workload(mix: str, *, tau2: str | None = None, jsonl: str | None = None, seed: int = 0,
                  max_turns: int | None = None) -> Workload:
    """Resolve a mix name (see :data:`MIXES`) to a workload, truncated to ``max_turns``."""
    if mix == "auto":
        try:
            wl = tau2_workload(tau2)
        except WorkloadUnavailable:
            packs = pack_mixes()
            if not packs:
                raise
            wl = pack_workload(packs[0], seed=seed)
    elif mix == "tau2":
        wl = tau2_workload(tau2)
    elif mix == "jsonl":
        if not jsonl:
            raise ValueError("--mix jsonl needs --jsonl FILE")
        wl = jsonl_workload(jsonl)
    elif mix == "simple":
        wl = simple_workload()
    elif mix in pack_mixes():
        wl = pack_workload(mix, seed=seed)
    else:
        raise ValueError(f"unknown mix {mix!r} ({' | '.join([*MIXES, *pack_mixes()])})")
    return wl.truncated(max_turns)
