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

The decision schema is ``pipelines.dr.decisions.decision_schema`` over the support domain's
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

# ---- prompts and schema (no vLLM needed) -------------------------------------------------------

SYSTEM = (
    "You plan the next step of a retail support assistant. Output one JSON decision only.\n"
    "Verify the user first (email, or name and zip). One tool call per step. "
    "Changes to orders only through an action card; the user confirms later. "
    "Use only ids from the observations or the user's words.\n"
    "Decisions: a tool name with args; respond; clarify with a question; select an entity_id "
    "(null if unsure); action with card_id and params; escalate with a reason_code."
)
POLICY = [
    "Authenticate the user by email, or by first name, last name and zip, before any account action.",
    "Act only for the authenticated user; never read or change another user's orders.",
    "Only pending orders can be cancelled; the reason is 'no longer needed' or 'ordered by mistake'.",
    "Only pending orders can have items, the shipping address or the payment method modified.",
    "Item options of a pending order can be modified only once; list every item to change at once.",
    "Only delivered orders can be returned or exchanged; an exchange keeps the same product type.",
    "Refunds go to the original payment method or to an existing gift card, never elsewhere.",
    "Gift card refunds are immediate; other refunds take five to seven business days.",
    "Before any change, show an action card with the exact details and wait for an explicit yes.",
    "Transfer to a human agent only when the request is out of scope or the user insists.",
    "Never invent ids, prices, addresses or policies; use only the observations and the user's words.",
    "One tool call per step; at most three steps per turn; then answer, clarify or escalate.",
]
REQUESTS = [
    # (user text, state, observation lines)
    ("Hi, I want to cancel my order, I ordered it by mistake.", {"authenticated_user": "no"}, []),
    ("My email is [EMAIL_1], where is my order #W1000002?", {"authenticated_user": "no"}, []),
    ("Please cancel order #W1000001.", {"authenticated_user": "alex_rivera_1001",
                                        "orders": "#W1000001,#W1000002,#W1000003"},
     ['1. get_order_details {"order_id":"#W1000001"} -> ok status=pending total=231.40 items=2']),
    ("I want to return my order.", {"authenticated_user": "priya_shah_2002",
                                    "orders": "#W2000001,#W2000002,#W2000003"}, []),
    ("Do you ship to Canada?", {"authenticated_user": "no"}, []),
    ("Can I exchange the running shoes in #W2000002 for a size 10?",
     {"authenticated_user": "priya_shah_2002", "orders": "#W2000001,#W2000002,#W2000003"},
     ['1. get_order_details {"order_id":"#W2000002"} -> ok status=delivered items=3 '
      'running shoes size=9 color=black item_id=4107812777']),
    ("I'm Yusuf Rossi, zip 19122. I need to change the address of my pending order.",
     {"authenticated_user": "no"}, []),
    ("The refund for my cancelled order never arrived, this is the third time I ask.",
     {"authenticated_user": "alex_rivera_1001", "orders": "#W1000001,#W1000002,#W1000003"}, []),
    ("How many t-shirt options do you have right now?", {"authenticated_user": "no"}, []),
    ("yes, change the payment of #W1000001 to my gift card",
     {"authenticated_user": "alex_rivera_1001", "orders": "#W1000001,#W1000002,#W1000003"},
     ['1. get_user_details {"user_id":"alex_rivera_1001"} -> ok payment_methods=credit_card_1000001,'
      'gift_card_1000002(balance 15.00)']),
]
HISTORY = [
    ("U: hi, I have a question about an order", "A: Sure, I can help. Could you give me your email?"),
    ("U: it is the one I placed last week", "A: Thanks. Which order do you mean?"),
    ("U: the one with the lamp", "A: I found two orders with a lamp; please pick one."),
]


