"""A change of flights, as an agent makes one: the reservation's legs read, the route searched on the dates the
user wants, the flights that fit what they said offered first, and the new itinerary whole.

* **Directions.** A reservation has an outbound direction (its origin to its destination) and, for a round trip,
  a return (back again); each is one flight or several (a stop). :func:`directions` reads them off the legs a
  reservation read holds.
* **The dates wanted.** A date the user says that no flight of the reservation has (the newest said first), or a
  day relative to the one held ("the day after", "a day earlier"). One new date for a round trip is the
  direction whose date it is nearest; two are the outbound and the return, in date order.
  :func:`wanted_dates` gives, per direction, the date to search on: a new date; else, when the user asks another
  flight without a new date ("the cheapest flight", "an earlier one"), the date held; else none (a cabin change
  keeps the flights). A date held that the user says names its direction: one new date beside it is that
  direction's ("my flight on May 20 … to May 25").
* **What fits.** An itinerary a search returned for a direction on its wanted date, every flight with seats in the
  cabin for the reservation's passengers. In the order the user's words rank them: the cheapest first when they
  say "cheapest" (or cheaper), the earliest for "earlier"/"earliest", the latest for "later"/"latest"; else
  direct flights first, each by its departure.
* **The itinerary whole.** The tool replaces every flight: a direction the user does not change keeps its
  flights; a flight picked brings the rest of its itinerary (a stop's second leg); a direction whose new date
  has several fitting itineraries and no word to rank them is asked (:func:`open_direction`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

__all__ = ["Direction", "MAX_FLIGHTS", "MAX_TRIPS", "directions", "keep_trips", "wanted_dates", "fitting_trips", "itinerary", "open_direction",
           "describe_trip", "ranks", "wants_other_flight", "said_filters"]

#: a day relative to the one held: "the day after", "the next day", "a day later", "one day earlier"
_DAY_AFTER = re.compile(r"\b(?:(?:the\s+)?day\s+after|(?:the\s+)?next\s+day|(?:a|one)\s+day\s+later)\b", re.I)
_DAY_BEFORE = re.compile(r"\b(?:(?:the\s+)?day\s+before|(?:the\s+)?previous\s+day|(?:a|one)\s+day\s+earlier)\b",
                         re.I)
_CHEAPEST = re.compile(r"\b(?:cheap(?:er|est)|least\s+expensive|lowest\s+(?:price|fare)|less\s+expensive)\b", re.I)
_EARLIEST = re.compile(r"\bearli(?:er|est)\b", re.I)
_LATEST = re.compile(r"\blat(?:er|est)\b", re.I)
#: another flight wanted with no new date: a ranking word, or "another / a different / a new flight", "nonstop"
_OTHER = re.compile(r"\b(?:another|a\s+different|a\s+new|other)\s+flights?\b|\b(?:non-?stop|direct)\b", re.I)

Direction = tuple[str, str, str, list[str]]
"""(origin, destination, date held, the legs as "number@date"), in the order flown."""


def _legs(info: Mapping[str, str]) -> list[tuple[str, str, str, str]]:
    out = []
    for leg in (info.get("legs") or "").split(";"):
        parts = leg.split(">")
        if len(parts) == 4:
            out.append((parts[0], parts[1], parts[2], parts[3]))
    return out


def directions(info: Mapping[str, str]) -> list[Direction]:
    """The outbound (and, for a round trip, the return) of a reservation read: the legs up to its destination,
    then the rest."""
    legs = _legs(info)
    if not legs:
        return []
    dest = info.get("destination", "")
    cut = next((i + 1 for i, leg in enumerate(legs) if leg[1] == dest), len(legs))
    out: list[Direction] = []
    for part in (legs[:cut], legs[cut:]):
        if part:
            out.append((part[0][0], part[-1][1], part[0][2], [f"{n}@{d}" for _, _, d, n in part]))
    return out


#: At most this many flights and itineraries kept from searches (the session's state carries them every turn).
MAX_FLIGHTS, MAX_TRIPS = 200, 400


def keep_trips(flights: dict[str, dict[str, str]], trips: list[list[str]], result: Mapping[str, Any]) -> None:
    """A search's itineraries kept (at most :data:`MAX_FLIGHTS` flights, :data:`MAX_TRIPS` itineraries): each flight
    by "number@date" with its route, times, and per cabin its price and seats left."""
    options = [[f] for f in result.get("flights") or ()] + [list(t) for t in result.get("trips") or ()]
    for option in options:
        keys = []
        for f in option:
            if not isinstance(f, Mapping) or not f.get("date"):
                break
            key = f"{f.get('flight_number')}@{f.get('date')}"
            row = {"origin": str(f.get("origin")), "destination": str(f.get("destination")), "date": str(f["date"]),
                   "departs": str(f.get("scheduled_departure_time_est") or ""),
                   "arrives": str(f.get("scheduled_arrival_time_est") or ""),
                   "number": str(f.get("flight_number"))}
            row |= {f"price:{c}": str(p) for c, p in (f.get("prices") or {}).items()}
            row |= {f"seats:{c}": str(n) for c, n in (f.get("available_seats") or {}).items()}
            if key not in flights and len(flights) >= MAX_FLIGHTS:
                break
            flights[key] = row
            keys.append(key)
        else:
            if keys and keys not in trips and len(trips) < MAX_TRIPS:
                trips.append(keys)


def _shift(day: str, by: int) -> str | None:
    try:
        return (date.fromisoformat(day) + timedelta(days=by)).isoformat()
    except ValueError:
        return None


def wants_other_flight(texts: Sequence[str]) -> bool:
    """The user's words ask another flight than the one held (a ranking, "another flight", "nonstop", a day
    relative to it)."""
    return any(rx.search(t) for t in texts for rx in (_CHEAPEST, _EARLIEST, _LATEST, _OTHER, _DAY_AFTER, _DAY_BEFORE))


def wanted_dates(dirs: Sequence[Direction], said: Sequence[str], texts: Sequence[str]) -> list[str | None]:
    """Per direction, the date to search on (module docstring); ``said``: the dates the user said, newest last."""
    held = {d[2] for d in dirs} | {k.split("@", 1)[1] for d in dirs for k in d[3]}
    new = list(dict.fromkeys(d for d in reversed(said) if d not in held))  # newest first
    out: list[str | None] = [None] * len(dirs)
    if new:
        if len(dirs) > 1 and len(new) > 1:
            pair = sorted(new[:2])
            out[0], out[1] = pair[0], pair[1]
        else:
            day = new[0]
            named = [i for i, d in enumerate(dirs) if d[2] in said]  # "my flight on the 20th": that direction's
            if len(named) == 1:
                out[named[0]] = day
                return out

            def gap(d: Direction) -> int:
                try:
                    return abs((date.fromisoformat(day) - date.fromisoformat(d[2])).days)
                except ValueError:
                    return 10**6

            out[min(range(len(dirs)), key=lambda i: gap(dirs[i]))] = day
        return out
    by = 1 if any(_DAY_AFTER.search(t) for t in texts) else -1 if any(_DAY_BEFORE.search(t) for t in texts) else 0
    if by:
        return [_shift(d[2], by) for d in dirs]
    if wants_other_flight(texts):
        return [d[2] for d in dirs]
    return out


def ranks(texts: Sequence[str]) -> str | None:
    """How the user's words rank itineraries: ``price``, ``earliest``, ``latest``, or none."""
    for t in reversed(texts):
        if _CHEAPEST.search(t):
            return "price"
        if _EARLIEST.search(t):
            return "earliest"
        if _LATEST.search(t):
            return "latest"
    return None


