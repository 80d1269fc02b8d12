"""Results on disk: JSON (summary + series), CSV (one row per request), PNG plots (matplotlib Agg)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .clients import RequestRecord

__all__ = ["RECORD_COLUMNS", "record_rows", "write_json", "write_csv", "write_records_csv",
           "plot_latency_cdfs", "plot_timeseries", "plot_pareto", "format_summary"]

RECORD_COLUMNS = ("protocol", "session_id", "turn_index", "user", "start_s", "ok", "status", "error_code",
                  "transport_status", "ttft_ms", "ttfn_ms", "ttfr_ms", "e2e_ms", "itl_mean_ms", "itl_max_ms",
                  "n_narration", "n_reply", "reply_chars", "other_events", "queue_ms", "server_first_token_ms",
                  "server_end_ms", "turn_id", "trace_id")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def write_json(path: str | Path, obj: Any) -> Path:
    """Pretty JSON; NaN / inf become ``null`` (strict JSON)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(_clean(obj), indent=2, sort_keys=False, default=str) + "\n")
    return p


def write_csv(path: str | Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Path:
    """Rows of dicts; columns default to the union of keys in first-seen order."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    cols = list(columns) if columns else list(dict.fromkeys(k for r in rows for k in r))
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if _clean(r.get(k)) is None else r.get(k)) for k in cols})
    return p


def record_rows(records: Sequence[RequestRecord]) -> tuple[list[dict[str, Any]], list[str]]:
    """Flat rows (ITLs summarised, stages as ``stage.<name>`` columns) and their columns."""
    stages = sorted({k for r in records for k in r.stages})
    rows = []
    for r in records:
        d = r.to_dict()
        itls = d.pop("itls_ms")
        d["itl_mean_ms"] = sum(itls) / len(itls) if itls else None
        d["itl_max_ms"] = max(itls) if itls else None
        for s in stages:
            d[f"stage.{s}"] = r.stages.get(s)
        rows.append(d)
    return rows, [*RECORD_COLUMNS, *(f"stage.{s}" for s in stages)]


def write_records_csv(path: str | Path, records: Sequence[RequestRecord]) -> Path:
    rows, cols = record_rows(records)
    return write_csv(path, rows, cols)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_latency_cdfs(path: str | Path, runs: Mapping[str, Sequence[RequestRecord]],
                      fields: Sequence[str] = ("ttft_ms", "ttfr_ms", "e2e_ms")) -> Path:
    """One panel per latency field, one CDF line per run (successful requests)."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(fields), figsize=(5 * len(fields), 4), squeeze=False)
    for ax, f in zip(axes[0], fields, strict=True):
        for name, recs in runs.items():
            xs = sorted(v for r in recs if r.ok and (v := getattr(r, f)) is not None)
            if xs:
                ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=f"{name} (n={len(xs)})")
        ax.set_xlabel(f"{f.removesuffix('_ms')} (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def plot_timeseries(path: str | Path, series: Mapping[str, Sequence[Mapping[str, float]]],
                    replicas: Mapping[str, Sequence[Mapping[str, Any]]]) -> Path:
    """Throughput (completions/s) per run over time, and running replicas per deployment."""
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for name, pts in series.items():
        ax1.plot([p["t_s"] for p in pts], [p["rps"] for p in pts], label=f"{name} req/s")
        ax1.plot([p["t_s"] for p in pts], [p["ok_rps"] for p in pts], linestyle="--", label=f"{name} ok req/s")
    ax1.set_ylabel("completions / s")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    drawn = False
    for name, tl in replicas.items():
        deps = sorted({d for s in tl for d in s["running"]})
        for d in deps:
            ax2.step([s["t_s"] for s in tl], [s["running"].get(d, 0) for s in tl], where="post", label=f"{name}: {d}")
            drawn = True
    from matplotlib.ticker import MaxNLocator

    ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.set_ylim(bottom=0)
    ax2.set_ylabel("running replicas")
    ax2.set_xlabel("time since load start (s)")
    ax2.grid(alpha=0.3)
    if drawn:
        ax2.legend(fontsize=7)
    else:
        ax2.text(0.5, 0.5, "replicas not polled (--poll-replicas)", ha="center", va="center", transform=ax2.transAxes)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def plot_pareto(path: str | Path, rows: Sequence[Mapping[str, Any]], front: Sequence[int], *,
                x: str = "ttft_p90_ms", y: str = "goodput_rps", best: int | None = None) -> Path:
    """Sweep points as goodput vs p90 TTFT; the Pareto-optimal ones joined and marked."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    pts = [(i, r.get(x), r.get(y)) for i, r in enumerate(rows)]
    pts = [(i, a, b) for i, a, b in pts if isinstance(a, int | float) and isinstance(b, int | float)
           and not (math.isnan(a) or math.isnan(b))]
    ax.scatter([a for _, a, _ in pts], [b for *_, b in pts], c="tab:gray", label="points", zorder=2)
    fr = sorted((rows[i][x], rows[i][y]) for i in front)
    if fr:
        ax.plot([a for a, _ in fr], [b for _, b in fr], "o-", color="tab:red", label="Pareto front", zorder=3)
    if best is not None and best < len(rows):
        ax.scatter([rows[best][x]], [rows[best][y]], s=220, facecolors="none", edgecolors="tab:green",
                   linewidths=2, label="best", zorder=4)
    for i, a, b in pts:
        ax.annotate(str(rows[i].get("label", i)), (a, b), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel(f"{x} (lower is better)")
    ax.set_ylabel(f"{y} (higher is better)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def format_summary(name: str, s: Mapping[str, Any]) -> str:
    """A few human lines for one run's summary."""
    lat = s["latency_ms"]

    def q(f: str) -> str:
        d = lat.get(f) or {}
        return f"p50 {d.get('p50', float('nan')):7.1f}  p90 {d.get('p90', float('nan')):7.1f}  p99 {d.get('p99', float('nan')):7.1f}"

    slo = ", ".join(f"{k}<={v:g}" for k, v in s["slo"].items()) or "none"
    lines = [
        f"[{name}] {s['requests']} requests in {s['duration_s']:.1f} s: {s['throughput_rps']:.2f} req/s, "
        f"{s['deltas_per_s']:.1f} deltas/s, error rate {s['error_rate']:.1%} {s['errors'] or ''}",
        f"  TTFT (any token) ms   {q('ttft_ms')}",
        f"  first reply token ms  {q('ttfr_ms')}",
        f"  inter-delta ms        {q('itl_ms')}",
        f"  end-to-end ms         {q('e2e_ms')}",
        f"  goodput at SLO ({slo}): {s['goodput_rps']:.2f} req/s ({s['goodput_fraction']:.1%} of requests)",
    ]
    return "\n".join(lines)
