"""The ``tandem`` command.

    tandem run [CONFIG]            prepare the model, start Ray and the app, serve until Ctrl-C
    tandem prepare-model           convert the embedded model once (idempotent)
    tandem check-config CONFIG     validate a Serve config file strictly
    tandem k8s render CONFIG       render the KubeRay RayService (+ Redis, secrets) from a profile
    tandem load ARGS...            bounded load test over HTTP/SSE and gRPC (goodput at SLOs, plots)
    tandem sweep CONFIG --set KEY=V1,V2 ...   one load test per serving-config grid point
    tandem replay SESSION          re-run a session's logged decisions and check they are identical
    tandem eval ARGS...            pipelines over the tau2 / flows / coach suites: table, ratios, CDF
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from pipelines.errors import ConfigError

__all__ = ["main", "start_app", "wait_ready", "example_turn"]

DEFAULT_CONFIG = "configs/embedded.yaml"


def _print(msg: str) -> None:
    print(msg, flush=True)


def start_app(config_path: str, *, num_cpus: float | None = None, metrics_port: int | None = None,
              http_port: int | None = None, grpc_port: int | None = None) -> dict[str, Any]:
    """Start a local Ray, Serve's proxies and the app from a Serve file. Returns endpoints."""
    from serve.config import load_serve_file
    from serve.telemetry import configure_env

    sf = load_serve_file(config_path)
    entry = sf.applications[0]
    tele = entry.args.telemetry
    tdir = configure_env(jsonl_dir=tele.jsonl_dir, otlp_endpoint=tele.otlp_endpoint,
                         sampling_ratio=tele.sampling_ratio)
    for m in entry.args.models.values():
        if m.source == "embedded":
            from models.prepare import prepare_embedded_model

            prepared = prepare_embedded_model()
            _print(f"model      {prepared.path} ({'converted' if prepared.converted else 'cached'})")
    import ray
    from ray import serve
    from ray.serve.config import gRPCOptions

    from serve.deploy import deploy_serve_file

    http = sf.http_options.model_copy(update={"port": http_port} if http_port else {})
    grpc_port = grpc_port or sf.grpc_options.port
    init_kwargs: dict[str, Any] = {"num_cpus": num_cpus or max(4, os.cpu_count() or 2),
                                   "include_dashboard": False, "log_to_driver": False}
    if metrics_port:
        init_kwargs["_metrics_export_port"] = metrics_port
    ray.init(**init_kwargs)
    serve.start(
        http_options={"host": http.host, "port": http.port},
        grpc_options=gRPCOptions(port=grpc_port, grpc_servicer_functions=sf.grpc_options.grpc_servicer_functions),
    )
    # Declarative deploy (as `serve deploy` and KubeRay do): a later redeploy of the same file
    # with changed rule tables reconfigures live replicas instead of restarting them.
    deploy_serve_file(sf, http_host=http.host, http_port=http.port, grpc_port=grpc_port)
    host = "127.0.0.1" if http.host in ("0.0.0.0", "::") else http.host
    return {
        "http": f"http://{host}:{http.port}",
        "grpc": f"{host}:{grpc_port}",
        "openai": f"http://{host}:{http.port}{entry.route_prefix.rstrip('/')}/v1",
        "telemetry": str(tdir),
        "app": entry.name,
        "metrics": f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port else None,
    }


def wait_ready(base_url: str, timeout_s: float = 600.0) -> float:
    """Poll ``/readyz`` until 200; returns seconds waited."""
    import httpx

    t0 = time.monotonic()
    last = ""
    while time.monotonic() - t0 < timeout_s:
        try:
            r = httpx.get(f"{base_url}/readyz", timeout=5)
            if r.status_code == 200:
                return time.monotonic() - t0
            last = r.text[:200]
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(1.0)
    raise TimeoutError(f"app not ready after {timeout_s:.0f} s (last: {last})")


