"""Orchestrator-step latency P50/P90 on ONE NVIDIA GPU (H100/H200 class), vLLM variants side by side.

One orchestrator step of the DR pipeline is one chat request: a system prompt (tools, cards,
policy) plus a short user request with the session state and prior observations, answered
with ONE JSON decision constrained by a JSON schema (structured outputs), greedy
(temperature 0). This script measures that step's latency with a small local model, for
these engine variants, one after the other in one run, each in its own subprocess (the GPU
is freed between them):

  baseline         async_scheduling=False (recent vLLM, e.g. 0.32, turns it ON by default; forced
                   off here so its gain is measured), default attention backend, no spec decode
  async_fi         async_scheduling=True + attention backend FLASHINFER
  async_fi_ngram   async_fi + n-gram (prompt lookup) speculative decoding; method ngram_gpu
                   when the installed vLLM has it (it runs under async scheduling), else
                   ngram with async scheduling off (vLLM refuses the combination) — the row says
  async_fi_eagle3  async_fi + EAGLE-3 draft (only with --eagle3-draft /path/to/draft-folder;
                   the draft must be trained for exactly this target model)

For each variant and each concurrency level C it sends N requests (C in flight at a time,
after a warm-up), and reports per-step latency P50/P90/P99, time to first token, prompt and
output tokens, decode tokens/s per request, requests/s, the share of outputs that parse as
a decision, the share identical to the baseline's output for the same request (greedy
sanity check), and the speculative acceptance rate when vLLM exposes it. Ratios are
baseline / variant (> 1 = faster). Writes everything as JSON.

Two more experiments follow on the async_fi engine (``--experiments``, companion module
``device_prefix_priority.py``):

  prefix           sessions of 3 turns x 3 steps in two prompt layouts: the system message
                   rewritten per step (eligible tools + state, the ``dr`` layout) vs append-only
                   (a fixed head, each step appended, the ``tandem`` layout); prefix-cache hit
                   rate per request (vLLM's num_cached_tokens, checked against its
                   prefix_cache_queries / hits counters) and per-step TTFT, side by side
  priority         closed-loop turns at --priority-concurrency over a smaller batch
                   (--priority-max-num-seqs): the first call at priority -1, later calls at 0,
                   on an fcfs engine and on a priority-scheduled one; first-call TTFT p50/p90

The decision schema is the dr rung's (``pipelines.core.decisions.decision_schema``) over the support domain's
tools when this repository is importable (run from the repo root), otherwise a small inline
schema of the same shape (anyOf of const-discriminated branches).

Requirements: the CUDA build of vLLM (``pip install vllm``; FlashInfer for the FLASHINFER
backend: ``pip install flashinfer-python`` if vLLM does not bring it), one GPU. The model is
a LOCAL folder (no hub download is assumed): a Hugging Face checkpoint folder with
``config.json``, tokenizer and weights, e.g. Qwen3-8B, Qwen2.5-7B-Instruct or
Llama-3.1-8B-Instruct (EAGLE-3 drafts exist for some of these, e.g.
yuhuili/EAGLE3-LLaMA3.1-Instruct-8B for Llama-3.1-8B-Instruct; download both beforehand).

    python scripts/device_orchestrator_p90.py --model /models/Qwen3-8B
    python scripts/device_orchestrator_p90.py --model /models/Llama-3.1-8B-Instruct \\
        --eagle3-draft /models/EAGLE3-LLaMA3.1-Instruct-8B --requests 200 --concurrency 1,8,32
    python scripts/device_orchestrator_p90.py --model /models/Qwen3-8B --dry-run   # no GPU needed
    python scripts/device_orchestrator_p90.py --model /models/Qwen3-8B --dry-run --check-config

Exit status: 0 ok; 2 bad arguments; 3 no GPU / no CUDA vLLM; 4 every variant failed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("baseline", "async_fi", "async_fi_ngram", "async_fi_eagle3")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its companions: device_prompts, device_prefix_priority
from device_prompts import (  # noqa: E402
    REQUESTS,
    build_prompts,
    decision_schema_and_tools,
    policy_text,
    shared_head,
)

# ---- variants ------------------------------------------------------------------------------------


def ngram_method() -> str | None:
    """ngram_gpu when the installed vLLM knows it, ngram when it does not, None without vLLM."""
    try:
        import vllm.config.speculative as spec
    except Exception:
        return None
    from typing import get_args

    types = getattr(spec, "NgramGPUTypes", None)
    return "ngram_gpu" if types is not None and "ngram_gpu" in get_args(types) else "ngram"


def variant_kwargs(name: str, ns: argparse.Namespace, ngram: str) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "model": str(ns.model), "tokenizer": str(ns.model), "dtype": ns.dtype, "seed": 0,
        "max_model_len": ns.max_model_len, "gpu_memory_utilization": ns.gpu_memory_utilization,
        "max_num_seqs": max(ns.concurrency_list), "tensor_parallel_size": ns.tp,
        "enable_prefix_caching": not ns.no_prefix_caching, "generation_config": "vllm",
        "disable_log_stats": False, "trust_remote_code": ns.trust_remote_code,
    }
    if ns.structured_backend:
        kw["structured_outputs_config"] = {"backend": ns.structured_backend}
    if name == "baseline":
        kw["async_scheduling"] = False
        return kw
    kw["async_scheduling"] = True
    kw["attention_config"] = {"backend": "FLASHINFER"}
    if name == "async_fi_ngram":
        kw["speculative_config"] = {"method": ngram, "num_speculative_tokens": ns.ngram_tokens,
                                    "prompt_lookup_max": 4, "prompt_lookup_min": 2}
        if ngram == "ngram":
            kw["async_scheduling"] = False  # vLLM refuses CPU n-gram drafting under async scheduling
    elif name == "async_fi_eagle3":
        kw["speculative_config"] = {"method": "eagle3", "model": str(ns.eagle3_draft),
                                    "num_speculative_tokens": ns.eagle3_tokens}
    return kw


# ---- the worker (one variant, one process) -------------------------------------------------------


def pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


SPEC_COUNTERS = ("vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens")
PREFIX_COUNTERS = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits")


def _counters(names: tuple[str, ...] = SPEC_COUNTERS) -> dict[str, float]:
    """The engine's own counters (summed over engines), read in process."""
    try:
        from vllm.v1.metrics.reader import Counter, get_metrics_snapshot

        out: dict[str, float] = {}
        for m in get_metrics_snapshot():
            if isinstance(m, Counter) and m.name in names:
                out[m.name] = out.get(m.name, 0.0) + float(m.value)
        return out
    except Exception:
        return {}


