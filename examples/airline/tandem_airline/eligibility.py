"""The airline policy (``policy.md``) as small pure rules: each takes plain values and returns ``None``
(allowed) or a reason code (one of :data:`REASONS`). The tools raise the refusal; tests pin each rule at
its boundaries.

==========================  ====================================================================================
rule                        policy
==========================  ====================================================================================
:func:`free_bags`           free checked bags per passenger, by the booking user's membership and the cabin
:func:`bags_needing_fee`    bags beyond the allowance ($50 each)
:func:`segment_flown`       a segment has been flown (its date is past, or it is flying / landed)
:func:`cancel_refusal`      nothing flown; booked within 24 h, or cancelled by the airline, or business, or
                            insured and the reason is covered (health, weather)
:func:`route_refusal`       the flights connect, from the origin to the destination (and back, round trip)
:func:`change_refusal`      basic economy keeps its flights; origin, destination and trip type stay; a cabin
                            change only before anything is flown
:func:`update_payment_refusal`  a change is paid by one gift card or credit card on file (never a certificate)
:func:`baggage_refusal`     bags can be added (at least one), never removed; the fee covers every bag beyond the allowance
:func:`passengers_refusal`  passengers can be changed, their number cannot
:func:`booking_refusal`     one to five passengers; at most one certificate, one credit card, three gift
                            cards, all on file; the fee covers every bag beyond the allowance
:func:`compensation_refusal`  a certificate only for silver / gold members, insured or business travellers,
                            in multiples of $50
==========================  ====================================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

__all__ = ["REASONS", "CANCEL_REASONS", "INSURED_REASONS", "BAG_FEE", "INSURANCE_FEE", "MAX_PASSENGERS",
           "free_bags", "bags_needing_fee", "segment_flown", "cancel_refusal", "route_refusal", "change_refusal",
           "update_payment_refusal", "baggage_refusal", "passengers_refusal", "booking_refusal",
           "compensation_refusal"]

REASONS: tuple[str, ...] = (
    "not_confirmed", "other_user", "user_not_found", "reservation_not_found", "flight_not_found",
    "flight_not_available", "not_enough_seats", "payment_not_found", "insufficient_balance",
    "certificate_not_allowed", "payment_mismatch", "already_cancelled", "already_flown", "not_cancellable",
    "basic_economy_fixed", "no_change", "route_changed", "bags_removed", "no_bags_added", "bags_under_charged",
    "passenger_count", "too_many_passengers", "payment_mix", "no_compensation", "bad_amount", "too_many_certificates",
)
CANCEL_REASONS: tuple[str, ...] = ("change_of_plan", "airline_cancelled", "health", "weather", "other")
INSURED_REASONS = frozenset({"health", "weather"})
BAG_FEE = 50
INSURANCE_FEE = 30
MAX_PASSENGERS = 5
_FREE = {"regular": (0, 1, 2), "silver": (1, 2, 3), "gold": (2, 3, 4)}
_CABIN_INDEX = {"basic_economy": 0, "economy": 1, "business": 2}


def free_bags(membership: str, cabin: str) -> int:
    """Free checked bags per passenger."""
    return _FREE[membership][_CABIN_INDEX[cabin]]


def bags_needing_fee(membership: str, cabin: str, passengers: int, total_bags: int) -> int:
    """How many of ``total_bags`` are beyond the allowance of ``passengers`` travellers."""
    return max(0, total_bags - free_bags(membership, cabin) * passengers)


def segment_flown(date: str, status: str | None, now: datetime) -> bool:
    """A segment is flown once its date is past, or it is flying or has landed."""
    return date < now.date().isoformat() or status in ("flying", "landed")


def cancel_refusal(*, status: str | None, cabin: str, insurance: str, created_at: str, flown: Sequence[bool],
                   airline_cancelled: bool, reason: str | None, now: datetime) -> str | None:
    """Whether a reservation may be cancelled (see module docstring)."""
    if status == "cancelled":
        return "already_cancelled"
    if any(flown):
        return "already_flown"
    if now - datetime.fromisoformat(created_at) <= timedelta(hours=24):
        return None
    if airline_cancelled or cabin == "business":
        return None
    if insurance == "yes" and reason in INSURED_REASONS:
        return None
    return "not_cancellable"


def route_refusal(legs: Sequence[tuple[str, str]], origin: str, destination: str, flight_type: str) -> str | None:
    """The legs (origin, destination) connect, start at ``origin``, reach ``destination`` (one way: end
    there; round trip: pass there and end back at ``origin``)."""
    if not legs or legs[0][0] != origin:
        return "route_changed"
    if any(a[1] != b[0] for a, b in zip(legs, legs[1:], strict=False)):
        return "route_changed"
    if flight_type == "one_way":
        return None if legs[-1][1] == destination else "route_changed"
    return None if legs[-1][1] == origin and destination in {leg[1] for leg in legs[:-1]} else "route_changed"


def change_refusal(*, status: str | None, cabin: str, new_cabin: str, flights_changed: bool,
                   any_flown: bool) -> str | None:
    """A change of flights or cabin (the route is :func:`route_refusal`'s); one that changes neither is none."""
    if status == "cancelled":
        return "already_cancelled"
    if not flights_changed and new_cabin == cabin:
        return "no_change"
    if flights_changed and cabin == "basic_economy":
        return "basic_economy_fixed"
    if new_cabin != cabin and any_flown:
        return "already_flown"
    return None


def update_payment_refusal(source: str | None, balance: float | None, amount: float) -> str | None:
    """A change's payment (or refund) method: on file, not a certificate, a gift card that covers it."""
    if source is None:
        return "payment_not_found"
    if source == "certificate":
        return "certificate_not_allowed"
    if source == "gift_card" and (balance or 0) < amount:
        return "insufficient_balance"
    return None


def baggage_refusal(*, total: int, nonfree: int, old_total: int, old_nonfree: int, membership: str, cabin: str,
                    passengers: int) -> str | None:
    """Bags are added, never removed (and a change adds at least one); every bag beyond the allowance is paid."""
    if total < old_total or nonfree < old_nonfree or nonfree > total:
        return "bags_removed"
    if total == old_total:
        return "no_bags_added"
    if nonfree < bags_needing_fee(membership, cabin, passengers, total):
        return "bags_under_charged"
    return None


def passengers_refusal(old_count: int, new_count: int) -> str | None:
    return None if old_count == new_count else "passenger_count"


def booking_refusal(*, passengers: int, sources: Sequence[str | None], membership: str, cabin: str,
                    total_bags: int, nonfree_bags: int) -> str | None:
    """A new booking (``sources``: the source of each payment method used, ``None`` when not on file)."""
    if not 1 <= passengers <= MAX_PASSENGERS:
        return "too_many_passengers"
    if any(s is None for s in sources):
        return "payment_not_found"
    if (sources.count("certificate") > 1 or sources.count("credit_card") > 1 or sources.count("gift_card") > 3
            or not sources):
        return "payment_mix"
    if nonfree_bags > total_bags or nonfree_bags < bags_needing_fee(membership, cabin, passengers, total_bags):
        return "bags_under_charged"
    return None


def compensation_refusal(*, membership: str, insured: bool, business: bool, amount: float) -> str | None:
    """A certificate as a gesture: silver / gold members, insured or business travellers; $50 steps."""
    if amount <= 0 or amount % 50:
        return "bad_amount"
    if membership == "regular" and not insured and not business:
        return "no_compensation"
    return None
