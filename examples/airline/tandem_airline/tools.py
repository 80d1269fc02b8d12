"""The airline tools, typed like tau2-airline's: reads (user, reservation, flight search, airports,
calculator), writes (cancel, change flights, bags, passengers, book, certificate) and the transfer.

Each write does what tau2's tool does to the database (the same payments, balances, seats and new ids)
after the policy's rules (:mod:`.eligibility`) and the session's facts (the user's yes, their own
reservation) allow it. Two kinds of refusal, both ending their message with ``[reason]``:

* :class:`~pipelines.errors.IneligibleAction` — the policy or the session says no (tau2's tools do not
  check these: "the API does not check … the agent must");
* :class:`~pipelines.errors.ToolError` — tau2's own tool refuses too (an unknown id, a flight not
  available, too few seats, a payment that does not add up, a certificate used for a change).
"""

from __future__ import annotations

import ast
import operator
from datetime import date as Date
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipelines.domain import (
    CallOutcome,
    ToolContext,
    ToolRegistry,
    ToolSpec,
    allocate,
    fail,
    reason_from,
    refuse,
)

from . import eligibility as el
from .world import (
    AirlineWorld,
    Cabin,
    Certificate,
    FlightRef,
    GiftCard,
    Passenger,
    Payment,
    Reservation,
    ReservationFlight,
    User,
)

__all__ = ["RESERVATION_ID_START", "CERTIFICATE_ID_START", "WRITE_TOOLS", "LOOKUP_TOOLS", "TRANSFER_TOOL",
           "TOOL_SPECS", "build_registry", "invoke"]

#: The first id of each sequence new entities take (tau2's own: its new reservations and certificates).
RESERVATION_ID_START = "HATHAT"
CERTIFICATE_ID_START = "certificate_3221322"
TRANSFER_TOOL = "transfer_to_human_agents"


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserIdArgs(_Args):
    user_id: str = Field(..., description="The user's id, such as 'sara_doe_496'.")


class ReservationIdArgs(_Args):
    reservation_id: str = Field(..., description="The reservation id, such as '8JX2WO'.")


class SearchArgs(_Args):
    origin: str = Field(..., description="Origin airport IATA code, such as 'JFK'.")
    destination: str = Field(..., description="Destination airport IATA code, such as 'LAX'.")
    date: str = Field(..., description="The date of the flight, 'YYYY-MM-DD'.")


class NoArgs(_Args):
    pass


class CalculateArgs(_Args):
    expression: str = Field(..., description="Numbers, + - * / and parentheses.")


class CancelArgs(_Args):
    reservation_id: str
    reason: Literal["change_of_plan", "airline_cancelled", "health", "weather", "other"] | None = Field(
        None, description="Why the user cancels (the policy's windows depend on it).")


class UpdateFlightsArgs(_Args):
    reservation_id: str
    cabin: Cabin
    flights: list[FlightRef] = Field(..., description="Every flight of the new itinerary, kept ones included.")
    payment_id: str = Field(..., description="A gift card or credit card on file, such as 'credit_card_7815826'.")


class UpdateBaggagesArgs(_Args):
    reservation_id: str
    total_baggages: int = Field(..., ge=0)
    nonfree_baggages: int = Field(..., ge=0)
    payment_id: str


class UpdatePassengersArgs(_Args):
    reservation_id: str
    passengers: list[Passenger]


class BookArgs(_Args):
    user_id: str
    origin: str
    destination: str
    flight_type: Literal["one_way", "round_trip"]
    cabin: Cabin
    flights: list[FlightRef]
    passengers: list[Passenger]
    payment_methods: list[Payment]
    total_baggages: int = Field(..., ge=0)
    nonfree_baggages: int = Field(..., ge=0)
    insurance: Literal["yes", "no"]


class CertificateArgs(_Args):
    user_id: str
    amount: float


class TransferArgs(_Args):
    summary: str


class DirectFlight(BaseModel):
    flight_number: str
    origin: str
    destination: str
    status: str = "available"
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    date: str | None = None
    available_seats: dict[str, int]
    prices: dict[str, int]


class DirectFlights(BaseModel):
    flights: list[DirectFlight]


