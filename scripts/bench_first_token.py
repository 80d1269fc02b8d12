"""First-token latency of the SGC W1 stream (``sgc_w1``) vs a Plan-and-Execute agent (``pe_agent``).

docs/architecture.md (SGC W1): the 4-in-1 stream puts narration in front of the user while
the orchestrator still decides; the published system measured a first token at
1.5 s vs 6.1 s for a Plan-and-Execute agent (4.1x). This bench measures the
same comparison side by side on one engine, in one run:

  * starts the embedded app (real Ray Serve + vLLM on the CPU) from a copy of
    ``configs/embedded.yaml`` with free ports and a private store / telemetry dir;
  * wraps ``LLMServer:<model_id>`` (through ``serve.get_deployment_handle``) in a
    :class:`serve.model_client.ServeModelClient` for all three roles;
  * in THIS driver process, with the coach tools and rule kernels in process
    (``LocalCoachTools`` / ``LocalRuleKernels``) and an in-memory session store,
    runs for each coach opening (turn 0 of ``generate_sessions``) one ``sgc_w1``
    turn and one ``pe_agent`` turn through :class:`pipelines.turn.TurnRunner`,
    same user text, same bound session state, interleaved turn by turn (the
    order alternates so neither rung always follows the other).

Per turn, from the start of the turn: sgc_w1 time to the first NarrationDelta
(first reply delta only if the turn streamed no narration: counted), pe_agent
time to the first ReplyDelta, end-to-end for both; for sgc_w1 Φ hits the tool
dispatch point as a share of the W1 stream (``dispatch_at / w1_stream``).
Prints p50/p90, the pe_agent/sgc_w1 first-token ratios (goal >= 5x; the
published system: 4.1x) and the dispatch share (goal: before 30 % of the
stream); writes JSON with every turn.

    python scripts/bench_first_token.py --turns 20 --warmup 2 --out results/bench_first_token.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KINDS = ("sgc_w1", "pe_agent")
SHARE_GOAL = 0.30
RATIO_GOAL = 5.0
PUBLISHED = {"sgc_w1_first_token_s": 1.5, "pe_agent_first_token_s": 6.1, "ratio": 4.1}


# --- small helpers ----------------------------------------------------------------------------


def pct(xs: Iterable[float], q: float) -> float:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def p50_p90(xs: Iterable[float | None]) -> dict[str, float | int]:
    vals = [x for x in xs if x is not None]
    return {"p50": pct(vals, 0.5), "p90": pct(vals, 0.9), "n": len(vals)}


def counters_diff(after: dict[str, dict[str, int]], before: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for fam, vals in after.items():
        d = {k: v - before.get(fam, {}).get(k, 0) for k, v in vals.items()}
        d = {k: v for k, v in d.items() if v}
        if d:
            out[fam] = d
    return out


class MemStore:
    """In-memory :class:`pipelines.protocols.SessionStore` (turns numbered like the real stores)."""

    def __init__(self) -> None:
        self.turns: dict[str, list[Any]] = {}

    async def get_history(self, session_id: str, limit: int | None = None) -> list[Any]:
        turns = list(self.turns.get(session_id, []))
        if limit is not None:
            turns = turns[-limit:] if limit > 0 else []
        return turns

    async def session_exists(self, session_id: str) -> bool:
        return session_id in self.turns

    async def append_turn(self, session_id: str, record: Any) -> None:
        turns = self.turns.setdefault(session_id, [])
        turns.append(record.model_copy(update={"index": len(turns)}))


class ListSink:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def emit(self, kind: str, **fields: Any) -> None:
        self.events.append((kind, fields))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, f in self.events if k == kind]


# --- /dev/shm bookkeeping: remove only what this run's process tree created -------------------


def _shm() -> set[str]:
    try:
        return {p for p in os.listdir("/dev/shm") if p.startswith(("psm_", "sem.mp-"))}
    except OSError:
        return set()


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for c in children.get(pid, []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _shm_used_by_tree(root: int) -> set[str]:
    """Names under /dev/shm that this process or its descendants map or hold open."""
    names: set[str] = set()
    for pid in {root} | _descendants(root):
        try:
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                i = line.find("/dev/shm/")
                if i >= 0:
                    names.add(line[i + 9:].split()[0])
        except OSError:
            pass
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("/dev/shm/"):
                    names.add(target[9:].split()[0])
        except OSError:
            pass
    return {n for n in names if n.startswith(("psm_", "sem.mp-"))}


def _foreign_raylets(root: int) -> int:
    """Raylets on this box that this run did not start (other sessions' Ray: CPU contention)."""
    ours = _descendants(root)
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) not in ours:
            try:
                if Path(f"/proc/{d}/comm").read_text().strip() == "raylet":
                    n += 1
            except OSError:
                pass
    return n


