"""tau2's database check for a played task: the world after the session against the expected actions replayed.

:func:`expected_world` replays a task's expected actions, in order, on a fresh world of
the pack built from the task's ``db.json`` (every write confirmed just before it runs;
the user a lookup returns is verified; a task that lists no lookup has the owner of its
first referenced record verified, as tau2's own replays do). :func:`db_check` compares
every entity the expected actions changed, and every entity a write of the session named,
between that world and the live world after the session (``live``: ``(kind, key)`` →
the entity's JSON, ``None`` when absent). The task passes when all of them are equal —
tau2's ``DB`` reward basis, restricted to the entities either side could have touched
(the live world is shared by the tasks played on one app, so untouched entities are not
compared).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipelines.core.domain import Domain
from pipelines.core.taskreplay import TaskReplayHook
from pipelines.tools import ToolContext

__all__ = ["expected_world", "changed_entities", "named_entities", "db_check"]


def _hook(pack: Domain, db_path: Path) -> TaskReplayHook:
    hook = pack.task_replay(Path(db_path).parent)
    if hook is None:
        raise ValueError(f"the {pack.name} pack has no task replay hook")
    return hook


def expected_world(pack: Any, db_path: Path, task: Mapping[str, Any], db: Mapping[str, Any] | None = None) -> Any:
    """A fresh world of ``pack`` from ``db_path`` with the task's expected actions replayed (through the pack's
    task replay hook, :mod:`pipelines.core.taskreplay`)."""
    db = db if db is not None else json.loads(Path(db_path).read_text())
    hook = _hook(pack, db_path)
    world = hook.fresh_world(db)
    actions = list((task.get("evaluation_criteria") or {}).get("actions") or [])
    ctx = ToolContext(session_id=f"tau2-expected-{task.get('id')}")
    if not any(a["name"] in hook.lookup_tools for a in actions):
        owner = hook.owner(task, db)
        if owner:
            hook.authenticate(ctx, owner, world)
    for a in actions:
        ctx.confirmed = a["name"] in hook.write_tools
        out = hook.invoke(a["name"], dict(a["arguments"]), ctx, world)
        ctx.confirmed = False
        obs = out.observation
        if a["name"] in hook.lookup_tools and obs.ok and ctx.authenticated_user_id is None:
            hook.authenticate(ctx, obs.result["user_id"], world)
    return world


def changed_entities(before: Any, after: Any) -> set[tuple[str, str]]:
    """``(kind, key)`` of every entity that differs between two worlds (``entities()`` rows)."""
    a = {(k, key): body for k, key, body in before.entities()}
    b = {(k, key): body for k, key, body in after.entities()}
    return {x for x in a.keys() | b.keys() if a.get(x) != b.get(x)}


def named_entities(world: Any, writes: Sequence[tuple[str, Mapping[str, Any]]]) -> set[tuple[str, str]]:
    """The entities of ``world`` whose key is a string argument of one of ``writes``."""
    values = {str(v) for _, args in writes for v in args.values() if isinstance(v, str | int)}
    return {(k, key) for k, key, _ in world.entities() if key in values}


def db_check(pack: Any, db_path: Path, task: Mapping[str, Any],
             live: Callable[[str, str], Mapping[str, Any] | None],
             session_writes: Sequence[tuple[str, Mapping[str, Any]]] = (),
             db: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{passed, compared, differ}``: the live entities against the expected world (see module docstring)."""
    db = db if db is not None else json.loads(Path(db_path).read_text())
    fresh = _hook(pack, db_path).fresh_world(db)
    want = expected_world(pack, db_path, task, db)
    keys = changed_entities(fresh, want) | named_entities(fresh, session_writes)
    differ = []
    for kind, key in sorted(keys):
        expected = json.loads(want.entity_json(kind, key)) if want.has(kind, key) else None
        got = live(kind, key)
        if got != expected:
            differ.append(f"{kind}:{key}")
    return {"passed": not differ, "compared": len(keys), "differ": differ}
