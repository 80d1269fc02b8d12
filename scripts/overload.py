"""Overload the real embedded app and check it refuses early instead of timing everyone out.

Starts the app from a Serve file (default ``configs/embedded.yaml``; ``--pipeline`` overrides
``pipeline.kind``) on free loopback ports with auth on (one generated key), then:

1. **capacity** — a closed loop of ``--users`` clients for ``--phase-s`` seconds: turns
   completed within the turn deadline per second (goodput at capacity);
2. **overload** — for each level (default 2× and 5×) and each protocol (HTTP JSON, gRPC
   ``Turn``), open-loop arrivals at ``level × capacity`` per second for ``--phase-s`` seconds
   (every request a fresh session), counting per level: requests, completed, clean
   refusals (HTTP 429 / 503 with Retry-After, gRPC RESOURCE_EXHAUSTED / UNAVAILABLE),
   other errors (goal 0), lost stored turns (a completed turn missing from the store, or a
   refused one stored anyway; goal 0), goodput and its ratio to capacity (goal ≥ 0.8);
3. **burst** — ``--burst`` turns sent at once over HTTP (default 64, each a fresh session): only
   200 / 429 / 503 (+ Retry-After) are clean, a 504 (a turn admitted and run past its deadline) is not;
   goodput over the burst (turns completed within the deadline per second until the last one came back)
   and its ratio to capacity (goal ≥ 0.8), and how many were served;
4. RSS of the whole Ray process tree at the start and at the end.

``--variants normal,slow`` runs the whole measurement once per engine, one after the other, each in its
own process and Ray (``slow``: the engine slowed — one sequence at a time, so the calls of concurrent turns queue in
the engine instead of sharing its batch (it already computes on one core; vLLM reads its KV space in
whole GiB); ``fixed-slow``: the same slow engine behind the hand-sized admission the embedded
profile had, 6 turns + 2 waiting, for contrast), and reports the capacities side by side.

Loopback only; every phase is bounded in time and in count (``--max-requests``).
Prints a table and writes JSON (``--out``, default ``results/overload.json``).

    python scripts/overload.py --pipeline prompting
    python scripts/overload.py --variants normal,slow --levels 5 --burst 64
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import secrets
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TEXTS = ["Hi! What can you help me with?", "Where is my order?", "Can I return a pair of shoes?",
         "What are your opening hours?", "Thanks, that is all."]
CLEAN_HTTP = {429, 503}
CLEAN_GRPC = {"RESOURCE_EXHAUSTED", "UNAVAILABLE"}


@dataclass
class Phase:
    name: str
    protocol: str
    rate_rps: float | None
    duration_s: float = 0.0
    requests: int = 0
    completed: int = 0
    completed_in_deadline: int = 0
    clean_refusals: int = 0
    refusals_without_retry_after: int = 0
    other_errors: int = 0
    other_error_kinds: dict[str, int] = field(default_factory=dict)
    lost_stored_turns: int = 0
    latency_ms_p50: float | None = None
    latency_ms_p90: float | None = None
    goodput_rps: float = 0.0
    goodput_ratio: float | None = None
    outcomes: list[tuple[str, str, str | None]] = field(default_factory=list, repr=False)  # (sid, kind, turn_id)
    latencies: list[float] = field(default_factory=list, repr=False)

    def other(self, kind: str) -> None:
        self.other_errors += 1
        self.other_error_kinds[kind] = self.other_error_kinds.get(kind, 0) + 1


def tree_rss_mb() -> float:
    """RSS of this process and every descendant (the local Ray cluster and its replicas), MiB."""
    import psutil

    me = psutil.Process(os.getpid())
    total = 0
    for p in [me, *me.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return round(total / 2**20, 1)


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))], 1)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: Engine and admission presets of ``--variant`` (applied to every model of the config).
VARIANTS: dict[str, dict[str, Any]] = {
    "normal": {},
    "slow": {"engine_kwargs": {"max_num_seqs": 1}},
    "fixed-slow": {"engine_kwargs": {"max_num_seqs": 1},
                   "ingress": {"max_ongoing_requests": 6, "max_queued_requests": 2, "admission": {"mode": "off"}}},
}


def apply_variant(args: dict[str, Any], variant: str) -> None:
    """The variant's engine settings on every model, its ingress settings on the ingress."""
    preset = VARIANTS[variant]
    for model in args.get("models", {}).values():
        model["engine_kwargs"] = {**model.get("engine_kwargs", {}), **preset.get("engine_kwargs", {})}
        model["env"] = {**model.get("env", {}), **preset.get("env", {})}
    if "ingress" in preset:
        args["ingress"] = {**args.get("ingress", {}), **preset["ingress"]}