async def _run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    import device_prefix_priority as dpp
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.sampling_params import StructuredOutputsParams
    from vllm.v1.engine.async_llm import AsyncLLM

    t0 = time.perf_counter()
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**spec["engine_kwargs"]))
    start_s = time.perf_counter() - t0
    cfg = engine.vllm_config
    resolved = {
        "async_scheduling": getattr(cfg.scheduler_config, "async_scheduling", None),
        "attention_backend": str(getattr(getattr(cfg, "attention_config", None), "backend", None)),
        "speculative": (getattr(cfg.speculative_config, "method", None) if cfg.speculative_config else None),
    }
    tok = engine.tokenizer if hasattr(engine, "tokenizer") else None
    if tok is None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(spec["engine_kwargs"]["tokenizer"])

    def render(msgs: list[dict[str, str]]) -> str:
        try:
            return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, enable_thinking=False)
        except TypeError:
            return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)

    params = SamplingParams(temperature=0.0, max_tokens=spec["max_tokens"], seed=0,
                            structured_outputs=StructuredOutputsParams(json=spec["schema"]))
    experiment = spec.get("experiment", "latency")
    if experiment != "latency":
        if experiment == "prefix":
            res = await dpp.run_prefix(engine, render, params, spec, lambda: _counters(PREFIX_COUNTERS), pct)
        else:
            res = await dpp.run_priority(engine, render, lambda n: SamplingParams(
                temperature=0.0, max_tokens=n, seed=0, ignore_eos=True), spec, pct)
        engine.shutdown()
        engine = None
        gc.collect()
        return {"engine_start_s": start_s, "resolved": resolved, "experiment": experiment, **res}
    prompts = [render(m) for m in spec["prompts"]]
    counter = 0

    async def one(i: int) -> dict[str, Any]:
        nonlocal counter
        counter += 1
        rid = f"r{counter}"
        t = time.perf_counter()
        ttft = None
        final = None
        async for out in engine.generate(prompts[i], params, rid):
            if ttft is None and out.outputs and out.outputs[0].token_ids:
                ttft = time.perf_counter() - t
            final = out
        lat = time.perf_counter() - t
        text = final.outputs[0].text if final and final.outputs else ""
        n_out = len(final.outputs[0].token_ids) if final and final.outputs else 0
        try:
            ok = isinstance(json.loads(text), dict) and isinstance(json.loads(text).get("decision"), str)
        except ValueError:
            ok = False
        return {"i": i, "latency_s": lat, "ttft_s": ttft if ttft is not None else lat, "prompt_tokens":
                len(final.prompt_token_ids or []) if final else 0, "output_tokens": n_out, "text": text, "valid": ok}

    async def level(c: int, idx: list[int]) -> tuple[list[dict[str, Any]], float]:
        sem = asyncio.Semaphore(c)

        async def guarded(i: int) -> dict[str, Any]:
            async with sem:
                return await one(i)

        t = time.perf_counter()
        rows = await asyncio.gather(*(guarded(i) for i in idx))
        return list(rows), time.perf_counter() - t

    # Distinct prompts for the warm-up and for each level, so that no measured request finds its
    # own prompt in the prefix cache (the shared system part is cached, as in production).
    n, w = spec["n"], spec["warmup"]
    if w:
        await level(min(8, max(spec["concurrency"])), list(range(w)))  # warm-up (CUDA graphs, grammar)
    levels = []
    for li, c in enumerate(spec["concurrency"]):
        before = _counters()
        rows, wall = await level(c, list(range(w + li * n, w + (li + 1) * n)))
        after = _counters()
        draft = after.get("vllm:spec_decode_num_draft_tokens", 0) - before.get("vllm:spec_decode_num_draft_tokens", 0)
        acc = after.get("vllm:spec_decode_num_accepted_tokens", 0) - before.get(
            "vllm:spec_decode_num_accepted_tokens", 0)
        lat = [r["latency_s"] for r in rows]
        ttft = [r["ttft_s"] for r in rows]
        dec = [(r["output_tokens"] - 1) / (r["latency_s"] - r["ttft_s"]) for r in rows
               if r["output_tokens"] > 1 and r["latency_s"] > r["ttft_s"]]
        levels.append({
            "concurrency": c, "n": len(rows), "wall_s": wall, "req_per_s": len(rows) / wall if wall else None,
            "p50_s": pct(lat, 0.5), "p90_s": pct(lat, 0.9), "p99_s": pct(lat, 0.99), "mean_s": statistics.fmean(lat),
            "ttft_p50_s": pct(ttft, 0.5), "ttft_p90_s": pct(ttft, 0.9),
            "prompt_tokens_mean": statistics.fmean(r["prompt_tokens"] for r in rows),
            "output_tokens_mean": statistics.fmean(r["output_tokens"] for r in rows),
            "output_tokens_p90": pct([float(r["output_tokens"]) for r in rows], 0.9),
            "decode_tok_s_p50": pct(dec, 0.5), "valid_decisions": sum(r["valid"] for r in rows) / len(rows),
            "spec_acceptance": (acc / draft) if draft else None,
            "outputs": [r["text"] for r in sorted(rows, key=lambda r: r["i"])],
        })
    engine.shutdown()
    engine = None  # drop it so its __del__ runs now, not at interpreter exit
    gc.collect()
    return {"engine_start_s": start_s, "resolved": resolved, "levels": levels}


