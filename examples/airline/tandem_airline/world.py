"""The airline world: pydantic models with the exact shape of tau2-airline's ``db.json``.

:meth:`AirlineWorld.from_tau2_json` accepts the real file as is and :meth:`AirlineWorld.to_json` gives it back
(optional fields that are unset are left out, so an untouched world round-trips to the same JSON). As a
Tandem ``World`` it is stored as ``(kind, id, json)`` rows of three kinds (``flight``, ``user``,
``reservation``), forked for one write (its scope: the user, their reservations, the flights the write
names, and new reservations), and the changed entities adopted after the commit.

The world's clock is the time the policy's windows are measured against (``now``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipelines.domain import Clock, RecordWorld, SystemClock, WriteScope

__all__ = ["CABINS", "Cabin", "Name", "Address", "CreditCard", "GiftCard", "Certificate", "PaymentMethod",
           "Passenger", "User", "FlightDate", "Flight", "FlightRef", "ReservationFlight", "Payment",
           "Reservation", "AirlineWorld"]

Cabin = Literal["basic_economy", "economy", "business"]
CABINS: tuple[str, ...] = Cabin.__args__  # type: ignore[attr-defined]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Name(_Model):
    first_name: str
    last_name: str


class Address(_Model):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class CreditCard(_Model):
    source: Literal["credit_card"] = "credit_card"
    id: str
    brand: str
    last_four: str


class GiftCard(_Model):
    source: Literal["gift_card"] = "gift_card"
    id: str
    amount: float


class Certificate(_Model):
    source: Literal["certificate"] = "certificate"
    id: str
    amount: float


PaymentMethod = Annotated[CreditCard | GiftCard | Certificate, Field(discriminator="source")]


class Passenger(_Model):
    first_name: str
    last_name: str
    dob: str


class User(_Model):
    user_id: str
    name: Name
    address: Address
    email: str
    dob: str
    payment_methods: dict[str, PaymentMethod]
    saved_passengers: list[Passenger]
    membership: Literal["regular", "silver", "gold"]
    reservations: list[str]


class FlightDate(_Model):
    status: Literal["available", "delayed", "on time", "flying", "landed", "cancelled"]
    available_seats: dict[str, int] | None = None
    prices: dict[str, int] | None = None
    actual_departure_time_est: str | None = None
    actual_arrival_time_est: str | None = None
    estimated_departure_time_est: str | None = None
    estimated_arrival_time_est: str | None = None


class Flight(_Model):
    flight_number: str
    origin: str
    destination: str
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    dates: dict[str, FlightDate]


class FlightRef(_Model):
    """One flight on one date, as a booking or a change names it."""

    flight_number: str
    date: str


class ReservationFlight(_Model):
    origin: str
    destination: str
    flight_number: str
    date: str
    price: int


class Payment(_Model):
    payment_id: str
    amount: float


class Reservation(_Model):
    reservation_id: str
    user_id: str
    origin: str
    destination: str
    flight_type: Literal["one_way", "round_trip"]
    cabin: Cabin
    flights: list[ReservationFlight]
    passengers: list[Passenger]
    payment_history: list[Payment]
    created_at: str
    total_baggages: int
    nonfree_baggages: int
    insurance: Literal["yes", "no"]
    status: Literal["cancelled"] | None = None


class AirlineWorld(RecordWorld):
    """Flights, users and reservations keyed by id (a Tandem ``RecordWorld``), with the policy's clock."""

    KINDS: ClassVar[dict[str, str]] = {"flight": "flights", "user": "users", "reservation": "reservations"}

    flights: dict[str, Flight] = Field(default_factory=dict)
    users: dict[str, User] = Field(default_factory=dict)
    reservations: dict[str, Reservation] = Field(default_factory=dict)

    _clock: Clock = SystemClock()

    # -- the clock ---------------------------------------------------------------------------
    def with_clock(self, clock: Clock) -> AirlineWorld:
        self._clock = clock
        return self

    def now(self) -> datetime:
        return self._clock.now()

    @classmethod
    def from_tau2_json(cls, data: Mapping[str, Any]) -> AirlineWorld:
        return cls.from_json(data)  # type: ignore[no-any-return]

    # -- what one write may change -----------------------------------------------------------
    def write_scope(self, tool: str, args: Mapping[str, Any], user_id: str | None) -> WriteScope:
        """The user (the acting one, or the owner of the named reservation), their reservations, the
        flights the write names or the reservation holds; a booking may create a reservation."""
        res = self.reservations.get(str(args.get("reservation_id", "")))
        owner = res.user_id if res is not None else str(args.get("user_id") or user_id or "")
        user = self.users.get(owner)
        flights = {str(f.get("flight_number")) for f in args.get("flights") or () if isinstance(f, Mapping)}
        if res is not None:
            flights |= {f.flight_number for f in res.flights}
        return WriteScope(
            existing={"user": {owner} if user else set(),
                      "reservation": set(user.reservations if user else ()) | ({res.reservation_id} if res else set()),
                      "flight": {f for f in flights if f in self.flights}},
            creates=frozenset({"reservation"}) if tool == "book_reservation" else frozenset())

    # -- lookups -----------------------------------------------------------------------------
    def flight_date(self, flight_number: str, date: str) -> FlightDate | None:
        flight = self.flights.get(flight_number)
        return None if flight is None else flight.dates.get(date)
