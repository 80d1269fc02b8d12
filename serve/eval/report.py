"""Aggregates of ``tandem eval``: ``summary.json``, the markdown table, the first-token CDF, the ratios.

Every measure is computed from the per-turn rows alone, so a saved run can be
re-summarised without an app. A count-with-denominator measure is
``{"n": scored turns, "ok": k, "pct": 100·k/n}`` (``None`` when no turn could be
scored — e.g. ``correct`` for a kind that makes no decisions, or any decision
measure of an ``--http`` run without ``--telemetry``).

A pack's own measures (``row["measures"]``, from its turn judge) are summarised by their values: a
verdict (``bool``) as such a rate, a list of findings as a count (lower is better).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["tau2_tasks", "percentile", "p50_p90", "rate", "summarise", "summary_doc", "ratios", "goals", "markdown",
           "plot_first_token_cdf", "GOALS"]

Row = Mapping[str, Any]

GOALS = {
    "tandem_vs_dr_first_token_p50_min": 5.0,
    "tandem_over_prompting_first_token_p50_max": 1.2,
    "tandem_tau2_correct_pct_min": 50.0,
}


def percentile(xs: Iterable[float], q: float) -> float | None:
    """Linear-interpolated percentile (``None`` for no values)."""
    vals = sorted(x for x in xs if x is not None)
    if not vals:
        return None
    k = (len(vals) - 1) * q
    lo, hi = math.floor(k), min(math.floor(k) + 1, len(vals) - 1)
    return round(vals[lo] + (vals[hi] - vals[lo]) * (k - lo), 1)


def p50_p90(xs: Iterable[float | None]) -> dict[str, Any]:
    vals = [x for x in xs if x is not None]
    return {"p50": percentile(vals, 0.5), "p90": percentile(vals, 0.9), "n": len(vals)}


def rate(flags: Iterable[bool | None]) -> dict[str, Any] | None:
    """``{n, ok, pct}`` over the flags that are not ``None`` (``None`` when there are none)."""
    vals = [bool(f) for f in flags if f is not None]
    if not vals:
        return None
    return {"n": len(vals), "ok": sum(vals), "pct": round(100.0 * sum(vals) / len(vals), 1)}


def _count(rows: Sequence[Row], key: str) -> int | None:
    vals = [r.get(key) for r in rows]
    if all(v is None for v in vals):
        return None
    return sum(len(v) if isinstance(v, list) else int(bool(v)) for v in vals if v is not None)


def summarise(rows: Sequence[Row]) -> dict[str, Any]:
    """Every measure over ``rows`` (one pipeline kind, one suite or all of them)."""
    out: dict[str, Any] = {
        "turns": len(rows),
        "statuses": dict(Counter(str(r.get("status")) for r in rows)),
        "errors": sum(1 for r in rows if r.get("error")),
        "eval_errors": sum(1 for r in rows if r.get("eval_error")),
        "first_token_ms": p50_p90(r.get("first_token_ms") for r in rows),
        "first_visible_ms": p50_p90(r.get("first_visible_ms") for r in rows),
        # a turn that streamed no delta counts with its end: what the user waited before seeing a word
        "first_token_or_end_ms": p50_p90(r.get("first_token_ms") if r.get("first_token_ms") is not None
                                         else r.get("e2e_ms") for r in rows),
        "e2e_ms": p50_p90(r.get("e2e_ms") for r in rows),
        "loadavg_1m": p50_p90(r.get("loadavg_1m") for r in rows),
        "turns_without_delta": sum(1 for r in rows if r.get("first_token_ms") is None),
        "correct": rate(r.get("correct") for r in rows),
        "terminal_within_cap": rate(r.get("terminal") for r in rows),
        "invented_arguments": _count(rows, "invented"),
        "withheld_arguments": _count(rows, "withheld"),
        "unrequested_cards": _count(rows, "unrequested"),
        "delivered_unselected_actions": _count(rows, "unselected"),
    }
    tasks = [r["tau2_task"] for r in rows if r.get("tau2_task")]
    if tasks:
        played = [r for r in rows if r.get("suite") == "tau2-tasks"]
        runs = list(dict.fromkeys(_run_of(t) for t in tasks))
        # the headline is the first user and perception played; every one is under by_run
        out["tau2_tasks"] = tau2_tasks([t for t in tasks if _run_of(t) == runs[0]],
                                       [r for r in played if _run_of(r) in (runs[0], None)])
        if len(runs) > 1:
            out["tau2_tasks"]["by_run"] = {r: tau2_tasks([t for t in tasks if _run_of(t) == r],
                                                         [x for x in played if _run_of(x) == r]) for r in runs}
    # the openings of whole tasks; without them, the openings suite's (the same texts, one turn each)
    opened = ([r.get("intent_ok") for r in rows if r.get("suite") == "tau2-tasks" and r.get("turn") == 0]
              or [r.get("intent_ok") for r in rows if r.get("suite") == "tau2-openings" and "intent_label" in r])
    if opened:
        out["intent_accuracy"] = rate(opened)
    measured = pack_measures(rows)
    if measured:
        out.update(measured)
        out["measures"] = list(measured)
    return out


def pack_measures(rows: Sequence[Row]) -> dict[str, Any]:
    """The pack measures of ``rows``, by name: a rate over verdicts, a count over findings (see module docstring)."""
    names = list(dict.fromkeys(k for r in rows for k in (r.get("measures") or {})))
    out: dict[str, Any] = {}
    for name in names:
        vals = [(r.get("measures") or {}).get(name) for r in rows]
        if any(isinstance(v, list) for v in vals):
            out[name] = sum(len(v) for v in vals if isinstance(v, list))
        else:
            out[name] = rate(v for v in vals if v is None or isinstance(v, bool))
    return out


def _run_of(row: Mapping[str, Any]) -> str | None:
    """``user/perception`` of a task record (its own keys) or of a played row (its ``run``; ``None``: a row of a
    run that played one user and perception only)."""
    if "passed" in row and "user" in row:
        return f"{row.get('user')}/{row.get('perception')}"
    return row.get("run")


def _one(values: Iterable[Any]) -> Any:
    """The one value a run's tasks share (``user``, ``perception``); ``mixed`` when they differ."""
    seen = list(dict.fromkeys(v for v in values if v is not None))
    return seen[0] if len(seen) == 1 else ("mixed" if seen else None)