def worker_main(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    try:
        res = asyncio.run(_run_worker(spec))
        res["ok"] = True
    except Exception as exc:  # report the variant as failed, keep the run going
        import traceback

        res = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]}
    Path(out_path).write_text(json.dumps(res))
    return 0


# ---- the driver --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="LOCAL model folder (config.json, tokenizer, weights); required")
    ap.add_argument("--eagle3-draft", type=Path, default=None,
                    help="LOCAL EAGLE-3 draft folder for this model; adds the async_fi_eagle3 variant")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma list from {', '.join(VARIANTS)} (eagle3 needs --eagle3-draft)")
    ap.add_argument("--requests", type=int, default=120, help="requests per concurrency level (N)")
    ap.add_argument("--concurrency", default="1,4,16", help="comma list of in-flight requests, e.g. 1,8,32")
    ap.add_argument("--warmup", type=int, default=16, help="warm-up requests per variant (not measured)")
    ap.add_argument("--max-tokens", type=int, default=160, help="cap on a decision's tokens (the app's default)")
    ap.add_argument("--shared-tokens", type=int, default=1500,
                    help="approx. tokens of the shared system prompt (tools, cards, policy; prefix-cacheable)")
    ap.add_argument("--unique-tokens", type=int, default=300,
                    help="approx. tokens of per-request history before the request, state and observations")
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--tp", type=int, default=1,
                    help="tensor-parallel size (1 on the one-GPU machine; 8 to measure the production "
                         "orchestrator itself on an 8-GPU node)")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--ngram-tokens", type=int, default=4, help="speculative tokens for n-gram")
    ap.add_argument("--eagle3-tokens", type=int, default=3, help="speculative tokens for EAGLE-3")
    ap.add_argument("--structured-backend", default=None,
                    help="vLLM structured-outputs backend (default: vLLM's auto; the app's schema has "
                         "maxLength bounds, which auto serves with guidance)")
    ap.add_argument("--no-prefix-caching", action="store_true")
    ap.add_argument("--trust-remote-code", action="store_true")
    ap.add_argument("--experiments", default="latency,prefix,priority",
                    help="comma list: latency (the variants), prefix (rewrite vs append-only layouts: "
                         "prefix-cache hits and per-step TTFT), priority (first-call TTFT, fcfs vs priority)")
    ap.add_argument("--prefix-sessions", type=int, default=16)
    ap.add_argument("--prefix-turns", type=int, default=3)
    ap.add_argument("--prefix-steps", type=int, default=3)
    ap.add_argument("--prefix-concurrency", type=int, default=4, help="sessions in flight")
    ap.add_argument("--priority-concurrency", type=int, default=32, help="turns in flight")
    ap.add_argument("--priority-turns", type=int, default=128)
    ap.add_argument("--priority-max-num-seqs", type=int, default=8,
                    help="the engine's batch in the priority experiment (< concurrency, so requests queue)")
    ap.add_argument("--variant-timeout-s", type=int, default=1800, help="per variant (engine start + all levels)")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "device_orchestrator_p90.json")
    ap.add_argument("--dry-run", action="store_true",
                    help="validate arguments, print the plan and a sample prompt; needs no GPU and no vLLM")
    ap.add_argument("--check-config", action="store_true",
                    help="with --dry-run: also build each variant's engine config with vLLM's own builder "
                         "(works with the CPU build of vLLM; the CPU platform rewrites async_scheduling)")
    ap.add_argument("--_worker", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def validate(ns: argparse.Namespace, ap_error: Any) -> None:
    if ns.model is None:
        ap_error("--model /path/to/local/model-folder is required")
    if not (ns.model / "config.json").is_file():
        ap_error(f"--model {ns.model}: not a local model folder (no config.json); this script never downloads")
    try:
        ns.concurrency_list = sorted({int(c) for c in ns.concurrency.split(",") if c.strip()})
    except ValueError:
        ap_error(f"--concurrency {ns.concurrency!r}: expected a comma list of integers")
    if not ns.concurrency_list or min(ns.concurrency_list) < 1:
        ap_error("--concurrency: every level must be >= 1")
    ns.variant_list = [v.strip() for v in ns.variants.split(",") if v.strip()]
    unknown = [v for v in ns.variant_list if v not in VARIANTS]
    if unknown:
        ap_error(f"--variants: unknown {unknown}; choose from {', '.join(VARIANTS)}")
    if "baseline" not in ns.variant_list:
        ap_error("--variants must include baseline (ratios are against it)")
    if ns.eagle3_draft is not None:
        if not (ns.eagle3_draft / "config.json").is_file():
            ap_error(f"--eagle3-draft {ns.eagle3_draft}: not a local folder with config.json "
                     "(a hub id would be fetched; give a folder)")
    else:
        ns.variant_list = [v for v in ns.variant_list if v != "async_fi_eagle3"]
    ns.experiment_list = [e.strip() for e in ns.experiments.split(",") if e.strip()]
    if not ns.experiment_list or set(ns.experiment_list) - {"latency", "prefix", "priority"}:
        ap_error(f"--experiments {ns.experiments!r}: a comma list of latency, prefix, priority")
    for name in ("prefix_sessions", "prefix_turns", "prefix_steps", "prefix_concurrency", "priority_concurrency",
                 "priority_turns", "priority_max_num_seqs"):
        if getattr(ns, name) < 1:
            ap_error(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("requests", "max_tokens", "max_model_len", "tp"):
        if getattr(ns, name) < 1:
            ap_error(f"--{name.replace('_', '-')} must be >= 1")
    if ns.warmup < 0 or ns.shared_tokens < 0 or ns.unique_tokens < 0:
        ap_error("--warmup, --shared-tokens and --unique-tokens must be >= 0")
    if not 0.1 <= ns.gpu_memory_utilization <= 0.98:
        ap_error("--gpu-memory-utilization must be in [0.1, 0.98]")
    if ns.ngram_tokens < 1 or ns.eagle3_tokens < 1:
        ap_error("--ngram-tokens / --eagle3-tokens must be >= 1")
    if (ns.shared_tokens + ns.unique_tokens + ns.max_tokens + 200) > ns.max_model_len:
        ap_error("--max-model-len is too small for the prompt sizes asked")


def check_configs(ns: argparse.Namespace, ngram: str) -> int:
    """Build every variant's VllmConfig offline; returns how many were refused."""
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs
    except ImportError as exc:
        print(f"  --check-config needs vLLM installed ({exc})", file=sys.stderr)
        return 1
    bad = 0
    configs = [(v, variant_kwargs(v, ns, ngram)) for v in ns.variant_list]
    configs += [(name, spec["engine_kwargs"]) for name, spec in experiment_specs(ns, {}, [])]
    for v, kwargs in configs:
        try:
            AsyncEngineArgs(**kwargs).create_engine_config()
            print(f"  {v:16} engine config ok")
        except Exception as exc:
            bad += 1
            print(f"  {v:16} engine config REFUSED: {type(exc).__name__}: {str(exc)[:300]}")
    return bad


def gpu_check(tp: int) -> str | None:
    """None when enough CUDA GPUs and the CUDA build of vLLM are usable, else the reason."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible (torch.cuda.is_available() is False)"
    if torch.cuda.device_count() < tp:
        return f"--tp {tp} needs {tp} GPUs, {torch.cuda.device_count()} visible"
    try:
        import vllm  # noqa: F401
        from vllm.platforms import current_platform
    except ImportError as exc:
        return f"vLLM is not importable ({exc})"
    if not current_platform.is_cuda():
        return f"vLLM's platform is {type(current_platform).__name__}, not CUDA (a CPU build is installed?)"
    return None


def fmt(x: float | None, nd: int = 3) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def report_experiments(extra: dict[str, Any]) -> None:
    """Print the prefix and priority experiments side by side."""
    p = extra.get("prefix")
    if p and p.get("ok"):
        print("\nprefix reuse (measured: steps >= 2 of a turn, every step of turns >= 2)")
        for layout in ("rewrite", "append"):
            m = p[layout]["measured"]
            print(f"  {layout:8} hit rate {fmt(m['hit_rate'], 3)}  step TTFT p50 {fmt(m['ttft_ms']['p50'], 1)} ms  "
                  f"p90 {fmt(m['ttft_ms']['p90'], 1)} ms  engine counters {p[layout]['engine_counters']}")
        print(f"  TTFT rewrite / append: p50 {fmt(p['ratio_ttft_p50_rewrite_over_append'], 2)}  "
              f"p90 {fmt(p['ratio_ttft_p90_rewrite_over_append'], 2)}")
    elif p:
        print(f"\nprefix FAILED: {p.get('error', '')[:200]}")
    rows = {k.removeprefix("priority_"): v for k, v in extra.items() if k.startswith("priority_")}
    if rows:
        print("\npriority (first call at -1, later calls at 0)")
        for policy, r in rows.items():
            if not r.get("ok"):
                print(f"  {policy:8} FAILED: {r.get('error', '')[:200]}")
                continue
            f, later = r["first_call_ttft_ms"], r["later_call_ttft_ms"]
            print(f"  {policy:8} first-call TTFT p50 {fmt(f['p50'], 1)} p90 {fmt(f['p90'], 1)} ms; later calls p50 "
                  f"{fmt(later['p50'], 1)} p90 {fmt(later['p90'], 1)} ms; turn p90 {fmt(r['turn_ms']['p90'], 0)} ms")


def report(results: dict[str, Any], meta: dict[str, Any], out_path: Path, extra: dict[str, Any] | None = None) -> None:
    """Print the side-by-side table (ratios against baseline per concurrency level) and write JSON."""
    base = results.get("baseline", {})
    base_levels = {lv["concurrency"]: lv for lv in base.get("levels", [])} if base.get("ok") else {}
    print()
    print(f"{'variant':16} {'C':>3} {'P50 s':>7} {'P90 s':>7} {'P99 s':>7} {'TTFT90':>7} {'in tok':>7} {'out tok':>7} "
          f"{'dec t/s':>8} {'req/s':>7} {'valid':>6} {'=base':>6} {'accept':>6} {'xP50':>6} {'xP90':>6}")
    for v, res in results.items():
        if not res.get("ok"):
            print(f"{v:16} FAILED: {res.get('error', '')[:110]}")
            continue
        for lv in res["levels"]:
            b = base_levels.get(lv["concurrency"])
            same = None
            if b:
                same = sum(x == y for x, y in zip(lv["outputs"], b["outputs"], strict=False)) / max(1, len(lv["outputs"]))
                lv["identical_to_baseline"] = same
                lv["speedup_p50"] = b["p50_s"] / lv["p50_s"] if lv["p50_s"] else None
                lv["speedup_p90"] = b["p90_s"] / lv["p90_s"] if lv["p90_s"] else None
            print(f"{v:16} {lv['concurrency']:>3} {fmt(lv['p50_s'])!s:>7} {fmt(lv['p90_s'])!s:>7} {fmt(lv['p99_s'])!s:>7} "
                  f"{fmt(lv['ttft_p90_s'])!s:>7} {lv['prompt_tokens_mean']:7.0f} {lv['output_tokens_mean']:7.1f} "
                  f"{fmt(lv['decode_tok_s_p50'], 0)!s:>8} {fmt(lv['req_per_s'], 2)!s:>7} {lv['valid_decisions']:6.2f} "
                  f"{fmt(same, 2)!s:>6} {fmt(lv['spec_acceptance'], 2)!s:>6} {fmt(lv.get('speedup_p50'), 2)!s:>6} "
                  f"{fmt(lv.get('speedup_p90'), 2)!s:>6}")
    print("xP50 / xP90: baseline latency / variant latency (> 1 = faster); =base: share of outputs identical "
          "to the baseline's (greedy)")
    for res in results.values():  # keep the JSON small: outputs of the first level only
        for k, lv in enumerate(res.get("levels", [])):
            if k:
                lv.pop("outputs", None)
    report_experiments(extra or {})
    out = {**meta, "variants": results, "experiments": extra or {}}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(f"wrote {out_path}")


def run_worker(name: str, spec: dict[str, Any], ns: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One engine, one subprocess (the GPU is freed between them); the worker's JSON result."""
    sp, op = tmp / f"{name}.spec.json", tmp / f"{name}.out.json"
    sp.write_text(json.dumps(spec))
    kwargs = {k: x for k, x in spec["engine_kwargs"].items() if k not in ("model", "tokenizer")}
    print(f"--- {name}: {json.dumps(kwargs)}", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--_worker", str(sp), str(op)],
                              timeout=ns.variant_timeout_s, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        res = json.loads(op.read_text()) if op.is_file() else {
            "ok": False, "error": f"worker exited {proc.returncode} without a result"}
    except subprocess.TimeoutExpired:
        res = {"ok": False, "error": f"timed out after {ns.variant_timeout_s} s"}
    res["wall_s"] = time.perf_counter() - t0
    res["engine_kwargs"] = kwargs
    print(f"    {'ok' if res['ok'] else 'FAILED: ' + res['error'][:300]} ({res['wall_s']:.0f} s)", flush=True)
    return res


def experiment_specs(ns: argparse.Namespace, schema: dict[str, Any], sigs: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The prefix and priority experiments' worker specs (engine: the async_fi variant)."""
    base = variant_kwargs("async_fi", ns, "ngram")
    head = shared_head(ns.shared_tokens, sigs)
    common = {"head": head, "policy": policy_text(ns.shared_tokens, sigs), "schema": schema,
              "max_tokens": ns.max_tokens, "requests": [r[0] for r in REQUESTS]}
    out: list[tuple[str, dict[str, Any]]] = []
    if "prefix" in ns.experiment_list:
        out.append(("prefix", {**common, "experiment": "prefix", "engine_kwargs": {**base, "enable_prefix_caching": True},
                               "sessions": ns.prefix_sessions, "turns": ns.prefix_turns, "steps": ns.prefix_steps,
                               "concurrency": ns.prefix_concurrency}))
    if "priority" in ns.experiment_list:
        for policy in ("fcfs", "priority"):
            kw = {**base, "scheduling_policy": policy, "max_num_seqs": ns.priority_max_num_seqs}
            out.append((f"priority_{policy}", {**common, "experiment": "priority", "engine_kwargs": kw,
                                               "first_priority": -1, "concurrency": ns.priority_concurrency,
                                               "turns": ns.priority_turns, "first_tokens": 24,
                                               "step_tokens": 64, "reply_tokens": 160}))
    return out


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    if ns._worker:
        return worker_main(*ns._worker)
    validate(ns, lambda msg: (print(f"error: {msg}", file=sys.stderr), sys.exit(2)))
    schema, sigs, schema_src = decision_schema_and_tools()
    prompts = build_prompts(ns.warmup + ns.requests * len(ns.concurrency_list), ns.shared_tokens,
                            ns.unique_tokens, sigs)
    if ns.dry_run:
        ngram = ngram_method() or "ngram_gpu"  # decided again at run time on the GPU machine
        print(f"model {ns.model}; variants {ns.variant_list}; concurrency {ns.concurrency_list}; "
              f"N {ns.requests}; schema {schema_src} ({len(json.dumps(schema))} chars)")
        for v in ns.variant_list:
            kw = {k: val for k, val in variant_kwargs(v, ns, ngram).items() if k not in ("model", "tokenizer")}
            print(f"  {v:16} {json.dumps(kw)}")
        for name, spec in experiment_specs(ns, schema, sigs):
            kw = {k: val for k, val in spec["engine_kwargs"].items() if k not in ("model", "tokenizer")}
            print(f"  {name:16} {json.dumps(kw)}")
        if ns.check_config:
            bad = check_configs(ns, ngram)
            if bad:
                return 2
        print(f"{len(prompts)} distinct prompts (warm-up + N per level); sample: system "
              f"{len(prompts[0][0]['content'])} chars, user {len(prompts[0][1]['content'])} chars\n"
              f"--- user (tail) ---\n{prompts[0][1]['content'][-400:]}")
        return 0
    reason = gpu_check(ns.tp)
    if reason:
        print(f"error: this script needs one NVIDIA GPU and the CUDA build of vLLM: {reason}. "
              "Use --dry-run to check the arguments and the plan on a machine without a GPU.", file=sys.stderr)
        return 3
    ngram = ngram_method() or "ngram"
    import torch

    gpu = torch.cuda.get_device_name(0)
    import vllm

    print(f"GPU {gpu}; vLLM {vllm.__version__}; model {ns.model}; schema {schema_src}; n-gram method {ngram}",
          flush=True)
    results: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="orch_p90-") as tmp:
        if "latency" in ns.experiment_list:
            for v in ns.variant_list:
                spec = {"engine_kwargs": variant_kwargs(v, ns, ngram), "prompts": prompts, "schema": schema,
                        "max_tokens": ns.max_tokens, "concurrency": ns.concurrency_list, "warmup": ns.warmup,
                        "n": ns.requests}
                results[v] = run_worker(v, spec, ns, Path(tmp))
        for name, spec in experiment_specs(ns, schema, sigs):
            extra[name] = run_worker(name, spec, ns, Path(tmp))
    meta = {"gpu": gpu, "tp": ns.tp, "vllm": vllm.__version__, "model": str(ns.model),
            "eagle3_draft": str(ns.eagle3_draft) if ns.eagle3_draft else None, "schema_source": schema_src,
            "requests": ns.requests, "concurrency": ns.concurrency_list, "max_tokens": ns.max_tokens,
            "shared_tokens": ns.shared_tokens, "unique_tokens": ns.unique_tokens, "ngram_method": ngram}
    report(results, meta, ns.out, extra)
    return 0 if any(r.get("ok") for r in [*results.values(), *extra.values()]) else 4


if __name__ == "__main__":
    raise SystemExit(main())
