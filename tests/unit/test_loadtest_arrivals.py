"""Arrival processes: seeded reproducibility, mean rate and burstiness within statistical tolerance."""

from __future__ import annotations

import math
import statistics

import pytest

from serve.loadtest.arrivals import GammaArrivals, PoissonArrivals, arrival_times, make_arrivals

N = 20_000


def _gaps(proc, n: int = N) -> list[float]:
    it = proc.gaps()
    return [next(it) for _ in range(n)]


@pytest.mark.parametrize("proc", [PoissonArrivals(rate=5.0, seed=3), GammaArrivals(rate=5.0, seed=3, burstiness=2.5)])
def test_same_seed_same_schedule_and_seed_matters(proc):
    assert _gaps(proc, 200) == _gaps(proc, 200)
    other = type(proc)(**{**proc.__dict__, "seed": proc.seed + 1})
    assert _gaps(proc, 200) != _gaps(other, 200)


@pytest.mark.parametrize("rate", [0.5, 4.0, 50.0])
def test_poisson_mean_rate_and_cv(rate):
    gaps = _gaps(PoissonArrivals(rate=rate, seed=11))
    mean = statistics.fmean(gaps)
    # The sample mean of N exponentials has relative sd 1/sqrt(N) ≈ 0.7 %; allow 5 sd.
    assert abs(mean * rate - 1.0) < 5 / math.sqrt(N)
    assert abs(statistics.pstdev(gaps) / mean - 1.0) < 0.05


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_gamma_keeps_the_rate_and_sets_the_cv(cv):
    rate = 8.0
    gaps = _gaps(GammaArrivals(rate=rate, seed=5, burstiness=cv))
    mean = statistics.fmean(gaps)
    assert abs(mean * rate - 1.0) < 5 * cv / math.sqrt(N)
    assert abs(statistics.pstdev(gaps) / mean - cv) < 0.1 * cv
    assert all(g >= 0 for g in gaps)


def test_count_over_a_horizon_is_near_rate_times_horizon():
    times = arrival_times(PoissonArrivals(rate=10.0, seed=1), horizon_s=400.0)
    # Poisson count: mean 4000, sd ≈ 63; allow 5 sd.
    assert abs(len(times) - 4000) < 5 * math.sqrt(4000)
    assert times == sorted(times) and times[-1] <= 400.0


def test_arrival_times_bounds_and_factory():
    assert len(arrival_times(make_arrivals("gamma", 2.0, seed=0, cv=2.0), n=17)) == 17
    assert isinstance(make_arrivals("poisson", 1.0), PoissonArrivals)
    with pytest.raises(ValueError):
        arrival_times(PoissonArrivals(rate=1.0))
    with pytest.raises(ValueError):
        make_arrivals("uniform", 1.0)
    with pytest.raises(ValueError):
        PoissonArrivals(rate=0)
    with pytest.raises(ValueError):
        GammaArrivals(rate=1.0, burstiness=-1)