# --- one turn ---------------------------------------------------------------------------------


async def run_turn(kind: str, pipeline: Any, store: MemStore, session_id: str, text: str, user_id: str,
                   *, deadline_s: float) -> dict[str, Any]:
    from pipelines.events import DoneEvent, ErrorEvent, NarrationDelta, ReplyDelta, TurnRequest
    from pipelines.turn import TurnRunner

    sink = ListSink()
    runner = TurnRunner(pipeline, store, sink=sink, max_history_turns=getattr(pipeline, "history_turns", 6),
                        deadline_s=deadline_s)
    first_narr = first_reply = None
    narration: list[str] = []
    reply: list[str] = []
    done: DoneEvent | None = None
    errors: list[str] = []
    t0 = time.perf_counter()
    async for ev in runner.run(session_id, TurnRequest(text=text, user_id=user_id), trace_id=secrets.token_hex(16)):
        now = (time.perf_counter() - t0) * 1000
        if isinstance(ev, NarrationDelta):
            first_narr = now if first_narr is None else first_narr
            narration.append(ev.text)
        elif isinstance(ev, ReplyDelta):
            first_reply = now if first_reply is None else first_reply
            reply.append(ev.text)
        elif isinstance(ev, ErrorEvent):
            errors.append(f"{ev.code}: {ev.message}")
        elif isinstance(ev, DoneEvent):
            done = ev
    end_ms = (time.perf_counter() - t0) * 1000
    assert done is not None
    rec = store.turns[session_id][-1]
    sgc = rec.meta.get("sgc") or {}
    stages = dict(done.timings.stages)
    row: dict[str, Any] = {
        "kind": kind, "session_id": session_id, "user_text": text, "status": done.status,
        "fallback": sgc.get("fallback"), "errors": errors,
        "first_narration_ms": first_narr, "first_reply_ms": first_reply, "end_ms": end_ms,
        "runner_first_token_ms": done.timings.first_token_ms, "stages_ms": stages,
        "narration": "".join(narration), "narration_chars": len("".join(narration)),
        "reply": "".join(reply), "reply_chars": len("".join(reply)),
        "tools": sgc.get("tools"),
        "fallback_events": sink.of("sgc.fallback"),
    }
    if kind == "sgc_w1":
        row["first_token_ms"] = first_narr if first_narr is not None else first_reply
        row["first_token_source"] = "narration" if first_narr is not None else ("reply" if first_reply else None)
        parsed = sink.of("sgc.w1.parsed")
        row["w1"] = parsed[-1] if parsed else None
        row["phi"] = sgc.get("phi")
        row["dispatch"] = sgc.get("dispatch")
        row["plan_ignored"] = sgc.get("plan_ignored")
        hit = (sgc.get("phi") or {}).get("kind") == "hit"
        row["phi_hit"] = hit
        w1, at = stages.get("w1_stream"), stages.get("dispatch_at")
        row["dispatch_share"] = at / w1 if hit and w1 and at is not None else None
    else:
        row["first_token_ms"] = first_reply
        row["first_token_source"] = "reply" if first_reply is not None else None
        row["plan"] = sgc.get("plan")
    return row


