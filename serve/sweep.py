"""``tandem sweep`` / ``scripts/sweep.py``: serving-config sweeps, one load test per grid point.

    python scripts/sweep.py configs/embedded.yaml \\
        --set models.smollm2.engine_kwargs.max_num_seqs=8,16 \\
        --set 'models.smollm2.engine_kwargs.speculative_config=none,{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}' \\
        --requests 20 --duration 30 --slo-ttft-ms 500

Each ``--set KEY=V1,V2,...`` is one axis (dotted keys into the application ``args``;
values are YAML scalars or JSON, ``none`` = null; commas inside ``{}``/``[]``/quotes
do not split). Every point's derived config is written and validated strictly
(:func:`serve.config.load_serve_file`: a misspelt key fails before anything starts),
then deployed (one local Ray reused across points, or ``--address`` for an existing
cluster), warmed up and loaded. Output: a table (printed, CSV, JSON), a Pareto plot
(goodput vs p90 time to first token) and the best point.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from pipelines.errors import ConfigError
from serve.loadtest.cli import (
    add_load_arguments,
    slo_from_args,
    spec_from_args,
    write_results,
)
from serve.loadtest.clients import RemoteTargetRefused
from serve.loadtest.deploy import deploy_app, start_local_cluster
from serve.loadtest.metrics import pareto_front
from serve.loadtest.replicas import ReplicaPoller, connect_ray
from serve.loadtest.report import plot_pareto, write_csv, write_json
from serve.loadtest.runner import run_load_sync
from serve.loadtest.workload import WorkloadUnavailable, load_workload

__all__ = ["split_values", "parse_value", "parse_axis", "expand_grid", "set_dotted", "derive_config",
           "validate_points", "best_point", "point_label", "main", "MAX_POINTS"]

REPO = Path(__file__).resolve().parents[1]
MAX_POINTS = 64
TABLE_COLS = ("point", "label", "status", "deploy_s", "requests", "error_rate", "throughput_rps", "goodput_rps",
              "goodput_fraction", "ttft_p50_ms", "ttft_p90_ms", "ttfr_p90_ms", "e2e_p90_ms", "itl_p50_ms", "pareto")


def split_values(text: str) -> list[str]:
    """Split on commas outside brackets, braces and quotes."""
    out, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if depth or quote:
        raise ValueError(f"unbalanced brackets or quotes in {text!r}")
    out.append("".join(cur).strip())
    return out


def parse_value(tok: str) -> Any:
    """A YAML scalar or JSON value; ``none`` / ``null`` / ``~`` are null."""
    if tok.lower() in ("none", "null", "~"):
        return None
    try:
        return yaml.safe_load(tok)
    except yaml.YAMLError as exc:
        raise ValueError(f"cannot parse value {tok!r}: {exc}") from exc


def parse_axis(spec: str) -> tuple[str, list[Any]]:
    """``"a.b.c=1,2"`` → ``("a.b.c", [1, 2])``."""
    key, sep, values = spec.partition("=")
    key = key.strip()
    if not sep or not key or any(not p for p in key.split(".")):
        raise ValueError(f"expected KEY=V1,V2,... with a dotted KEY, got {spec!r}")
    toks = split_values(values)
    if any(not t for t in toks):
        raise ValueError(f"empty value in {spec!r} (write none for null)")
    return key, [parse_value(t) for t in toks]


def expand_grid(axes: list[tuple[str, list[Any]]], *, max_points: int = MAX_POINTS) -> list[dict[str, Any]]:
    """The Cartesian product of the axes, first axis slowest; no axes → one empty point."""
    keys = [k for k, _ in axes]
    if len(set(keys)) != len(keys):
        raise ValueError(f"an axis is given twice: {keys}")
    n = math.prod(len(v) for _, v in axes)
    if n > max_points:
        raise ValueError(f"grid has {n} points, more than the cap {max_points}")
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))]


def set_dotted(d: dict[str, Any], key: str, value: Any) -> None:
    """Set ``d[a][b][c] = value`` for ``"a.b.c"``, creating missing mappings (the strict config judges them)."""
    parts = key.split(".")
    cur = d
    for i, p in enumerate(parts[:-1]):
        nxt = cur.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise ValueError(f"{'.'.join(parts[:i + 1])} is not a mapping; cannot set {key}")
        cur = nxt
    cur[parts[-1]] = copy.deepcopy(value)


def derive_config(base: dict[str, Any], overrides: dict[str, Any], *, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of the Serve file with overrides applied to ``applications[0].args``."""
    raw = copy.deepcopy(base)
    args = raw["applications"][0].setdefault("args", {})
    items = {**(extra or {}), **overrides}
    kind = items.get("pipeline.kind")
    if kind is not None and kind != (args.get("pipeline") or {}).get("kind"):
        args["pipeline"] = {"kind": kind}  # each kind has its own settings: start its section afresh
    for k, v in items.items():
        set_dotted(args, k, v)
    return raw