#: a time of day said: "at 2pm", "after 11 am", "before 14:30", "around noon"
_TIME = re.compile(r"\b(?:(?P<rel>before|after|by|at|around)\s+)?(?:(?P<h>\d{1,2})(?::(?P<m>[0-5]\d))?\s*"
                   r"(?P<ap>[ap]\.?m\.?)(?![a-z])|(?P<h24>\d{1,2}):(?P<m24>[0-5]\d)\b|(?P<noon>noon|midday))", re.I)
#: parts of the day, as departures: the morning before noon, the afternoon to five, the evening after
_PARTS = {"morning": ("00:00", "12:00"), "afternoon": ("12:00", "17:00"), "evening": ("17:00", "24:00"),
          "night": ("19:00", "24:00")}
_PART = re.compile(r"\b(?:in\s+the\s+|this\s+|an?\s+|the\s+)?(morning|afternoon|evening|night)\b", re.I)
_STOPS = re.compile(r"\b(?P<direct>non-?stop|direct)\b|\b(?P<stop>one[- ]stop|a\s+stop|layover|connecting)\b", re.I)


_ARRIVE = re.compile(r"\b(?:arriv\w*|land\w*|get(?:s|ting)?\s+(?:in|there))\b", re.I)


def _hhmm(row: Mapping[str, str], end: str) -> str:
    """A flight's departure or arrival as "HH:MM" (an arrival the next day: "24:…", after any time that day)."""
    at = row.get(end, "")
    return f"{24 + int(at[:2]):02d}{at[2:5]}" if at.endswith("+1") and at[:2].isdigit() else at[:5]


def _clock(m: re.Match[str]) -> str | None:
    if m.group("noon"):
        return "12:00"
    if m.group("h24") is not None:
        h, mins = int(m.group("h24")), int(m.group("m24"))
    else:
        h, mins = int(m.group("h")), int(m.group("m") or 0)
        pm = m.group("ap").lower().startswith("p")
        if not 1 <= h <= 12:
            return None
        h = (h % 12) + (12 if pm else 0)
    return f"{h:02d}:{mins:02d}" if h < 24 else None


def _time_test(end: str, rel: str, at: str) -> Any:
    """An itinerary's test: its first departure (or last arrival) after, before, or in the hour of ``at``."""
    def test(trip: Sequence[str], rows: Sequence[Mapping[str, str]]) -> bool:
        when = _hhmm(rows[-1] if end == "arrives" else rows[0], end)
        if rel == "after":
            return when >= at
        if rel in ("before", "by"):
            return when <= at
        return when[:2] == at[:2]
    return test