class OneStopFlights(BaseModel):
    trips: list[list[DirectFlight]]


class Airports(BaseModel):
    airports: list[str]


class CalculateResult(BaseModel):
    value: float


class Message(BaseModel):
    message: str


# -- lookups ----------------------------------------------------------------------------------

def _user(world: AirlineWorld, user_id: str) -> User:
    user = world.users.get(user_id)
    if user is None:
        fail("user_not_found", f"user {user_id} not found")
    return user


def _reservation(world: AirlineWorld, reservation_id: str) -> Reservation:
    res = world.reservations.get(reservation_id)
    if res is None:
        fail("reservation_not_found", f"reservation {reservation_id} not found")
    return res


def _own(ctx: ToolContext, user_id: str, *, write: bool) -> None:
    if ctx.authenticated_user_id is not None and ctx.authenticated_user_id != user_id:
        refuse("other_user", "that belongs to another user")
    if write and ctx.authenticated_user_id is None:
        refuse("other_user", "the user is not known yet")
    if write and not ctx.confirmed:
        refuse("not_confirmed", "a change needs the user's explicit yes")


def _available(world: AirlineWorld, ref: FlightRef, cabin: str, seats: int):
    flight = world.flights.get(ref.flight_number)
    if flight is None:
        fail("flight_not_found", f"flight {ref.flight_number} not found")
    day = flight.dates.get(ref.date)
    if day is None or day.status != "available":
        fail("flight_not_available", f"flight {ref.flight_number} is not available on {ref.date}")
    if (day.available_seats or {}).get(cabin, 0) < seats:
        fail("not_enough_seats", f"not enough seats on flight {ref.flight_number}")
    return flight, day


def _flown(world: AirlineWorld, res: Reservation) -> list[bool]:
    now = world.now()
    out = []
    for f in res.flights:
        day = world.flight_date(f.flight_number, f.date)
        out.append(el.segment_flown(f.date, day.status if day else None, now))
    return out


# -- reads --------------------------------------------------------------------------------------

def get_user_details(args: UserIdArgs, ctx: ToolContext, world: AirlineWorld) -> User:
    user = _user(world, args.user_id)
    _own(ctx, user.user_id, write=False)
    ctx.observed_ids.update({user.user_id, *user.reservations, *user.payment_methods})
    return user


def get_reservation_details(args: ReservationIdArgs, ctx: ToolContext, world: AirlineWorld) -> Reservation:
    res = _reservation(world, args.reservation_id)
    _own(ctx, res.user_id, write=False)
    ctx.observed_ids.add(res.reservation_id)
    return res


def _direct(world: AirlineWorld, day: str, origin: str | None, destination: str | None,
            leave_after: str | None = None) -> list[DirectFlight]:
    out = []
    for f in world.flights.values():
        d = f.dates.get(day)
        if d is None or d.status != "available":
            continue
        if (origin is not None and f.origin != origin) or (destination is not None and f.destination != destination):
            continue
        if leave_after is not None and f.scheduled_departure_time_est < leave_after:
            continue
        out.append(DirectFlight(flight_number=f.flight_number, origin=f.origin, destination=f.destination,
                                scheduled_departure_time_est=f.scheduled_departure_time_est,
                                scheduled_arrival_time_est=f.scheduled_arrival_time_est,
                                available_seats=dict(d.available_seats or {}), prices=dict(d.prices or {})))
    return out


def search_direct_flight(args: SearchArgs, ctx: ToolContext, world: AirlineWorld) -> DirectFlights:
    flights = _direct(world, args.date, args.origin, args.destination)
    for f in flights:  # each on the date searched, as a one-stop trip's legs are: a flight is a number on a date
        f.date = args.date
    return DirectFlights(flights=flights)


def search_onestop_flight(args: SearchArgs, ctx: ToolContext, world: AirlineWorld) -> OneStopFlights:
    trips = []
    for first in _direct(world, args.date, args.origin, None):
        first.date = args.date
        day2 = args.date
        if "+1" in first.scheduled_arrival_time_est:
            day2 = (Date.fromisoformat(args.date) + timedelta(days=1)).isoformat()
        for second in _direct(world, day2, first.destination, args.destination, first.scheduled_arrival_time_est):
            second.date = day2
            trips.append([first, second])
    return OneStopFlights(trips=trips)