def example_turn(base_url: str, session_id: str = "demo-session", text: str = "Hi! What can you help me with?") -> dict[str, Any]:
    """One streamed turn over SSE; prints the reply as it arrives; returns the done event."""
    import httpx

    done: dict[str, Any] = {}
    with httpx.stream("POST", f"{base_url}/v1/sessions/{session_id}/turns", json={"text": text},
                      headers={"Accept": "text/event-stream"}, timeout=120) as r:
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            ev = json.loads(line[6:])
            if ev["type"] in ("reply.delta", "narration.delta"):
                sys.stdout.write(ev["text"])
                sys.stdout.flush()
            elif ev["type"] == "done":
                done = ev
            elif ev["type"] == "error":
                sys.stdout.write(f"\n[error {ev['code']}: {ev['message']}]")
    sys.stdout.write("\n")
    return done


def cmd_run(ns: argparse.Namespace) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    t0 = time.monotonic()
    _print(f"starting Tandem from {ns.config} ...")
    ep = start_app(ns.config, num_cpus=ns.num_cpus, metrics_port=ns.metrics_port,
                   http_port=ns.http_port, grpc_port=ns.grpc_port)
    try:
        from serve.deploy import wait_app_running

        wait_app_running(ep["app"], timeout_s=ns.ready_timeout)
        wait_ready(ep["http"], timeout_s=ns.ready_timeout)
        _print(f"ready in {time.monotonic() - t0:.1f} s\n")
        _print(f"HTTP       {ep['http']}/v1/sessions/<session_id>/turns   (SSE with Accept: text/event-stream)")
        _print(f"gRPC       {ep['grpc']}   service tandem.v1.Assistant (reflection on)")
        _print(f"OpenAI     {ep['openai']}   (/chat/completions, /models)")
        if ep["metrics"]:
            _print(f"metrics    {ep['metrics']}")
        _print(f"telemetry  {ep['telemetry']}   (spans-*.jsonl, events-*.jsonl)\n")
        if not ns.no_example:
            _print("example turn: POST /v1/sessions/demo-session/turns {\"text\": \"Hi! What can you help me with?\"}")
            done = example_turn(ep["http"])
            if done:
                _print(f"done: status={done['status']} turn={done['turn_id']} trace={done['trace_id']} "
                       f"first_token={done['timings']['first_token_ms']} ms end={done['timings']['end_ms']} ms")
        _print("\nserving; press Ctrl-C to stop")
        while not stop.wait(1.0):
            pass
    finally:
        _print("shutting down ...")
        import ray
        from ray import serve

        try:
            serve.shutdown()
        finally:
            ray.shutdown()
    return 0


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


def cmd_k8s(ns: argparse.Namespace) -> int:
    from serve.k8s import main as k8s_main

    args = list(ns.args)
    if args and args[0] == "render":
        args = args[1:]
    return int(k8s_main(args) or 0)


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
    r.set_defaults(func=cmd_run)
    sub.add_parser("load", help="bounded load test of the turn API over HTTP/SSE and gRPC (tandem load --help)")
    sub.add_parser("replay", help="re-run a session's logged decisions and check they are identical")
    sub.add_parser("sweep", help="serving-config sweep: one load test per grid point (tandem sweep --help)")
    sub.add_parser("eval", help="pipelines over the evaluation suites: table, ratios, CDF (tandem eval --help)")
    pm = sub.add_parser("prepare-model", help="convert the embedded model (once)")
    pm.set_defaults(func=cmd_prepare)
    k = sub.add_parser("k8s", help="render KubeRay manifests from a profile (tandem k8s render configs/h100.yaml)")
    k.add_argument("args", nargs=argparse.REMAINDER)
    k.set_defaults(func=cmd_k8s)
    c = sub.add_parser("check-config", help="validate a Serve config file strictly")
    c.add_argument("config")
    c.set_defaults(func=cmd_check)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    # load / sweep / replay / eval own their whole argument list (argparse's REMAINDER refuses a leading --flag).
    if argv and argv[0] == "load":
        from serve.loadtest import main as load_main

        return int(load_main(argv[1:]) or 0)
    if argv and argv[0] == "replay":
        from serve.replay import main as replay_main

        return int(replay_main(argv[1:]) or 0)
    if argv and argv[0] == "sweep":
        from serve.sweep import main as sweep_main

        return int(sweep_main(argv[1:]) or 0)
    if argv and argv[0] == "eval":
        from serve.eval import main as eval_main

        return int(eval_main(argv[1:]) or 0)
    ns = build_parser().parse_args(argv)
    try:
        return int(ns.func(ns) or 0)
    except ConfigError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