def point_label(overrides: dict[str, Any]) -> str:
    def short(v: Any) -> str:
        if isinstance(v, dict):
            return str(v.get("method", "{..}"))
        return json.dumps(v) if not isinstance(v, str) else v

    return " ".join(f"{k.rsplit('.', 1)[-1]}={short(v)}" for k, v in overrides.items()) or "base"


def validate_points(base_path: str | Path, points: list[dict[str, Any]], out_dir: Path,
                    extra: dict[str, Any] | None = None) -> list[Path]:
    """Write ``points/pNN.yaml`` for every point and validate each strictly; ConfigError names the key."""
    from serve.config import load_serve_file

    base = yaml.safe_load(Path(base_path).read_text())
    paths = []
    for i, ov in enumerate(points):
        p = out_dir / "points" / f"p{i:02d}.yaml"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(yaml.safe_dump(derive_config(base, ov, extra=extra), sort_keys=False))
        try:
            load_serve_file(p)
        except ConfigError as exc:
            raise ConfigError(f"point p{i:02d} ({point_label(ov)}): {exc.message}") from exc
        paths.append(p)
    return paths


def best_point(rows: list[dict[str, Any]]) -> int | None:
    """Highest goodput among completed points; ties → lower p90 TTFT."""
    ok = [i for i, r in enumerate(rows) if r.get("status") == "ok"]
    if not ok:
        return None
    return max(ok, key=lambda i: (rows[i]["goodput_rps"], -_num(rows[i]["ttft_p90_ms"])))


def _num(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not math.isnan(v) else float("inf")


def _row(i: int, ov: dict[str, Any], status: str, **extra: Any) -> dict[str, Any]:
    return {"point": f"p{i:02d}", "label": point_label(ov), "status": status,
            "overrides": json.dumps(ov, sort_keys=True), **extra}


def _metrics(summary: dict[str, Any]) -> dict[str, Any]:
    lat = summary["latency_ms"]
    return {"requests": summary["requests"], "error_rate": summary["error_rate"],
            "throughput_rps": summary["throughput_rps"], "goodput_rps": summary["goodput_rps"],
            "goodput_fraction": summary["goodput_fraction"], "ttft_p50_ms": lat["ttft_ms"]["p50"],
            "ttft_p90_ms": lat["ttft_ms"]["p90"], "ttfr_p90_ms": lat["ttfr_ms"]["p90"],
            "e2e_p90_ms": lat["e2e_ms"]["p90"], "itl_p50_ms": lat["itl_ms"]["p50"]}


def _print_table(rows: list[dict[str, Any]]) -> None:
    def fmt(v: Any) -> str:
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    cells = [[fmt(r.get(c, "")) for c in TABLE_COLS] for r in rows]
    widths = [max(len(c), *(len(x[j]) for x in cells)) for j, c in enumerate(TABLE_COLS)]
    print("  ".join(c.ljust(w) for c, w in zip(TABLE_COLS, widths, strict=True)))
    for x in cells:
        print("  ".join(v.ljust(w) for v, w in zip(x, widths, strict=True)))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tandem sweep", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", help="base Serve file (e.g. configs/embedded.yaml)")
    p.add_argument("--set", dest="axes", action="append", default=[], metavar="KEY=V1,V2", help="one grid axis")
    p.add_argument("--address", default=None, help="existing Ray cluster (e.g. auto); default: start a local Ray")
    p.add_argument("--http", default=None, help="with --address: HTTP base URL (default http://127.0.0.1:8000)")
    p.add_argument("--grpc", default=None, help="with --address: gRPC host:port (default 127.0.0.1:9000)")
    p.add_argument("--num-cpus", type=float, default=None, help="logical CPUs of the local Ray")
    p.add_argument("--deploy-timeout", type=float, default=900.0)
    p.add_argument("--out", default=None, help="results dir (default results/sweep-<time>)")
    p.add_argument("--dry-run", action="store_true", help="expand, write and validate the points only")
    add_load_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    ns = build_parser().parse_args(argv)
    out = Path(ns.out or REPO / "results" / time.strftime("sweep-%Y%m%d-%H%M%S"))
    if ns.protocol == "both":
        print("error: a sweep ranks one protocol: --protocol http or grpc", file=sys.stderr)
        return 2
    work: Path | None = None
    try:
        points = expand_grid([parse_axis(a) for a in ns.axes])
        work = Path(tempfile.mkdtemp(prefix="tandem-sweep-"))
        local = {} if ns.address else {"store.kind": "sqlite", "store.path": str(work / "sessions.db"),
                                        "telemetry.jsonl_dir": str(work / "telemetry")}
        paths = validate_points(ns.config, points, out, extra=local)
        wl = load_workload(ns.mix, tau2=ns.tau2, jsonl=ns.jsonl, seed=ns.seed, max_turns=ns.max_turns)
        http, grpc = ns.http or "http://127.0.0.1:8000", ns.grpc or "127.0.0.1:9000"
        spec_from_args(ns, ns.protocol, http if ns.protocol == "http" else grpc)  # guard targets early
    except (ConfigError, ValueError, WorkloadUnavailable) as exc:
        print(f"error: {getattr(exc, 'message', exc)}", file=sys.stderr)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        return 2
    print(f"{len(points)} point(s), configs under {out / 'points'}", flush=True)
    try:
        return 0 if ns.dry_run else _run_points(ns, points, paths, wl, out, work, http, grpc)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the points' stores and telemetry; the results are under out