async def bench(client: Any, ns: argparse.Namespace, pipeline_cfg: Any) -> dict[str, Any]:
    from pipelines.annex.sgc_ladder import SgcCounters, SgcSettings, build_sgc_pipeline
    from pipelines.core.kernels import LocalRuleKernels
    from pipelines.domains.coach import coach_tables_holder, generate_coach_world, generate_sessions
    from pipelines.domains.coach.domain import DomainPack as CoachPack
    from pipelines.domains.coach.runner import LocalCoachTools

    world = generate_coach_world(ns.world_seed)
    holder = coach_tables_holder()
    sessions = generate_sessions(world, holder.active, seed=ns.seed, n_sessions=ns.warmup + ns.turns,
                                 turns_per_session=1)
    tools = LocalCoachTools(world)
    kernels = LocalRuleKernels.of(CoachPack(), holder)
    settings = SgcSettings(max_reply_tokens=pipeline_cfg.max_reply_tokens, temperature=pipeline_cfg.temperature,
                           seed=pipeline_cfg.seed)
    counters = {k: SgcCounters() for k in KINDS}
    pipes = {k: build_sgc_pipeline(k, client, tools, kernels, settings=settings, counters=counters[k]) for k in KINDS}
    store = MemStore()
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    before: dict[str, Any] = {k: counters[k].snapshot() for k in KINDS}
    for i, session in enumerate(sessions):
        if i == ns.warmup:
            before = {k: counters[k].snapshot() for k in KINDS}
        opening = session.turns[0]
        values = {k: v for k, v in opening.snapshot.items() if k != "user_id"}
        order = KINDS if i % 2 == 0 else KINDS[::-1]
        pair = {}
        for kind in order:
            sid = f"{session.session_id}.{kind}"
            tools.bind(sid, session.user_id, values, version=opening.live_version)  # same state for both
            row = await run_turn(kind, pipes[kind], store, sid, opening.user_text, session.user_id,
                                 deadline_s=pipeline_cfg.turn_deadline_s)
            row.update(opening=i - ns.warmup, warmup=i < ns.warmup, ran_first=kind == order[0],
                       scripted={"intent": opening.intent, "sub_intent": opening.sub_intent},
                       has_opponent=("opponent_id" in opening.snapshot))
            pair[kind] = row
            if i >= ns.warmup:
                rows[kind].append(row)
        w, p = pair["sgc_w1"], pair["pe_agent"]
        tag = "warm-up" if i < ns.warmup else f"{i - ns.warmup + 1}/{ns.turns}"
        share = w["dispatch_share"]
        print(f"[{tag:>7}] sgc_w1 first {w['first_token_ms'] or float('nan'):7.0f} ms ({w['first_token_source']}) "
              f"end {w['end_ms']:7.0f} ms  phi={(w['phi'] or {}).get('kind')} "
              f"share={'-' if share is None else f'{share:.2f}'} narr={w['narration_chars']}c | "
              f"pe_agent first {p['first_token_ms'] or float('nan'):7.0f} ms end {p['end_ms']:7.0f} ms "
              f"plan={p.get('plan')} {p['status']}", file=sys.stderr, flush=True)
    return {"rows": rows, "counters": {k: counters_diff(counters[k].snapshot(), before[k]) for k in KINDS},
            "settings": {"max_perception_tokens": settings.max_perception_tokens,
                         "max_plan_tokens": settings.max_plan_tokens, "max_reply_tokens": settings.max_reply_tokens,
                         "temperature": settings.temperature, "seed": settings.seed,
                         "narration_max_chars": settings.narration_max_chars}}


