"""The suites of ``tandem eval``: tau2-format tasks on any pack that has them, and each pack's own suites.

* ``tau2-openings`` — the first ``limit`` tasks (file order; 0 = all) of a pack's tau2-format
  ``tasks_train.json`` (the folder of its task replay hook, or ``--tau2-dir``). The user's opening is
  the first sentence of ``user_scenario.instructions.reason_for_call`` turned into the first person by
  a fixed pronoun swap ("You received your order" -> "I received my order"; ``verbatim`` sends the
  whole reason unchanged). One turn, a fresh session, nobody verified. The expected FIRST decision
  class comes from the task's expected actions: ``escalate`` when the first expected action is
  ``transfer_to_human_agents``, ``identify`` otherwise (tau2's policies verify the user before any
  account-specific action; tasks that list only their writes leave the lookup out of their action list).
  Where the pack labels intents (``PackEvaluation.intent_label``), each case also carries its task's label,
  and the opening's perceived intent is judged against it (``intent_accuracy``, as on ``tau2-tasks``).
* ``tau2-tasks`` — whole tasks played by the pack's scripted user (``PackEvaluation.scripted_user``).
* a pack's own suites (``PackEvaluation.suites``, :mod:`pipelines.core.evaluation`): e.g. the support
  pack's multi-turn ``flows``, the coach pack's labelled ``coach`` sessions.

A suite runs on one pack: the one ``--domain`` names (default: the config's ``domain.name``) when that
pack has it, else the only installed pack that has it (several: name one with ``--domain``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.core.domain import Domain
from pipelines.core.evaluation import (
    Case,
    EvalTurn,
    PackEvaluation,
    SuiteOptions,
    evaluation_of,
    first_person,
    opening,
)

__all__ = [
    "EvalTurn",
    "Case",
    "SuiteOptions",
    "first_person",
    "opening",
    "tau2_cases",
    "tau2_tasks",
    "tau2_suite",
    "tau2_tasks_suite",
    "TAU2_SUITES",
    "tau2_dir_of",
    "default_domain",
    "suite_packs",
    "pack_suite",
    "resolve_suites",
]

#: The suites played from tau2-format tasks (on any pack whose task replay has a data folder).
TAU2_SUITES = ("tau2-openings", "tau2-tasks")


def tau2_dir_of(pack: Domain) -> Path | None:
    """The folder of the pack's tau2-format tasks (its task replay hook's default; ``None``: none)."""
    hook = pack.task_replay()
    return None if hook is None else Path(hook.default_dir())


def default_domain(config: Path) -> str | None:
    """The ``domain.name`` of a config's first application (``None``: it names none or cannot be read)."""
    import yaml

    try:
        apps = (yaml.safe_load(Path(config).read_text()) or {}).get("applications") or []
    except (OSError, ValueError):
        return None
    return ((apps[0].get("args") or {}).get("domain") or {}).get("name") if apps else None


def suite_packs(packs: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """Suite name → the packs that have it, over the installed packs (``packs``: name → pack, for tests)."""
    if packs is None:
        from pipelines.domains import load_domain, pack_names

        packs = {n: load_domain(n) for n in pack_names()}
    out: dict[str, list[str]] = {}
    for name, pack in sorted(packs.items()):
        own = list(evaluation_of(pack).suites())
        if tau2_dir_of(pack) is not None:
            own = list(TAU2_SUITES) + own
        for s in own:
            out.setdefault(s, []).append(name)
    return out


def resolve_suites(suites: list[str], domain: str | None, known: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """Suites grouped by the pack they run on, in the order asked (see module docstring).

    Raises ValueError for a suite no pack has, or one several have when ``domain`` is none of them."""
    out: dict[str, list[str]] = {}
    for s in suites:
        packs = known.get(s, [])
        if not packs:
            raise ValueError(f"unknown suite {s!r}; known: {', '.join(sorted(known))}")
        if domain in packs:
            d = str(domain)
        elif len(packs) == 1:
            d = packs[0]
        else:
            raise ValueError(f"suite {s!r} runs on {', '.join(packs)}: name one with --domain")
        out.setdefault(d, []).append(s)
    return list(out.items())


def tau2_tasks(base: Path, limit: int, half: str = "all") -> list[dict[str, Any]]:
    """The tasks of ``base/tasks_train.json`` in file order, each with its ``half`` of the fixed split
    (:func:`pipelines.core.tau2_user.split_half`, over every task of the file), keeping one half when asked; then
    the first ``limit`` (0: all)."""
    from pipelines.core.tau2_user import split_half

    tasks = json.loads((base / "tasks_train.json").read_text())
    halves = split_half([str(t["id"]) for t in tasks])
    tasks = [{**t, "_half": halves[str(t["id"])]} for t in tasks]
    if half != "all":
        tasks = [t for t in tasks if t["_half"] == half]
    return tasks[:limit] if limit > 0 else tasks


def tau2_cases(base: Path, limit: int, verbatim: bool, half: str = "all") -> list[dict[str, Any]]:
    """The tau2 openings as plain dicts: ``task_id``, ``text``, ``first_expected_action``, ``expect``, ``actions``
    (the task's expected actions), ``half``."""
    out = []
    for t in tau2_tasks(base, limit, half):
        actions = (t.get("evaluation_criteria") or {}).get("actions") or []
        first = actions[0]["name"] if actions else None
        out.append({
            "task_id": str(t["id"]),
            "text": opening(t["user_scenario"]["instructions"]["reason_for_call"], verbatim),
            "first_expected_action": first,
            "expect": {"kind": "escalate" if first == "transfer_to_human_agents" else "identify"},
            "actions": actions, "half": t["_half"],
        })
    return out


def tau2_suite(base: Path, limit: int, *, verbatim: bool = False, kit: PackEvaluation | None = None,
               half: str = "all") -> list[Case]:
    """One single-turn case per tau2 task (see module docstring); with the pack's ``kit``, ``info`` also
    carries the intent label of the task's expected actions (``kit.intent_label``; ``None``: none)."""
    out = []
    for c in tau2_cases(base, limit, verbatim, half):
        info = {"task_id": c["task_id"], "first_expected_action": c["first_expected_action"], "half": c["half"]}
        label = kit.intent_label(c["actions"]) if kit is not None else None
        if label is not None:
            info["intent_label"] = label
        out.append(Case("tau2-openings", f"task-{c['task_id']}", (EvalTurn(c["text"], expect=c["expect"]),),
                        info=info))
    return out


def tau2_tasks_suite(base: Path, limit: int, *, verbatim: bool = False,
                     kit: PackEvaluation | None = None, half: str = "all") -> list[Case]:
    """One whole session per tau2 task, played by the pack's scripted user.

    The case's one turn is the opening; the evaluator asks the user for every later one.
    ``info`` carries the task id, the intent label of its expected actions (``kit.intent_label``) and the
    tasks' folder.
    """
    kit = kit or PackEvaluation()
    out = []
    for t in tau2_tasks(base, limit, half):
        actions = (t.get("evaluation_criteria") or {}).get("actions") or []
        out.append(Case("tau2-tasks", f"task-{t['id']}",
                        (EvalTurn(opening(t["user_scenario"]["instructions"]["reason_for_call"], verbatim)),),
                        info={"task_id": str(t["id"]), "intent_label": kit.intent_label(actions),
                              "tau2_dir": str(base), "half": t["_half"]}))
    return out


def pack_suite(kit: PackEvaluation, suite: str) -> Callable[[SuiteOptions], list[Case]]:
    """The builder of one of the pack's own suites."""
    return kit.suites()[suite]
