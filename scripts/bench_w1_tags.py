"""W1's first narration token with short vs long section tags, side by side on one engine.

The tandem turn's first visible token is the W1 narration, which the engine can only start
after the intent, the sub-intent and the tags around them: every tag is grammar-forced text
that is still decoded one token at a time. ``pipeline.w1_tags: short`` spells the sections
``<I>…</I><S>…</S><N>…`` (10 tag tokens before the narration with SmolLM2's tokenizer) instead
of ``<INTENT>…</INTENT><SUB_INTENT>…</SUB_INTENT><NARRATION>…`` (21).

The bench starts the embedded app (real Ray Serve + vLLM on the CPU), builds the W1 call of
each tau2 opening exactly as the tandem turn builds it (the support pack's head, labels,
intent prior and grammar, the fixed opening as the reply's prefix, W1's engine priority) once
per tag set, and streams both through the model deployment's handle, interleaved per opening
(the order alternates). Per call, from the request: the Φ dispatch point (the sub-intent
closed), the first narration character, the narration's close; and whether both tag sets
chose the same (intent, sub-intent). Prints p50/p90 and the long/short ratios; writes JSON.

    python scripts/bench_w1_tags.py --limit 20 --out results/bench_w1_tags.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _pct(xs: list[float], q: float) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return round(xs[lo] + (xs[hi] - xs[lo]) * (k - lo), 1)


def _p(xs: list[float | None]) -> dict[str, Any]:
    vals = [x for x in xs if x is not None]
    return {"p50": _pct(vals, 0.5), "p90": _pct(vals, 0.9), "n": len(vals)}


def build_call(tags: str, text: str) -> tuple[Any, Any]:
    """The W1 call of the tandem turn for ``text`` (a first turn) with this tag set."""
    from pipelines.domains import load_domain
    from pipelines.tandem.perception import Perception
    from pipelines.tandem.prompts import orchestrator_head, perception_messages
    from pipelines.tandem.settings import TandemSettings

    settings = TandemSettings(w1_tags=tags)
    domain = load_domain("support")
    p = Perception(domain, None, None, settings, snapshot={}, caller=None, gate=None, counters=None,  # type: ignore[arg-type]
                   emit=lambda *a, **k: None)
    messages = perception_messages(orchestrator_head(domain, settings.tags), [], text)
    call, labels = p.call(messages, text)
    return call, (labels, settings.tags, p.opening)


async def one(client: Any, call: Any, meta: Any) -> dict[str, Any]:
    from pipelines.sgc.w1 import NarrationDelta, PerceptionParser, SubIntentParsed

    labels, tags, opening = meta
    parser = PerceptionParser(labels=labels, tags=tags)
    parser.feed(opening)
    out: dict[str, Any] = {"dispatch_ms": None, "first_narration_ms": None, "narration_closed_ms": None,
                           "intent": None, "sub_intent": None, "error": None}
    t0 = time.perf_counter()
    stream = client.stream("orchestrator", call)
    try:
        async for chunk in stream:
            now = (time.perf_counter() - t0) * 1000
            for ev in parser.feed(chunk):
                if isinstance(ev, SubIntentParsed):
                    out.update(dispatch_ms=round(now, 1), intent=ev.intent, sub_intent=ev.sub_intent)
                elif isinstance(ev, NarrationDelta) and ev.text.strip() and out["first_narration_ms"] is None:
                    out["first_narration_ms"] = round(now, 1)
            if parser.narration_closed:
                out["narration_closed_ms"] = round(now, 1)
                await stream.aclose()
                break
    except Exception as exc:  # a bad stream is a result of the bench, not its end
        out["error"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs" / "embedded.yaml"))
    ap.add_argument("--limit", type=int, default=20, help="tau2 openings measured")
    ap.add_argument("--warmup", type=int, default=2, help="openings run first, not measured")
    ap.add_argument("--tau2-dir", default=None)
    ap.add_argument("--out", default=str(REPO / "results" / "bench_w1_tags.json"))
    ns = ap.parse_args()

    import ray
    import yaml
    from ray import serve

    from pipelines.domains.support.replay import default_tau2_dir
    from serve.eval.suites import tau2_suite
    from serve.launch import start_app
    from serve.model_client import ServeModelClient

    base = Path(ns.tau2_dir) if ns.tau2_dir else default_tau2_dir()
    texts = [c.turns[0].text for c in tau2_suite(base, ns.warmup + ns.limit)]
    tmp = Path(tempfile.mkdtemp(prefix="bench-w1-tags-"))
    raw = yaml.safe_load(Path(ns.config).read_text())
    args = raw["applications"][0]["args"]
    args["store"] = {"kind": "sqlite", "path": str(tmp / "sessions.db")}
    args.setdefault("telemetry", {})["jsonl_dir"] = str(tmp / "telemetry")
    cfg = tmp / "app.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    from tests.integration.conftest import free_port

    ends = start_app(str(cfg), num_cpus=4, http_port=free_port(), grpc_port=free_port())
    rows: list[dict[str, Any]] = []
    try:
        from serve.deploy import wait_app_running

        wait_app_running(ends["app"], timeout_s=600)
        model_id = next(iter(args["models"].values()))["model_id"]
        handle = serve.get_deployment_handle(f"LLMServer:{model_id}", app_name=ends["app"])
        client = ServeModelClient({"orchestrator": (handle, model_id)})

        async def run() -> None:
            for i, text in enumerate(texts):
                order = ("short", "long") if i % 2 == 0 else ("long", "short")
                pair: dict[str, Any] = {"text": text, "warmup": i < ns.warmup}
                for tags in order:
                    call, meta = build_call(tags, text)
                    pair[tags] = await one(client, call, meta)
                rows.append(pair)
                s, lg = pair["short"], pair["long"]
                print(f"{i:2d} short {s['first_narration_ms']} ms  long {lg['first_narration_ms']} ms  "
                      f"{s['intent']}/{s['sub_intent']} vs {lg['intent']}/{lg['sub_intent']}", flush=True)

        asyncio.run(run())
    finally:
        serve.shutdown()
        ray.shutdown()
    measured = [r for r in rows if not r["warmup"]]
    summary: dict[str, Any] = {}
    for tags in ("short", "long"):
        summary[tags] = {k: _p([r[tags][k] for r in measured])
                         for k in ("dispatch_ms", "first_narration_ms", "narration_closed_ms")}
        summary[tags]["errors"] = sum(1 for r in measured if r[tags]["error"])
    ratios = {}
    for k in ("dispatch_ms", "first_narration_ms"):
        pairs = [(r["long"][k], r["short"][k]) for r in measured if r["long"][k] and r["short"][k]]
        ratios[f"long_over_short_{k}_p50"] = (round(statistics.median(a / b for a, b in pairs), 2)
                                              if pairs else None)
    same = sum(1 for r in measured if (r["short"]["intent"], r["short"]["sub_intent"])
               == (r["long"]["intent"], r["long"]["sub_intent"]))
    result = {"openings": len(measured), "summary": summary, "ratios": ratios,
              "same_labels": f"{same}/{len(measured)}", "loadavg_after": list(os.getloadavg()), "rows": rows}
    out = Path(ns.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