def write_config(src: Path, work: Path, pipeline: str | None, key_hash: str,
                 variant: str = "normal") -> tuple[Path, dict[str, Any]]:
    import yaml

    from pipelines.registry import kind_record

    raw = yaml.safe_load(src.read_text())
    raw["http_options"] = {**raw.get("http_options", {}), "host": "127.0.0.1", "port": free_port()}
    raw["grpc_options"] = {**raw.get("grpc_options", {}), "port": free_port()}
    args = raw["applications"][0]["args"]
    args["store"] = {"kind": "sqlite", "path": str(work / "sessions.db"), "vault_key_file": str(work / "vault.key")}
    args["telemetry"] = {**args.get("telemetry", {}), "jsonl_dir": str(work / "telemetry")}
    args["auth"] = {"enabled": True, "keys": [{"id": "overload", "sha256": key_hash}]}
    apply_variant(args, variant)
    if pipeline:
        args["pipeline"] = {"kind": pipeline, "turn_deadline_s": args.get("pipeline", {}).get("turn_deadline_s", 60)}
        domains = kind_record(pipeline).domains  # None: any domain
        if domains and args.get("domain", {}).get("name") not in domains:
            args["domain"] = {**args.get("domain", {}), "name": domains[0]}
    from cryptography.fernet import Fernet

    (work / "vault.key").write_bytes(Fernet.generate_key())
    out = work / "app.yaml"
    out.write_text(yaml.safe_dump(raw))
    return out, args


class Clients:
    def __init__(self, http: str, grpc_target: str, key: str, timeout_s: float) -> None:
        import grpc
        import httpx

        from serve.protos import assistant_pb2_grpc
        from serve.streaming import GRPC_CLIENT_OPTIONS

        self.http = httpx.AsyncClient(base_url=http, timeout=timeout_s,
                                      limits=httpx.Limits(max_connections=1024, max_keepalive_connections=256),
                                      headers={"authorization": f"Bearer {key}"})
        self.channel = grpc.aio.insecure_channel(grpc_target, options=list(GRPC_CLIENT_OPTIONS))
        self.stub = assistant_pb2_grpc.AssistantStub(self.channel)
        self.md = (("authorization", f"Bearer {key}"),)
        self.timeout_s = timeout_s

    async def turn(self, protocol: str, sid: str, text: str) -> tuple[str, str | None, str]:
        """(kind, turn_id, detail): kind is completed | refused | refused_no_retry_after | other."""
        import grpc
        import httpx

        if protocol == "http":
            try:
                r = await self.http.post(f"/v1/sessions/{sid}/turns", json={"text": text})
            except httpx.HTTPError as exc:
                return "other", None, type(exc).__name__
            if r.status_code == 200:
                body = r.json()
                return ("completed", body["turn_id"], body["status"]) if body["status"] in ("ok", "fallback") \
                    else ("other", None, f"200 {body['status']}")
            if r.status_code in CLEAN_HTTP:
                return ("refused" if "retry-after" in r.headers else "refused_no_retry_after"), None, str(r.status_code)
            return "other", None, f"http {r.status_code}"
        from serve.protos import assistant_pb2 as pb

        try:
            ans = await self.stub.Turn(pb.TurnRequest(session_id=sid, text=text), metadata=self.md,
                                       timeout=self.timeout_s)
        except grpc.aio.AioRpcError as exc:
            name = exc.code().name
            return ("refused", None, name) if name in CLEAN_GRPC else ("other", None, f"grpc {name}")
        return ("completed", ans.turn_id, ans.status) if ans.status in ("ok", "fallback") else ("other", None, ans.status)

    async def aclose(self) -> None:
        await self.http.aclose()
        await self.channel.close()


