"""Summary math: percentiles, SLO attainment, goodput, error rate, time series, Pareto fronts.

Latencies are summarised over the requests that succeeded (a failed turn's "first
token" says little); error rate and goodput are over all requests. Goodput is the
rate (req/s over the measured window) of requests that succeeded *and* met every
given SLO; ``goodput_fraction`` is the same count over all requests.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .clients import RequestRecord

__all__ = ["SLO", "percentile", "distribution", "meets_slo", "summarize", "throughput_series",
           "pareto_front", "LATENCY_FIELDS"]

LATENCY_FIELDS = ("ttft_ms", "ttfn_ms", "ttfr_ms", "e2e_ms", "queue_ms", "server_first_token_ms", "server_end_ms")


def percentile(values: Iterable[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in [0, 100]), NaN for no values (numpy's default)."""
    xs = sorted(v for v in values if v is not None and not math.isnan(v))
    if not xs:
        return float("nan")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    k = (len(xs) - 1) * q / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def distribution(values: Iterable[float | None]) -> dict[str, float]:
    """n, mean, p50, p90, p99, max of the non-missing values."""
    xs = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not xs:
        return {"n": 0, "mean": float("nan"), "p50": float("nan"), "p90": float("nan"),
                "p99": float("nan"), "max": float("nan")}
    return {"n": len(xs), "mean": sum(xs) / len(xs), "p50": percentile(xs, 50), "p90": percentile(xs, 90),
            "p99": percentile(xs, 99), "max": max(xs)}


@dataclass(frozen=True)
class SLO:
    """Per-request latency objectives in ms (``None``: not set)."""

    ttft_ms: float | None = None      # first token of any kind (narration or reply)
    ttfr_ms: float | None = None      # first reply token
    e2e_ms: float | None = None       # whole turn
    itl_ms: float | None = None       # mean gap between deltas of one turn

    def as_dict(self) -> dict[str, float]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _mean_itl(r: RequestRecord) -> float | None:
    return sum(r.itls_ms) / len(r.itls_ms) if r.itls_ms else None


def meets_slo(r: RequestRecord, slo: SLO) -> bool:
    """Succeeded and met every SLO that is set (a missing measurement misses its SLO)."""
    if not r.ok:
        return False
    checks = ((slo.ttft_ms, r.ttft_ms), (slo.ttfr_ms, r.ttfr_ms), (slo.e2e_ms, r.e2e_ms),
              (slo.itl_ms, _mean_itl(r) if r.n_deltas > 1 else 0.0))
    return all(limit is None or (value is not None and value <= limit) for limit, value in checks)


def summarize(records: Sequence[RequestRecord], duration_s: float, slo: SLO | None = None) -> dict[str, Any]:
    """The load test's summary dict (counts, rates, latency distributions, goodput)."""
    slo = slo or SLO()
    n = len(records)
    ok = [r for r in records if r.ok]
    dur = max(duration_s, 1e-9)
    good = sum(1 for r in records if meets_slo(r, slo))
    errors = Counter(r.error_code or f"status_{r.status}" for r in records if not r.ok)
    out: dict[str, Any] = {
        "requests": n,
        "ok": len(ok),
        "failed": n - len(ok),
        "error_rate": (n - len(ok)) / n if n else 0.0,
        "errors": dict(errors.most_common()),
        "statuses": dict(Counter(str(r.status) for r in records)),
        "transport": dict(Counter(r.transport_status for r in records)),
        "duration_s": duration_s,
        "throughput_rps": n / dur,
        "ok_rps": len(ok) / dur,
        "deltas_per_s": sum(r.n_deltas for r in records) / dur,
        "reply_chars_per_s": sum(r.reply_chars for r in records) / dur,
        "slo": slo.as_dict(),
        "goodput_rps": good / dur,
        "goodput_fraction": good / n if n else 0.0,
        "slo_attainment": {},
        "latency_ms": {f: distribution(getattr(r, f) for r in ok) for f in LATENCY_FIELDS},
    }
    out["latency_ms"]["itl_ms"] = distribution(x for r in ok for x in r.itls_ms)
    for name in sorted({k for r in ok for k in r.stages}):
        out["latency_ms"][f"stage.{name}"] = distribution(r.stages.get(name) for r in ok)
    for key, limit in slo.as_dict().items():
        one = SLO(**{key: limit})
        out["slo_attainment"][key] = sum(1 for r in records if meets_slo(r, one)) / n if n else 0.0
    return out


def throughput_series(records: Sequence[RequestRecord], bin_s: float = 1.0) -> list[dict[str, float]]:
    """Completions per second in ``bin_s`` bins, by completion time (start + e2e)."""
    if not records:
        return []
    ends = [r.start_s + (r.e2e_ms or 0.0) / 1000.0 for r in records]
    nbins = int(max(ends) // bin_s) + 1
    done, good, deltas = [0] * nbins, [0] * nbins, [0] * nbins
    for r, e in zip(records, ends, strict=True):
        b = int(e // bin_s)
        done[b] += 1
        good[b] += int(r.ok)
        deltas[b] += r.n_deltas
    return [{"t_s": i * bin_s, "rps": done[i] / bin_s, "ok_rps": good[i] / bin_s, "deltas_per_s": deltas[i] / bin_s}
            for i in range(nbins)]


def pareto_front(points: Sequence[tuple[float, float]], *, maximize: tuple[bool, bool] = (True, False)) -> list[int]:
    """Indices of the non-dominated points (NaN coordinates are never on the front).

    Default: maximise the first coordinate (goodput), minimise the second (p90 TTFT).
    """
    def norm(p: tuple[float, float]) -> tuple[float, float]:
        return (p[0] if maximize[0] else -p[0], p[1] if maximize[1] else -p[1])

    valid = [i for i, p in enumerate(points) if not any(math.isnan(float(c)) for c in p)]
    front = []
    for i in valid:
        a = norm(points[i])
        dominated = any(
            (b := norm(points[j]))[0] >= a[0] and b[1] >= a[1] and (b[0] > a[0] or b[1] > a[1])
            for j in valid if j != i)
        if not dominated:
            front.append(i)
    return front