def _run_points(ns: argparse.Namespace, points: list[dict[str, Any]], paths: list[Path], wl: Any, out: Path,
                work: Path, http: str, grpc: str) -> int:
    import ray
    from ray import serve

    from serve.config import load_serve_file

    rows: list[dict[str, Any]] = []
    started = False
    try:
        if ns.address:
            connect_ray(ns.address)
        else:
            http, grpc = start_local_cluster(load_serve_file(paths[0]), ns.num_cpus, work)
            started = True
        for i, (ov, path) in enumerate(zip(points, paths, strict=True)):
            sf = load_serve_file(path)
            name = sf.applications[0].name
            print(f"[p{i:02d}] {point_label(ov)}: deploying ...", flush=True)
            try:
                deploy_s = deploy_app(sf, http, ns.deploy_timeout)
                spec = spec_from_args(ns, ns.protocol, http if ns.protocol == "http" else grpc)
                poller = ReplicaPoller(name, interval_s=ns.poll_interval) if ns.poll_replicas else None
                res = run_load_sync(spec, wl, slo=slo_from_args(ns), poller=poller)
                write_results(out / "points" / f"p{i:02d}", {ns.protocol: res}, plots=False, extra={"overrides": ov})
                rows.append(_row(i, ov, "ok", deploy_s=deploy_s, **_metrics(res.summary)))
            except (RuntimeError, TimeoutError, RemoteTargetRefused) as exc:
                print(f"[p{i:02d}] failed: {exc}", file=sys.stderr, flush=True)
                rows.append(_row(i, ov, "failed", error=str(exc)[:300]))
            finally:
                try:
                    serve.delete(name)
                except Exception as exc:  # keep sweeping
                    print(f"[p{i:02d}] serve.delete: {exc}", file=sys.stderr)
            print(f"[p{i:02d}] {rows[-1]['status']} goodput={rows[-1].get('goodput_rps', float('nan')):.3f} req/s "
                  f"ttft_p90={rows[-1].get('ttft_p90_ms', float('nan')):.1f} ms", flush=True)
    finally:
        if started:
            try:
                serve.shutdown()
            finally:
                ray.shutdown()
    ok = [i for i, r in enumerate(rows) if r["status"] == "ok"]
    front = [ok[j] for j in pareto_front([(rows[i]["goodput_rps"], rows[i]["ttft_p90_ms"]) for i in ok])]
    for i, r in enumerate(rows):
        r["pareto"] = i in front
    best = best_point(rows)
    _print_table(rows)
    cols = [*TABLE_COLS, "overrides", "error"]
    write_csv(out / "sweep.csv", rows, cols)
    write_json(out / "sweep.json", {"config": ns.config, "axes": ns.axes, "slo": slo_from_args(ns).as_dict(),
                                    "rows": rows, "pareto": [rows[i]["point"] for i in front],
                                    "best": rows[best] if best is not None else None})
    plot_pareto(out / "pareto.png", rows, front, best=best)
    if best is None:
        print("no point completed", file=sys.stderr)
        return 1
    b = rows[best]
    print(f"best: {b['point']} {b['label']}: goodput {b['goodput_rps']:.3f} req/s, p90 TTFT {b['ttft_p90_ms']:.1f} ms")
    print(f"wrote {out / 'sweep.csv'}, {out / 'sweep.json'}, {out / 'pareto.png'}")
    return 0