def list_all_airports(args: NoArgs, ctx: ToolContext, world: AirlineWorld) -> Airports:
    return Airports(airports=sorted({f.origin for f in world.flights.values()}
                                    | {f.destination for f in world.flights.values()}))


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    raise ValueError("not arithmetic")


def calculate(args: CalculateArgs, ctx: ToolContext, world: AirlineWorld) -> CalculateResult:
    if not all(c in "0123456789+-*/(). " for c in args.expression):
        fail("invalid_expression", "only numbers, + - * / and parentheses are allowed")
    try:
        return CalculateResult(value=round(_eval(ast.parse(args.expression, mode="eval")), 2))
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        fail("invalid_expression", f"cannot evaluate {args.expression!r}")


def transfer_to_human_agents(args: TransferArgs, ctx: ToolContext, world: AirlineWorld) -> Message:
    return Message(message="Transfer successful")


# -- writes -------------------------------------------------------------------------------------

def _charge(user: User, payment_id: str, amount: float) -> Payment | None:
    """tau2's payment for a change: a gift card or credit card on file; a gift card is debited."""
    method = user.payment_methods.get(payment_id)
    reason = el.update_payment_refusal(method.source if method else None,
                                       getattr(method, "amount", None), amount)
    if reason is not None:
        fail(reason, f"payment {payment_id} cannot pay {amount}")
    if isinstance(method, GiftCard):
        method.amount -= amount
    return Payment(payment_id=payment_id, amount=amount) if amount != 0 else None


def cancel_reservation(args: CancelArgs, ctx: ToolContext, world: AirlineWorld) -> Reservation:
    res = _reservation(world, args.reservation_id)
    _own(ctx, res.user_id, write=True)
    airline_cancelled = any(
        (d := world.flight_date(f.flight_number, f.date)) is not None and d.status == "cancelled" for f in res.flights)
    reason = el.cancel_refusal(status=res.status, cabin=res.cabin, insurance=res.insurance,
                               created_at=res.created_at, flown=_flown(world, res),
                               airline_cancelled=airline_cancelled, reason=args.reason, now=world.now())
    if reason is not None:
        refuse(reason, "this reservation cannot be cancelled under the policy")
    res.payment_history.extend([Payment(payment_id=p.payment_id, amount=-p.amount) for p in res.payment_history])
    res.status = "cancelled"
    return res


def update_reservation_flights(args: UpdateFlightsArgs, ctx: ToolContext, world: AirlineWorld) -> Reservation:
    res = _reservation(world, args.reservation_id)
    _own(ctx, res.user_id, write=True)
    user = _user(world, res.user_id)
    old = {(f.flight_number, f.date) for f in res.flights}
    changed = {(f.flight_number, f.date) for f in args.flights} != old
    reason = el.change_refusal(status=res.status, cabin=res.cabin, new_cabin=args.cabin, flights_changed=changed,
                               any_flown=any(_flown(world, res)))
    if reason is None:
        legs = []
        for ref in args.flights:
            flight = world.flights.get(ref.flight_number)
            legs.append((flight.origin, flight.destination) if flight else ("?", "?"))
        reason = el.route_refusal(legs, res.origin, res.destination, res.flight_type)
    if reason is not None:
        refuse(reason, "this change is not allowed under the policy")
    n = len(res.passengers)
    total, new_flights = 0, []
    for ref in args.flights:
        kept = next((f for f in res.flights if f.flight_number == ref.flight_number and f.date == ref.date
                     and args.cabin == res.cabin), None)
        if kept is not None:
            new_flights.append(kept)
            total += kept.price * n
            continue
        flight, day = _available(world, ref, args.cabin, n)
        price = (day.prices or {})[args.cabin]
        new_flights.append(ReservationFlight(origin=flight.origin, destination=flight.destination,
                                             flight_number=ref.flight_number, date=ref.date, price=price))
        total += price * n
    total -= sum(f.price for f in res.flights) * n
    payment = _charge(user, args.payment_id, total)
    if payment is not None:
        res.payment_history.append(payment)
    res.flights, res.cabin = new_flights, args.cabin
    return res