async def one(clients: Clients, phase: Phase, protocol: str, sid: str, deadline_s: float) -> None:
    t0 = time.monotonic()
    kind, turn_id, detail = await clients.turn(protocol, sid, TEXTS[hash(sid) % len(TEXTS)])
    dt = time.monotonic() - t0
    phase.requests += 1
    if kind == "completed":
        phase.completed += 1
        phase.latencies.append(dt * 1000)
        if dt <= deadline_s:
            phase.completed_in_deadline += 1
    elif kind == "refused":
        phase.clean_refusals += 1
    elif kind == "refused_no_retry_after":
        phase.clean_refusals += 1
        phase.refusals_without_retry_after += 1
    else:
        phase.other(detail)
    phase.outcomes.append((sid, kind, turn_id))


async def closed_loop(clients: Clients, users: int, duration_s: float, deadline_s: float, max_requests: int) -> Phase:
    phase = Phase("capacity", "http", None)
    stop = time.monotonic() + duration_s
    n = iter(range(max_requests))

    async def user(u: int) -> None:
        while time.monotonic() < stop:
            i = next(n, None)
            if i is None:
                return
            await one(clients, phase, "http", f"cap-{u}-{i}-{secrets.token_hex(3)}", deadline_s)

    t0 = time.monotonic()
    await asyncio.gather(*(user(u) for u in range(users)))
    phase.duration_s = round(time.monotonic() - t0, 2)
    return phase


async def open_loop(clients: Clients, name: str, protocol: str, rate: float, duration_s: float,
                    deadline_s: float, max_requests: int) -> Phase:
    phase = Phase(name, protocol, round(rate, 3))
    count = min(max_requests, max(1, int(rate * duration_s)))
    t0 = time.monotonic()
    tasks = []
    for i in range(count):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(clients, phase, protocol, f"{name}-{i}-{secrets.token_hex(3)}", deadline_s)))
    await asyncio.gather(*tasks)
    phase.duration_s = round(time.monotonic() - t0, 2)
    return phase


async def burst(clients: Clients, n: int, deadline_s: float) -> Phase:
    """``n`` turns at once over HTTP, each a fresh session; the phase lasts until the last completed turn came
    back (refusals come back at once), so its goodput is what the box served of the burst per second."""
    phase = Phase(f"burst{n}", "http", None)
    tag = secrets.token_hex(3)
    t0 = time.monotonic()
    await asyncio.gather(*(one(clients, phase, "http", f"burst-{tag}-{i}", deadline_s) for i in range(n)))
    phase.duration_s = round(max(phase.latencies) / 1000 if phase.latencies else time.monotonic() - t0, 2)
    return phase


def audit(store: Path, phase: Phase) -> None:
    """Completed turns must be stored; refused ones must not be.

    Read from the app's SQLite file itself (read-only), not through the API: the audit must not
    queue behind, or be refused by, the bounded ingress it is auditing.
    """
    import sqlite3

    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30)
    try:
        for sid, kind, turn_id in phase.outcomes:
            ids = {r[0] for r in conn.execute("SELECT turn_id FROM turns WHERE session_id = ?", (sid,))}
            if (kind == "completed" and turn_id not in ids) or (kind.startswith("refused") and ids):
                phase.lost_stored_turns += 1
    finally:
        conn.close()


def finish(phase: Phase, capacity: float | None) -> None:
    phase.latency_ms_p50, phase.latency_ms_p90 = pct(phase.latencies, 0.5), pct(phase.latencies, 0.9)
    phase.goodput_rps = round(phase.completed_in_deadline / phase.duration_s, 3) if phase.duration_s else 0.0
    if capacity:
        phase.goodput_ratio = round(phase.goodput_rps / capacity, 3)


