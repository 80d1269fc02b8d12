"""``tandem cost``: what a turn spends, per pipeline kind, side by side in one run.

    tandem cost --pipelines tandem,prompting,dr --turns 20 --users 4 --slo-ttft-ms 1000 --slo-e2e-ms 15000 \\
        --out results/cost
    tandem cost --pipelines tandem,prompting --variant before=tandem:w1_skip_forced_labels=false ...
    tandem cost --http http://127.0.0.1:8000 --turns 4 --users 2 --out results/cost-one   # a running app

One local Ray for the run (:class:`serve.eval.runner.LocalApps`); per kind (and per ``--variant``: a kind
with pipeline settings changed, to measure a mechanism against its absence in the same run) one app with
a fresh store and world, warmed up, then the workload's turns alone and the load levels
(:mod:`serve.cost.measure`). Writes ``DIR/cost.json`` (:mod:`serve.cost.report`), ``DIR/turns.jsonl``
(every turn played alone, with its cost block) and ``DIR/goodput.png``; prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from serve.loadtest import SLO, WorkloadUnavailable

from .measure import cost_workload, goodput_of, play_alone, play_load
from .report import build_doc, format_table, plot_goodput, summarize_kind

__all__ = ["main", "build_parser", "parse_variant", "measure_app"]

REPO = Path(__file__).resolve().parents[2]


def parse_variant(text: str) -> tuple[str, str, dict[str, Any]]:
    """``LABEL=KIND:key=value,key=value`` → (label, kind, pipeline overrides; values read as YAML scalars)."""
    import yaml

    label, sep, rest = text.partition("=")
    kind, _, settings = rest.partition(":")
    if not sep or not label.strip() or not kind.strip():
        raise ValueError(f"--variant {text!r}: expected LABEL=KIND[:key=value,...]")
    over: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in settings.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"--variant {text!r}: {item!r} is not key=value")
        over[key.strip()] = yaml.safe_load(value)
    return label.strip(), kind.strip(), over


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tandem cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(REPO / "configs" / "embedded.yaml"), help="the profile the apps run")
    p.add_argument("--pricing", default=str(REPO / "configs" / "h100.yaml"),
                   help="the profile whose cost.pricing table prices the tokens (production)")
    p.add_argument("--pipelines", default="tandem,prompting,dr", help="kinds, comma-separated")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL=KIND:key=value,...",
                   help="one more app: KIND with these pipeline settings, reported as LABEL")
    p.add_argument("--turns", type=int, default=20, help="turns played one at a time per kind (and per load level)")
    p.add_argument("--users", type=int, default=4, help="closed-loop users of the goodput figure")
    p.add_argument("--levels", default="", help="more user counts for the plot (comma-separated; 1 is the turns alone)")
    p.add_argument("--load-turns", type=int, default=None, help="turns per load level (default: --turns)")
    p.add_argument("--slo-ttft-ms", type=float, default=1000.0)
    p.add_argument("--slo-e2e-ms", type=float, default=15000.0)
    p.add_argument("--pack-sessions", type=int, default=2, help="whole sessions of the pack in the workload")
    p.add_argument("--tau2", default=None, help="tau2 task folder (default: the pack's)")
    p.add_argument("--seed", type=int, default=0, help="the load levels' session order")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured turns per app first")
    p.add_argument("--timeout-s", type=float, default=180.0, help="per-turn client timeout")
    p.add_argument("--http", default=None, help="measure the app already running here (its one kind)")
    p.add_argument("--api-key", default=None, help="with --http: the API key")
    p.add_argument("--num-cpus", type=float, default=4, help="logical CPUs of the local Ray")
    p.add_argument("--workdir", type=Path, default=None, help="keep the apps' stores, worlds and telemetry here")
    p.add_argument("--out", type=Path, default=None, help="output folder (default results/cost-<time>)")
    return p


def measure_app(http: str, label: str, workload: Any, ns: argparse.Namespace, *, pricing: dict[str, Any],
                gpu_hour_usd: float | None, reset: Any = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One running app: warm-up, the turns alone, the load levels; its ``cost.json`` entry and turn rows."""
    from serve.eval.runner import run_turn

    slo = SLO(ttft_ms=ns.slo_ttft_ms, e2e_ms=ns.slo_e2e_ms)
    for i in range(ns.warmup):
        run_turn(http, f"cost-warm-{label}-{i}-{time.strftime('%H%M%S')}", ("Hello!", "Where is my order?")[i % 2],
                 timeout_s=ns.timeout_s, api_key=ns.api_key)
    print(f"[{label}] {ns.turns} turns alone ...", flush=True)
    alone = play_alone(http, workload, ns.turns, tag=label, timeout_s=ns.timeout_s, api_key=ns.api_key)
    levels = sorted({ns.users, *(int(x) for x in str(ns.levels).split(",") if x.strip())} - {1} | set())
    load = []
    for users in levels:
        if reset is not None:
            try:  # the world back to its seed for every level; a kind without tools has none to reset
                reset()
            except Exception as exc:  # best effort: the level runs on the world as it is
                print(f"[{label}] world not reset: {type(exc).__name__}", flush=True)
        print(f"[{label}] {users} users, {ns.load_turns or ns.turns} turns ...", flush=True)
        load.append(play_load(http, workload, users=users, requests=ns.load_turns or ns.turns,
                              slo=slo, timeout_s=ns.timeout_s, tag=label, seed=ns.seed, api_key=ns.api_key))
    entry = summarize_kind(alone, load, users=ns.users, alone=goodput_of(alone, slo), pricing=pricing,
                           gpu_hour_usd=gpu_hour_usd)
    rows = [{"kind": label, **r.as_dict()} for r in alone]
    return entry, rows


