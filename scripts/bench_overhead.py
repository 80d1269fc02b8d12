"""Overhead of the full Tandem turn vs the same model call sent straight to the model deployment.

Starts the embedded app (real Ray Serve + vLLM on the CPU), then for N prompts
alternates, in one run:
  * app    — POST /v1/sessions/<fresh id>/turns over HTTP with SSE (proxy → ingress →
             prompting pipeline → LLMServer), timed by the client;
  * direct — the identical ChatCompletionRequest sent from this driver through a Serve
             handle to ``LLMServer:<model>`` (no proxy, no ingress, no pipeline).
Prints TTFT and end-to-end p50/p90 for both and their ratios; writes JSON.

    python scripts/bench_overhead.py --turns 30 --out results/bench_overhead.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

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


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def app_turn(base: str, sid: str, text: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    ttft = None
    with httpx.stream("POST", f"{base}/v1/sessions/{sid}/turns", json={"text": text},
                      headers={"Accept": "text/event-stream"}, timeout=120) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data: ") and ttft is None and '"reply.delta"' in line:
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
    return {"ttft_p50_ms": pct(ttft, 0.5), "ttft_p90_ms": pct(ttft, 0.9),
            "e2e_p50_ms": pct(e2e, 0.5), "e2e_p90_ms": pct(e2e, 0.9), "n": len(rows)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs" / "embedded.yaml"))
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--out", default=str(REPO / "results" / "bench_overhead.json"))
    ns = ap.parse_args()

    # The overhead is measured on the prompting pipeline: its one generator call is exactly the
    # request the direct side sends, so the difference is the app (proxy, ingress, runner, SSE).
    import tempfile

    import ray
    import yaml
    from ray import serve

    from pipelines.events import TurnRequest
    from pipelines.prompting import PromptingPipeline, PromptingSettings
    from pipelines.protocols import NullEventSink
    from pipelines.turn import TurnContext
    from serve.config import load_serve_file
    from serve.launch import start_app, wait_ready
    from tests.integration.conftest import free_port

    raw = yaml.safe_load(Path(ns.config).read_text())
    raw["applications"][0]["args"]["pipeline"]["kind"] = "prompting"
    raw["applications"][0]["args"]["pipeline"]["max_reply_tokens"] = ns.max_tokens
    cfg_path = Path(tempfile.mkdtemp(prefix="tandem-bench-")) / "prompting.yaml"
    cfg_path.write_text(yaml.safe_dump(raw))
    sf = load_serve_file(cfg_path)
    args = sf.applications[0].args
    ep = start_app(str(cfg_path), http_port=free_port(), grpc_port=free_port(), metrics_port=None)
    try:
        wait_ready(ep["http"])
        gen = args.model_for_role("generator")
        handle = serve.get_deployment_handle(f"LLMServer:{gen.model_id}", app_name=ep["app"]).options(stream=True)
        p = args.pipeline
        pipe = PromptingPipeline(None, PromptingSettings(p.system_prompt, p.max_reply_tokens, p.temperature, p.seed))  # type: ignore[arg-type]

        def call_for(text: str):
            ctx = TurnContext("bench", "t", "x", TurnRequest(text=text), [], NullEventSink())
            return pipe.build_call(ctx)

        loop = asyncio.new_event_loop()
        app_rows, direct_rows = [], []
        for i in range(ns.warmup + ns.turns):
            text = PROMPTS[i % len(PROMPTS)]
            a = app_turn(ep["http"], f"bench-{i}", text)
            d = loop.run_until_complete(direct_turn(handle, gen.model_id, call_for(text)))
            if i >= ns.warmup:
                app_rows.append(a)
                direct_rows.append(d)
            print(f"\r{i + 1}/{ns.warmup + ns.turns}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        app_s, direct_s = summary(app_rows), summary(direct_rows)
        ratios = {k.replace("_ms", "_ratio"): app_s[k] / direct_s[k] for k in app_s if k.endswith("_ms")}
        extra = {k.replace("_ms", "_overhead_ms"): app_s[k] - direct_s[k] for k in app_s if k.endswith("_ms")}
        result = {"app": app_s, "direct": direct_s, "ratio_app_over_direct": ratios,
                  "overhead_ms": extra, "turns": ns.turns, "config": Path(ns.config).name,
                  "max_reply_tokens": p.max_reply_tokens}
        print(f"{'':8} {'TTFT p50':>10} {'TTFT p90':>10} {'E2E p50':>10} {'E2E p90':>10}   (ms)")
        for name, s in (("app", app_s), ("direct", direct_s)):
            print(f"{name:8} {s['ttft_p50_ms']:10.1f} {s['ttft_p90_ms']:10.1f} {s['e2e_p50_ms']:10.1f} {s['e2e_p90_ms']:10.1f}")
        print(f"{'ratio':8} {ratios['ttft_p50_ratio']:10.2f} {ratios['ttft_p90_ratio']:10.2f} "
              f"{ratios['e2e_p50_ratio']:10.2f} {ratios['e2e_p90_ratio']:10.2f}")
        Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.out).write_text(json.dumps(result, indent=2))
        print(f"wrote {ns.out}")
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