async def drive(ns: argparse.Namespace, ep: dict[str, str], key: str, deadline_s: float,
                store: Path) -> dict[str, Any]:
    clients = Clients(ep["http"], ep["grpc"], key, timeout_s=deadline_s + 15)
    try:
        for i in range(2):  # warm-up (not counted)
            await clients.turn("http", f"warm-{i}", TEXTS[i])
            await clients.turn("grpc", f"warm-g-{i}", TEXTS[i])
        cap = await closed_loop(clients, ns.users, ns.phase_s, deadline_s, ns.max_requests)
        audit(store, cap)
        finish(cap, None)
        capacity = max(cap.goodput_rps, 0.01)
        phases = [cap]
        if ns.burst:
            await asyncio.sleep(ns.settle_s)
            b = await burst(clients, ns.burst, deadline_s)
            audit(store, b)
            finish(b, capacity)
            phases.append(b)
        for level in ns.levels:
            for protocol in ("http", "grpc"):
                await asyncio.sleep(ns.settle_s)  # let the previous phase drain
                p = await open_loop(clients, f"x{level:g}-{protocol}", protocol, level * capacity, ns.phase_s,
                                    deadline_s, ns.max_requests)
                audit(store, p)
                finish(p, capacity)
                phases.append(p)
        return {"capacity_rps": capacity, "phases": phases}
    finally:
        await clients.aclose()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs" / "embedded.yaml"))
    ap.add_argument("--pipeline", default=None, help="pipeline.kind (default: what the config says)")
    ap.add_argument("--users", type=int, default=4, help="closed-loop users of the capacity phase")
    ap.add_argument("--phase-s", type=float, default=30.0)
    ap.add_argument("--settle-s", type=float, default=5.0)
    ap.add_argument("--levels", type=float, nargs="+", default=[2.0, 5.0])
    ap.add_argument("--max-requests", type=int, default=400, help="cap per phase")
    ap.add_argument("--burst", type=int, default=64, help="turns sent at once after the capacity phase (0: none)")
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="normal", help="the engine / admission preset")
    ap.add_argument("--variants", default=None,
                    help="several presets, comma-separated: one whole run each (own process), side by side")
    ap.add_argument("--num-cpus", type=float, default=4)
    ap.add_argument("--out", default=str(REPO / "results" / "overload.json"))
    ns = ap.parse_args(argv)
    if ns.variants:
        return run_variants(ns, argv or sys.argv[1:])

    from serve.cli import start_app, wait_ready
    from serve.eval.runner import shm_held_here, shm_names, shutdown_local

    key = "ovl-" + secrets.token_urlsafe(16)
    work = Path(tempfile.mkdtemp(prefix="tandem-overload-"))
    cfg_path, args = write_config(Path(ns.config), work, ns.pipeline, hashlib.sha256(key.encode()).hexdigest(),
                                  ns.variant)
    deadline_s = float(args.get("pipeline", {}).get("turn_deadline_s", 60))
    shm_before, held = shm_names(), set()
    try:
        ep = start_app(str(cfg_path), num_cpus=ns.num_cpus)
        wait_ready(ep["http"], timeout_s=900)
        held = shm_held_here()
        rss0 = tree_rss_mb()
        result = asyncio.run(drive(ns, ep, key, deadline_s, work / "sessions.db"))
        rss1 = tree_rss_mb()
    finally:
        shutdown_local(held | shm_held_here(), shm_before)
    phases: list[Phase] = result["phases"]
    print(f"variant={ns.variant}  pipeline={args['pipeline']['kind']}  deadline={deadline_s:g}s  "
          f"capacity={result['capacity_rps']:.3f} turns/s  RSS start {rss0:.0f} MiB, end {rss1:.0f} MiB")
    hdr = f"{'phase':<14}{'rate':>7}{'reqs':>6}{'done':>6}{'clean':>7}{'other':>7}{'lost':>6}{'p50 ms':>9}{'p90 ms':>9}{'goodput':>9}{'ratio':>7}"
    print(hdr)
    for p in phases:
        print(f"{p.name:<14}{(p.rate_rps or 0):>7.2f}{p.requests:>6}{p.completed:>6}{p.clean_refusals:>7}"
              f"{p.other_errors:>7}{p.lost_stored_turns:>6}{(p.latency_ms_p50 or 0):>9.0f}{(p.latency_ms_p90 or 0):>9.0f}"
              f"{p.goodput_rps:>9.3f}{(p.goodput_ratio if p.goodput_ratio is not None else 1):>7.2f}")
        if p.other_error_kinds:
            print(f"{'':<14}other: {p.other_error_kinds}")
    over = [p for p in phases if p.rate_rps]
    b = next((p for p in phases if p.name.startswith("burst")), None)
    summary = {
        "variant": ns.variant, "variant_settings": VARIANTS[ns.variant],
        "pipeline": args["pipeline"]["kind"], "deadline_s": deadline_s, "capacity_rps": result["capacity_rps"],
        "burst": None if b is None else {
            "turns": b.requests, "completed": b.completed, "completed_in_deadline": b.completed_in_deadline,
            "clean_refusals": b.clean_refusals, "timeouts_504": b.other_error_kinds.get("http 504", 0),
            "other_errors": b.other_errors, "only_clean_answers": b.other_errors == 0,
            "goodput_rps": b.goodput_rps, "goodput_ratio": b.goodput_ratio,
            "capacity_within_deadline": round(result["capacity_rps"] * deadline_s, 1)},
        "rss_mb": {"start": rss0, "end": rss1},
        "min_goodput_ratio": min((p.goodput_ratio or 0) for p in over) if over else None,
        "other_errors": sum(p.other_errors for p in phases),
        "lost_stored_turns": sum(p.lost_stored_turns for p in phases),
        "phases": [{k: v for k, v in asdict(p).items() if k not in ("outcomes", "latencies")} for p in phases],
    }
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    if summary["burst"] is not None:
        bs = summary["burst"]
        print(f"burst of {bs['turns']}: {bs['completed']} answered (200), {bs['clean_refusals']} refused with "
              f"Retry-After, {bs['timeouts_504']} past the deadline (504), {bs['other_errors']} other; goodput "
              f"{bs['goodput_rps']:.3f} turns/s = {bs['goodput_ratio']} x capacity")
    print(f"min goodput ratio under overload {summary['min_goodput_ratio']}  other errors {summary['other_errors']}"
          f"  lost stored turns {summary['lost_stored_turns']}  -> {out}")
    return 0


