"""W1's first narration token: long vs short section tags vs segmented decoding, side by side.

The tandem turn's first visible token is the W1 narration, which the engine can only start
after the intent, the sub-intent and the tags around them: in one grammar-constrained stream
every tag is forced text that is still decoded one token at a time. Three ways to spell it:

* ``long``     — one stream, ``<INTENT>…</INTENT><SUB_INTENT>…</SUB_INTENT><NARRATION>…`` (21 of
                 SmolLM2's tokens are tags before the narration); the tandem default;
* ``short``    — one stream, ``<I>…</I><S>…</S><N>…`` (10 tag tokens; ``pipeline.w1_tags: short``);
* ``segments`` — the long tags in three calls (``pipeline.w1_segments: true``): the intent label,
                 the sub-intent label, then the narration, each continuing the text so far as the
                 reply's prefix, so the tags ride in a prefill (a prefix-cache hit) and are never
                 decoded;
* ``parallel`` — the labels in segments and, beside them, the narration in its own call
                 (``pipeline.w1_parallel_narration: true``): the first narration token waits for one
                 prefill, not for the labels;
* ``lead``     — ``parallel`` with ``pipeline.w1_narration_lead_ms: 200``: the label calls start when
                 the narration's first word went out (or 200 ms passed), so the narration's prefill
                 and first tokens run alone.

And a reference beside them: ``prompting``, the prompting turn's one generator call for the same
opening (its system prompt, the request), whose first token is visible at once (no gate).

The bench starts the embedded app (real Ray Serve + vLLM on the CPU), builds the W1 call of
each tau2 opening exactly as the tandem turn builds it (the support pack's head, labels, intent
prior and grammar, the fixed opening as the reply's prefix, W1's engine priority) and runs it
once per variant through the model deployment's handle, interleaved per opening (the order
rotates). Per run, from the first request: the Φ dispatch point (the sub-intent closed), the
first narration character, the narration's close; and whether the variants chose the same
(intent, sub-intent) as ``long``. Prints p50/p90 and the per-opening ratios to ``long``;
writes JSON.

Each run's narration chunks are kept with their times, and replayed through the narration gate
(the support pack's narration judge, its product names) under both release policies:
``hold`` (``pipeline.narration_hold_words: 3``, 3 words behind the model), ``forming`` (unset:
every word no violation can still grow from) and ``complete`` (the default: ``forming`` with the
pack's narration completion, so "I'll" goes out at once and a promise after it is ended safely) —
the first *visible* narration word of the same decoded stream under each, the gate's own compute
time included.

    python scripts/bench_w1_tags.py --limit 20 --out results/bench_w1_tags.json
    python scripts/bench_w1_tags.py --variants long,segments,parallel
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


VARIANTS = {"long": ("long", False, False, 0.0), "short": ("short", False, False, 0.0),
            "segments": ("long", True, False, 0.0), "parallel": ("long", True, True, 0.0),
            "lead": ("long", True, True, 200.0)}


RELEASES = {"hold": {"forming": False, "hold_words": 3}, "forming": {"forming": True, "hold_words": 3},
            "complete": {"forming": True, "hold_words": 3}}


async def visible_at(chunks: list[tuple[float, str]], names: list[str], policy: str) -> float | None:
    """When the narration gate under ``policy`` first releases a word of this chunk stream (ms)."""
    from pipelines.counters import Counters
    from pipelines.domains.support.texts import SUPPORT_TEXTS
    from pipelines.gate import NarrationJudge, SentenceGate
    from pipelines.guardrails.post import SentenceSplitter

    ending = SUPPORT_TEXTS.narration_completion if policy == "complete" else None
    gate = SentenceGate([NarrationJudge(names, completion=ending)], Counters(), lambda *a, **k: None,
                        stage="narration", safe="…")
    splitter, spent = SentenceSplitter(), 0.0
    for at, chunk in chunks:
        t = time.perf_counter()
        out = [await gate.close(s) for s in splitter.feed(chunk)]
        partial = splitter.pending.lstrip()
        if partial:
            out.append(await gate.stream(partial, **RELEASES[policy]))
        spent += (time.perf_counter() - t) * 1000
        if any(o and o.strip() for o in out):
            return round(at + spent, 1)
    t = time.perf_counter()
    out = [await gate.close(s) for s in splitter.flush()]
    spent += (time.perf_counter() - t) * 1000
    return round(chunks[-1][0] + spent, 1) if chunks and any(o and o.strip() for o in out) else None


def _names(text: str) -> list[str]:
    """What the tandem turn's narration judge refuses on a first turn: products, names the user typed."""
    from pipelines.domains.support.candidates import extract_user_candidates
    from pipelines.domains.support.generator import PRODUCT_TEMPLATES

    typed = extract_user_candidates(text)
    return list(PRODUCT_TEMPLATES) + typed.get("first_name", []) + typed.get("last_name", [])