def said_filters(texts: Sequence[str]) -> list[Any]:
    """What the user's words say of the flight they want, as tests of an itinerary's first departure and its
    stops: a time ("at 2pm": that hour; "after 11am", "before 14:30"), a part of the day ("in the morning"),
    "nonstop" / "direct" or "one stop". The newest text saying each first."""
    tests: list[Any] = []
    for t in reversed(texts):
        for m in _TIME.finditer(t):
            at = _clock(m)
            if at is None:
                continue
            # "arriving before 6pm": the last flight's arrival (one landing after midnight is later than any)
            end = "arrives" if _ARRIVE.search(t[max(0, m.start() - 25):m.start()]) else "departs"
            tests.append(_time_test(end, (m.group("rel") or "at").lower(), at))
        for m in _PART.finditer(t):
            lo, hi = _PARTS[m.group(1).lower()]
            tests.append(lambda trip, rows, lo=lo, hi=hi: lo <= rows[0].get("departs", "")[:5] < hi)
        for m in _STOPS.finditer(t):
            direct = m.group("direct") is not None
            tests.append(lambda trip, rows, direct=direct: (len(trip) == 1) == direct)
    return tests


def _price(flights: Mapping[str, Mapping[str, str]], trip: Sequence[str], cabin: str) -> float:
    try:
        return sum(float(flights[k][f"price:{cabin}"]) for k in trip)
    except (KeyError, ValueError):
        return float("inf")


def fitting_trips(flights: Mapping[str, Mapping[str, str]], trips: Iterable[Sequence[str]], direction: Direction,
                  day: str, cabin: str, seats: int, rank: str | None, tests: Sequence[Any] = ()) -> list[list[str]]:
    """The itineraries searched for ``direction`` on ``day`` with ``seats`` seats in ``cabin`` that pass what the
    user said of the flight (``tests``: :func:`said_filters`), best first."""
    origin, dest = direction[0], direction[1]
    fits = []
    for trip in trips:
        rows = [flights.get(k) for k in trip]
        if not rows or any(r is None for r in rows):
            continue
        first, last = rows[0], rows[-1]
        assert first is not None and last is not None
        if first["origin"] != origin or last["destination"] != dest or first["date"] != day:
            continue
        if all(int((r or {}).get(f"seats:{cabin}") or 0) >= seats for r in rows):
            fits.append(list(trip))
    for test in tests:  # each said of the flight narrows the fits, unless none would be left ("nonstop or not")
        kept = [t for t in fits if test(t, [flights[k] for k in t])]
        fits = kept or fits

    def depart(trip: Sequence[str]) -> str:
        return flights[trip[0]].get("departs", "")

    if rank == "price":
        return sorted(fits, key=lambda t: (_price(flights, t, cabin), len(t), depart(t)))
    if rank == "latest":
        return sorted(fits, key=depart, reverse=True)
    return sorted(fits, key=lambda t: (depart(t),) if rank == "earliest" else (len(t), depart(t)))


def itinerary(picked: Sequence[str], dirs: Sequence[Direction], options: Sequence[Sequence[list[str]]],
              ranked: bool) -> list[str] | None:
    """The whole new itinerary ("number@date", in the order flown) for the flights the user ``picked`` (each a
    number, or "number@date"): per direction, the held legs when it wants no new date (``options[i]`` empty); else
    the itinerary of ``options[i]`` a picked flight belongs to; else its first option when the user's words rank
    them or only one fits; else ``None`` (a direction still open)."""
    def hits(trip: Sequence[str]) -> bool:
        return any(p == k or p == k.split("@", 1)[0] for p in picked for k in trip)

    out: list[str] = []
    for d, opts in zip(dirs, options, strict=True):
        chosen = next((t for t in opts if hits(t)), None)
        if chosen is None and not opts:
            chosen = list(d[3])
        elif chosen is None and (ranked or len(opts) == 1):
            chosen = list(opts[0])
        if chosen is None:
            return None
        out += chosen
    return out


def open_direction(picked: Sequence[str], dirs: Sequence[Direction], options: Sequence[Sequence[list[str]]],
                   ranked: bool) -> int | None:
    """The first direction :func:`itinerary` leaves open, else ``None``."""
    for i, (_d, opts) in enumerate(zip(dirs, options, strict=True)):
        if opts and not ranked and len(opts) > 1 and not any(
                p == k or p == k.split("@", 1)[0] for p in picked for t in opts for k in t):
            return i
    return None


def describe_trip(flights: Mapping[str, Mapping[str, str]], trip: Sequence[str], cabin: str) -> str:
    """"HAT110 at 14:00:00 and HAT172 at 18:00:00 on 2024-05-24 ($320 in economy)"."""
    rows = [flights[k] for k in trip if k in flights]
    if not rows:
        return ""
    legs = " and ".join(f"{r['number']} at {r.get('departs', '')[:5]}" for r in rows)
    price = _price(flights, trip, cabin)
    cost = f" (${price:g} in {cabin.replace('_', ' ')})" if price != float("inf") else ""
    return f"{legs} on {rows[0]['date']}{cost}"