def _without(argv: list[str], flag: str) -> list[str]:
    """``argv`` without ``flag`` and its value (``--flag v`` or ``--flag=v``)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def run_variants(ns: argparse.Namespace, argv: list[str]) -> int:
    """One whole run per variant, each in its own process (its own Ray), then the results side by side."""
    import subprocess

    names = [v.strip() for v in ns.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        print(f"unknown variants {unknown} (known: {', '.join(sorted(VARIANTS))})", file=sys.stderr)
        return 2
    base = _without(_without(_without(argv, "--variants"), "--out"), "--variant")
    out = Path(ns.out)
    results: dict[str, Any] = {}
    for name in names:
        part = out.with_name(f"{out.stem}-{name}{out.suffix}")
        print(f"== variant {name}", flush=True)
        rc = subprocess.call([sys.executable, str(Path(__file__).resolve()), *base, "--variant", name,
                              "--out", str(part)])
        results[name] = json.loads(part.read_text()) if rc == 0 and part.is_file() else {"error": f"exit {rc}"}
    normal = (results.get("normal") or {}).get("capacity_rps")
    doc = {"variants": results,
           "capacity_over_normal": {n: round(r["capacity_rps"] / normal, 3) if normal and "capacity_rps" in r else None
                                    for n, r in results.items()}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    print(f"{'variant':<12}{'capacity':>10}{'x normal':>10}{'burst 200':>11}{'refused':>9}{'504':>6}{'other':>7}"
          f"{'burst ratio':>13}{'min ratio':>11}")
    for n, r in results.items():
        b = r.get("burst") or {}
        print(f"{n:<12}{r.get('capacity_rps', 0):>10.3f}{doc['capacity_over_normal'][n] or 0:>10.2f}"
              f"{b.get('completed', 0):>11}{b.get('clean_refusals', 0):>9}{b.get('timeouts_504', 0):>6}"
              f"{b.get('other_errors', 0):>7}{b.get('goodput_ratio') or 0:>13.2f}{r.get('min_goodput_ratio') or 0:>11.2f}")
    print(f"-> {out}")
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
