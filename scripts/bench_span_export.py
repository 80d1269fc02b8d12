"""What span export costs on the request path: each span written as it ends vs batched export.

No Ray and no model: one process records the spans of a DR-shaped turn (turn,
pre-guard, orchestrator steps with their LLM calls and tools, mid- and
post-guard decisions, generator) with Tandem's real span helpers and
``serve.telemetry``'s real JSONL exporter, alternating turn by turn between:

  * sync  — ``SimpleSpanProcessor``: each span is serialised and appended to the
            file by the thread that ends it (what the request path paid before);
  * batch — ``BatchSpanProcessor``: ending a span only queues it; a background
            thread writes every ``TANDEM_SPAN_FLUSH_MS`` (what the app does now).

Prints the time the turn's thread spends in span code per turn (p50 / p90) for both
and their ratio; writes JSON.

    python scripts/bench_span_export.py --turns 400 --out results/bench_span_export.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MESSAGES = [{"role": "system", "content": "You decide the next step for a retail support assistant. " * 12},
            {"role": "user", "content": "Hi, I'm [EMAIL_1], where is my order #W1000002?"}]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def one_turn(turn_id: str) -> None:
    """The spans of a two-step DR turn, recorded with the pipelines' helpers."""
    from pipelines.semconv import SpanKind
    from pipelines.spans import guard_decision, guard_span, llm_span, retriever_span, tool_span
    from pipelines.telemetry import annotate, stage_span

    with stage_span("turn", session_id="bench", turn_id=turn_id, pipeline="dr", input=MESSAGES[1]["content"]) as turn:
        with stage_span("pre_guard", kind=SpanKind.GUARDRAIL) as pre:
            annotate(pre, guard_decision="pass", output=MESSAGES[1]["content"])
        with stage_span("orchestrate", role="orchestrator"):
            for step, decision in ((1, "get_order_details"), (2, "respond")):
                with stage_span("step", role="orchestrator", step=step) as s:
                    with llm_span("orchestrator", MESSAGES, model_id="smollm2-135m-instruct",
                                  params={"max_tokens": 96, "structured_output": {"kind": "json"}}) as llm:
                        for piece in ('{"decision": ', f'"{decision}"', "}"):
                            llm.add(piece)
                        llm.usage(420, 12)
                    annotate(s, decision=decision)
                    if step == 1:
                        guard_decision("mid", "pass", step=step)
                        with tool_span("get_order_details", {"order_id": "#W1000002"}, step=step) as t:
                            t.observation({"order_id": "#W1000002", "status": "pending", "items": ["a"] * 4}, ok=True)
        with retriever_span(MESSAGES[1]["content"]) as r:
            r.documents([{"id": "help.orders", "content": "Orders ship in two days.", "score": 3.0}])
        with stage_span("generate", role="generator"):
            with llm_span("generator", MESSAGES, model_id="smollm2-135m-instruct") as llm:
                for _ in range(24):
                    llm.add("word ")
            for sentence in ("Your order is pending.", "It ships soon."):
                with guard_span("post", text=sentence) as g:
                    g.decision("pass")
        annotate(turn, status="ok", output="Your order is pending. It ships soon.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--out", default=str(REPO / "results" / "bench_span_export.json"))
    ns = ap.parse_args()

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    import pipelines.telemetry as ptel
    from serve.telemetry import JsonlSpanExporter, flush_ms

    work = Path(tempfile.mkdtemp(prefix="tandem-span-bench-"))
    providers = {}
    for mode in ("sync", "batch"):
        exporter = JsonlSpanExporter(work / mode)
        proc = SimpleSpanProcessor(exporter) if mode == "sync" else BatchSpanProcessor(
            exporter, schedule_delay_millis=flush_ms(), max_export_batch_size=512)
        provider = TracerProvider()
        provider.add_span_processor(proc)
        providers[mode] = (provider, exporter)
    rows: dict[str, list[float]] = {"sync": [], "batch": []}
    for i in range(ns.warmup + ns.turns):
        for mode in ("sync", "batch") if i % 2 == 0 else ("batch", "sync"):
            ptel.tracer = providers[mode][0].get_tracer("tandem.pipelines")
            t0 = time.perf_counter()
            one_turn(f"t{i}")
            if i >= ns.warmup:
                rows[mode].append((time.perf_counter() - t0) * 1000)
    spans_per_turn = {}
    for mode, (provider, exporter) in providers.items():
        provider.shutdown()  # flushes the batch processor
        spans_per_turn[mode] = sum(1 for _ in exporter.path.open()) / (ns.warmup + ns.turns)
    shutil.rmtree(work, ignore_errors=True)  # the span files were only counted
    result = {mode: {"p50_ms": pct(v, 0.5), "p90_ms": pct(v, 0.9), "n": len(v)} for mode, v in rows.items()}
    result["ratio_sync_over_batch"] = {q: result["sync"][f"{q}_ms"] / result["batch"][f"{q}_ms"] for q in ("p50", "p90")}
    result["spans_per_turn"] = spans_per_turn
    print(f"span code on the turn's thread, per turn ({spans_per_turn['batch']:.0f} spans, {ns.turns} turns):")
    for mode in ("sync", "batch"):
        print(f"  {mode:6} p50 {result[mode]['p50_ms']:7.3f} ms   p90 {result[mode]['p90_ms']:7.3f} ms")
    print(f"  ratio  p50 {result['ratio_sync_over_batch']['p50']:7.2f}x    p90 {result['ratio_sync_over_batch']['p90']:7.2f}x")
    Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
    Path(ns.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