def summarise(data: dict[str, Any]) -> dict[str, Any]:
    w, p = data["rows"]["sgc_w1"], data["rows"]["pe_agent"]
    ft_w = p50_p90(r["first_token_ms"] for r in w)
    ft_p = p50_p90(r["first_token_ms"] for r in p)
    pairs = list(zip(w, p, strict=True))
    paired = [b["first_token_ms"] / a["first_token_ms"] for a, b in pairs if a["first_token_ms"] and b["first_token_ms"]]
    both_ok = [(a, b) for a, b in pairs if a["status"] == "ok" and b["status"] == "ok"]
    p_ok = [r for r in p if r["status"] == "ok"]
    p_fb = [r for r in p if r["status"] != "ok"]
    hits = [r for r in w if r["phi_hit"]]
    shares = [r["dispatch_share"] for r in hits if r["dispatch_share"] is not None]
    phi_kinds: dict[str, int] = {}
    for r in w:
        k = (r["phi"] or {}).get("kind") or "none (turn failed before Φ was recorded)"
        phi_kinds[k] = phi_kinds.get(k, 0) + 1
    phi_counter = data["counters"]["sgc_w1"].get("phi", {})
    lookups = sum(phi_counter.values())
    parsed = [r["w1"] for r in w if r["w1"]]
    placeholder = "one short sentence telling the user what you are checking"
    cap = data["settings"]["narration_max_chars"]

    def ratio(a: float, b: float) -> float:
        return a / b if b else float("nan")

    ok_w = p50_p90(a["first_token_ms"] for a, _ in both_ok)
    ok_p = p50_p90(b["first_token_ms"] for _, b in both_ok)
    return {
        "n_openings": len(w),
        "sgc_w1": {
            "first_token_ms": ft_w,
            "first_narration_ms": p50_p90(r["first_narration_ms"] for r in w),
            "first_reply_ms": p50_p90(r["first_reply_ms"] for r in w),
            "end_ms": p50_p90(r["end_ms"] for r in w),
            "w1_stream_ms": p50_p90(r["stages_ms"].get("w1_stream") for r in w),
            "dispatch_at_ms_hits": p50_p90(r["stages_ms"].get("dispatch_at") for r in hits),
            "generate_ms": p50_p90(r["stages_ms"].get("generate") for r in w),
            "w1_stream_chars": p50_p90(x.get("length") for x in parsed),
            "narration_chars": p50_p90(r["narration_chars"] for r in w),
            "narration_is_prompt_placeholder": sum(r["narration"].strip() == placeholder for r in w),
            "narration_at_cap": sum(r["narration_chars"] >= cap for r in w),
            "reply_chars": p50_p90(r["reply_chars"] for r in w),
            "turns_without_narration": sum(r["first_narration_ms"] is None for r in w),
            "phi_outcomes_recorded": phi_kinds,
            "phi_hit_rate_recorded": len(hits) / len(w) if w else float("nan"),
            "phi_lookups_counted": lookups,
            "phi_hit_rate_counted": phi_counter.get("hit", 0) / lookups if lookups else float("nan"),
            "dispatch_share_hits": {**p50_p90(shares), "goal_max": SHARE_GOAL,
                                    "within_goal": sum(s <= SHARE_GOAL for s in shares)},
            "statuses": _count(r["status"] for r in w),
            "fallbacks": _count(r["fallback"] for r in w if r["fallback"]),
            "errors": _count(e.split(":")[0] for r in w for e in r["errors"]),
            "w1_labels": _count(f"{x.get('intent')}/{x.get('sub_intent')}" for x in parsed),
            "intent_matches_script": sum(1 for r in w if r["w1"] and r["w1"]["intent"] == r["scripted"]["intent"]),
            "label_matches_script": sum(1 for r in w if r["w1"] and (r["w1"]["intent"], r["w1"]["sub_intent"])
                                        == (r["scripted"]["intent"], r["scripted"]["sub_intent"])),
        },
        "pe_agent": {
            "first_token_ms": ft_p,
            "first_token_ms_ok_turns": p50_p90(r["first_token_ms"] for r in p_ok),
            "first_token_ms_fallback_turns": p50_p90(r["first_token_ms"] for r in p_fb),
            "end_ms": p50_p90(r["end_ms"] for r in p),
            "plan_ms": p50_p90(r["stages_ms"].get("plan") for r in p),
            "tools_ms": p50_p90(r["stages_ms"].get("tools") for r in p),
            "generate_ms": p50_p90(r["stages_ms"].get("generate") for r in p),
            "plan_len": p50_p90(len(r["plan"]) for r in p if r.get("plan") is not None),
            "empty_plans": sum(1 for r in p if r.get("plan") == []),
            "reply_chars": p50_p90(r["reply_chars"] for r in p_ok),
            "statuses": _count(r["status"] for r in p),
            "fallbacks": _count(r["fallback"] for r in p if r["fallback"]),
        },
        "ratio_pe_over_sgc_first_token": {
            "p50": ratio(ft_p["p50"], ft_w["p50"]), "p90": ratio(ft_p["p90"], ft_w["p90"]),
            "paired_median": pct(paired, 0.5),
            "pairs_both_ok": {"n": len(both_ok), "p50": ratio(ok_p["p50"], ok_w["p50"]),
                              "p90": ratio(ok_p["p90"], ok_w["p90"])},
            "goal": RATIO_GOAL, "published": PUBLISHED["ratio"],
        },
        "ratio_pe_over_sgc_end": {
            "p50": ratio(pct([r["end_ms"] for r in p], 0.5), pct([r["end_ms"] for r in w], 0.5)),
            "p90": ratio(pct([r["end_ms"] for r in p], 0.9), pct([r["end_ms"] for r in w], 0.9)),
        },
    }


