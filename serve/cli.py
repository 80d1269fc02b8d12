"""The ``tandem`` command.

    tandem run [CONFIG]            prepare the model, start Ray and the app, serve until Ctrl-C
                                   (--cluster N: a head, a model node and N CPU nodes on this machine)
                                   (--observe: Arize Phoenix on loopback beside it, every trace exported)
    tandem prepare-model           convert the embedded model once (idempotent)
    tandem check-config CONFIG     validate a Serve config file strictly
    tandem k8s render CONFIG       render the KubeRay RayService (+ Redis, secrets, kustomize base) from a profile
    tandem k8s validate PATH...    validate manifests strictly (files, folders, kustomize overlays, - for stdin)
    tandem load ARGS...            bounded load test over HTTP/SSE and gRPC (goodput at SLOs, plots)
    tandem sweep CONFIG --set KEY=V1,V2 ...   one load test per serving-config grid point
    tandem replay SESSION          re-run a session's logged decisions and check they are identical
    tandem explain SESSION [TURN]  one turn's story: text, decisions, contract, guards, delivery, waterfall
    tandem whatif --from RUN ...   re-decide logged sessions under a changed table, pack or model: what changes
    tandem eval ARGS...            pipelines over the tau2 / flows / coach suites: table, ratios, CDF
    tandem cost ARGS...            model calls, tokens, engine time and goodput per turn and kind, priced on production
    tandem domain list|new|check   the installed domain packs, a new one, the conformance suite
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
import time
from typing import Any

from pipelines.errors import ConfigError

__all__ = ["main", "start_app", "wait_ready", "example_turn"]

from serve.launch import _print, example_turn, start_app, wait_ready  # noqa: E402  (re-exported)

DEFAULT_CONFIG = "configs/embedded.yaml"
SERVE_SHUTDOWN_S = 30.0  # how long `tandem run` waits for Serve's own shutdown before Ray's


def cmd_run_cluster(ns: argparse.Namespace, stop: threading.Event) -> int:
    """``tandem run --cluster N``: the profile on a head, a model node and N CPU nodes of this machine."""
    from serve.cluster import LocalCluster

    t0 = time.monotonic()
    cluster = LocalCluster(ns.config, cpu_nodes=ns.cluster, gcs_ft=ns.gcs_ft)
    _print(f"starting Tandem from {ns.config} on {len(cluster.nodes)} Ray nodes: "
           + ", ".join(f"{n.name} ({n.num_cpus:g} CPU{', ' if n.resources else ''}"
                       + ", ".join(f"{k} {v:g}" for k, v in n.resources.items()) + ")" for n in cluster.nodes))
    try:
        eps = cluster.start(ready_timeout_s=ns.ready_timeout)
        _print(f"ready in {time.monotonic() - t0:.1f} s\n")
        for name, ep in eps.items():
            _print(f"{name:<8} HTTP {ep.http}   gRPC {ep.grpc}")
        _print(f"redis    {cluster.redis.url}   (sessions, rate limits{', GCS' if ns.gcs_ft else ''})")
        _print(f"api key  {cluster.api_key}   (Authorization: Bearer ...)")
        _print("\nserving; press Ctrl-C to stop")
        while not stop.wait(1.0):
            pass
    finally:
        _print("shutting down ...")
        cluster.shutdown()
    return 0


def cmd_run(ns: argparse.Namespace) -> int:
    """Serve until Ctrl-C (SIGINT) or SIGTERM, then leave nothing behind: Serve and Ray shut down, the processes
    of this tree that outlive them stopped, the shared-memory files the tree held removed (:class:`Leftovers`).
    A signal during the start interrupts it (the same clean-up runs)."""
    stop = threading.Event()
    starting = [True]

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
        if starting[0]:  # still starting (a model conversion, an engine that takes minutes): stop now
            starting[0] = False
            raise KeyboardInterrupt(signal.Signals(signum).name)

    def arm() -> None:  # ray.init replaces the driver's SIGTERM handler with its own sys.exit: set ours again
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    arm()
    try:
        if ns.cluster:
            starting[0] = False
            return cmd_run_cluster(ns, stop)
        return _run_local(ns, stop, starting, arm)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _run_local(ns: argparse.Namespace, stop: threading.Event, starting: list[bool], arm: Any) -> int:
    from serve.launch import Leftovers

    left = Leftovers()
    t0 = time.monotonic()
    phoenix = None
    try:
        _print(f"starting Tandem from {ns.config} ...")
        phoenix = _start_phoenix(ns) if ns.observe else None
        ep = start_app(ns.config, num_cpus=ns.num_cpus, metrics_port=ns.metrics_port, http_port=ns.http_port,
                       grpc_port=ns.grpc_port, otlp_endpoint=phoenix.otlp_endpoint if phoenix else None)
        arm()
        from serve.deploy import wait_app_running

        wait_app_running(ep["app"], timeout_s=ns.ready_timeout)
        wait_ready(ep["http"], timeout_s=ns.ready_timeout)
        left.snapshot()
        _print(f"ready in {time.monotonic() - t0:.1f} s\n")
        _print(f"HTTP       {ep['http']}/v1/sessions/<session_id>/turns   (SSE with Accept: text/event-stream)")
        _print(f"gRPC       {ep['grpc']}   service tandem.v1.Assistant (reflection on)")
        _print(f"OpenAI     {ep['openai']}   (/chat/completions, /models)")
        if ep["metrics"]:
            _print(f"metrics    {ep['metrics']}")
        _print(f"telemetry  {ep['telemetry']}   (spans-*.jsonl, events-*.jsonl; tandem explain SESSION)")
        if phoenix is not None:
            phoenix.wait_ready()
            _print(f"traces     {phoenix.ui}   (Arize Phoenix, project {phoenix.project!r}; "
                   f"OTLP/gRPC {phoenix.otlp_endpoint})")
        _print("")
        if not ns.no_example:
            _print("example turn: POST /v1/sessions/demo-session/turns {\"text\": \"Hi! What can you help me with?\"}")
            done = example_turn(ep["http"])
            if done:
                _print(f"done: status={done['status']} turn={done['turn_id']} trace={done['trace_id']} "
                       f"first_token={done['timings']['first_token_ms']} ms end={done['timings']['end_ms']} ms")
                if phoenix is not None:
                    _print(f"trace:  {phoenix.trace_url(done['trace_id'])}")
        starting[0] = False
        if stop.is_set():  # a signal that arrived while the example turn ran
            return 0
        _print("\nserving; press Ctrl-C to stop")
        n = 0
        while not stop.wait(1.0):
            n += 1
            if n % 10 == 0:  # an engine restarted by Serve holds new files: remember them too
                left.snapshot()
    except KeyboardInterrupt as exc:
        _print(f"\ninterrupted ({exc or 'SIGINT'}) while starting")
        return 130
    finally:
        starting[0] = False
        _shutdown(left, phoenix)
    return 0


def _shutdown(left: Any, phoenix: Any) -> None:
    """Serve, Ray and Phoenix down, then whatever of this tree outlived them (:class:`serve.launch.Leftovers`)."""
    _print("shutting down ...")
    import ray
    from ray import serve

    with contextlib.suppress(Exception):
        left.snapshot()
    failed: list[BaseException] = []

    def serve_down() -> None:  # never prints: a daemon thread writing at interpreter exit aborts the process
        try:
            serve.shutdown()
        except Exception as exc:  # a controller already gone (the Ctrl-C reached it too): go on
            failed.append(exc)

    try:
        if ray.is_initialized():  # bounded: with the GCS killed by the same Ctrl-C, Serve's calls could wait long
            t = threading.Thread(target=serve_down, name="serve-shutdown", daemon=True)
            t.start()
            t.join(SERVE_SHUTDOWN_S)
            for exc in failed:
                _print(f"serve.shutdown: {type(exc).__name__}: {str(exc)[:200]}")
            if t.is_alive():
                _print(f"serve.shutdown: no answer in {SERVE_SHUTDOWN_S:.0f} s; shutting Ray down")
    finally:
        ray.shutdown()
        if phoenix is not None:
            phoenix.stop()
        stopped, removed = left.sweep()
        _print(f"stopped; {stopped} leftover process(es) ended, {removed} shared-memory file(s) removed")


def _start_phoenix(ns: argparse.Namespace) -> Any:
    """Arize Phoenix on loopback from its own virtualenv (``make phoenix``); the app exports to it."""
    from models.prepare import cache_dir
    from serve.phoenix import PhoenixServer

    phoenix = PhoenixServer.start(cache_dir() / "phoenix", port=ns.phoenix_port, grpc_port=ns.phoenix_grpc_port)
    _print(f"phoenix    starting on {phoenix.ui} (log {phoenix.log_path})")
    return phoenix


def cmd_prepare(ns: argparse.Namespace) -> int:
    from models.prepare import main as prepare_main

    return prepare_main()


def cmd_check(ns: argparse.Namespace) -> int:
    from serve.config import load_serve_file

    sf = load_serve_file(ns.config)
    for app in sf.applications:
        roles = app.args.roles.model_dump()
        _print(f"{ns.config}: ok — app {app.name!r}, profile {app.args.profile!r}, "
               f"pipeline {app.args.pipeline.kind!r}, roles {roles}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tandem", description="State-grounded two-model assistants on Ray Serve")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="start Ray and the app, serve until Ctrl-C")
    r.add_argument("config", nargs="?", default=DEFAULT_CONFIG)
    r.add_argument("--num-cpus", type=float, default=None, help="logical CPUs for the local Ray (default max(4, cores))")
    r.add_argument("--metrics-port", type=int, default=8080, help="Prometheus port of the local Ray")
    r.add_argument("--http-port", type=int, default=None)
    r.add_argument("--grpc-port", type=int, default=None)
    r.add_argument("--ready-timeout", type=float, default=600.0)
    r.add_argument("--no-example", action="store_true")
    r.add_argument("--observe", action="store_true",
                   help="start Arize Phoenix on loopback beside the app and export every trace to it")
    r.add_argument("--phoenix-port", type=int, default=6006, help="Phoenix UI / HTTP port (with --observe)")
    r.add_argument("--phoenix-grpc-port", type=int, default=4317, help="Phoenix OTLP/gRPC port (with --observe)")
    r.add_argument("--cluster", type=int, default=0, metavar="N",
                   help="a multi-node Ray cluster on this machine: a head with no work, a model node and N CPU "
                   "nodes (configs/cluster-dev.yaml; Redis from redis-server)")
    r.add_argument("--gcs-ft", action="store_true", help="with --cluster: GCS fault tolerance on the cluster's Redis")
    r.set_defaults(func=cmd_run)
    sub.add_parser("load", help="bounded load test of the turn API over HTTP/SSE and gRPC (tandem load --help)")
    sub.add_parser("replay", help="re-run a session's logged decisions and check they are identical")
    sub.add_parser("explain", help="one turn's story from its events and spans (tandem explain --help)")
    sub.add_parser("whatif", help="re-decide logged sessions under a candidate change (tandem whatif --help)")
    sub.add_parser("sweep", help="serving-config sweep: one load test per grid point (tandem sweep --help)")
    sub.add_parser("eval", help="pipelines over the evaluation suites: table, ratios, CDF (tandem eval --help)")
    sub.add_parser("cost", help="what a turn spends per pipeline kind, side by side (tandem cost --help)")
    pm = sub.add_parser("prepare-model", help="convert the embedded model (once)")
    pm.set_defaults(func=cmd_prepare)
    sub.add_parser("k8s", help="KubeRay manifests: render from a profile, validate any manifest (tandem k8s --help)")
    c = sub.add_parser("check-config", help="validate a Serve config file strictly")
    c.add_argument("config")
    c.set_defaults(func=cmd_check)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    # load / sweep / replay / whatif / k8s / eval own their whole argument list (argparse's REMAINDER refuses a leading --flag).
    if argv and argv[0] == "k8s":
        from serve.k8s.cli import main as k8s_main

        return int(k8s_main(argv[1:]) or 0)
    if argv and argv[0] == "load":
        from serve.loadtest import main as load_main

        return int(load_main(argv[1:]) or 0)
    if argv and argv[0] == "replay":
        from serve.replay import main as replay_main

        return int(replay_main(argv[1:]) or 0)
    if argv and argv[0] == "explain":
        from serve.explain import main as explain_main

        return int(explain_main(argv[1:]) or 0)
    if argv and argv[0] == "whatif":
        from serve.whatif import main as whatif_main

        return int(whatif_main(argv[1:]) or 0)
    if argv and argv[0] == "sweep":
        from serve.sweep import main as sweep_main

        return int(sweep_main(argv[1:]) or 0)
    if argv and argv[0] == "domain":
        from serve.domain_cli import main as domain_main

        return int(domain_main(argv[1:]) or 0)
    if argv and argv[0] == "eval":
        from serve.eval import main as eval_main

        return int(eval_main(argv[1:]) or 0)
    if argv and argv[0] == "cost":
        from serve.cost import main as cost_main

        return int(cost_main(argv[1:]) or 0)
    ns = build_parser().parse_args(argv)
    try:
        return int(ns.func(ns) or 0)
    except ConfigError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
