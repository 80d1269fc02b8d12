"""Admission of whole turns by the box's measured capacity and the turn deadline, not a number sized by hand.

::

    admit()      a turn is admitted while fewer than ``limit`` run; one more is refused at once
                 (:class:`~pipelines.errors.Overloaded`: 503 + Retry-After / UNAVAILABLE), never queued
                 behind turns that would push it past its deadline
    limit        ⌊X · budget⌋, clamped to [min_limit, max_limit]: X is the box's completion rate in turns
                 per second, budget = target × deadline is how long a turn may expect to take when ``limit``
                 run at once (Little's law: latency = turns in flight / X)
    X            measured from completed turns: each gives N̄ / T — the mean number of turns in flight
                 during its life over its latency — smoothed (EWMA); so the limit follows whatever the box
                 delivers at the concurrency it runs (a slower engine, fewer threads, a smaller KV space, a
                 slower pipeline kind), and settles where a turn's latency is the budget
    cold         before the first completion: ``initial_limit``
    late         a turn that ran past its deadline halves X at once (multiplicative back-off)
    Retry-After  the expected wait for a free slot: 1 / X (at least ``min_retry_s``, at most ``max_retry_s``)
    lost         a ticket never released (a path that forgot it) stops counting twice the deadline after it
                 was admitted: a leak cannot shrink the box for good

The same in the manner of Envoy's adaptive concurrency filter and Netflix's concurrency-limits, with the
deadline as the latency target instead of a measured minimum. One instance per ingress replica: each
measures its own share of the box (its turns in flight over their latency), so replicas add up.
Pure Python, no clock of its own: the caller passes ``clock``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from pipelines.errors import Overloaded

__all__ = ["AdaptiveAdmission", "Ticket"]


@dataclass(eq=False)
class Ticket:
    """One admitted turn: when it was admitted and the in-flight area (turn·seconds) at that moment."""

    t0: float
    area0: float
    done: bool = False


class AdaptiveAdmission:
    """Turns in flight bounded by measured rate × deadline budget (see module docstring)."""

    def __init__(self, deadline_s: float, *, target: float = 0.5, initial_limit: int = 2, min_limit: int = 1,
                 max_limit: int = 64, alpha: float = 0.3, min_retry_s: float = 1.0, max_retry_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < target <= 1:
            raise ValueError("target must be in (0, 1]")
        if not 1 <= min_limit <= initial_limit <= max_limit:
            raise ValueError("need 1 <= min_limit <= initial_limit <= max_limit")
        self.deadline_s, self.target, self.alpha = deadline_s, target, alpha
        self.initial_limit, self.min_limit, self.max_limit = initial_limit, min_limit, max_limit
        self.min_retry_s, self.max_retry_s = min_retry_s, max_retry_s
        self.clock = clock
        self.rate: float | None = None  # X, turns per second
        self.inflight = 0
        self.admitted = self.refused = self.completed = self.late = self.expired = 0
        self._open: set[Ticket] = set()
        self._area = 0.0  # ∫ inflight dt
        self._t = clock()

    # -- the in-flight integral ---------------------------------------------------------------

    def _advance(self) -> float:
        now = self.clock()
        self._area += self.inflight * (now - self._t)
        self._t = now
        return now

    # -- the limit ------------------------------------------------------------------------------

    @property
    def budget_s(self) -> float:
        return self.target * self.deadline_s

    @property
    def limit(self) -> int:
        if self.rate is None:
            return self.initial_limit
        return max(self.min_limit, min(self.max_limit, math.floor(self.rate * self.budget_s)))

    def retry_after_s(self) -> float:
        """The expected wait for a free slot (one completion at the measured rate)."""
        if not self.rate:
            return self.min_retry_s
        return max(self.min_retry_s, min(self.max_retry_s, 1.0 / self.rate))

    # -- admission ------------------------------------------------------------------------------

    def _expire(self, now: float) -> None:
        for t in [t for t in self._open if now - t.t0 > 2 * self.deadline_s]:
            self._open.discard(t)
            t.done = True
            self.inflight = max(0, self.inflight - 1)
            self.expired += 1

    def admit(self) -> Ticket:
        """A ticket for one more turn, or :class:`Overloaded` (with Retry-After) when ``limit`` run."""
        now = self._advance()
        self._expire(now)
        if self.inflight >= self.limit:
            self.refused += 1
            raise Overloaded(f"the service is at its measured capacity ({self.inflight} turns in flight); "
                             "try again shortly", retry_after_s=self.retry_after_s(),
                             details={"in_flight": self.inflight, "limit": self.limit})
        self.inflight += 1
        self.admitted += 1
        ticket = Ticket(t0=now, area0=self._area)
        self._open.add(ticket)
        return ticket

    def release(self, ticket: Ticket, *, completed: bool, late: bool = False) -> None:
        """End an admitted turn. ``completed``: it ran to its end (a latency sample); ``late``: it ran past
        its deadline (the rate is halved). A turn that ended otherwise (refused by a later check, the client
        left) only frees its slot. Releasing twice does nothing."""
        if ticket.done:
            return
        ticket.done = True
        self._open.discard(ticket)
        now = self._advance()
        self.inflight = max(0, self.inflight - 1)
        if late:
            self.late += 1
            self.rate = None if self.rate is None else self.rate / 2
            if self.rate is None:  # no measurement yet: what the late turn delivered, halved
                self.rate = 1.0 / max(now - ticket.t0, 1e-3) / 2
            return
        if not completed:
            return
        elapsed = now - ticket.t0
        if elapsed <= 0:
            return
        self.completed += 1
        sample = ((self._area - ticket.area0) / elapsed) / elapsed  # N̄ / T
        self.rate = sample if self.rate is None else (1 - self.alpha) * self.rate + self.alpha * sample

    def snapshot(self) -> dict[str, float | int | None]:
        """The state, for metrics and tests."""
        return {"limit": self.limit, "in_flight": self.inflight, "rate_per_s": self.rate,
                "admitted": self.admitted, "refused": self.refused, "completed": self.completed, "late": self.late,
                "expired": self.expired}
