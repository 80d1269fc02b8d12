"""Two experiments of ``scripts/device_orchestrator_p90.py`` on one GPU: prefix reuse and priorities.

prefix     S sessions x T turns x K steps of one orchestrator, in two prompt layouts, one after
           the other on one engine (prefix caching on):
             rewrite   the system message lists the tools eligible *now* and the state, so it
                       changes per step; observations go into one user message (the ``dr`` layout)
             append    a fixed system head (every tool), the history, the request, then each
                       step's decision and observations appended (the ``tandem`` layout)
           per request: prompt tokens, tokens served from the prefix cache (vLLM's
           ``num_cached_tokens``), time to first token; the engine's own counters
           (``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``) per layout as a check.
           Hit rate over the measured calls: steps >= 2 of a turn and every step of turns >= 2.
priority   closed-loop turns at C in flight on an engine whose batch (max_num_seqs) is smaller
           than C: a short first call (what produces the turn's first visible token) at
           priority -1, two steps and a generator call at 0; run on an fcfs engine and on a
           priority-scheduled one (vLLM: lower runs earlier); first-call TTFT p50/p90 side by side.

The pure parts (layouts, accounting) import nothing from vLLM and are unit-tested.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["TOOLS_BY_STAGE", "rewrite_messages", "append_messages", "observation", "hit_summary",
           "run_prefix", "run_priority"]

# The tools eligible at each stage of a support turn (what the rewrite layout lists per step).
TOOLS_BY_STAGE: tuple[tuple[str, ...], ...] = (
    ("find_user_id_by_email", "find_user_id_by_name_zip", "search_help_articles"),
    ("get_user_details", "get_order_details", "search_help_articles"),
    ("get_order_details", "get_product_details", "card.cancel_order", "card.modify_address"),
)


def observation(session: int, turn: int, step: int) -> str:
    """A short, session-specific tool observation line."""
    oid = f"#W{1000000 + 97 * session + turn:07d}"
    return (f'{step}. get_order_details {{"order_id":"{oid}"}} -> ok status=pending '
            f"total={20 + (session * 7 + step) % 300}.{session % 100:02d} items={1 + step % 3}")


def rewrite_messages(policy: str, history: Sequence[tuple[str, str]], request: str,
                     observations: Sequence[str], step: int) -> list[dict[str, str]]:
    """The rewrite layout of one step: eligible tools and state in the system message."""
    tools = TOOLS_BY_STAGE[min(step, len(TOOLS_BY_STAGE)) - 1]
    state = "authenticated_user=" + ("no" if step == 1 else "user_1001")
    system = f"{policy}\nTools: {'; '.join(tools)}\nState: {state}\nOutput one JSON decision."
    user = [f"U: {u}\nA: {a}" for u, a in history] + [f"User: {request}"]
    if observations:
        user += ["Observations:", *observations]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(user + ["Next decision:"])}]


def append_messages(head: str, history: Sequence[tuple[str, str]], request: str,
                    steps: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The append-only layout: fixed head, history, request, then (observations, decision) pairs.

    ``steps`` holds the user message of each step so far and the model's decision ("" for the
    step being asked now).
    """
    out = [{"role": "system", "content": head}]
    for u, a in history:
        out += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    out.append({"role": "user", "content": request})
    for user, decision in steps:
        out.append({"role": "user", "content": user})
        if decision:
            out.append({"role": "assistant", "content": decision})
    return out


def hit_summary(rows: Sequence[dict[str, Any]], pct: Callable[[list[float], float], float | None]) -> dict[str, Any]:
    """Hit rate (cached / prompt tokens) and TTFT over the measured calls (step >= 2 or turn >= 2)."""
    def block(sel: list[dict[str, Any]]) -> dict[str, Any]:
        q = sum(r["prompt_tokens"] for r in sel)
        h = sum(r["cached_tokens"] for r in sel)
        ttft = [r["ttft_s"] * 1000 for r in sel]
        return {"n": len(sel), "queries": q, "hits": h, "hit_rate": h / q if q else None,
                "ttft_ms": {"p50": pct(ttft, 0.5), "p90": pct(ttft, 0.9)}}

    return {"measured": block([r for r in rows if r["step"] >= 2 or r["turn"] >= 2]),
            "later_steps": block([r for r in rows if r["step"] >= 2]),
            "first_step_of_turns_ge_2": block([r for r in rows if r["step"] == 1 and r["turn"] >= 2]),
            "first_step_of_turn_1": block([r for r in rows if r["step"] == 1 and r["turn"] == 1]),
            "all": block(list(rows))}


async def _one(engine: Any, prompt: str, params: Any, rid: str, priority: int = 0) -> dict[str, Any]:
    t = time.perf_counter()
    ttft, final = None, None
    async for out in engine.generate(prompt, params, rid, priority=priority):
        if ttft is None and out.outputs and out.outputs[0].token_ids:
            ttft = time.perf_counter() - t
        final = out
    lat = time.perf_counter() - t
    return {"text": final.outputs[0].text if final and final.outputs else "", "latency_s": lat,
            "ttft_s": ttft if ttft is not None else lat, "prompt_tokens": len(final.prompt_token_ids or []),
            "cached_tokens": int(getattr(final, "num_cached_tokens", 0) or 0)}


