"""The airline pack's hook for Tandem's task replay (:mod:`pipelines.core.taskreplay`).

Every expected action of tau2-airline's tasks runs through the pack's tools on a fresh world from
``db.json``; after each write the database must equal what :func:`expected_changes` derives from the state
before it (tau2's own tools, restated on plain JSON: refunds appended on a cancellation, the fare difference
paid on a change, $50 per added paid bag, seats taken and gift cards debited by a booking, a certificate
added to the profile), and nothing else may change. What tau2's own tools refuse too (an unknown id, a flight
not available, too few seats, a payment that does not add up, a certificate paying for a change) is an
``expected_error``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.domain import CallOutcome, ToolContext, allocate

from .data import default_data_dir, load_world_clock_for
from .tools import (
    CERTIFICATE_ID_START,
    LOOKUP_TOOLS,
    RESERVATION_ID_START,
    WRITE_TOOLS,
    build_registry,
    invoke,
)
from .world import AirlineWorld

__all__ = ["AirlineReplay", "TAU2_REFUSES", "expected_changes"]

#: Refusals tau2-airline's own tools raise as well.
TAU2_REFUSES = frozenset({"flight_not_available", "not_enough_seats", "payment_not_found", "insufficient_balance",
                          "certificate_not_allowed", "payment_mismatch", "passenger_count", "too_many_certificates"})
_NOT_FOUND = {"user_not_found": "users", "reservation_not_found": "reservations", "flight_not_found": "flights"}


def _pay_update(user: dict[str, Any], payment_id: str, amount: float) -> dict[str, Any] | None:
    method = user["payment_methods"][payment_id]
    if method["source"] == "gift_card":
        method["amount"] = method["amount"] - amount
    return {"payment_id": payment_id, "amount": amount} if amount != 0 else None


def expected_changes(name: str, a: Mapping[str, Any], pre: Mapping[str, Any], now: str) -> dict[str, dict]:
    """Table → key → the entity's JSON after the write ``name`` (``now``: the booking time)."""
    if name == "send_certificate":
        user = copy.deepcopy(pre["users"][a["user_id"]])
        pid = allocate(CERTIFICATE_ID_START, user["payment_methods"].__contains__, limit=3)
        user["payment_methods"][pid] = {"source": "certificate", "id": pid, "amount": a["amount"]}
        return {"users": {user["user_id"]: user}}
    if name == "book_reservation":
        user = copy.deepcopy(pre["users"][a["user_id"]])
        n, cabin = len(a["passengers"]), a["cabin"]
        flights, touched, total = [], {}, 0
        for ref in a["flights"]:
            flight = touched.get(ref["flight_number"]) or copy.deepcopy(pre["flights"][ref["flight_number"]])
            day = flight["dates"][ref["date"]]
            flights.append({"origin": flight["origin"], "destination": flight["destination"],
                            "flight_number": ref["flight_number"], "date": ref["date"], "price": day["prices"][cabin]})
            day["available_seats"][cabin] -= n
            total += day["prices"][cabin] * n
            touched[ref["flight_number"]] = flight
        for p in a["payment_methods"]:
            method = user["payment_methods"][p["payment_id"]]
            if method["source"] == "gift_card":
                method["amount"] = method["amount"] - p["amount"]
            elif method["source"] == "certificate":
                del user["payment_methods"][p["payment_id"]]
        rid = allocate(RESERVATION_ID_START, pre["reservations"].__contains__)
        user["reservations"].append(rid)
        res = {"reservation_id": rid, "user_id": a["user_id"], "origin": a["origin"], "destination": a["destination"],
               "flight_type": a["flight_type"], "cabin": cabin, "flights": flights,
               "passengers": [dict(p) for p in a["passengers"]],
               "payment_history": [dict(p) for p in a["payment_methods"]], "created_at": now,
               "total_baggages": a["total_baggages"], "nonfree_baggages": a["nonfree_baggages"],
               "insurance": a["insurance"]}
        return {"reservations": {rid: res}, "users": {user["user_id"]: user}, "flights": touched}
    res = copy.deepcopy(pre["reservations"][a["reservation_id"]])
    user = copy.deepcopy(pre["users"][res["user_id"]])
    n = len(res["passengers"])
    if name == "cancel_reservation":
        res["payment_history"] += [{"payment_id": p["payment_id"], "amount": -p["amount"]}
                                   for p in res["payment_history"]]
        res["status"] = "cancelled"
    elif name == "update_reservation_passengers":
        res["passengers"] = [dict(p) for p in a["passengers"]]
    elif name == "update_reservation_baggages":
        payment = _pay_update(user, a["payment_id"], 50 * max(0, a["nonfree_baggages"] - res["nonfree_baggages"]))
        if payment:
            res["payment_history"].append(payment)
        res["total_baggages"], res["nonfree_baggages"] = a["total_baggages"], a["nonfree_baggages"]
    elif name == "update_reservation_flights":
        new, total = [], 0
        for ref in a["flights"]:
            kept = next((f for f in res["flights"] if f["flight_number"] == ref["flight_number"]
                         and f["date"] == ref["date"] and a["cabin"] == res["cabin"]), None)
            if kept is None:
                flight = pre["flights"][ref["flight_number"]]
                kept = {"origin": flight["origin"], "destination": flight["destination"],
                        "flight_number": ref["flight_number"], "date": ref["date"],
                        "price": flight["dates"][ref["date"]]["prices"][a["cabin"]]}
            new.append(kept)
            total += kept["price"] * n
        total -= sum(f["price"] for f in res["flights"]) * n
        payment = _pay_update(user, a["payment_id"], total)
        if payment:
            res["payment_history"].append(payment)
        res["flights"], res["cabin"] = new, a["cabin"]
    return {"reservations": {res["reservation_id"]: res}, "users": {user["user_id"]: user}}


