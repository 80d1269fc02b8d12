"""Prefix-cache reuse of the orchestrator's prompts, measured from vLLM's own counters.

Starts the embedded app (real Ray Serve + vLLM on the CPU) and runs support sessions through
two pipelines hosted in this process on the app's deployments (tools, guardrails, kernels and
the one model deployment, through Serve handles), interleaved in blocks, in one run:

  * before — the ``dr`` orchestrator: each step's system message lists the tools eligible
             *now*, so it is rewritten per step;
  * after  — the ``tandem`` turn: append-only prompts (a fixed head per domain, history, the
             request, then the W1 output and each step's observations appended).

Per model call, the engine reports its prompt tokens and the tokens served from its prefix
cache (vLLM's ``num_cached_tokens``, with ``enable_prompt_tokens_details``); the per-layout
totals are checked against the Prometheus counters vLLM exports through Ray's metrics port
(``ray_vllm_prefix_cache_queries`` / ``ray_vllm_prefix_cache_hits``). The hit rate is taken
over the *measured* orchestrator calls: every orchestrator call of a turn after its first
(dr steps 2-3; tandem steps 1-3, which follow W1) and every orchestrator call of turns >= 2.
Time to first token is per call, client side (a Serve handle from this process).

    python scripts/bench_prefix.py --rounds 2 --sessions 3 --turns 3
    python scripts/bench_prefix.py --affinity --sessions 3 --turns 3   # 2 replicas: default vs affinity

``--affinity`` serves the model with two replicas and runs tandem sessions twice, first with
Serve's default router, then with Ray Serve LLM's ``PrefixCacheAffinityRouter``.
Writes ``results/bench_prefix.json`` (``results/bench_affinity.json`` with ``--affinity``).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.prefix_driver import (  # noqa: E402
    AFFINITY_ROUTER,
    DriverApp,
    RecordingModels,
    prometheus_prefix_counters,
    session_scripts,
    summarize_calls,
)

LAYOUTS = {"before": "dr", "after": "tandem"}


def derive_config(base: Path, work: Path, *, replicas: int = 1, router: str | None = None) -> Path:
    """The embedded config with per-request cache reporting on (and the replica / router asked)."""
    raw = yaml.safe_load(base.read_text())
    args = raw["applications"][0]["args"]
    args["pipeline"]["kind"] = "tandem"
    model = args["models"][args["roles"]["orchestrator"]]
    model["engine_kwargs"]["enable_prompt_tokens_details"] = True
    dep = model.setdefault("deployment", {})
    dep["num_replicas"] = replicas
    dep.pop("request_router_config", None)
    if router is not None:
        dep["request_router_config"] = {"request_router_class": router}
    args.setdefault("store", {})["path"] = str(work / "sessions.db")
    args.setdefault("telemetry", {})["jsonl_dir"] = str(work / "telemetry")
    name = f"prefix-{replicas}-{'affinity' if router else 'default'}.yaml"
    (work / name).write_text(yaml.safe_dump(raw, sort_keys=False))
    return work / name


async def run_sessions(app: DriverApp, rec: RecordingModels, layout: str, scripts: list[list[str]],
                       tag: str) -> list[str]:
    """Run whole sessions one after the other under ``layout``; returns each turn's status."""
    statuses = []
    runner = app.runner(LAYOUTS[layout] if layout in LAYOUTS else layout, rec)
    for i, turns in enumerate(scripts):
        sid = f"{tag}-{layout}-{i}"
        for t, text in enumerate(turns, start=1):
            rec.context(layout=layout, session=sid, turn=t)
            statuses.append(await app.turn(runner, sid, text))
            print(f"  {sid} turn {t}: {statuses[-1]}", file=sys.stderr, flush=True)
    return statuses


