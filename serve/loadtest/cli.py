"""``tandem load`` / ``scripts/loadtest.py``: run a bounded load test and write JSON, CSV and plots.

    python scripts/loadtest.py --start configs/embedded.yaml --protocol both --mix tau2 \\
        --concurrency 4 --requests 40 --slo-ttft-ms 500 --slo-e2e-ms 5000
    python scripts/loadtest.py --http http://127.0.0.1:8000 --mode open --rate 2 --arrival gamma --cv 2 \\
        --duration 60 --poll-replicas

Targets are loopback only unless ``--allow-remote``. ``--start CONFIG`` starts the
app in this process (local Ray, free ports, a throwaway session store) and stops it after.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .clients import RemoteTargetRefused
from .metrics import SLO
from .replicas import ReplicaPoller, connect_ray
from .report import (
    format_summary,
    plot_latency_cdfs,
    plot_timeseries,
    write_json,
    write_records_csv,
)
from .runner import LoadResult, LoadSpec, run_load_sync
from .workload import MIXES, WorkloadUnavailable, load_workload

__all__ = ["main", "build_parser", "add_load_arguments", "spec_from_args", "slo_from_args", "run_protocols",
           "write_results", "free_port", "start_local_app"]

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def add_load_arguments(p: argparse.ArgumentParser) -> None:
    """The load and SLO options (shared with ``tandem sweep``)."""
    g = p.add_argument_group("load")
    g.add_argument("--protocol", choices=("http", "grpc", "both"), default="http")
    g.add_argument("--mode", choices=("closed", "open"), default="closed")
    g.add_argument("--concurrency", type=int, default=4, help="closed loop: virtual users")
    g.add_argument("--rate", type=float, default=1.0, help="open loop: session arrivals per second")
    g.add_argument("--arrival", choices=("poisson", "gamma"), default="poisson")
    g.add_argument("--cv", type=float, default=1.0, help="gamma arrivals: coefficient of variation (burstiness)")
    g.add_argument("--max-inflight", type=int, default=256, help="open loop: sessions in flight before dropping arrivals")
    g.add_argument("--requests", type=int, default=100, help="at most this many measured turns")
    g.add_argument("--duration", type=float, default=60.0, help="stop issuing after this many seconds")
    g.add_argument("--warmup", type=int, default=2, help="unmeasured turns first")
    g.add_argument("--timeout-s", type=float, default=120.0, help="per-turn client timeout")
    g.add_argument("--think-ms", type=float, default=0.0, help="pause between turns of one session")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--mix", default="auto", help=f"{' | '.join(MIXES)} | an installed pack with session scripts")
    g.add_argument("--tau2", default=None, help="tau2-format task dir (default $TANDEM_TAU2_DIR, else the default "
                   "config's pack's)")
    g.add_argument("--jsonl", default=None, help='--mix jsonl: {"session": [...]} or {"text": ...} per line')
    g.add_argument("--max-turns", type=int, default=None, help="truncate every session to this many turns")
    g.add_argument("--api-key", default=None)
    g.add_argument("--grpc-app", default=None, help="gRPC 'application' metadata (needed with 2+ Serve apps)")
    s = p.add_argument_group("SLOs (goodput = rate of ok requests meeting all of them)")
    s.add_argument("--slo-ttft-ms", type=float, default=None, help="first token (narration or reply)")
    s.add_argument("--slo-ttfr-ms", type=float, default=None, help="first reply token")
    s.add_argument("--slo-e2e-ms", type=float, default=None)
    s.add_argument("--slo-itl-ms", type=float, default=None, help="mean gap between deltas of a turn")
    r = p.add_argument_group("replicas")
    r.add_argument("--poll-replicas", action="store_true", help="poll serve.status() (a Ray driver of the cluster)")
    r.add_argument("--ray-address", default="auto", help="with --poll-replicas and no --start")
    r.add_argument("--app", default="tandem", help="Serve application name to poll")
    r.add_argument("--poll-interval", type=float, default=1.0)
    p.add_argument("--allow-remote", action="store_true", help="allow non-loopback targets (never the default)")
    p.add_argument("--no-progress", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tandem load", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--http", default="http://127.0.0.1:8000", help="HTTP base URL (loopback)")
    p.add_argument("--grpc", default="127.0.0.1:9000", help="gRPC host:port (loopback)")
    p.add_argument("--start", metavar="CONFIG", default=None, help="start the app from CONFIG in-process first")
    p.add_argument("--num-cpus", type=float, default=None, help="--start: logical CPUs of the local Ray")
    p.add_argument("--out", default=None, help="results dir (default results/loadtest-<time>)")
    p.add_argument("--label", default="", help="a name for this run in the JSON")
    p.add_argument("--no-plots", action="store_true")
    add_load_arguments(p)
    return p


def slo_from_args(ns: argparse.Namespace) -> SLO:
    return SLO(ttft_ms=ns.slo_ttft_ms, ttfr_ms=ns.slo_ttfr_ms, e2e_ms=ns.slo_e2e_ms, itl_ms=ns.slo_itl_ms)


def spec_from_args(ns: argparse.Namespace, protocol: str, target: str) -> LoadSpec:
    return LoadSpec(protocol=protocol, target=target, mode=ns.mode, concurrency=ns.concurrency, rate=ns.rate,  # type: ignore[arg-type]
                    arrival=ns.arrival, cv=ns.cv, requests=ns.requests, duration_s=ns.duration, warmup=ns.warmup,
                    timeout_s=ns.timeout_s, think_s=ns.think_ms / 1000.0, seed=ns.seed, max_inflight=ns.max_inflight,
                    allow_remote=ns.allow_remote, application=ns.grpc_app, api_key=ns.api_key,
                    progress=not ns.no_progress)


def run_protocols(ns: argparse.Namespace, http: str, grpc: str, *, poll: bool) -> dict[str, LoadResult]:
    """One run per requested protocol (HTTP first), each with its own replica poller."""
    wl = load_workload(ns.mix, tau2=ns.tau2, jsonl=ns.jsonl, seed=ns.seed, max_turns=ns.max_turns)
    protos = ["http", "grpc"] if ns.protocol == "both" else [ns.protocol]
    out: dict[str, LoadResult] = {}
    for proto in protos:
        spec = spec_from_args(ns, proto, http if proto == "http" else grpc)
        poller = ReplicaPoller(ns.app, interval_s=ns.poll_interval) if poll else None
        out[proto] = run_load_sync(spec, wl, slo=slo_from_args(ns), poller=poller)
        print(format_summary(proto, out[proto].summary), flush=True)
    return out


def write_results(out_dir: Path, results: dict[str, LoadResult], *, extra: dict[str, Any] | None = None,
                  plots: bool = True) -> dict[str, str]:
    """summary.json, requests.csv, latency_cdf.png, timeseries.png under ``out_dir``."""
    files = {"json": str(write_json(out_dir / "summary.json",
                                    {**(extra or {}), "runs": {k: v.to_dict() for k, v in results.items()}}))}
    files["csv"] = str(write_records_csv(out_dir / "requests.csv", [r for v in results.values() for r in v.records]))
    if plots:
        files["cdf"] = str(plot_latency_cdfs(out_dir / "latency_cdf.png", {k: v.records for k, v in results.items()}))
        files["timeseries"] = str(plot_timeseries(out_dir / "timeseries.png", {k: v.series for k, v in results.items()},
                                                  {k: v.replicas for k, v in results.items() if v.replicas}))
    return files


def start_local_app(config: str, work: Path, *, num_cpus: float | None = None) -> dict[str, Any]:
    """Start ``config`` in-process on free ports with a throwaway SQLite store; returns endpoints."""
    import yaml

    from serve.launch import start_app, wait_ready

    raw = yaml.safe_load(Path(config).read_text())
    for entry in raw.get("applications", []):
        args = entry.setdefault("args", {})
        if (args.get("store") or {}).get("kind", "sqlite") == "sqlite":
            args["store"] = {**(args.get("store") or {}), "kind": "sqlite", "path": str(work / "sessions.db")}
        args["telemetry"] = {**(args.get("telemetry") or {}), "jsonl_dir": str(work / "telemetry")}
    derived = work / "app.yaml"
    derived.write_text(yaml.safe_dump(raw))
    ep = start_app(str(derived), num_cpus=num_cpus, http_port=free_port(), grpc_port=free_port())
    ep["ready_s"] = wait_ready(ep["http"], timeout_s=900)
    return ep


def main(argv: list[str] | None = None) -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    ns = build_parser().parse_args(argv)
    out_dir = Path(ns.out or REPO / "results" / time.strftime("loadtest-%Y%m%d-%H%M%S"))
    started = False
    try:
        load_workload(ns.mix, tau2=ns.tau2, jsonl=ns.jsonl, seed=ns.seed, max_turns=ns.max_turns)
        http, grpc = ns.http, ns.grpc
        if ns.start:
            work = Path(tempfile.mkdtemp(prefix="tandem-load-"))
            print(f"starting {ns.start} in-process ...", file=sys.stderr, flush=True)
            started = True
            ep = start_local_app(ns.start, work, num_cpus=ns.num_cpus)
            http, grpc = ep["http"], ep["grpc"]
            print(f"ready in {ep['ready_s']:.1f} s: {http} / {grpc}", file=sys.stderr, flush=True)
        elif ns.poll_replicas:
            connect_ray(ns.ray_address)
        results = run_protocols(ns, http, grpc, poll=ns.poll_replicas)
        files = write_results(out_dir, results, plots=not ns.no_plots,
                              extra={"label": ns.label, "started_config": ns.start, "argv": list(argv or sys.argv[1:])})
        print("wrote " + ", ".join(files.values()))
    except WorkloadUnavailable as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 0
    except (RemoteTargetRefused, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if started:
            import ray
            from ray import serve

            try:
                serve.shutdown()
            finally:
                ray.shutdown()
    return 0