def update_reservation_baggages(args: UpdateBaggagesArgs, ctx: ToolContext, world: AirlineWorld) -> Reservation:
    res = _reservation(world, args.reservation_id)
    _own(ctx, res.user_id, write=True)
    user = _user(world, res.user_id)
    reason = el.baggage_refusal(total=args.total_baggages, nonfree=args.nonfree_baggages,
                                old_total=res.total_baggages, old_nonfree=res.nonfree_baggages,
                                membership=user.membership, cabin=res.cabin, passengers=len(res.passengers))
    if reason is not None:
        refuse(reason, "this baggage change is not allowed under the policy")
    payment = _charge(user, args.payment_id, el.BAG_FEE * max(0, args.nonfree_baggages - res.nonfree_baggages))
    if payment is not None:
        res.payment_history.append(payment)
    res.total_baggages, res.nonfree_baggages = args.total_baggages, args.nonfree_baggages
    return res


def update_reservation_passengers(args: UpdatePassengersArgs, ctx: ToolContext,
                                  world: AirlineWorld) -> Reservation:
    res = _reservation(world, args.reservation_id)
    _own(ctx, res.user_id, write=True)
    if el.passengers_refusal(len(res.passengers), len(args.passengers)):
        fail("passenger_count", "the number of passengers cannot change")
    res.passengers = [p.model_copy() for p in args.passengers]
    return res


def book_reservation(args: BookArgs, ctx: ToolContext, world: AirlineWorld) -> Reservation:
    user = _user(world, args.user_id)
    _own(ctx, user.user_id, write=True)
    sources = [getattr(user.payment_methods.get(p.payment_id), "source", None) for p in args.payment_methods]
    reason = el.booking_refusal(passengers=len(args.passengers), sources=sources, membership=user.membership,
                                cabin=args.cabin, total_bags=args.total_baggages, nonfree_bags=args.nonfree_baggages)
    if reason is None:
        legs = [(f.origin, f.destination) if (f := world.flights.get(r.flight_number)) else ("?", "?")
                for r in args.flights]
        reason = el.route_refusal(legs, args.origin, args.destination, args.flight_type)
    if reason is not None:
        refuse(reason, "this booking is not allowed under the policy")
    n = len(args.passengers)
    flights, days, total = [], [], 0
    for ref in args.flights:
        flight, day = _available(world, ref, args.cabin, n)
        price = (day.prices or {})[args.cabin]
        flights.append(ReservationFlight(origin=flight.origin, destination=flight.destination,
                                         flight_number=ref.flight_number, date=ref.date, price=price))
        days.append(day)
        total += price * n
    total += (el.INSURANCE_FEE * n if args.insurance == "yes" else 0) + el.BAG_FEE * args.nonfree_baggages
    for p in args.payment_methods:
        method = user.payment_methods.get(p.payment_id)
        if method is None:
            fail("payment_not_found", f"payment method {p.payment_id} not found")
        if isinstance(method, GiftCard | Certificate) and method.amount < p.amount:
            fail("insufficient_balance", f"not enough balance in {p.payment_id}")
    if sum(p.amount for p in args.payment_methods) != total:
        fail("payment_mismatch", f"the payments do not add up to the total price {total}")
    for p in args.payment_methods:
        method = user.payment_methods[p.payment_id]
        if isinstance(method, GiftCard):
            method.amount -= p.amount
        elif isinstance(method, Certificate):
            user.payment_methods.pop(p.payment_id)
    for day in days:
        day.available_seats[args.cabin] -= n  # type: ignore[index]
    rid = allocate(RESERVATION_ID_START, world.reservations.__contains__)
    res = Reservation(reservation_id=rid, user_id=user.user_id, origin=args.origin, destination=args.destination,
                      flight_type=args.flight_type, cabin=args.cabin, flights=flights,
                      passengers=[p.model_copy() for p in args.passengers],
                      payment_history=[p.model_copy() for p in args.payment_methods],
                      created_at=world.now().isoformat(timespec="seconds"), total_baggages=args.total_baggages,
                      nonfree_baggages=args.nonfree_baggages, insurance=args.insurance)
    world.reservations[rid] = res
    user.reservations.append(rid)
    return res