def build_call(variant: str, text: str, client: Any = None) -> tuple[Any, Any]:
    """The W1 call of the tandem turn for ``text`` (a first turn) in this variant, and its stream."""
    tags, segments, parallel, lead = VARIANTS[variant]
    from pipelines.core.kernels import tables_holder
    from pipelines.core.perception import Perception
    from pipelines.counters import Counters
    from pipelines.domains import load_domain
    from pipelines.sgc.snapshot import Snapshot
    from pipelines.tandem.decide import allowed_labels, w1_config
    from pipelines.tandem.prompts import narration_messages, orchestrator_head, perception_messages
    from pipelines.tandem.settings import TandemSettings

    settings = TandemSettings(w1_tags=tags, w1_segments=segments, w1_parallel_narration=parallel,
                              w1_narration_lead_ms=lead)
    domain = load_domain("support")
    labels = allowed_labels(domain, text)

    class Timed(Perception):
        """The tandem W1 with a note of when the labels closed, and the narration's chunks kept with their
        times (from the W1 start)."""

        t0 = 0.0

        def _on_sub_intent(self, ev: Any) -> None:
            self.labels_at = (ev.intent, ev.sub_intent, round((time.perf_counter() - self.t0) * 1000, 1))

        def _narration_alone(self, call: Any, user_text: str) -> Any:
            inner = super()._narration_alone(call, user_text)

            async def kept() -> Any:
                async for chunk in inner:
                    self.chunks.append((round((time.perf_counter() - self.t0) * 1000, 1), chunk))
                    yield chunk
            self.chunks: list[tuple[float, str]] = []
            return kept()

    gate = None
    if parallel:  # the turn's own W1 code runs, with the default narration gate (the pack's completion)
        from pipelines.gate import NarrationJudge, SentenceGate

        judge = NarrationJudge(_names(text), completion=domain.texts.narration_completion)
        gate = SentenceGate([judge], Counters(), lambda *a, **k: None, stage="narration", safe=domain.texts.safe_ack)
    p: Any = (Timed if parallel else Perception)(
        client, w1_config(settings), labels=labels, tools=domain.registry.names(),
        phi=tables_holder(domain).active.phi, snapshot=Snapshot.of({}), counters=Counters(),
        emit=lambda *a, **k: None, prefix="tandem", dispatch=lambda step: None, gate=gate,
        safe_ack=domain.texts.safe_ack, narration=narration_messages)
    messages = perception_messages(orchestrator_head(domain, settings.tags), [], text)
    call = p.call(messages)

    def stream() -> Any:
        return p._segments(call) if segments else client.stream("orchestrator", call)

    if parallel:
        return call, (p, labels, text)
    return call, (labels, settings.tags, p.opening, stream)


