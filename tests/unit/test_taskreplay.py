"""The domain-neutral task replay on a toy hook: ok, refused, mismatch, expected errors, implicit auth."""

from __future__ import annotations

import copy
from pathlib import Path

from pipelines.core.runner import CallOutcome
from pipelines.core.taskreplay import replay_task, replay_tasks, unexpected_changes
from pipelines.tools import ToolContext, ToolObservation


class Toy:
    """A world of counters owned by users; ``add`` adds to one counter (``bug``: it adds twice)."""

    lookup_tools = frozenset({"whoami"})
    write_tools = frozenset({"add"})

    def __init__(self, bug: bool = False) -> None:
        self.bug = bug

    def default_dir(self) -> Path:
        return Path(".")

    def fresh_world(self, db):
        return copy.deepcopy(dict(db))

    def world_json(self, world):
        return copy.deepcopy(world)

    def invoke(self, name, args, ctx: ToolContext, world) -> CallOutcome:
        def fail(code, reason):
            return CallOutcome(ToolObservation(tool=name, args=args, ok=False, error_code=code,
                                               error_message=reason), reason=reason)
        if name == "whoami":
            if args["user_id"] not in world["users"]:
                return fail("tool_error", "user_not_found")
            return CallOutcome(ToolObservation(tool=name, args=args, ok=True, result={"user_id": args["user_id"]}))
        counter = world["counters"].get(args["counter"])
        if counter is None:
            return fail("tool_error", "counter_not_found")
        if counter["owner"] != ctx.authenticated_user_id or not ctx.confirmed:
            return fail("ineligible_action", "not_owner")
        counter["value"] += args["n"] * (2 if self.bug else 1)
        return CallOutcome(ToolObservation(tool=name, args=args, ok=True, result=dict(counter)))

    def authenticate(self, ctx, user_id, world):
        ctx.authenticated_user_id = user_id

    def owner(self, task, db):
        first = task["evaluation_criteria"]["actions"][0]["arguments"]
        return db["counters"].get(first.get("counter"), {}).get("owner")

    def fails_too(self, name, args, reason, error_code, db):
        return reason == "counter_not_found" and args["counter"] not in db["counters"]

    def expected_changes(self, name, args, pre):
        c = copy.deepcopy(pre["counters"][args["counter"]])
        c["value"] += args["n"]
        return {"counters": {args["counter"]: c}}


DB = {"users": {"ann": {}, "bob": {}}, "counters": {"a": {"owner": "ann", "value": 1}, "b": {"owner": "bob", "value": 5}}}


def _task(tid, *actions):
    return {"id": tid, "evaluation_criteria": {"actions": [
        {"action_id": f"{tid}_{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(actions)]}}


def test_a_lookup_authenticates_and_a_write_matches_the_oracle():
    rep = replay_task(_task("1", ("whoami", {"user_id": "ann"}), ("add", {"counter": "a", "n": 2})), DB, Toy())
    assert rep.status == "ok" and rep.actions == [] and rep.implicit_auth is None


def test_without_a_lookup_the_owner_is_authenticated():
    rep = replay_task(_task("2", ("add", {"counter": "b", "n": 1})), DB, Toy())
    assert rep.status == "ok" and rep.implicit_auth == "bob"


def test_refusals_expected_errors_and_mismatches():
    refused = replay_task(_task("3", ("whoami", {"user_id": "ann"}), ("add", {"counter": "b", "n": 1})), DB, Toy())
    assert refused.status == "refused" and refused.actions[0].reason == "not_owner"
    absent = replay_task(_task("4", ("whoami", {"user_id": "ann"}), ("add", {"counter": "z", "n": 1})), DB, Toy())
    assert absent.status == "ok" and absent.actions[0].status == "expected_error"
    wrong = replay_task(_task("5", ("add", {"counter": "a", "n": 1})), DB, Toy(bug=True))
    assert wrong.status == "mismatch" and "expected" in wrong.actions[0].detail
    report = replay_tasks([_task("1", ("add", {"counter": "a", "n": 1})), _task("5", ("add", {"counter": "a", "n": 1}))],
                          DB, Toy(bug=True))
    assert report.counts == {"ok": 0, "refused": 0, "mismatch": 2, "expected_errors": 0, "implicit_auth": 2}


def test_unexpected_changes_names_what_else_changed():
    pre = {"t": {"x": 1, "y": 2}}
    assert unexpected_changes({"t": {"x": 3}}, pre, {"t": {"x": 3, "y": 2}}) == []
    assert unexpected_changes({"t": {"x": 3}}, pre, {"t": {"x": 3, "y": 9}}) == ["t y changed unexpectedly"]
    assert unexpected_changes({}, pre, {"t": {"x": 1, "y": 2, "z": 0}}) == ["t z changed unexpectedly"]
