"""The airline pack's sample writes: one eligible, grounded call of each write tool on the tau2-airline world,
for ``tandem domain check`` (Tandem's ``sample_writes`` hook).

Each is found on the world (a reservation the policy lets its user cancel, upgrade, add a bag to, or keep
the passengers of; a flight with seats for a booking; a member a certificate is due to) and kept only when the
pack's precheck and grounding re-check pass; the user's words hold what the policy has the user say.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipelines.domain import SampleWrite, ToolContext

from .world import AirlineWorld, Reservation

__all__ = ["sample_writes"]

_CANCEL_WORDS = {"change_of_plan": "my plans changed", "airline_cancelled": "the airline cancelled my flight",
                 "health": "I am sick", "weather": "the weather is bad"}


def _card(world: AirlineWorld, user_id: str) -> str | None:
    user = world.users[user_id]
    return next((pid for pid, m in user.payment_methods.items() if m.source == "credit_card"), None)


def _calls(world: AirlineWorld) -> Iterator[tuple[str, dict[str, Any], str, str]]:
    """``(tool, args, user id, what the user says)`` candidates, in the world's order."""
    for rid, res in list(world.reservations.items())[:300]:
        uid, said = res.user_id, f"About reservation {rid}."
        card = _card(world, uid)
        for reason, words in _CANCEL_WORDS.items():
            yield "cancel_reservation", {"reservation_id": rid, "reason": reason}, uid, f"{said} {words}"
        if card:
            yield ("update_reservation_baggages", {"reservation_id": rid, "total_baggages": res.total_baggages + 1,
                                                   "nonfree_baggages": res.nonfree_baggages + 1, "payment_id": card},
                   uid, f"{said} One more bag on {card}.")
            for cabin in [c for c in ("economy", "business") if c != res.cabin]:
                yield ("update_reservation_flights", {"reservation_id": rid, "cabin": cabin, "payment_id": card,
                                                      "flights": _refs(res)}, uid, f"{said} Move me to {cabin}, on {card}.")
        yield ("update_reservation_passengers", {"reservation_id": rid,  # the same people, in another order
                                                 "passengers": [p.model_dump() for p in res.passengers[::-1]]},
               uid, f"{said} " + ", ".join(f"{p.first_name} {p.last_name} {p.dob}" for p in res.passengers))
        if card:
            yield from _bookings(world, res, card)
        # the policy's certificate: $100 a passenger for a flight cancelled, $50 for one delayed
        for what, rate in (("cancelled", 100), ("delayed", 50)):
            yield ("send_certificate", {"user_id": uid, "amount": rate * len(res.passengers)}, uid,
                   f"{said} Its flight was {what}, may I have a certificate?")


def _refs(res: Reservation) -> list[dict[str, str]]:
    return [{"flight_number": f.flight_number, "date": f.date} for f in res.flights]


def _bookings(world: AirlineWorld, res: Reservation, card: str) -> Iterator[tuple[str, dict[str, Any], str, str]]:
    """The same trip again for the same passengers, paid by card at today's prices."""
    total = 0
    for f in res.flights:
        day = world.flight_date(f.flight_number, f.date)
        if day is None or day.status != "available" or not day.prices:
            return
        total += day.prices.get(res.cabin, 0) * len(res.passengers)
    args = {"user_id": res.user_id, "origin": res.origin, "destination": res.destination,
            "flight_type": res.flight_type, "cabin": res.cabin, "flights": _refs(res),
            "passengers": [p.model_dump() for p in res.passengers],
            "payment_methods": [{"payment_id": card, "amount": total}], "total_baggages": 0,
            "nonfree_baggages": 0, "insurance": "no"}
    yield ("book_reservation", args, res.user_id,
           f"I am {res.user_id}: {res.origin} to {res.destination} for "
           + ", ".join(f"{p.first_name} {p.last_name} {p.dob}" for p in res.passengers))


def sample_writes(pack: Any, world: AirlineWorld) -> list[SampleWrite]:
    """One call per write tool that the pack's precheck and grounding re-check accept."""
    found: dict[str, SampleWrite] = {}
    for tool, args, uid, said in _calls(world):
        if tool in found:
            continue
        ctx = ToolContext(session_id="sample", authenticated_user_id=uid)
        if pack.precheck(tool, args, ctx, world) is None and not pack.ungrounded(tool, args, [said], world, uid):
            found[tool] = SampleWrite(tool=tool, args=args, user_id=uid, user_texts=(said,))
        if len(found) == len(pack.write_tools):
            break
    return [found[t] for t in sorted(found)]