async def one_parallel(call: Any, meta: Any) -> dict[str, Any]:
    """The ``parallel`` / ``lead`` variants: the tandem turn's own W1 code (narration through the default
    gate, the label pair beside it, started as ``w1_narration_lead_ms`` says); ``visible_live_ms`` is when
    the gate released the first word during the run."""
    from pipelines.guardrails.post import SentenceSplitter

    p, labels, text = meta
    out: dict[str, Any] = {"dispatch_ms": None, "first_narration_ms": None, "narration_closed_ms": None,
                           "visible_live_ms": None, "intent": None, "sub_intent": None, "error": None}
    p.t0 = t0 = time.perf_counter()
    try:
        async for delta in p._parallel(call, SentenceSplitter(), text):
            if delta.text.strip() and out["visible_live_ms"] is None:
                out["visible_live_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out["intent"], out["sub_intent"], out["dispatch_ms"] = p.labels_at
    except Exception as exc:  # a bad stream is a result of the bench, not its end
        out["error"] = f"{type(exc).__name__}: {exc}"[:200]
    out["chunks"] = list(p.chunks)
    out["narration"] = "".join(c for _, c in p.chunks)
    firsts = [at for at, c in p.chunks if c.strip()]
    out["first_narration_ms"] = firsts[0] if firsts else None
    out["narration_closed_ms"] = p.chunks[-1][0] if p.chunks else None
    return out


async def one_prompting(client: Any, text: str) -> dict[str, Any]:
    """The prompting turn's one generator call for ``text`` (a first turn), as that pipeline builds it."""
    from types import SimpleNamespace

    from pipelines.annex.prompting import PromptingPipeline, PromptingSettings
    from pipelines.registry import DEFAULT_SYSTEM_PROMPT

    ctx = SimpleNamespace(request=SimpleNamespace(text=text, locale="en-US"), history=[])
    call = PromptingPipeline(client, PromptingSettings(system_prompt=DEFAULT_SYSTEM_PROMPT)).build_call(ctx)
    out: dict[str, Any] = {"first_token_ms": None, "error": None}
    t0 = time.perf_counter()
    stream = client.stream("generator", call)
    try:
        async for chunk in stream:
            if chunk.strip():
                out["first_token_ms"] = round((time.perf_counter() - t0) * 1000, 1)
                break
    except Exception as exc:  # a bad stream is a result of the bench, not its end
        out["error"] = f"{type(exc).__name__}: {exc}"[:200]
    finally:
        await stream.aclose()
    return out


async def one(client: Any, call: Any, meta: Any) -> dict[str, Any]:
    from pipelines.sgc.w1 import NarrationDelta, PerceptionParser, SubIntentParsed

    labels, tags, opening, make_stream = meta
    parser = PerceptionParser(labels=labels, tags=tags)
    parser.feed(opening)
    out: dict[str, Any] = {"dispatch_ms": None, "first_narration_ms": None, "narration_closed_ms": None,
                           "intent": None, "sub_intent": None, "error": None, "chunks": []}
    t0 = time.perf_counter()
    stream = make_stream()
    try:
        async for chunk in stream:
            now = (time.perf_counter() - t0) * 1000
            for ev in parser.feed(chunk):
                if isinstance(ev, SubIntentParsed):
                    out.update(dispatch_ms=round(now, 1), intent=ev.intent, sub_intent=ev.sub_intent)
                elif isinstance(ev, NarrationDelta):
                    out["narration"] = out.get("narration", "") + ev.text
                    out["chunks"].append((round(now, 1), ev.text))
                    if ev.text.strip() and out["first_narration_ms"] is None:
                        out["first_narration_ms"] = round(now, 1)
            if parser.narration_closed:
                out["narration_closed_ms"] = round(now, 1)
                await stream.aclose()
                break
    except Exception as exc:  # a bad stream is a result of the bench, not its end
        out["error"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def bench_config(raw: dict[str, Any], work: Path) -> dict[str, Any]:
    """The bench's app config: ``raw`` (a Serve file) with a private session store and telemetry folder."""
    args = raw["applications"][0]["args"]
    args["store"] = {"kind": "sqlite", "path": str(work / "sessions.db")}
    args.setdefault("telemetry", {})["jsonl_dir"] = str(work / "telemetry")
    return raw


async def measure(client: Any, texts: list[str], variants: list[str], warmup: int) -> list[dict[str, Any]]:
    """Every opening once per variant and once through the prompting call, the order rotating per opening;
    each run's chunks replayed through the narration gate under every release policy."""
    rows: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        runs = [*variants, "prompting"]
        order = runs[i % len(runs):] + runs[:i % len(runs)]  # rotate who goes first
        pair: dict[str, Any] = {"text": text, "warmup": i < warmup}
        for variant in order:
            if variant == "prompting":
                pair[variant] = await one_prompting(client, text)
                continue
            call, meta = build_call(variant, text, client)
            run_one = one_parallel(call, meta) if VARIANTS[variant][2] else one(client, call, meta)
            pair[variant] = await run_one
            for policy in RELEASES:
                pair[variant][f"visible_{policy}_ms"] = await visible_at(pair[variant]["chunks"], _names(text), policy)
        rows.append(pair)
        print(f"{i:2d} " + "  ".join(f"{v} {pair[v]['first_narration_ms']} ms {pair[v]['intent']}/"
                                     f"{pair[v]['sub_intent']}" for v in variants), flush=True)
    return rows


def summarize(rows: list[dict[str, Any]], variants: list[str]) -> dict[str, Any]:
    """The measured openings (warm-up left out): p50 / p90 per variant, the ratios, the labels agreement."""
    measured = [r for r in rows if not r["warmup"]]
    summary: dict[str, Any] = {}
    for v in variants:
        summary[v] = {k: _p([r[v].get(k) for r in measured]) for k in ("dispatch_ms", "first_narration_ms",
                                                                     "narration_closed_ms", "visible_hold_ms",
                                                                     "visible_forming_ms", "visible_complete_ms",
                                                                     "visible_live_ms")}
        pairs = [(r[v]["visible_hold_ms"], r[v]["visible_forming_ms"]) for r in measured
                 if r[v]["visible_hold_ms"] and r[v]["visible_forming_ms"]]
        summary[v]["hold_over_forming_visible_p50"] = (round(statistics.median(a / b for a, b in pairs), 2)
                                                       if pairs else None)
        summary[v]["errors"] = sum(1 for r in measured if r[v]["error"])
    summary["prompting"] = {"first_token_ms": _p([r["prompting"]["first_token_ms"] for r in measured]),
                            "errors": sum(1 for r in measured if r["prompting"]["error"])}
    ratios = {}
    for v in variants:  # the first visible narration word over the prompting turn's first token, per opening
        pairs = [(r[v]["visible_complete_ms"], r["prompting"]["first_token_ms"]) for r in measured
                 if r[v]["visible_complete_ms"] and r["prompting"]["first_token_ms"]]
        ratios[f"{v}_visible_complete_over_prompting_p50"] = (round(statistics.median(a / b for a, b in pairs), 2)
                                                              if pairs else None)
    same = {}
    for v in variants:
        if v == "long":
            continue
        for k in ("dispatch_ms", "first_narration_ms"):
            pairs = [(r["long"][k], r[v][k]) for r in measured if r["long"][k] and r[v][k]]
            ratios[f"long_over_{v}_{k}_p50"] = (round(statistics.median(a / b for a, b in pairs), 2)
                                                if pairs else None)
        n = sum(1 for r in measured if (r[v]["intent"], r[v]["sub_intent"]) == (r["long"]["intent"],
                                                                               r["long"]["sub_intent"]))
        same[v] = f"{n}/{len(measured)}"
    return {"openings": len(measured), "summary": summary, "ratios": ratios,
            "same_labels_as_long": same, "loadavg_after": list(os.getloadavg()), "rows": rows}


def write_result(result: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs" / "embedded.yaml"))
    ap.add_argument("--limit", type=int, default=20, help="tau2 openings measured")
    ap.add_argument("--warmup", type=int, default=2, help="openings run first, not measured")
    ap.add_argument("--tau2-dir", default=None)
    ap.add_argument("--variants", default="long,segments,parallel", help=f"comma-separated: {', '.join(VARIANTS)}")
    ap.add_argument("--out", default=str(REPO / "results" / "bench_w1_tags.json"))
    ns = ap.parse_args(argv)
    variants = [v for v in ns.variants.split(",") if v]
    if "long" not in variants or any(v not in VARIANTS for v in variants):
        ap.error(f"--variants must include long (the reference) and name only {', '.join(VARIANTS)}")

    import ray
    import yaml
    from ray import serve

    from pipelines.domains.support.replay import default_tau2_dir
    from serve.eval.suites import tau2_suite
    from serve.launch import start_app
    from serve.loadtest.cli import free_port
    from serve.model_client import ServeModelClient

    base = Path(ns.tau2_dir) if ns.tau2_dir else default_tau2_dir()
    texts = [c.turns[0].text for c in tau2_suite(base, ns.warmup + ns.limit)]
    tmp = Path(tempfile.mkdtemp(prefix="bench-w1-tags-"))
    raw = bench_config(yaml.safe_load(Path(ns.config).read_text()), tmp)
    args = raw["applications"][0]["args"]
    cfg = tmp / "app.yaml"
    cfg.write_text(yaml.safe_dump(raw))

    ends = start_app(str(cfg), num_cpus=4, http_port=free_port(), grpc_port=free_port())
    rows: list[dict[str, Any]] = []
    try:
        from serve.deploy import wait_app_running

        wait_app_running(ends["app"], timeout_s=600)
        model_id = next(iter(args["models"].values()))["model_id"]
        handle = serve.get_deployment_handle(f"LLMServer:{model_id}", app_name=ends["app"])
        client = ServeModelClient({"orchestrator": (handle, model_id), "generator": (handle, model_id)})
        rows = asyncio.run(measure(client, texts, variants, ns.warmup))
    finally:
        serve.shutdown()
        ray.shutdown()
    write_result(summarize(rows, variants), Path(ns.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
