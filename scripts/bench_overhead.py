"""Overhead of the full Tandem turn vs the app's own OpenAI route vs a direct handle, same prompt tokens.

Starts the embedded app (real Ray Serve + vLLM on the CPU) with the ``prompting`` pipeline, then
for N prompts sends, in one run and in a rotating order:
  * turn          — POST /v1/sessions/<fresh id>/turns over HTTP with SSE (proxy → ingress →
                    prompting pipeline → LLMServer), timed to the first ``reply.delta``;
  * turn_grpc     — the same turn as ``tandem.v1.Assistant/StreamTurn`` through Serve's gRPC proxy;
  * openai_route  — POST /v1/chat/completions (stream) on the same app with the same messages and
                    decoding parameters (proxy → ingress → Ray Serve LLM's OpenAI path → LLMServer);
  * handle        — the identical ChatCompletionRequest from this driver through a Serve handle to
                    ``LLMServer:<model>`` (no proxy, no ingress, no pipeline).
Prints TTFT and end-to-end p50/p90 per path and the ratios of the turn over the two others;
writes ``results/bench_overhead.json`` (``ttft_ms`` per path, ``ratio_vs_openai_route``,
``ratio_vs_handle`` at p50). For the two turn paths it also reads each turn's ``done`` event:
``server_first_token_ms`` is the ingress's own first-token time (from the request's arrival at the
ingress) and ``outside_ingress_ms`` the rest of the client's wait (proxy, connection, framing).

    python scripts/bench_overhead.py --turns 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PROMPTS = [
    "Where is my order?",
    "How do I return a pair of shoes?",
    "Can I change the shipping address of my order?",
    "What payment methods do you accept?",
    "I want to cancel my order, it is still pending.",
    "Do you ship to Canada?",
]
PATHS = ("turn", "turn_grpc", "openai_route", "handle")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


SERVER: dict[str, list[float]] = {"turn": [], "turn_grpc": []}  # the ingress's own first-token time per turn


def app_turn(client: httpx.Client, base: str, sid: str, text: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    ttft = None
    with client.stream("POST", f"{base}/v1/sessions/{sid}/turns", json={"text": text},
                       headers={"Accept": "text/event-stream"}) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data: ") and ttft is None and '"reply.delta"' in line:
                ttft = time.perf_counter() - t0
            elif line.startswith("data: ") and '"type":"done"' in line.replace(" ", ""):
                SERVER["turn"].append(float(json.loads(line[6:])["timings"].get("first_token_ms") or "nan"))
    return (ttft or float("nan")) * 1000, (time.perf_counter() - t0) * 1000


def grpc_turn(stub, app: str, sid: str, text: str) -> tuple[float, float]:
    from serve.grpc_codec import proto_to_event
    from serve.protos import assistant_pb2 as pb

    t0 = time.perf_counter()
    ttft = None
    for msg in stub.StreamTurn(pb.TurnRequest(session_id=sid, text=text), metadata=(("application", app),),
                               timeout=120):
        ev = proto_to_event(msg)
        if ttft is None and ev.type == "reply.delta":
            ttft = time.perf_counter() - t0
        elif ev.type == "done":
            SERVER["turn_grpc"].append(float(ev.timings.first_token_ms or "nan"))
    return (ttft or float("nan")) * 1000, (time.perf_counter() - t0) * 1000


def openai_body(model_id: str, call) -> dict:
    """The OpenAI route's body for our ModelCall: the same messages and decoding parameters."""
    body = {"model": model_id, "messages": [m.model_dump() for m in call.messages], "max_tokens": call.max_tokens,
            "temperature": call.temperature, "top_p": call.top_p, "stream": True}
    if call.seed is not None:
        body["seed"] = call.seed
    if call.stop:
        body["stop"] = list(call.stop)
    if call.repetition_penalty != 1.0:
        body["repetition_penalty"] = call.repetition_penalty
    return body