def _count(xs: Iterable[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[str(x)] = out.get(str(x), 0) + 1
    return out


def report(s: dict[str, Any]) -> None:
    w, p, r = s["sgc_w1"], s["pe_agent"], s["ratio_pe_over_sgc_first_token"]
    print(f"\n{s['n_openings']} coach openings, one engine, sgc_w1 and pe_agent interleaved (ms)")
    print(f"{'':34} {'p50':>9} {'p90':>9}")
    lines = [
        ("sgc_w1   first token (narration)", w["first_token_ms"]),
        ("pe_agent first token (reply)", p["first_token_ms"]),
        ("sgc_w1   first reply token", w["first_reply_ms"]),
        ("sgc_w1   end-to-end", w["end_ms"]),
        ("pe_agent end-to-end", p["end_ms"]),
        ("sgc_w1   W1 stream", w["w1_stream_ms"]),
        ("sgc_w1   dispatch_at (Φ hits)", w["dispatch_at_ms_hits"]),
        ("pe_agent plan call", p["plan_ms"]),
    ]
    for name, v in lines:
        print(f"{name:34} {v['p50']:9.1f} {v['p90']:9.1f}   n={v['n']}")
    print(f"{'ratio pe_agent/sgc_w1 first token':34} {r['p50']:8.2f}x {r['p90']:8.2f}x   "
          f"(paired median {r['paired_median']:.2f}x; goal >= {RATIO_GOAL:g}x, published {PUBLISHED['ratio']}x)")
    ok = r["pairs_both_ok"]
    print(f"{'  same, pairs where both turns ok':34} {ok['p50']:8.2f}x {ok['p90']:8.2f}x   n={ok['n']}")
    po, pf = p["first_token_ms_ok_turns"], p["first_token_ms_fallback_turns"]
    print(f"{'pe_agent first token, ok turns':34} {po['p50']:9.1f} {po['p90']:9.1f}   n={po['n']} "
          f"(empty plans: {p['empty_plans']})")
    print(f"{'pe_agent first token, fallback':34} {pf['p50']:9.1f} {pf['p90']:9.1f}   n={pf['n']} "
          f"(the canned fallback reply after an invalid plan)")
    e = s["ratio_pe_over_sgc_end"]
    print(f"{'ratio pe_agent/sgc_w1 end-to-end':34} {e['p50']:8.2f}x {e['p90']:8.2f}x")
    d = w["dispatch_share_hits"]
    print(f"{'dispatch share of W1 stream (hits)':34} {d['p50']:9.1%} {d['p90']:9.1%}   n={d['n']}, "
          f"{d['within_goal']}/{d['n']} within {SHARE_GOAL:.0%}")
    print(f"Φ hit rate {w['phi_hit_rate_counted']:.0%} of {w['phi_lookups_counted']} lookups (counters); "
          f"recorded per turn {w['phi_outcomes_recorded']}")
    n_parsed = sum(w["w1_labels"].values())
    print(f"W1 labels {w['w1_labels']}; intent = scripted {w['intent_matches_script']}/{n_parsed}, "
          f"label = scripted {w['label_matches_script']}/{n_parsed}")
    print(f"narration chars p50 {w['narration_chars']['p50']:.0f} p90 {w['narration_chars']['p90']:.0f}; "
          f"the prompt's placeholder copied {w['narration_is_prompt_placeholder']}x, at the cap "
          f"{w['narration_at_cap']}x; turns without narration {w['turns_without_narration']}")
    print(f"statuses sgc_w1 {w['statuses']} fallbacks {w['fallbacks']} errors {w['errors']} | "
          f"pe_agent {p['statuses']} fallbacks {p['fallbacks']}")


# --- main -------------------------------------------------------------------------------------


def pipeline_for_kind(pipeline: dict[str, Any], kind: str) -> dict[str, Any]:
    """``pipeline`` for an app of ``kind``: the settings that kind's model declares (others refused at load)."""
    from typing import get_args

    from pipelines import registry

    for model in get_args(get_args(registry.PipelineSettings)[0]):
        if kind in get_args(model.model_fields["kind"].annotation):
            return {k: v for k, v in pipeline.items() if k in model.model_fields} | {"kind": kind}
    raise ValueError(f"unknown pipeline kind {kind!r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(REPO / "configs" / "embedded.yaml"))
    ap.add_argument("--turns", type=int, default=20, help="measured coach openings (one turn of each rung each)")
    ap.add_argument("--warmup", type=int, default=2, help="openings run first and not measured")
    ap.add_argument("--seed", type=int, default=0, help="generate_sessions seed")
    ap.add_argument("--world-seed", type=int, default=7)
    ap.add_argument("--app-kind", default="prompting",
                    help="pipeline kind of the started app (the bench drives the model deployment directly)")
    ap.add_argument("--out", default=str(REPO / "results" / "bench_first_token.json"))
    ap.add_argument("--from-json", default=None,
                    help="recompute and print the summary of an earlier results file (no engine); rewrites it")
    ns = ap.parse_args()

    if ns.from_json:
        old = json.loads(Path(ns.from_json).read_text())
        data = {"rows": old["turns_detail"], "counters": old["counters"], "settings": old["settings"]}
        old["summary"] = summarise(data)
        report(old["summary"])
        Path(ns.from_json).write_text(json.dumps(old, indent=2, default=str))
        print(f"rewrote {ns.from_json}")
        return 0

    import ray
    import yaml
    from ray import serve

    from serve.config import load_serve_file
    from serve.deploy import wait_app_running
    from serve.launch import start_app, wait_ready
    from serve.model_client import ServeModelClient
    from tests.integration.conftest import deep_merge, free_port

    tmp = Path(tempfile.mkdtemp(prefix="bench-first-token-"))
    raw = yaml.safe_load(Path(ns.config).read_text())
    entry = raw["applications"][0]
    # settings are per kind: the app kind gets the config's settings its own model declares
    entry["args"]["pipeline"] = pipeline_for_kind(entry["args"].get("pipeline", {}), ns.app_kind)
    entry["args"] = deep_merge(entry["args"], {
        "store": {"kind": "sqlite", "path": str(tmp / "sessions.db")},
        "telemetry": {"jsonl_dir": str(tmp / "telemetry")},
        "domain": {"world_path": str(tmp / "world.db")},
    })
    cfg_file = tmp / "app.yaml"
    cfg_file.write_text(yaml.safe_dump(raw))
    args = load_serve_file(cfg_file).applications[0].args

    shm_before = _shm()
    shm_ours: set[str] = set()
    t_start = time.monotonic()
    ep = start_app(str(cfg_file), http_port=free_port(), grpc_port=free_port(), metrics_port=None)
    try:
        wait_app_running(ep["app"], timeout_s=600)
        wait_ready(ep["http"], timeout_s=600)
        ready_s = time.monotonic() - t_start
        print(f"app ready in {ready_s:.1f} s", file=sys.stderr, flush=True)
        shm_ours |= _shm_used_by_tree(os.getpid())
        handles: dict[str, Any] = {}
        routes = {}
        for role in ("orchestrator", "generator", "slot_extractor"):
            mid = args.model_for_role(role).model_id
            if mid not in handles:
                handles[mid] = serve.get_deployment_handle(f"LLMServer:{mid}", app_name=ep["app"])
            routes[role] = (handles[mid], mid)
        client = ServeModelClient(routes)
        t_bench = time.monotonic()
        env_before = {"loadavg": os.getloadavg(), "foreign_raylets": _foreign_raylets(os.getpid())}
        data = asyncio.run(bench(client, ns, args.pipeline))
        bench_s = time.monotonic() - t_bench
        env_after = {"loadavg": os.getloadavg(), "foreign_raylets": _foreign_raylets(os.getpid())}
        shm_ours |= _shm_used_by_tree(os.getpid())
        summary = summarise(data)
        report(summary)
        result = {
            "summary": summary,
            "counters": data["counters"],
            "settings": data["settings"],
            "models": {role: mid for role, (_, mid) in routes.items()},
            "config": ns.config, "app_kind": ns.app_kind, "turns": ns.turns, "warmup": ns.warmup,
            "seed": ns.seed, "world_seed": ns.world_seed, "app_ready_s": ready_s, "bench_s": bench_s,
            "host": {"cpus": os.cpu_count(), "before_bench": env_before, "after_bench": env_after},
            "published": PUBLISHED,
            "turns_detail": data["rows"],
        }
        Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.out).write_text(json.dumps(result, indent=2, default=str))
        print(f"wrote {ns.out}")
    finally:
        try:
            shm_ours |= _shm_used_by_tree(os.getpid())
        except Exception:
            pass
        try:
            serve.shutdown()
        except Exception as exc:  # shutdown must go on
            print(f"serve.shutdown: {exc}", file=sys.stderr)
        ray.shutdown()
        time.sleep(1.0)
        removed = 0
        for name in (_shm() - shm_before) & shm_ours:
            try:
                os.unlink(os.path.join("/dev/shm", name))
                removed += 1
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)  # the private config, store, world and telemetry of this run
        others = (_shm() - shm_before)
        print(f"/dev/shm: removed {removed} file(s) this run created"
              + (f"; left {len(others)} new file(s) not attributable to this run" if others else ""),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