def tau2_tasks(tasks: Sequence[Mapping[str, Any]], rows: Sequence[Row], *, halves: bool = True) -> dict[str, Any]:
    """Whole tau2 tasks: the database check, actions matched, cards refused, repeated asks, turns per task, cards
    offered again unchanged after a no, cards whose read-back misses an argument they change, whether the first
    card offered was an expected write; and the same per half of the fixed split (``halves``)."""
    judged = [t for t in tasks if t.get("passed") is not None]
    passed = sum(1 for t in judged if t["passed"])
    turns = Counter(r["case"] for r in rows)
    out = {
        "tasks": len(tasks),
        "passed": passed if judged else None,
        "pass_rate": round(100.0 * passed / len(judged), 1) if judged else None,
        "user": _one(t.get("user") for t in tasks),
        "perception": _one(t.get("perception") for t in tasks),
        "actions_expected": sum(int(t.get("actions_expected") or 0) for t in tasks),
        "actions_matched": sum(int(t.get("actions_matched") or 0) for t in tasks),
        "cards_refused": sum(int(t.get("cards_refused") or 0) for t in tasks),
        "repeated_asks": sum(int(t.get("repeated_asks") or 0) for t in tasks),
        "reoffered_after_no": sum(int(t.get("reoffered_after_no") or 0) for t in tasks),
        "readback_missing": sum(int(t.get("readback_missing") or 0) for t in tasks),
        "first_card_ok": rate(t.get("first_card_ok") for t in tasks),
        "turns_p50": percentile(turns.values(), 0.5),
        "ended": dict(Counter(str(t.get("ended")) for t in tasks)),
        "first_token_ms": p50_p90(r.get("first_token_ms") for r in rows),
        "e2e_ms": p50_p90(r.get("e2e_ms") for r in rows),
    }
    if halves:
        names = sorted({str(t["half"]) for t in tasks if t.get("half")})
        out["halves"] = {h: tau2_tasks([t for t in tasks if t.get("half") == h],
                                       [r for r in rows if (r.get("info") or {}).get("half") == h], halves=False)
                         for h in names}
    return out


def summary_doc(rows: Sequence[Row], run: Mapping[str, Any]) -> dict[str, Any]:
    """``summary.json``: ``pipelines.<kind>`` (all turns, and ``suites.<suite>``), ratios, goals, the run."""
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    pipelines: dict[str, Any] = {}
    for kind in kinds:
        mine = [r for r in rows if r["kind"] == kind]
        suites = list(dict.fromkeys(r["suite"] for r in mine))
        pipelines[kind] = {**summarise(mine), "suites": {s: summarise([r for r in mine if r["suite"] == s])
                                                          for s in suites}}
        if "intent_accuracy" not in pipelines[kind]:
            pipelines[kind]["intent_accuracy"] = None
    doc = {"run": dict(run), "pipelines": pipelines}
    doc["ratios"] = ratios(pipelines)
    doc["goals"] = goals(pipelines, doc["ratios"])
    return doc


def _p50(pipelines: Mapping[str, Any], kind: str, suite: str, measure: str = "first_token_ms") -> float | None:
    return (((pipelines.get(kind) or {}).get("suites") or {}).get(suite) or {}).get(measure, {}).get("p50")


