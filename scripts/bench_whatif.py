"""Throughput of ``tandem whatif`` without model calls: logged turns re-decided per minute (offline; no Ray).

Reads a logged run as ``tandem whatif`` does (``--from``: an eval run's folder or a telemetry folder;
``--config``: the Serve file it ran with), repeats its sessions until at least ``--turns`` logged turns are in
the set (each repeat is the same session, re-decided again: the work per turn is a real turn's), and times, side
by side in one run, three candidates:

* ``noop`` — the rule tables as served: each session is re-decided once (the candidate decides it as served, so
  no baseline run is needed);
* ``phi_orchestrate`` — Φ's catch-all rows (the ones that need no state: a greeting's answer, the identity
  question of an unverified request) hand the turn to the orchestrator instead: most logged sessions change, so
  each is re-decided twice (candidate and baseline), and the orchestrator steps they now take were never logged
  (``missing``: they fall back as in a model outage; with ``--model`` / ``--rerun-changed`` they would run live);
* ``table`` — the ``--table KIND=FILE`` candidate, when given.

For each: the wall time and the process's CPU time (the box may be shared: the CPU figure is what the what-if
itself costs), logged turns per minute of each, the turns changed, and the sessions that needed the baseline.
Writes ``results/bench_whatif.json``.

    python scripts/bench_whatif.py --from results/eval --config configs/embedded.yaml --turns 1000
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "run"]

REPO = Path(__file__).resolve().parents[1]


def _ns(source: str, config: str, tables: list[str], telemetry: str | None = None) -> argparse.Namespace:
    from serve.whatif import build_parser

    argv = ["--from", source, "--config", config, "--out", "unused"] + (["--telemetry", telemetry] if telemetry else [])
    for t in tables:
        argv += ["--table", t]
    return build_parser().parse_args(argv)


def _phi_orchestrate(tmp: Path, bundle: dict[str, Any]) -> str:
    import yaml

    phi = copy.deepcopy(bundle["phi"])
    phi["version"] += "-orchestrate"
    for row in phi["rows"]:
        if not row.get("requires_state") and not row.get("tools"):
            row["then"] = None
    path = tmp / "phi_orchestrate.yaml"
    path.write_text(yaml.safe_dump(phi, allow_unicode=True))
    return f"phi={path}"


def run(source: str, config: str, *, turns: int, table: str | None = None, work: Path | None = None,
        telemetry: str | None = None) -> dict[str, Any]:
    """Time the candidates over the logged run (see module docstring); returns the results document."""
    import tempfile

    from pipelines.core.whatif import what_if
    from pipelines.domains import load_domain
    from serve.config import load_serve_file
    from serve.whatif import build_sides, load_sessions

    entry = load_serve_file(config).applications[0]
    t0 = time.perf_counter()
    sessions, _ = load_sessions(_ns(source, config, [], telemetry), entry.args)
    load_s = time.perf_counter() - t0
    distinct = sum(len(s.turns) for s in sessions)
    copies = max(1, -(-turns // max(distinct, 1)))
    work = work or Path(tempfile.mkdtemp(prefix="bench-whatif-"))
    candidates = {"noop": [],
                  "phi_orchestrate": [_phi_orchestrate(work, load_domain(entry.args.domain.name).rule_tables())]}
    if table:
        candidates["table"] = [table]
    out: dict[str, Any] = {"source": source, "config": config, "sessions": len(sessions), "distinct_turns": distinct,
                           "copies": copies, "turns": distinct * copies, "load_s": round(load_s, 2),
                           "cpus": os.cpu_count(),
                           "python": platform.python_version(), "loadavg_before": list(os.getloadavg()),
                           "candidates": {}}
    for name, tables in candidates.items():
        base, cand, describe = build_sides(_ns(source, config, tables), entry)
        c0, t0 = time.process_time(), time.perf_counter()
        rep = asyncio.run(what_if(sessions * copies, base, cand, describe=describe))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        out["candidates"][name] = {
            "turns": rep.replayed, "changed": rep.changed, "baseline_sessions": rep.baseline_runs,
            "sessions": len(sessions) * copies, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "turns_per_min_wall": round(rep.replayed / wall * 60, 1),
            "turns_per_min_cpu": round(rep.replayed / cpu * 60, 1) if cpu > 0 else None,
            "model_calls": rep.model_calls, "by_kind": {k: c.changed for k, c in rep.by_kind.items() if c.changed}}
    out["loadavg_after"] = list(os.getloadavg())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="source", required=True, help="a logged run (eval folder or telemetry folder)")
    ap.add_argument("--config", default=str(REPO / "configs" / "embedded.yaml"))
    ap.add_argument("--telemetry", default=None, help="the run's event-log folder (default: as tandem whatif finds it)")
    ap.add_argument("--turns", type=int, default=1000, help="logged turns re-decided per candidate (at least)")
    ap.add_argument("--table", default=None, metavar="KIND=FILE", help="a third candidate, as tandem whatif takes it")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "bench_whatif.json")
    ns = ap.parse_args(argv)
    doc = run(ns.source, ns.config, turns=ns.turns, table=ns.table, telemetry=ns.telemetry)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"{doc['turns']} logged turns ({doc['distinct_turns']} distinct x {doc['copies']}), "
          f"load {doc['loadavg_before'][0]:.1f} -> {doc['loadavg_after'][0]:.1f}")
    for name, c in doc["candidates"].items():
        print(f"  {name:<10} {c['turns_per_min_wall']:>8.1f} turns/min wall  {c['turns_per_min_cpu']:>8.1f} turns/min CPU"
              f"  ({c['wall_s']} s wall, {c['cpu_s']} s CPU; {c['changed']} changed; "
              f"{c['baseline_sessions']}/{c['sessions']} sessions re-run as served too)")
    base, most = doc["candidates"]["noop"], doc["candidates"]["phi_orchestrate"]
    if base["turns_per_min_cpu"] and most["turns_per_min_cpu"]:
        print(f"  no-op / phi_orchestrate CPU throughput: {base['turns_per_min_cpu'] / most['turns_per_min_cpu']:.2f}x")
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