class AirlineReplay:
    """The hook (see module docstring)."""

    lookup_tools = LOOKUP_TOOLS
    write_tools = WRITE_TOOLS

    def __init__(self, tau2_dir: str | Path | None = None) -> None:
        self.registry = build_registry()
        self.dir = Path(tau2_dir) if tau2_dir is not None else default_data_dir()
        self.clock = load_world_clock_for(self.dir)

    def default_dir(self) -> Path:
        return self.dir

    def fresh_world(self, db: Mapping[str, Any]) -> AirlineWorld:
        return AirlineWorld.from_tau2_json(db).with_clock(self.clock)

    def world_json(self, world: AirlineWorld) -> dict[str, Any]:
        return world.to_json()

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: AirlineWorld) -> CallOutcome:
        return invoke(self.registry, name, args, ctx, world)

    def authenticate(self, ctx: ToolContext, user_id: str, world: AirlineWorld) -> None:
        if user_id in world.users:
            ctx.authenticated_user_id = user_id

    def owner(self, task: Mapping[str, Any], db: Mapping[str, Any]) -> str | None:
        for action in task["evaluation_criteria"]["actions"] or ():
            args = action["arguments"]
            if args.get("user_id") in db["users"]:
                return args["user_id"]
            if args.get("reservation_id") in db["reservations"]:
                return db["reservations"][args["reservation_id"]]["user_id"]
        return None

    def fails_too(self, name: str, args: Mapping[str, Any], reason: str | None, error_code: str | None,
                  db: Mapping[str, Any]) -> bool:
        if error_code != "tool_error":
            return False
        if reason in _NOT_FOUND:
            key = {"users": "user_id", "reservations": "reservation_id"}.get(_NOT_FOUND[reason])
            return key is None or args.get(key) not in db[_NOT_FOUND[reason]]
        return reason in TAU2_REFUSES

    def expected_changes(self, name: str, args: Mapping[str, Any], pre: Mapping[str, Any]) -> dict[str, dict]:
        return expected_changes(name, args, pre, self.clock.now().isoformat(timespec="seconds"))
