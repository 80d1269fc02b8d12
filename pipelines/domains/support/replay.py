"""Replay tau2-retail tasks' expected actions through our registry and check the state.

For each task: a fresh world from ``db.json``; the expected actions in order;
the user a lookup returns is authenticated; every write is confirmed just
before it runs. After each write, the touched order / user must equal what an
independent oracle derives from the state before the write (status, payment
records, gift card balances, items, addresses), and nothing else in the world
may change. A task is ``ok``, ``refused`` (our eligibility said no: a finding,
with the reason) or ``mismatch`` (the state or a call went wrong).

Two facts of the tau2 data are handled explicitly and counted in the report:
some expected actions are *meant* to fail (a wrong email, an order id without
its ``W``, a docstring example product id); such a call is ``expected_error``
when the entity is really absent from ``db.json`` (so tau2 fails too). And
many tasks list only their writes, without the lookup that authenticated the
user in the conversation; for those the owner of the first referenced order
(or user) is authenticated and named in ``implicit_auth``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.core.runner import CallOutcome
from pipelines.core.taskreplay import ActionReport, ReplayReport, TaskReport
from pipelines.core.taskreplay import replay_file as _replay_file
from pipelines.core.taskreplay import replay_task as _replay_task
from pipelines.tools import ToolContext, ToolRegistry

from .eligibility import authenticate
from .reads import fold
from .tools import LOOKUP_TOOLS, WRITE_TOOLS, build_registry, invoke
from .world import RetailWorld

__all__ = ["ActionReport", "TaskReport", "ReplayReport", "RetailReplay", "default_tau2_dir", "replay_task",
           "replay_all"]

_NOT_FOUND = frozenset({"user_not_found", "order_not_found", "product_not_found", "item_not_found"})


def default_tau2_dir() -> Path:
    """``$TANDEM_TAU2_DIR``, else ``../shared/data/tau2-retail`` next to the repository."""
    env = os.environ.get("TANDEM_TAU2_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3].parent / "shared" / "data" / "tau2-retail"


def _tau2_fails_too(name: str, a: dict[str, Any], db: dict[str, Any]) -> bool:
    """True when the referenced entity is absent from ``db``, so tau2's own tool fails as well."""
    if name == "find_user_id_by_email":
        return not any(fold(u["email"]) == fold(a["email"]) for u in db["users"].values())
    if name == "find_user_id_by_name_zip":
        return not any(
            fold(u["name"]["first_name"]) == fold(a["first_name"])
            and fold(u["name"]["last_name"]) == fold(a["last_name"]) and u["address"]["zip"] == a["zip"]
            for u in db["users"].values()
        )
    if "order_id" in a:
        return a["order_id"] not in db["orders"]
    if name == "get_product_details":
        return a["product_id"] not in db["products"]
    if name == "get_item_details":
        return not any(a["item_id"] in p["variants"] for p in db["products"].values())
    return False


def _owner(task: dict[str, Any], db: dict[str, Any]) -> str | None:
    """The user a task acts for, from its first order or user argument (tasks without a lookup)."""
    for action in task["evaluation_criteria"]["actions"]:
        args = action["arguments"]
        if args.get("user_id") in db["users"]:
            return args["user_id"]
        if args.get("order_id") in db["orders"]:
            return db["orders"][args["order_id"]]["user_id"]
    return None


def _gift(user: dict[str, Any], pm_id: str, delta: float) -> None:
    pm = user["payment_methods"].get(pm_id)
    if pm is not None and pm["source"] == "gift_card":
        pm["balance"] = round(pm["balance"] + delta, 2)


