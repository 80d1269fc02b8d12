"""Writers and plots: strict JSON (NaN → null), per-request CSV with stage columns, PNGs."""

from __future__ import annotations

import csv
import json

from serve.loadtest.clients import RequestRecord
from serve.loadtest.metrics import summarize, throughput_series
from serve.loadtest.report import (
    RECORD_COLUMNS,
    format_summary,
    plot_latency_cdfs,
    plot_pareto,
    plot_timeseries,
    write_csv,
    write_json,
    write_records_csv,
)


def _recs() -> list[RequestRecord]:
    a = RequestRecord("http", "s1", 0, start_s=0.1, ttft_ms=100.0, ttfr_ms=100.0, e2e_ms=900.0, status="ok",
                      n_reply=3, itls_ms=[10.0, 30.0], stages={"generate": 880.0}, transport_status="200")
    b = RequestRecord("grpc", "s2", 1, start_s=0.2, e2e_ms=50.0, status=None, error_code="unavailable",
                      transport_status="UNAVAILABLE")
    return [a, b]


def test_json_is_strict_and_nan_free(tmp_path):
    p = write_json(tmp_path / "x" / "s.json", {"a": float("nan"), "b": [float("inf"), 1.5], "c": {"d": None}})
    text = p.read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": [None, 1.5], "c": {"d": None}}


def test_records_csv_has_one_row_per_request_and_stage_columns(tmp_path):
    p = write_records_csv(tmp_path / "r.csv", _recs())
    rows = list(csv.DictReader(p.open()))
    assert len(rows) == 2
    assert list(rows[0])[:len(RECORD_COLUMNS)] == list(RECORD_COLUMNS) and "stage.generate" in rows[0]
    assert rows[0]["ok"] == "True" and float(rows[0]["itl_mean_ms"]) == 20.0 and rows[0]["stage.generate"] == "880.0"
    assert rows[1]["ok"] == "False" and rows[1]["error_code"] == "unavailable" and rows[1]["ttft_ms"] == ""


def test_generic_csv_union_of_columns(tmp_path):
    p = write_csv(tmp_path / "t.csv", [{"a": 1, "b": float("nan")}, {"a": 2, "c": "x"}])
    rows = list(csv.DictReader(p.open()))
    assert list(rows[0]) == ["a", "b", "c"] and rows[0]["b"] == "" and rows[1]["c"] == "x"


def test_plots_write_pngs(tmp_path):
    recs = _recs()
    png = b"\x89PNG"
    assert plot_latency_cdfs(tmp_path / "cdf.png", {"http": recs}).read_bytes()[:4] == png
    tl = [{"t_s": 0.0, "running": {"Ingress": 1}, "total": {"Ingress": 1}},
          {"t_s": 1.0, "running": {"Ingress": 2}, "total": {"Ingress": 2}}]
    assert plot_timeseries(tmp_path / "ts.png", {"http": throughput_series(recs)}, {"http": tl}).read_bytes()[:4] == png
    assert plot_timeseries(tmp_path / "ts2.png", {"http": throughput_series(recs)}, {}).exists()
    rows = [{"label": "a", "goodput_rps": 1.0, "ttft_p90_ms": 100.0}, {"label": "b", "goodput_rps": 0.5, "ttft_p90_ms": 200.0},
            {"label": "c", "goodput_rps": float("nan"), "ttft_p90_ms": float("nan")}]
    assert plot_pareto(tmp_path / "p.png", rows, [0], best=0).read_bytes()[:4] == png


def test_format_summary_mentions_goodput():
    text = format_summary("http", summarize(_recs(), 1.0))
    assert "goodput" in text and "[http] 2 requests" in text
