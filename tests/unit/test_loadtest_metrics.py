"""Summary math: percentiles, distributions, SLO checks, goodput, error rate, series, Pareto fronts."""

from __future__ import annotations

import math

import pytest

from serve.loadtest.clients import RequestRecord
from serve.loadtest.metrics import (
    SLO,
    distribution,
    meets_slo,
    pareto_front,
    percentile,
    summarize,
    throughput_series,
)


def rec(ttft=100.0, e2e=1000.0, status="ok", error=None, itls=(10.0, 20.0), start=0.0, **kw) -> RequestRecord:
    r = RequestRecord("http", "s", 0, start_s=start, ttft_ms=ttft, ttfr_ms=ttft, e2e_ms=e2e, status=status,
                      error_code=error, n_reply=len(itls) + 1, itls_ms=list(itls), **kw)
    return r


def test_percentile_matches_linear_interpolation():
    xs = [15, 20, 35, 40, 50]
    assert percentile(xs, 0) == 15 and percentile(xs, 100) == 50
    assert percentile(xs, 50) == 35
    assert percentile(xs, 40) == pytest.approx(29.0)   # k = 1.6 → 20 + 0.6 * 15
    assert percentile(xs, 90) == pytest.approx(46.0)
    assert percentile(range(1, 101), 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 50))
    assert percentile([3, None, float("nan"), 1], 50) == 2  # missing values ignored
    with pytest.raises(ValueError):
        percentile([1], 101)


def test_distribution_fields():
    d = distribution([1, 2, 3, 4, None])
    assert d["n"] == 4 and d["mean"] == 2.5 and d["max"] == 4 and d["p50"] == 2.5
    assert distribution([])["n"] == 0 and math.isnan(distribution([])["p90"])


def test_slo_checks_every_set_objective_and_requires_success():
    r = rec(ttft=400, e2e=4000, itls=(30, 50))
    assert meets_slo(r, SLO())
    assert meets_slo(r, SLO(ttft_ms=500, e2e_ms=5000, itl_ms=40))
    assert not meets_slo(r, SLO(ttft_ms=399))
    assert not meets_slo(r, SLO(itl_ms=39))
    assert not meets_slo(rec(status="failed"), SLO())
    assert not meets_slo(rec(error="engine_error"), SLO())
    assert meets_slo(rec(status="fallback"), SLO())
    assert not meets_slo(rec(ttft=None), SLO(ttft_ms=10_000))  # no first token: the SLO is missed


def test_summary_counts_goodput_and_error_rate():
    records = [rec(ttft=100), rec(ttft=200), rec(ttft=600), rec(ttft=300, e2e=9000),
               rec(status="failed", error="engine_error"), rec(status=None, error="overloaded", transport_status="503")]
    s = summarize(records, duration_s=10.0, slo=SLO(ttft_ms=500, e2e_ms=5000))
    assert s["requests"] == 6 and s["ok"] == 4 and s["failed"] == 2
    assert s["error_rate"] == pytest.approx(2 / 6)
    assert s["errors"] == {"engine_error": 1, "overloaded": 1}
    assert s["goodput_rps"] == pytest.approx(0.2)          # 2 good requests in 10 s
    assert s["goodput_fraction"] == pytest.approx(2 / 6)
    assert s["slo_attainment"] == {"ttft_ms": pytest.approx(3 / 6), "e2e_ms": pytest.approx(3 / 6)}
    assert s["throughput_rps"] == pytest.approx(0.6)
    assert s["latency_ms"]["ttft_ms"]["n"] == 4              # latencies over successful requests only
    assert s["latency_ms"]["ttft_ms"]["p50"] == pytest.approx(250)
    assert s["latency_ms"]["itl_ms"]["n"] == 8               # ITLs pooled
    assert s["deltas_per_s"] == pytest.approx(6 * 3 / 10)


def test_summary_without_slo_has_goodput_equal_ok_rate_and_stages():
    records = [rec(stages={"generate": 10.0}), rec(stages={"generate": 30.0, "guard": 1.0}), rec(status="failed")]
    s = summarize(records, duration_s=2.0)
    assert s["goodput_rps"] == s["ok_rps"] == 1.0
    assert s["latency_ms"]["stage.generate"]["p50"] == 20.0
    assert s["latency_ms"]["stage.guard"]["n"] == 1
    assert summarize([], 1.0)["error_rate"] == 0.0


def test_throughput_series_bins_by_completion_time():
    records = [rec(start=0.1, e2e=500), rec(start=0.2, e2e=1500), rec(start=1.5, e2e=200, status="failed")]
    series = throughput_series(records, bin_s=1.0)
    assert [p["rps"] for p in series] == [1, 2]
    assert [p["ok_rps"] for p in series] == [1, 1]


def test_pareto_front_max_goodput_min_ttft():
    pts = [(1.0, 100.0), (2.0, 200.0), (1.5, 300.0), (2.0, 150.0), (0.5, 90.0), (float("nan"), 10.0)]
    assert sorted(pareto_front(pts)) == [0, 3, 4]
    assert pareto_front([]) == []
    assert pareto_front([(1.0, 1.0), (1.0, 1.0)]) == [0, 1]     # equal points do not dominate each other
    assert sorted(pareto_front(pts[:5], maximize=(True, True))) == [1, 2]