def ratios(pipelines: Mapping[str, Any]) -> dict[str, Any]:
    """First-token p50 ratios measured side by side in this run, per suite (``_or_end``: a turn without
    a delta counted at its end)."""
    suites = sorted({s for p in pipelines.values() for s in p.get("suites", {})})
    out: dict[str, Any] = {}
    for s in suites:
        row: dict[str, Any] = {}
        for measure, suffix in (("first_token_ms", ""), ("first_token_or_end_ms", "_or_end")):
            t = _p50(pipelines, "tandem", s, measure)
            for other, key, flip in (("dr", "tandem_vs_dr_first_token", True),
                                     ("prompting", "tandem_over_prompting_first_token", False),
                                     ("sgc_full", "tandem_vs_sgc_full_first_token", True)):
                o = _p50(pipelines, other, s, measure)
                if t and o:
                    row[f"{key}{suffix}_p50"] = round(o / t, 2) if flip else round(t / o, 2)
        if row:
            out[s] = row
    return out


def goals(pipelines: Mapping[str, Any], rat: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's goals, each with the measured value and whether it is met (``None``: not measured).

    Ratios are judged on the unrounded p50s; the value shown is the rounded ratio.
    """
    tandem = pipelines.get("tandem") or {}
    tau2 = (tandem.get("suites") or {}).get("tau2-openings") or {}
    out: dict[str, Any] = {}

    def put(name: str, value: Any, met: bool | None) -> None:
        out[name] = {"value": value, "met": met}

    r = (rat.get("tau2-openings") or {})
    t, d, p = (_p50(pipelines, k, "tau2-openings") for k in ("tandem", "dr", "prompting"))
    put("tandem_first_token_5x_sooner_than_dr_tau2", r.get("tandem_vs_dr_first_token_p50"),
        None if not (t and d) else d / t >= GOALS["tandem_vs_dr_first_token_p50_min"])
    put("tandem_first_token_within_1.2x_prompting_tau2", r.get("tandem_over_prompting_first_token_p50"),
        None if not (t and p) else t / p <= GOALS["tandem_over_prompting_first_token_p50_max"])
    for key in ("invented_arguments", "unrequested_cards"):
        v = tandem.get(key)
        put(f"tandem_{key}_zero", v, None if v is None else v == 0)
    c = tau2.get("correct")
    put("tandem_tau2_correct_50pct", c, None if c is None else c["pct"] >= GOALS["tandem_tau2_correct_pct_min"])
    for suite, m in (tandem.get("suites") or {}).items():  # a pack's scripted suites: every turn as expected
        c = m.get("correct")
        if suite != "tau2-openings" and c is not None:
            put(f"tandem_{suite}_all_correct", c, c["ok"] == c["n"])
    vals = {k: p.get("delivered_unselected_actions") for k, p in pipelines.items()}
    known = [v for v in vals.values() if v is not None]
    put("delivered_unselected_actions_zero_everywhere", vals, None if not known else all(v == 0 for v in known))
    sgc = (pipelines.get("sgc_full") or {}).get("suites") or {}
    for suite, mine in (tandem.get("suites") or {}).items():  # a pack's measures: tandem no worse than sgc_full
        theirs = sgc.get(suite)
        if not mine.get("measures") or not theirs:
            continue
        worse = []
        for key in mine["measures"]:
            a, b = mine.get(key), theirs.get(key)
            if isinstance(a, dict) and isinstance(b, dict):
                if a["pct"] < b["pct"]:
                    worse.append(key)
            elif isinstance(a, int) and isinstance(b, int) and a > b:
                worse.append(key)
        put(f"{suite}_tandem_no_worse_than_sgc_full", worse, not worse)
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, dict) and "ok" in v:
        return f"{v['ok']}/{v['n']} ({v['pct']:g}%)"
    if isinstance(v, dict) and "p50" in v:
        return "–" if v["p50"] is None else f"{v['p50']:.0f} / {v['p90']:.0f}"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


DECISION_COLS = (("turns", "turns"), ("first token p50 / p90 ms", "first_token_ms"),
                ("turns without a delta", "turns_without_delta"),
                ("first token or end p50 / p90 ms", "first_token_or_end_ms"), ("e2e p50 / p90 ms", "e2e_ms"),
                ("correct", "correct"), ("terminal within cap", "terminal_within_cap"),
                ("intent acc", "intent_accuracy"), ("invented args", "invented_arguments"), ("withheld args", "withheld_arguments"),
                ("unrequested cards", "unrequested_cards"),
                ("unselected actions", "delivered_unselected_actions"), ("load 1m p50 / p90", "loadavg_1m"))
BASE_COLS = (("turns", "turns"), ("first token p50 / p90 ms", "first_token_ms"),
             ("turns without a delta", "turns_without_delta"), ("e2e p50 / p90 ms", "e2e_ms"))
TAIL_COLS = (("unselected actions", "delivered_unselected_actions"), ("load 1m p50 / p90", "loadavg_1m"))


def markdown(doc: Mapping[str, Any]) -> str:
    """The run as markdown: one table per suite family, the ratios and the goals."""
    lines = [f"# tandem eval — {doc['run'].get('started_at', '')}", ""]
    all_suites = list(dict.fromkeys(s for p in doc["pipelines"].values() for s in p["suites"]))
    measured = [s for s in all_suites if any(p["suites"].get(s, {}).get("measures") for p in doc["pipelines"].values())]
    tables: list[tuple[str, list[str], tuple[tuple[str, str], ...]]] = [
        ("Decisions", [s for s in all_suites if s not in measured], DECISION_COLS)]
    for s in measured:
        names = list(dict.fromkeys(m for p in doc["pipelines"].values() for m in p["suites"].get(s, {}).get("measures", [])))
        tables.append((f"{s} (the pack's measures)", [s], BASE_COLS + tuple((m.replace("_", " "), m) for m in names)
                       + TAIL_COLS))
    for title, suites, cols in tables:
        body = [(k, s, p["suites"][s]) for k, p in doc["pipelines"].items() for s in suites if s in p["suites"]]
        if not body:
            continue
        lines += [f"## {title}", "", "| pipeline | suite | " + " | ".join(c for c, _ in cols) + " |",
                  "|---|---|" + "---|" * len(cols)]
        lines += [f"| {k} | {s} | " + " | ".join(_fmt(m.get(key)) for _, key in cols) + " |" for k, s, m in body]
        lines.append("")
    tasks = [(k, p["tau2_tasks"], p.get("intent_accuracy")) for k, p in doc["pipelines"].items()
             if p.get("tau2_tasks")]
    if tasks:
        lines += ["## tau2 tasks (scripted user, database check)", "",
                  "| pipeline | user | perception | half | tasks | passed | actions matched / expected | first card ok | "
                  "cards refused | re-offered after no | read-back missing | repeated asks | turns p50 | "
                  "first token p50 / p90 ms | e2e p50 / p90 ms | ended |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for k, t0, _ in tasks:
            for t in (list((t0.get("by_run") or {}).values()) or [t0]):
                for half, h in [("all", t)] + sorted((t.get("halves") or {}).items()):
                    passed = "–" if h["passed"] is None else f"{h['passed']}/{h['tasks']} ({h['pass_rate']:g}%)"
                    lines.append(
                        f"| {k} | {t.get('user')} | {t.get('perception')} | {half} | {h['tasks']} | {passed} | "
                        f"{h['actions_matched']}/{h['actions_expected']} | {_fmt(h.get('first_card_ok'))} | "
                        f"{h['cards_refused']} | {h.get('reoffered_after_no')} | {h.get('readback_missing')} | "
                        f"{h['repeated_asks']} | {_fmt(h['turns_p50'])} | {_fmt(h['first_token_ms'])} | "
                        f"{_fmt(h['e2e_ms'])} | " + ", ".join(f"{a} {n}" for a, n in h["ended"].items()) + " |")
        lines.append("")
    if doc.get("ratios"):
        lines += ["## First-token ratios (p50, same run)", ""]
        lines += [f"* {s}: " + ", ".join(f"{k} = {v}" for k, v in r.items()) for s, r in doc["ratios"].items()]
        lines.append("")
    if doc.get("goals"):
        lines += ["## Goals", ""]
        for name, g in doc["goals"].items():
            mark = {True: "met", False: "MISSED", None: "not measured"}[g["met"]]
            lines.append(f"* {name}: {mark} ({_fmt(g['value'])})")
        lines.append("")
    return "\n".join(lines)


def plot_first_token_cdf(path: Path, rows: Sequence[Row]) -> Path | None:
    """One panel per suite, one CDF line per pipeline: the first visible token (ms, at the client)."""
    suites = list(dict.fromkeys(r["suite"] for r in rows))
    if not suites:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(suites), figsize=(5.5 * len(suites), 4), squeeze=False)
    for ax, suite in zip(axes[0], suites, strict=True):
        for kind in dict.fromkeys(r["kind"] for r in rows if r["suite"] == suite):
            xs = sorted(r["first_token_ms"] for r in rows
                        if r["suite"] == suite and r["kind"] == kind and r.get("first_token_ms") is not None)
            if xs:
                ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=f"{kind} (n={len(xs)})")
        ax.set_xscale("log")
        ax.set_xlabel("first visible token (ms, client)")
        ax.set_ylabel("fraction of turns")
        ax.set_title(suite)
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
