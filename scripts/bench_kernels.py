"""Per-turn latency of the SGC rule kernels over generated coach sessions (an offline benchmark, not a test).

For every scripted turn it times, side by side in one run: W2 repair + diff,
Ψ, the paragraph plan, W3 resolve + pick (their sum is the per-turn kernel
total, goal < 1 ms p99), and — separately — the W1 parser + Φ driver over the
turn's perception stream fed in 4-character chunks. Prints p50 / p99 / max in
microseconds and writes ``results/bench_kernels.json``.

    python scripts/bench_kernels.py [--sessions 200] [--turns 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from pipelines.domains.coach import (
    INTENT_LABELS,
    TOOL_NAMES,
    generate_coach_world,
    generate_sessions,
    live_facts_for,
    load_coach_rule_tables,
)
from pipelines.sgc.psi import plan_paragraphs, psi
from pipelines.sgc.snapshot import Snapshot
from pipelines.sgc.w1_run import FallThroughCounters, PerceptionRun
from pipelines.sgc.w2 import constraints_of, diff, repair_slots
from pipelines.sgc.w3 import HISTORY_WINDOW, SessionRng, resolve_cross_turn_state, schedule_turn

__all__ = ["main", "run"]

KERNELS = ("w2_repair_diff", "w2_psi", "w2_plan", "w3_pick", "total", "w1_perception")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run(n_sessions: int, turns: int, seed: int) -> dict:
    """Time every kernel on every turn; return the summary (microseconds)."""
    world = generate_coach_world(7)
    tables = load_coach_rule_tables()
    sessions = generate_sessions(world, tables, seed=seed, n_sessions=n_sessions, turns_per_session=turns)
    samples: dict[str, list[float]] = {k: [] for k in KERNELS}
    counters = FallThroughCounters()
    clock = time.perf_counter_ns
    for s in sessions:
        facts = live_facts_for(world, s.user_id)
        rng = SessionRng.for_session(s.session_id)
        metas = []
        for t in s.turns:
            t0 = clock()
            slots, _ = repair_slots(t.slots, facts.known_entities)
            conflicts = diff(slots, facts, tables.tiers)
            t1 = clock()
            res = psi(tables.psi, conflicts, t.intent, constraints_of(slots))
            t2 = clock()
            plan_paragraphs(res.eligible, res.required, conflicts, incompatible=tables.psi.incompatible)
            t3 = clock()
            state = resolve_cross_turn_state(metas[-HISTORY_WINDOW:], t.c1)
            _, meta = schedule_turn(state, t.candidates, rng, tables.w3)
            t4 = clock()
            metas.append(meta)
            snap = Snapshot.of(t.snapshot, session_id=s.session_id, version=t.live_version, turn=t.index)
            t5 = clock()
            drv = PerceptionRun(tables.phi, snap, counters=counters, labels=INTENT_LABELS, tools=TOOL_NAMES,
                                turn=t.index, live_version=t.live_version, index=tables.phi_index)
            for i in range(0, len(t.stream), 4):
                drv.feed(t.stream[i:i + 4])
            drv.finish()
            t6 = clock()
            for k, ns in zip(KERNELS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, t6 - t5), strict=True):
                samples[k].append(ns / 1000.0)
    summary = {
        k: {"p50_us": round(statistics.median(v), 2), "p99_us": round(_pct(v, 0.99), 2),
            "max_us": round(max(v), 2), "mean_us": round(statistics.fmean(v), 2)}
        for k, v in samples.items()
    }
    return {
        "benchmark": "sgc_kernels",
        "turns": len(samples["total"]),
        "sessions": n_sessions,
        "seed": seed,
        "rules_version": tables.version,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "goal_total_p99_us": 1000.0,
        "total_p99_within_goal": summary["total"]["p99_us"] < 1000.0,
        "w1_counters": counters.as_dict(),
        "kernels": summary,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/bench_kernels.json")
    args = ap.parse_args(argv)
    run(5, 5, args.seed)  # warm-up (imports, pydantic schema caches)
    result = run(args.sessions, args.turns, args.seed)
    print(f"{result['turns']} turns, rules {result['rules_version']}")
    print(f"{'kernel':<16}{'p50 µs':>10}{'p99 µs':>10}{'max µs':>10}")
    for k, v in result["kernels"].items():
        print(f"{k:<16}{v['p50_us']:>10.1f}{v['p99_us']:>10.1f}{v['max_us']:>10.1f}")
    print(f"total p99 < 1 ms: {result['total_p99_within_goal']}   W1 counters: {result['w1_counters']}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