def layouts_main(ns: argparse.Namespace, work: Path) -> dict[str, Any]:
    cfg = derive_config(Path(ns.config), work)
    scripts = session_scripts(2 * ns.rounds * ns.sessions, ns.turns, seed=ns.world_seed)
    with DriverApp.start(cfg, metrics=True) as app:
        rec = RecordingModels(app.model_handle(), app.model_id)
        loop = asyncio.new_event_loop()
        loop.run_until_complete(app.warmup(rec))
        rec.records.clear()
        prom: dict[str, dict[str, float]] = {"before": {"queries": 0.0, "hits": 0.0},
                                             "after": {"queries": 0.0, "hits": 0.0}}
        names: set[str] = set()
        last = prometheus_prefix_counters(app.metrics_url, settle_s=ns.settle_s)
        k = 0
        for r in range(ns.rounds):
            for layout in ("before", "after") if r % 2 == 0 else ("after", "before"):  # alternate the order
                block = scripts[k:k + ns.sessions]
                k += ns.sessions
                print(f"round {r + 1}/{ns.rounds}: {layout} ({LAYOUTS[layout]}), {len(block)} sessions",
                      file=sys.stderr, flush=True)
                loop.run_until_complete(run_sessions(app, rec, layout, block, f"r{r}"))
                now = prometheus_prefix_counters(app.metrics_url, settle_s=ns.settle_s)
                for key in ("queries", "hits"):
                    prom[layout][key] += now[key] - last[key]
                names |= set(now["series"])
                last = now
    summary = summarize_calls(rec.records)
    for layout in ("before", "after"):
        engine = summary["layouts"][layout]["all_calls"]
        p = prom[layout]
        summary["layouts"][layout]["prometheus"] = {
            "queries": p["queries"], "hits": p["hits"],
            "hit_rate": p["hits"] / p["queries"] if p["queries"] else None,
            "per_request_hits_over_counter_hits": engine["hits"] / p["hits"] if p["hits"] else None,
        }
    after, before = summary["layouts"]["after"], summary["layouts"]["before"]
    return {
        "orchestrator_prefix_hit_rate": after["measured"]["hit_rate"],
        "orchestrator_prefix_hit_rate_before": before["measured"]["hit_rate"],
        "step_ttft_ms": {"before": before["measured"]["ttft_ms"], "after": after["measured"]["ttft_ms"]},
        "ttft_ratio_p50_before_over_after": _ratio(before, after, "p50"),
        "ttft_ratio_p90_before_over_after": _ratio(before, after, "p90"),
        "prometheus_series": sorted(names),
        "measured_calls": "orchestrator calls after the first of their turn, and every orchestrator call of turns >= 2",
        "rounds": ns.rounds, "sessions_per_block": ns.sessions, "turns": ns.turns,
        **summary,
    }


def _ratio(before: dict[str, Any], after: dict[str, Any], q: str) -> float | None:
    b, a = before["measured"]["ttft_ms"][q], after["measured"]["ttft_ms"][q]
    return b / a if a and b else None


def affinity_main(ns: argparse.Namespace, work: Path) -> dict[str, Any]:
    scripts = session_scripts(2 * ns.sessions, ns.turns, seed=ns.world_seed)
    out: dict[str, Any] = {"replicas": 2, "routers": {}}
    for i, (name, router) in enumerate((("default", None), ("affinity", AFFINITY_ROUTER))):
        cfg = derive_config(Path(ns.config), work, replicas=2, router=router)
        with DriverApp.start(cfg, metrics=False) as app:
            rec = RecordingModels(app.model_handle(), app.model_id)
            loop = asyncio.new_event_loop()
            loop.run_until_complete(app.warmup(rec))
            rec.records.clear()
            print(f"router {name}: {ns.sessions} tandem sessions on 2 replicas", file=sys.stderr, flush=True)
            block = scripts[i * ns.sessions:(i + 1) * ns.sessions]
            loop.run_until_complete(run_sessions(app, rec, "after", block, name))
            out["routers"][name] = summarize_calls(rec.records)["layouts"]["after"]
            out["routers"][name]["replicas_used"] = app.replica_count()
    d, a = out["routers"]["default"]["measured"], out["routers"]["affinity"]["measured"]
    out["hit_rate"] = {"default": d["hit_rate"], "affinity": a["hit_rate"]}
    out["step_ttft_ms"] = {"default": d["ttft_ms"], "affinity": a["ttft_ms"]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs" / "embedded.yaml"))
    ap.add_argument("--rounds", type=int, default=2, help="before/after block pairs")
    ap.add_argument("--sessions", type=int, default=3, help="sessions per block")
    ap.add_argument("--turns", type=int, default=3, help="turns per session (1-4)")
    ap.add_argument("--world-seed", type=int, default=7, help="the app's domain.seed (users come from it)")
    ap.add_argument("--settle-s", type=float, default=8.0, help="wait for Ray's metrics export per snapshot")
    ap.add_argument("--affinity", action="store_true", help="2 replicas: default router vs prefix affinity")
    ap.add_argument("--out", default=None)
    ns = ap.parse_args()
    if not 1 <= ns.turns <= 4 or ns.sessions < 1 or ns.rounds < 1:
        ap.error("--turns 1-4, --sessions >= 1, --rounds >= 1")
    work = Path(tempfile.mkdtemp(prefix="tandem-prefix-"))
    t0 = time.monotonic()
    result = affinity_main(ns, work) if ns.affinity else layouts_main(ns, work)
    result["wall_s"] = round(time.monotonic() - t0, 1)
    out = Path(ns.out or REPO / "results" / ("bench_affinity.json" if ns.affinity else "bench_prefix.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(copy.deepcopy(result), indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("layouts", "calls", "routers")}, indent=2,
                     default=str))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