def send_certificate(args: CertificateArgs, ctx: ToolContext, world: AirlineWorld) -> Message:
    user = _user(world, args.user_id)
    _own(ctx, user.user_id, write=True)
    mine = [world.reservations[r] for r in user.reservations if r in world.reservations]
    reason = el.compensation_refusal(membership=user.membership, insured=any(r.insurance == "yes" for r in mine),
                                     business=any(r.cabin == "business" for r in mine), amount=args.amount)
    if reason is not None:
        refuse(reason, "no certificate can be offered under the policy")
    try:
        pid = allocate(CERTIFICATE_ID_START, user.payment_methods.__contains__, limit=3)
    except ValueError:
        fail("too_many_certificates", "the user holds every certificate id already")
    user.payment_methods[pid] = Certificate(id=pid, amount=args.amount)
    return Message(message=f"Certificate {pid} added to user {user.user_id} with amount {args.amount}.")


# -- the registry -------------------------------------------------------------------------------

def _spec(name, description, args, result, handler, kind="read") -> ToolSpec:
    return ToolSpec(name=name, description=description, args_model=args, result_model=result, handler=handler,
                    kind=kind)


TOOL_SPECS: tuple[ToolSpec[Any, Any, AirlineWorld], ...] = (
    _spec("get_user_details", "The user's profile: membership, payment methods, saved passengers, reservations.",
          UserIdArgs, User, get_user_details),
    _spec("get_reservation_details", "One reservation: flights, cabin, passengers, payments, bags, insurance.",
          ReservationIdArgs, Reservation, get_reservation_details),
    _spec("search_direct_flight", "Direct flights between two airports on a date, with seats and prices.",
          SearchArgs, DirectFlights, search_direct_flight),
    _spec("search_onestop_flight", "One-stop trips between two airports on a date.",
          SearchArgs, OneStopFlights, search_onestop_flight),
    _spec("list_all_airports", "Every airport code served.", NoArgs, Airports, list_all_airports),
    _spec("calculate", "Evaluate an arithmetic expression (+ - * / parentheses), rounded to cents.",
          CalculateArgs, CalculateResult, calculate),
    _spec(TRANSFER_TOOL, "Hand the user to a human agent, with a summary.", TransferArgs, Message,
          transfer_to_human_agents),
    _spec("cancel_reservation", "Cancel a whole reservation; payments are refunded to their methods.",
          CancelArgs, Reservation, cancel_reservation, "write"),
    _spec("update_reservation_flights", "Change a reservation's flights or cabin (same route and trip type).",
          UpdateFlightsArgs, Reservation, update_reservation_flights, "write"),
    _spec("update_reservation_baggages", "Add checked bags to a reservation ($50 each beyond the allowance).",
          UpdateBaggagesArgs, Reservation, update_reservation_baggages, "write"),
    _spec("update_reservation_passengers", "Replace a reservation's passengers (the same number).",
          UpdatePassengersArgs, Reservation, update_reservation_passengers, "write"),
    _spec("book_reservation", "Book a new reservation for the user.", BookArgs, Reservation, book_reservation,
          "write"),
    _spec("send_certificate", "Give the user a travel certificate as a gesture.", CertificateArgs, Message,
          send_certificate, "write"),
)
WRITE_TOOLS: frozenset[str] = frozenset(s.name for s in TOOL_SPECS if s.kind == "write")
LOOKUP_TOOLS: frozenset[str] = frozenset({"get_user_details"})


def build_registry() -> ToolRegistry[AirlineWorld]:
    registry: ToolRegistry[AirlineWorld] = ToolRegistry()
    for spec in TOOL_SPECS:
        registry.register(spec)
    return registry


def invoke(registry: ToolRegistry[AirlineWorld], name: str, raw_args: dict[str, Any], ctx: ToolContext,
           world: AirlineWorld) -> CallOutcome:
    """One call and its refusal's reason (the task replay's tool call; the pack's is Tandem's default)."""
    obs = registry.call(name, raw_args, ctx, world)
    return CallOutcome(observation=obs, reason=reason_from(obs))
