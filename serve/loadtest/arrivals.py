"""Arrival processes for open-loop load: seeded Poisson and gamma (bursty) inter-arrival times.

An open-loop generator sends a new session at each arrival instant whatever the
server's state, which is what exposes queueing (a closed loop slows down with the
server and hides it). Inter-arrival gaps are i.i.d.:

* **Poisson** — exponential gaps with mean ``1/rate`` (coefficient of variation 1);
* **gamma** — gamma gaps with the same mean and a chosen CV: ``shape = 1/cv²``,
  ``scale = cv²/rate``. CV < 1 is smoother than Poisson, CV > 1 burstier; CV = 1 is Poisson.

Both are reproducible: the same ``seed`` gives the same schedule.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = ["ArrivalProcess", "PoissonArrivals", "GammaArrivals", "make_arrivals", "arrival_times"]

ArrivalKind = Literal["poisson", "gamma"]


@dataclass(frozen=True)
class ArrivalProcess:
    """Base: ``rate`` arrivals per second on average, seeded gaps."""

    rate: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"arrival rate must be a positive finite number, got {self.rate!r}")

    @property
    def cv(self) -> float:
        """Coefficient of variation of the gaps."""
        return 1.0

    def _gap(self, rng: random.Random) -> float:
        raise NotImplementedError

    def gaps(self) -> Iterator[float]:
        """Endless seeded inter-arrival gaps in seconds."""
        rng = random.Random(f"tandem-arrivals:{type(self).__name__}:{self.seed}")
        while True:
            yield self._gap(rng)


@dataclass(frozen=True)
class PoissonArrivals(ArrivalProcess):
    """Exponential gaps: a Poisson process of intensity ``rate``."""

    def _gap(self, rng: random.Random) -> float:
        return rng.expovariate(self.rate)


@dataclass(frozen=True)
class GammaArrivals(ArrivalProcess):
    """Gamma gaps with mean ``1/rate`` and coefficient of variation ``burstiness``."""

    burstiness: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            raise ValueError(f"burstiness (CV) must be positive, got {self.burstiness!r}")

    @property
    def cv(self) -> float:
        return self.burstiness

    def _gap(self, rng: random.Random) -> float:
        shape = 1.0 / (self.burstiness**2)
        return rng.gammavariate(shape, 1.0 / (shape * self.rate))


def make_arrivals(kind: ArrivalKind | str, rate: float, *, seed: int = 0, cv: float = 1.0) -> ArrivalProcess:
    """Build an arrival process by name (``poisson`` or ``gamma``)."""
    if kind == "poisson":
        return PoissonArrivals(rate=rate, seed=seed)
    if kind == "gamma":
        return GammaArrivals(rate=rate, seed=seed, burstiness=cv)
    raise ValueError(f"unknown arrival process {kind!r} (poisson | gamma)")


def arrival_times(process: ArrivalProcess, *, n: int | None = None, horizon_s: float | None = None) -> list[float]:
    """Absolute arrival instants (s from 0), bounded by a count and/or a horizon (at least one)."""
    if n is None and horizon_s is None:
        raise ValueError("bound the schedule with n and/or horizon_s")
    out: list[float] = []
    t = 0.0
    for gap in process.gaps():
        t += gap
        if (horizon_s is not None and t > horizon_s) or (n is not None and len(out) >= n):
            break
        out.append(t)
    return out
