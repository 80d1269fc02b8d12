"""Replay a benchmark's expected actions through a pack's tools and check the state after each write.

Domain-neutral: a pack supplies a :class:`TaskReplayHook` (its world from the benchmark's ``db.json``, its
tool call, who a task acts for, and an oracle: what a write must leave in the database, derived from the
state before it alone). For each task: a fresh world; the expected actions in order; the user a lookup
returns is authenticated (a task whose actions list no lookup acts for its owner, named in
``implicit_auth``); every write is confirmed just before it runs. After each write, the database must equal
what the oracle derives, and nothing else may change. A task is ``ok``, ``refused`` (our eligibility said
no: a finding, with the reason) or ``mismatch`` (the state or a call went wrong). An action that fails on an
entity the data really lacks, or that the benchmark's own tool refuses too, is ``expected_error``.

:func:`replay_file` runs every task of ``tasks_train.json`` in a directory.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from pipelines.tools import ToolContext

from .runner import ToolOutcome

__all__ = ["Status", "ActionStatus", "ActionReport", "TaskReport", "ReplayReport", "TaskReplayHook",
           "replay_task", "replay_tasks", "replay_file", "unexpected_changes"]

Status = Literal["ok", "refused", "mismatch"]
ActionStatus = Literal["ok", "expected_error", "refused", "mismatch"]


class ActionReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action_id: str
    name: str
    status: ActionStatus
    reason: str | None = None
    detail: str | None = None


class TaskReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str
    status: Status
    implicit_auth: str | None = Field(
        None, description="User authenticated for a task whose actions list no lookup (the owner)."
    )
    actions: list[ActionReport] = Field(default_factory=list, description="Actions that were not plain ok.")


class ReplayReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    counts: dict[str, int]
    tasks: list[TaskReport]


@runtime_checkable
class TaskReplayHook(Protocol):
    """What a pack gives the replay (see module docstring)."""

    lookup_tools: frozenset[str]
    """Tools whose successful result names the user to authenticate (``result["user_id"]``)."""
    write_tools: frozenset[str]

    def default_dir(self) -> Path:
        """The benchmark directory when none is given (``db.json``, ``tasks_train.json``)."""
        ...

    def fresh_world(self, db: Mapping[str, Any]) -> Any:
        """A new world holding ``db``."""
        ...

    def world_json(self, world: Any) -> dict[str, Any]:
        """The world as the benchmark's database JSON."""
        ...

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: Any) -> ToolOutcome:
        """One tool call (refusals are failed observations with a reason)."""
        ...

    def authenticate(self, ctx: ToolContext, user_id: str, world: Any) -> None:
        """Make ``user_id`` the session's user."""
        ...

    def owner(self, task: Mapping[str, Any], db: Mapping[str, Any]) -> str | None:
        """The user a task without a lookup acts for (its first referenced record's owner)."""
        ...

    def fails_too(self, name: str, args: Mapping[str, Any], reason: str | None, error_code: str | None,
                  db: Mapping[str, Any]) -> bool:
        """Whether the benchmark's own tool fails on this call too (an absent entity, a rule it enforces)."""
        ...

    def expected_changes(self, name: str, args: Mapping[str, Any], pre: Mapping[str, Any]) -> dict[str, dict]:
        """What the write must leave: table → key → the entity's JSON (``None``: removed), from ``pre`` alone."""
        ...


def unexpected_changes(expected: Mapping[str, Mapping[str, Any]], pre: Mapping[str, Any],
                       post: Mapping[str, Any]) -> list[str]:
    """Problems: an expected entity that differs, or any other entity of any table that changed."""
    problems: list[str] = []
    for table in pre.keys() | post.keys():
        want = expected.get(table, {})
        before, after = pre.get(table, {}), post.get(table, {})
        for key, value in want.items():
            if after.get(key) != value:
                problems.append(f"{table} {key}: expected {value} got {after.get(key)}")
        for key in before.keys() | after.keys():
            if key not in want and before.get(key) != after.get(key):
                problems.append(f"{table} {key} changed unexpectedly")
    return problems


def replay_task(task: Mapping[str, Any], db: Mapping[str, Any], hook: TaskReplayHook) -> TaskReport:
    """Replay one task's expected actions on a fresh world built from ``db``."""
    world = hook.fresh_world(db)
    ctx = ToolContext(session_id=f"task-{task['id']}")
    actions = task["evaluation_criteria"]["actions"] or []
    implicit = None
    if not any(a["name"] in hook.lookup_tools for a in actions):
        implicit = hook.owner(task, db)
        if implicit is not None:
            hook.authenticate(ctx, implicit, world)
    bad: list[ActionReport] = []
    for action in actions:
        name, args = action["name"], action["arguments"]
        pre = hook.world_json(world) if name in hook.write_tools else None
        ctx.confirmed = name in hook.write_tools
        out = hook.invoke(name, dict(args), ctx, world)
        ctx.confirmed = False
        obs = out.observation
        rep = ActionReport(action_id=action["action_id"], name=name, status="ok")
        if not obs.ok:
            rep.reason, rep.detail = out.reason, obs.error_message
            if hook.fails_too(name, args, out.reason, obs.error_code, db):
                rep.status = "expected_error"
            else:
                rep.status = "refused" if obs.error_code == "ineligible_action" else "mismatch"
        elif name in hook.lookup_tools:
            hook.authenticate(ctx, obs.result["user_id"], world)
        elif pre is not None:
            problems = unexpected_changes(hook.expected_changes(name, args, pre), pre, hook.world_json(world))
            if problems:
                rep.status, rep.detail = "mismatch", "; ".join(problems)[:2000]
        if rep.status != "ok":
            bad.append(rep)
    status: Status = "ok"
    if any(r.status == "mismatch" for r in bad):
        status = "mismatch"
    elif any(r.status == "refused" for r in bad):
        status = "refused"
    return TaskReport(task_id=str(task["id"]), status=status, implicit_auth=implicit, actions=bad)


def replay_tasks(tasks: list[Mapping[str, Any]], db: Mapping[str, Any], hook: TaskReplayHook) -> ReplayReport:
    """Every task's replay, and the counts: ok / refused / mismatch tasks, expected errors, implicit auths."""
    reports = [replay_task(t, db, hook) for t in tasks]
    counts = Counter(r.status for r in reports)
    summary = {k: counts.get(k, 0) for k in ("ok", "refused", "mismatch")}
    summary["expected_errors"] = sum(a.status == "expected_error" for r in reports for a in r.actions)
    summary["implicit_auth"] = sum(r.implicit_auth is not None for r in reports)
    return ReplayReport(counts=summary, tasks=reports)


def replay_file(data_dir: str | Path | None, hook: TaskReplayHook) -> ReplayReport:
    """Replay every task of ``tasks_train.json`` in ``data_dir`` (default: the hook's directory)."""
    base = Path(data_dir) if data_dir is not None else hook.default_dir()
    db = json.loads((base / "db.json").read_text(encoding="utf-8"))
    tasks = json.loads((base / "tasks_train.json").read_text(encoding="utf-8"))
    return replay_tasks(tasks, db, hook)