def _inline_schema() -> tuple[dict[str, Any], list[str]]:
    """A small schema of the same shape as pipelines.dr.decisions.decision_schema."""

    def obj(props: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

    s = {"type": "string", "maxLength": 64}
    tools = {
        "find_user_id_by_email": {"email": s},
        "find_user_id_by_name_zip": {"first_name": s, "last_name": s, "zip": s},
        "get_order_details": {"order_id": s},
        "get_user_details": {"user_id": s},
        "search_help_articles": {"query": s},
    }
    branches = [obj({"decision": {"const": n}, "args": obj(a)}) for n, a in tools.items()]
    branches += [
        obj({"decision": {"const": "respond"}}),
        obj({"decision": {"const": "clarify"}, "question": {"type": "string", "maxLength": 160}}),
        obj({"decision": {"const": "select"}, "entity_id": {"anyOf": [{"type": "string", "maxLength": 16},
                                                                      {"type": "null"}]}}),
        obj({"decision": {"const": "action"}, "card_id": {"enum": ["card.cancel_order", "card.modify_payment"]},
             "params": obj({"order_id": s, "reason": s})}),
        obj({"decision": {"const": "escalate"}, "reason_code": {"enum": [
            "user_requested_human", "safety_sensitive", "out_of_scope", "policy_exception", "technical_issue"]}}),
    ]
    sigs = [f"{n}({', '.join(a)})" for n, a in tools.items()]
    return {"anyOf": branches}, sigs


def decision_schema_and_tools() -> tuple[dict[str, Any], list[str], str]:
    """(schema, tool signatures, source): the repo's schema when importable, else the inline one."""
    try:
        sys.path.insert(0, str(REPO))
        from pipelines.domains.support import build_support_domain
        from pipelines.dr.decisions import decision_schema
        from pipelines.dr.outcome import OPEN_TOOLS, PRIVATE_READS

        d = build_support_domain()
        names = list(OPEN_TOOLS) + list(PRIVATE_READS) + sorted(d.lookup_tools)
        tools = {n: d.registry.get(n).args_schema() for n in names if n in d.registry.tools}
        cards = [(c.id, c.required_params, d.registry.get(c.tool).args_schema())
                 for c in d.cards if c.kind == "write"]
        ids = ["#W1000001", "#W1000002", "#W1000003", "#W2000001", "#W2000002", "#W2000003"]
        schema = decision_schema(tools, cards, ids)
        sigs = [f"{n}({', '.join(s.get('properties', {}))})" for n, s in sorted(tools.items())]
        sigs += [f"{cid}({', '.join(p)})" for cid, p, _ in cards]
        return schema, sigs, "pipelines.dr.decisions.decision_schema"
    except Exception as exc:  # not run from the repo, or its dependencies are missing
        schema, sigs = _inline_schema()
        return schema, sigs, f"inline ({type(exc).__name__})"


def build_prompts(n: int, shared_tokens: int, unique_tokens: int, sigs: list[str]) -> list[list[dict[str, str]]]:
    """n chat prompts: a shared system part (~shared_tokens, prefix-cacheable) + a unique user part.

    Token counts are approximate (~4 characters per token); the engine's real counts are reported.
    """
    system = SYSTEM + "\nTools and cards: " + "; ".join(sigs) + "\nPolicy:\n"
    i = 0
    while len(system) < shared_tokens * 4:
        system += f"{i + 1}. {POLICY[i % len(POLICY)]}\n"
        i += 1
    prompts = []
    for k in range(n):
        text, state, obs = REQUESTS[k % len(REQUESTS)]
        parts: list[str] = []
        j = 0
        while sum(len(p) for p in parts) < unique_tokens * 4:
            u, a = HISTORY[(k + j) % len(HISTORY)]
            parts += [f"{u} (ref {k}-{j})", a]
            j += 1
        parts.append(f"User: {text}")
        parts.append("State: " + "; ".join(f"{a}={b}" for a, b in state.items()))
        if obs:
            parts += ["Observations:", *obs]
        parts.append("Next decision:")
        prompts.append([{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}])
    return prompts


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


def _spec_counters() -> dict[str, float]:
    try:
        from vllm.v1.metrics.reader import Counter, get_metrics_snapshot

        out: dict[str, float] = {}
        for m in get_metrics_snapshot():
            if isinstance(m, Counter) and m.name in ("vllm:spec_decode_num_draft_tokens",
                                                      "vllm:spec_decode_num_accepted_tokens"):
                out[m.name] = out.get(m.name, 0.0) + float(m.value)
        return out
    except Exception:
        return {}


async def _run_worker(spec: dict[str, Any]) -> dict[str, Any]:
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

    prompts = [render(m) for m in spec["prompts"]]
    params = SamplingParams(temperature=0.0, max_tokens=spec["max_tokens"], seed=0,
                            structured_outputs=StructuredOutputsParams(json=spec["schema"]))
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
        before = _spec_counters()
        rows, wall = await level(c, list(range(w + li * n, w + (li + 1) * n)))
        after = _spec_counters()
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
    for v in ns.variant_list:
        try:
            AsyncEngineArgs(**variant_kwargs(v, ns, ngram)).create_engine_config()
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


def report(results: dict[str, Any], meta: dict[str, Any], out_path: Path) -> None:
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
    out = {**meta, "variants": results}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(f"wrote {out_path}")


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
    with tempfile.TemporaryDirectory(prefix="orch_p90-") as tmp:
        for v in ns.variant_list:
            spec = {"engine_kwargs": variant_kwargs(v, ns, ngram), "prompts": prompts, "schema": schema,
                    "max_tokens": ns.max_tokens, "concurrency": ns.concurrency_list, "warmup": ns.warmup,
                    "n": ns.requests}
            sp, op = Path(tmp) / f"{v}.spec.json", Path(tmp) / f"{v}.out.json"
            sp.write_text(json.dumps(spec))
            print(f"--- {v}: {json.dumps({k: x for k, x in spec['engine_kwargs'].items() if k not in ('model', 'tokenizer')})}",
                  flush=True)
            t0 = time.perf_counter()
            try:
                proc = subprocess.run([sys.executable, __file__, "--_worker", str(sp), str(op)],
                                      timeout=ns.variant_timeout_s, env={**os.environ, "PYTHONUNBUFFERED": "1"})
                res = json.loads(op.read_text()) if op.is_file() else {
                    "ok": False, "error": f"worker exited {proc.returncode} without a result"}
            except subprocess.TimeoutExpired:
                res = {"ok": False, "error": f"timed out after {ns.variant_timeout_s} s"}
            res["wall_s"] = time.perf_counter() - t0
            res["engine_kwargs"] = {k: x for k, x in spec["engine_kwargs"].items() if k not in ("model", "tokenizer")}
            results[v] = res
            print(f"    {'ok' if res['ok'] else 'FAILED: ' + res['error'][:300]} ({res['wall_s']:.0f} s)", flush=True)

    meta = {"gpu": gpu, "tp": ns.tp, "vllm": vllm.__version__, "model": str(ns.model),
            "eagle3_draft": str(ns.eagle3_draft) if ns.eagle3_draft else None, "schema_source": schema_src,
            "requests": ns.requests, "concurrency": ns.concurrency_list, "max_tokens": ns.max_tokens,
            "shared_tokens": ns.shared_tokens, "unique_tokens": ns.unique_tokens, "ngram_method": ngram}
    report(results, meta, ns.out)
    return 0 if any(r.get("ok") for r in results.values()) else 4


if __name__ == "__main__":
    raise SystemExit(main())