async def _prefix_session(engine: Any, render: Callable[[list[dict[str, str]]], str], params: Any,
                          spec: dict[str, Any], layout: str, sid: int, rows: list[dict[str, Any]]) -> None:
    """One session: ``turns`` turns of ``steps`` orchestrator steps each, in ``layout``."""
    requests = spec["requests"]
    history: list[tuple[str, str]] = []
    for t in range(1, spec["turns"] + 1):
        request = f"{requests[(sid + t) % len(requests)]} (session {sid}, turn {t})"
        steps: list[tuple[str, str]] = []
        obs: list[str] = []
        for k in range(1, spec["steps"] + 1):
            user = ("Observations:\n" + obs[-1] if obs else "No new observations.") + "\nDecide."
            if layout == "rewrite":
                msgs = rewrite_messages(spec["policy"], history[-2:], request, obs, k)
            else:
                msgs = append_messages(spec["head"], history[-2:], request, [*steps, (user, "")])
            r = await _one(engine, render(msgs), params, f"{layout}-{sid}-{t}-{k}")
            rows.append({**r, "session": sid, "turn": t, "step": k})
            steps.append((user, r["text"]))
            obs.append(observation(sid, t, k))
        history.append((request, f"Reply to turn {t} of session {sid}."))


async def run_prefix(engine: Any, render: Callable[[list[dict[str, str]]], str], params: Any, spec: dict[str, Any],
                     counters: Callable[[], dict[str, float]], pct: Any) -> dict[str, Any]:
    """The prefix experiment (see the module docstring); sessions run ``concurrency`` at a time."""
    out: dict[str, Any] = {}
    n = spec["sessions"]
    for li, layout in enumerate(("rewrite", "append")):
        rows: list[dict[str, Any]] = []
        sem = asyncio.Semaphore(spec["concurrency"])

        async def guarded(sid: int, layout: str, rows: list[dict[str, Any]], sem: asyncio.Semaphore) -> None:
            async with sem:
                await _prefix_session(engine, render, params, spec, layout, sid, rows)

        before = counters()  # distinct sessions per layout: no reuse across layouts
        await asyncio.gather(*(guarded(li * n + s, layout, rows, sem) for s in range(n)))
        after = counters()
        out[layout] = hit_summary(rows, pct)
        out[layout]["calls"] = [{k: r[k] for k in ("session", "turn", "step", "prompt_tokens", "cached_tokens", "ttft_s")}
                                for r in sorted(rows, key=lambda r: (r["session"], r["turn"], r["step"]))]
        out[layout]["engine_counters"] = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    out["ratio_ttft_p50_rewrite_over_append"] = _ratio(out, "p50")
    out["ratio_ttft_p90_rewrite_over_append"] = _ratio(out, "p90")
    return out


def _ratio(out: dict[str, Any], q: str) -> float | None:
    a, b = out["append"]["measured"]["ttft_ms"][q], out["rewrite"]["measured"]["ttft_ms"][q]
    return b / a if a and b else None


async def run_priority(engine: Any, render: Callable[[list[dict[str, str]]], str], make_params: Any,
                       spec: dict[str, Any], pct: Any) -> dict[str, Any]:
    """Closed-loop turns: first call (priority ``first``) then two steps and a reply (priority 0)."""
    head, requests = spec["head"], spec["requests"]
    first_p, conc, n = spec["first_priority"], spec["concurrency"], spec["turns"]
    first_params, step_params, reply_params = (make_params(m) for m in (spec["first_tokens"],
                                                                        spec["step_tokens"], spec["reply_tokens"]))
    rng = random.Random(0)
    firsts: list[float] = []
    laters: list[float] = []
    turns: list[float] = []
    counter = iter(range(10**9))

    async def turn() -> None:
        i = next(counter)
        request = f"{requests[i % len(requests)]} (turn {i}, ref {rng.randint(0, 10**6)})"
        msgs = append_messages(head, [], request, [])
        t0 = time.perf_counter()
        r = await _one(engine, render(msgs), first_params, f"p-{i}-0", priority=first_p)
        firsts.append(r["ttft_s"] * 1000)
        steps: list[tuple[str, str]] = [("Decide.", r["text"])]
        for k in (1, 2):
            s = await _one(engine, render(append_messages(head, [], request, [*steps, ("Decide.", "")])),
                           step_params, f"p-{i}-{k}")
            laters.append(s["ttft_s"] * 1000)
            steps.append(("Decide.", s["text"]))
        g = await _one(engine, render([{"role": "user", "content": f"Write the reply for: {request}"}]),
                       reply_params, f"p-{i}-g")
        laters.append(g["ttft_s"] * 1000)
        turns.append((time.perf_counter() - t0) * 1000)

    async def user(quota: int) -> None:
        for _ in range(quota):
            await turn()

    t = time.perf_counter()
    await asyncio.gather(*(user(n // conc + (1 if u < n % conc else 0)) for u in range(conc)))
    wall = time.perf_counter() - t
    return {"concurrency": conc, "turns": n, "wall_s": wall, "first_priority": first_p,
            "first_call_ttft_ms": {"p50": pct(firsts, 0.5), "p90": pct(firsts, 0.9)},
            "later_call_ttft_ms": {"p50": pct(laters, 0.5), "p90": pct(laters, 0.9)},
            "turn_ms": {"p50": pct(turns, 0.5), "p90": pct(turns, 0.9)}}


def describe() -> str:
    """One line per experiment, for the dry run."""
    return json.dumps({"prefix": "rewrite vs append layouts, cached tokens per call",
                       "priority": "first-call TTFT, fcfs vs priority scheduling"})