def _expect(name: str, a: dict[str, Any], pre: dict[str, Any]) -> tuple[dict | None, dict]:
    """The (order, user) JSON a write must produce, derived from the pre-state only."""
    if name == "modify_user_address":
        user = copy.deepcopy(pre["users"][a["user_id"]])
        user["address"] = {k: a[k] for k in ("address1", "address2", "city", "country", "state", "zip")}
        return None, user
    order = copy.deepcopy(pre["orders"][a["order_id"]])
    user = copy.deepcopy(pre["users"][order["user_id"]])
    hist = order["payment_history"]
    if name == "cancel_pending_order":
        net: dict[str, float] = {}
        for rec in hist:
            sign = 1 if rec["transaction_type"] == "payment" else -1
            net[rec["payment_method_id"]] = net.get(rec["payment_method_id"], 0.0) + sign * rec["amount"]
        for pm_id, amount in net.items():
            if round(amount, 2) > 0:
                hist.append({"transaction_type": "refund", "amount": round(amount, 2), "payment_method_id": pm_id})
                _gift(user, pm_id, round(amount, 2))
        order["status"], order["cancel_reason"] = "cancelled", a["reason"]
    elif name in ("modify_pending_order_items", "exchange_delivered_order_items"):
        diff = 0.0
        for old_id, new_id in zip(a["item_ids"], a["new_item_ids"], strict=True):
            item = next(i for i in order["items"] if i["item_id"] == old_id)
            variant = pre["products"][item["product_id"]]["variants"][new_id]
            diff += variant["price"] - item["price"]
            if name == "modify_pending_order_items":
                item.update(item_id=new_id, price=variant["price"], options=variant["options"])
        diff = round(diff, 2)
        if name == "modify_pending_order_items":
            if diff:
                kind = "payment" if diff > 0 else "refund"
                hist.append({"transaction_type": kind, "amount": abs(diff), "payment_method_id": a["payment_method_id"]})
                _gift(user, a["payment_method_id"], -diff)
            order["status"] = "pending (item modified)"
        else:
            order.update(status="exchange requested", exchange_items=sorted(a["item_ids"]),
                         exchange_new_items=sorted(a["new_item_ids"]),
                         exchange_payment_method_id=a["payment_method_id"], exchange_price_difference=diff)
    elif name == "modify_pending_order_address":
        order["address"] = {k: a[k] for k in ("address1", "address2", "city", "country", "state", "zip")}
    elif name == "modify_pending_order_payment":
        old = hist[0]
        hist.append({"transaction_type": "payment", "amount": old["amount"], "payment_method_id": a["payment_method_id"]})
        hist.append({"transaction_type": "refund", "amount": old["amount"], "payment_method_id": old["payment_method_id"]})
        _gift(user, a["payment_method_id"], -old["amount"])
        _gift(user, old["payment_method_id"], old["amount"])
    elif name == "return_delivered_order_items":
        order.update(status="return requested", return_items=sorted(a["item_ids"]),
                     return_payment_method_id=a["payment_method_id"])
    return order, user


class RetailReplay:
    """The retail pack's hook for the neutral replay (:mod:`pipelines.core.taskreplay`)."""

    lookup_tools = LOOKUP_TOOLS
    write_tools = WRITE_TOOLS

    def __init__(self, registry: ToolRegistry[RetailWorld] | None = None) -> None:
        self.registry = registry if registry is not None else build_registry()

    def default_dir(self) -> Path:
        return default_tau2_dir()

    def fresh_world(self, db: Mapping[str, Any]) -> RetailWorld:
        return RetailWorld.from_tau2_json(dict(db))

    def world_json(self, world: RetailWorld) -> dict[str, Any]:
        return world.to_json()

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: RetailWorld) -> CallOutcome:
        return invoke(self.registry, name, args, ctx, world)

    def authenticate(self, ctx: ToolContext, user_id: str, world: RetailWorld) -> None:
        authenticate(ctx, user_id, world)

    def owner(self, task: Mapping[str, Any], db: Mapping[str, Any]) -> str | None:
        return _owner(dict(task), dict(db))

    def fails_too(self, name: str, args: Mapping[str, Any], reason: str | None, error_code: str | None,
                  db: Mapping[str, Any]) -> bool:
        return reason in _NOT_FOUND and _tau2_fails_too(name, dict(args), dict(db))

    def expected_changes(self, name: str, args: Mapping[str, Any], pre: Mapping[str, Any]) -> dict[str, dict]:
        order, user = _expect(name, dict(args), dict(pre))
        out: dict[str, dict] = {"users": {user["user_id"]: user}}
        if order is not None:
            out["orders"] = {order["order_id"]: order}
        return out


def replay_task(task: dict[str, Any], db: dict[str, Any], registry: ToolRegistry[RetailWorld]) -> TaskReport:
    """Replay one task's expected actions on a fresh world built from ``db``."""
    return _replay_task(task, db, RetailReplay(registry))


def replay_all(tau2_dir: str | Path | None = None) -> ReplayReport:
    """Replay every task of ``tasks_train.json`` in ``tau2_dir`` (default :func:`default_tau2_dir`)."""
    return _replay_file(tau2_dir, RetailReplay())