def openai_turn(client: httpx.Client, base: str, body: dict) -> tuple[float, float]:
    t0 = time.perf_counter()
    ttft = None
    with client.stream("POST", f"{base}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if ttft is None and line.startswith("data: ") and line[6:].strip() != "[DONE]":
                delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
                if delta.get("content"):
                    ttft = time.perf_counter() - t0
    return (ttft or float("nan")) * 1000, (time.perf_counter() - t0) * 1000


async def direct_turn(handle, model_id: str, call) -> tuple[float, float]:
    from serve.model_client import parse_sse_item, to_chat_request

    t0 = time.perf_counter()
    ttft = None
    async for item in handle.chat.remote(to_chat_request(model_id, call)):
        if ttft is None and parse_sse_item(item):
            ttft = time.perf_counter() - t0
    return (ttft or float("nan")) * 1000, (time.perf_counter() - t0) * 1000


def summary(rows: list[tuple[float, float]]) -> dict[str, float]:
    ttft = [r[0] for r in rows]
    e2e = [r[1] for r in rows]
    return {"p50": pct(ttft, 0.5), "p90": pct(ttft, 0.9), "e2e_p50": pct(e2e, 0.5), "e2e_p90": pct(e2e, 0.9),
            "n": len(rows)}


def app_config(raw: dict[str, Any], work: Path, max_tokens: int, switch_interval_ms: float | None) -> dict[str, Any]:
    """The bench's app: ``raw`` (a Serve file) on the ``prompting`` pipeline, with a private store and telemetry.

    The overhead is measured on the prompting pipeline: its one generator call is exactly the
    request the two other paths send, so the differences are the app's own path."""
    app_args = raw["applications"][0]["args"]
    app_args["pipeline"] = {"kind": "prompting", "max_reply_tokens": max_tokens}
    # A private session store: the sessions of an earlier run (same ids, the default store) would bring
    # their history into the turn's prompt, and the turn would no longer send the other paths' tokens.
    app_args["store"] = {**app_args.get("store", {}), "kind": "sqlite", "path": str(work / "sessions.db")}
    app_args.setdefault("telemetry", {})["jsonl_dir"] = str(work / "telemetry")
    if switch_interval_ms is not None:
        app_args.setdefault("ingress", {})["switch_interval_ms"] = switch_interval_ms
    return raw


def call_builder(p: Any) -> Callable[[str], Any]:
    """``text`` → the prompting pipeline's generator call for a first turn (``p``: the app's pipeline settings)."""
    from pipelines.annex.prompting import PromptingPipeline, PromptingSettings
    from pipelines.events import TurnRequest
    from pipelines.protocols import NullEventSink
    from pipelines.turn import TurnContext

    pipe = PromptingPipeline(None, PromptingSettings(p.system_prompt, p.max_reply_tokens, p.temperature, p.seed))  # type: ignore[arg-type]

    def call_for(text: str) -> Any:
        ctx = TurnContext("bench", "t", "x", TurnRequest(text=text), [], NullEventSink())
        return pipe.build_call(ctx)

    return call_for


def path_runner(*, client: httpx.Client, http: str, base: str, stub: Any, app: str,
                direct: Callable[[Any], tuple[float, float]], model_id: str, run: str) -> Callable[..., tuple[float, float]]:
    """``one(name, i, text, call)``: one request on the path ``name`` → (TTFT, end to end) in ms.

    ``http``: the app's HTTP base; ``base``: the OpenAI route's base; ``stub``: the gRPC stub;
    ``direct(call)``: the handle path; ``run``: this run's session prefix (fresh sessions)."""
    def one(name: str, i: int, text: str, call: Any) -> tuple[float, float]:
        if name == "turn":
            return app_turn(client, http, f"bench-{run}-{i}", text)
        if name == "turn_grpc":
            return grpc_turn(stub, app, f"bench-{run}-g{i}", text)
        if name == "openai_route":
            return openai_turn(client, base, openai_body(model_id, call))
        return direct(call)

    return one


def run_paths(one: Callable[..., tuple[float, float]], call_for: Callable[[str], Any], *, warmup: int,
              turns: int) -> dict[str, list[tuple[float, float]]]:
    """``warmup + turns`` prompts on every path, the order rotating per prompt; the warm-up is not kept."""
    rows: dict[str, list[tuple[float, float]]] = {k: [] for k in PATHS}
    for i in range(warmup + turns):
        text = PROMPTS[i % len(PROMPTS)]
        call = call_for(text)
        for k in range(len(PATHS)):  # rotate the order so no path always follows another
            name = PATHS[(i + k) % len(PATHS)]
            got = one(name, i, text, call)
            if i >= warmup:
                rows[name].append(got)
            else:  # a warm-up turn's server time is not measured either
                SERVER.get(name, []).clear()
        print(f"\r{i + 1}/{warmup + turns}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return rows


def result_of(rows: dict[str, list[tuple[float, float]]], *, turns: int, config: str, max_reply_tokens: int,
              switch_interval_ms: float | None) -> dict[str, Any]:
    """The JSON the bench writes: TTFT / end to end per path, the turn's ratios over the other paths, and the
    ingress's own first-token time per turn path (from :data:`SERVER`)."""
    s = {name: summary(r) for name, r in rows.items()}
    return {
        "ttft_ms": {name: {"p50": v["p50"], "p90": v["p90"]} for name, v in s.items()},
        "e2e_ms": {name: {"p50": v["e2e_p50"], "p90": v["e2e_p90"]} for name, v in s.items()},
        "ratio_vs_openai_route": s["turn"]["p50"] / s["openai_route"]["p50"],
        "ratio_vs_handle": s["turn"]["p50"] / s["handle"]["p50"],
        "ratio_vs_openai_route_p90": s["turn"]["p90"] / s["openai_route"]["p90"],
        "ratio_vs_handle_p90": s["turn"]["p90"] / s["handle"]["p90"],
        "grpc_ratio_vs_handle": s["turn_grpc"]["p50"] / s["handle"]["p50"],
        "grpc_ratio_vs_openai_route": s["turn_grpc"]["p50"] / s["openai_route"]["p50"],
        "turns": turns, "config": config, "max_reply_tokens": max_reply_tokens,
        "switch_interval_ms": switch_interval_ms,
        # the ingress's own first token (from receiving the request) and the rest of the client's wait
        # (proxy, connection, framing), per turn path
        "server_first_token_ms": {k: {"p50": pct(v, 0.5), "p90": pct(v, 0.9)} for k, v in SERVER.items()},
        "outside_ingress_ms": {k: {"p50": pct([a[0] - b for a, b in zip(rows[k], v, strict=True)], 0.5)}
                               for k, v in SERVER.items() if len(v) == len(rows[k])},
    }


def report(rows: dict[str, list[tuple[float, float]]], result: dict[str, Any], out: Path) -> None:
    """Print the table and the ratios; write ``result`` to ``out``."""
    print(f"{'':14} {'TTFT p50':>10} {'TTFT p90':>10} {'E2E p50':>10} {'E2E p90':>10}   (ms)")
    for name, r in rows.items():
        v = summary(r)
        print(f"{name:14} {v['p50']:10.1f} {v['p90']:10.1f} {v['e2e_p50']:10.1f} {v['e2e_p90']:10.1f}")
    print(f"turn / openai_route (p50) {result['ratio_vs_openai_route']:.3f}; "
          f"turn / handle (p50) {result['ratio_vs_handle']:.3f}; "
          f"turn_grpc / handle (p50) {result['grpc_ratio_vs_handle']:.3f}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs" / "embedded.yaml"))
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--out", default=str(REPO / "results" / "bench_overhead.json"))
    ap.add_argument("--switch-interval-ms", type=float, default=None,
                    help="ingress.switch_interval_ms for the app (default: the config's)")
    ns = ap.parse_args(argv)

    import tempfile

    import yaml
    from ray import serve

    from serve.config import load_serve_file
    from serve.launch import start_app, wait_ready
    from serve.loadtest.cli import free_port

    work = Path(tempfile.mkdtemp(prefix="tandem-bench-"))
    raw = app_config(yaml.safe_load(Path(ns.config).read_text()), work, ns.max_tokens, ns.switch_interval_ms)
    cfg_path = work / "prompting.yaml"
    cfg_path.write_text(yaml.safe_dump(raw))
    sf = load_serve_file(cfg_path)
    args = sf.applications[0].args
    from serve.eval.runner import shm_held_here, shm_names, shutdown_local

    shm_before = shm_names()
    ep = start_app(str(cfg_path), http_port=free_port(), grpc_port=free_port(), metrics_port=None)
    try:
        wait_ready(ep["http"], timeout_s=1500)
        gen = args.model_for_role("generator")
        # One loop runs for the whole bench in its own thread: the handle's router lives in it (Serve's
        # throughput-optimized mode routes in the caller's loop and needs it running between calls).
        import threading

        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()

        def in_loop(coro):
            return asyncio.run_coroutine_threadsafe(coro, loop).result()

        async def make_handle():
            return serve.get_deployment_handle(f"LLMServer:{gen.model_id}", app_name=ep["app"]).options(stream=True)

        handle = in_loop(make_handle())
        import grpc

        from serve.protos import assistant_pb2_grpc

        channel = grpc.insecure_channel(ep["grpc"])
        # One client (one kept-alive connection) for both HTTP paths, as the gRPC path keeps its channel:
        # building an httpx client per request costs ~15 ms of TLS setup on the client side alone.
        client = httpx.Client(timeout=120)
        stub = assistant_pb2_grpc.AssistantStub(channel)
        one = path_runner(client=client, http=ep["http"], base=ep["openai"].removesuffix("/v1"), stub=stub,
                          app=ep["app"], direct=lambda call: in_loop(direct_turn(handle, gen.model_id, call)),
                          model_id=gen.model_id,
                          run=uuid.uuid4().hex[:8])  # fresh sessions: every turn sends exactly the other paths' messages
        rows = run_paths(one, call_builder(args.pipeline), warmup=ns.warmup, turns=ns.turns)
        result = result_of(rows, turns=ns.turns, config=Path(ns.config).name,
                           max_reply_tokens=args.pipeline.max_reply_tokens,
                           switch_interval_ms=args.ingress.switch_interval_ms)
        channel.close()
        client.close()
        report(rows, result, Path(ns.out))
    finally:
        # the engine's shared-memory segments go with it (only those this run's process tree held)
        shutdown_local(shm_held_here(), shm_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