def _pricing(path: str) -> tuple[dict[str, Any], float | None, str]:
    """The ``cost`` section of a profile (validated as the app config validates it)."""
    import yaml

    from serve.config import CostConfig

    args = (yaml.safe_load(Path(path).read_text())["applications"][0].get("args") or {})
    cost = CostConfig.model_validate(args.get("cost") or {})
    return ({r: p.model_dump() for r, p in cost.pricing.items()}, cost.gpu_hour_usd, cost.basis)


def _domain(config: str) -> tuple[str, int]:
    """The config's domain pack and world seed."""
    import yaml

    d = yaml.safe_load(Path(config).read_text())["applications"][0]["args"]["domain"]  # a config names its pack
    return str(d["name"]), int(d.get("seed", 7))


def _apps(ns: argparse.Namespace) -> list[tuple[str, str, dict[str, Any]]]:
    apps = [(k, k, {}) for k in (x.strip() for x in ns.pipelines.split(",")) if k]
    apps += [parse_variant(v) for v in ns.variant]
    labels = [a[0] for a in apps]
    if len(set(labels)) != len(labels):
        raise ValueError(f"every kind and variant needs its own label: {labels}")
    return apps


def _write(out: Path, kinds: dict[str, Any], rows: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    """``cost.json``, ``turns.jsonl`` and the plot of what was measured so far (after every kind)."""
    doc = build_doc(kinds, run)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cost.json").write_text(json.dumps(doc, indent=2, default=str))
    (out / "turns.jsonl").write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
    if kinds:
        plot_goodput(out / "goodput.png", doc)
    return doc


def _local_run(ns: argparse.Namespace, workload: Any, pricing: dict[str, Any], usd: float | None,
               run: dict[str, Any], out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    import yaml

    from pipelines.registry import kind_record
    from serve.eval.runner import LocalApps, app_overrides

    base = yaml.safe_load(Path(ns.config).read_text())["applications"][0]["args"]
    domain, world_seed = _domain(ns.config)
    work = ns.workdir or Path(tempfile.mkdtemp(prefix="tandem-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    apps = LocalApps(Path(ns.config), work, num_cpus=ns.num_cpus)
    kinds: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    try:
        for label, kind, over in _apps(ns):
            rec = kind_record(kind)
            if rec.domains is not None and domain not in rec.domains:
                run["skipped"].append({"label": label, "why": f"{kind} does not run on {domain}"})
                continue
            o = app_overrides(kind, domain, base.get("pipeline") or {}, work, label, world_seed=world_seed)
            o["pipeline"] = {**o["pipeline"], **over}
            print(f"[{label}] deploying {kind} {over or ''}...", flush=True)
            ready = apps.deploy(o, label)
            run["apps"].append({"label": label, "kind": kind, "settings": over, "ready_s": round(ready, 1),
                                "loadavg_before": [round(x, 2) for x in os.getloadavg()]})
            try:
                kinds[label], got = measure_app(apps.http, label, workload, ns, pricing=pricing, gpu_hour_usd=usd,
                                                reset=apps.reset_world if "tools" in rec.deployments else None)
            except Exception as exc:  # the run goes on with the next kind; the failure is recorded
                run["apps"][-1]["error"] = f"{type(exc).__name__}: {exc}"[:300]
                print(f"[{label}] failed: {run['apps'][-1]['error']}", file=sys.stderr, flush=True)
                got = []
            finally:
                apps.delete()
            run["apps"][-1]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            rows += got
            _write(out, kinds, rows, run)  # a later kind that fails loses nothing measured before it
    finally:
        run["shm_files_removed"] = apps.stop()
        if ns.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return kinds, rows


def main(argv: list[str] | None = None) -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    ns = build_parser().parse_args(argv)
    out = ns.out or REPO / "results" / time.strftime("cost-%Y%m%d-%H%M%S")
    try:
        _apps(ns)
        pricing, usd, basis = _pricing(ns.pricing)
        domain, world_seed = _domain(ns.config)
        workload = cost_workload(domain, tau2=ns.tau2, pack_sessions=ns.pack_sessions, world_seed=world_seed)
    except (ValueError, WorkloadUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run: dict[str, Any] = {"started_at": time.strftime("%Y-%m-%d %H:%M:%S"), "config": str(ns.config),
                           "pricing": {"config": str(ns.pricing), "basis": basis, "table": pricing,
                                       "gpu_hour_usd": usd},
                           "turns": ns.turns, "users": ns.users, "slo": {"ttft_ms": ns.slo_ttft_ms, "e2e_ms": ns.slo_e2e_ms},
                           "workload": {"sessions": len(workload.sessions), "pack_sessions": ns.pack_sessions},
                           "cpus": os.cpu_count(), "apps": [], "skipped": []}
    t0 = time.monotonic()
    if ns.http:
        import httpx

        kind = httpx.get(f"{ns.http.rstrip('/')}/readyz", timeout=30).json().get("pipeline", "app")
        entry, rows = measure_app(ns.http.rstrip("/"), kind, workload, ns, pricing=pricing, gpu_hour_usd=usd)
        kinds = {kind: entry}
        run["apps"].append({"label": kind, "kind": kind, "http": ns.http})
    else:
        kinds, rows = _local_run(ns, workload, pricing, usd, run, out)
    run["wall_s"] = round(time.monotonic() - t0, 1)
    doc = _write(out, kinds, rows, run)
    print(format_table(doc))
    print(f"-> {out / 'cost.json'}")
    return 0 if kinds else 1
