"""Pipelines hosted in a benchmark process on a running app's deployments, with every model call
recorded (time to first token, prompt tokens, tokens served from the engine's prefix cache).

Used by ``scripts/bench_prefix.py``. The app is started from a Serve file (``serve.launch``);
its CPU deployments and model deployment are reached through Serve handles, exactly as the
ingress reaches them, so the only difference from an app turn is where the pipeline runs.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

__all__ = ["AFFINITY_ROUTER", "RecordingModels", "DriverApp", "session_scripts",
           "prometheus_prefix_counters", "summarize_calls", "pct"]

AFFINITY_ROUTER = "ray.serve.llm.request_router.PrefixCacheAffinityRouter"
_PROM_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def _usage(item: Any) -> dict[str, Any] | None:
    """The usage block of a streamed item, if it carries one."""
    for ev in item if isinstance(item, list) else [item]:
        if not isinstance(ev, str):
            continue
        for line in ev.splitlines():
            payload = line[5:].strip() if line.startswith("data:") else ""
            if payload and payload != "[DONE]":
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    continue
                if chunk.get("usage"):
                    return chunk["usage"]
    return None


class RecordingModels:
    """A :class:`pipelines.protocols.ModelClient` over one model deployment that records each call.

    Every role goes to the same deployment (the embedded profile). A stream its caller closes
    early (W1 stops at ``</NARRATION>``) is drained before the close returns, so the engine's
    final usage (cached tokens) is recorded without decoding concurrently with the next call.
    """

    def __init__(self, handle: Any, model_id: str) -> None:
        self.handle = handle.options(stream=True)
        self.model_id = model_id
        self.records: list[dict[str, Any]] = []
        self._ctx: dict[str, Any] = {}
        self._index: dict[tuple[str, int, str], int] = defaultdict(int)

    def context(self, **ctx: Any) -> None:
        """Label the next calls (layout, session, turn)."""
        self._ctx = dict(ctx)

    async def stream(self, role: str, call: Any) -> AsyncIterator[str]:
        from vllm.entrypoints.generate.base.protocol import StreamOptions

        from serve.model_client import parse_sse_item, to_chat_request

        key = (self._ctx.get("session", ""), self._ctx.get("turn", 0), role)
        rec = {**self._ctx, "role": role, "index": self._index[key], "priority": call.priority,
               "prompt_tokens": None, "cached_tokens": None, "ttft_ms": None, "drained": False}
        self._index[key] += 1
        self.records.append(rec)
        req = to_chat_request(self.model_id, call).model_copy(
            update={"stream_options": StreamOptions(include_usage=True)})
        t0 = time.perf_counter()
        gen = self.handle.chat.remote(req)

        def see(item: Any) -> list[str]:
            usage = _usage(item)
            if usage:
                rec["prompt_tokens"] = usage.get("prompt_tokens")
                rec["cached_tokens"] = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            return parse_sse_item(item)

        try:
            async for item in gen:
                for text in see(item):
                    if rec["ttft_ms"] is None:
                        rec["ttft_ms"] = (time.perf_counter() - t0) * 1000
                    yield text
        except GeneratorExit:  # the caller stopped early: read the rest for the engine's usage
            rec["drained"] = True
            async with asyncio.timeout(300):
                async for item in gen:
                    see(item)
            raise
        finally:
            rec["total_ms"] = (time.perf_counter() - t0) * 1000


class DriverApp:
    """A running app plus pipelines of any kind built in this process on its deployments."""

    def __init__(self, cfg_path: Path, ep: dict[str, Any]) -> None:
        from serve.config import load_serve_file

        self.sf = load_serve_file(cfg_path)
        self.args = self.sf.applications[0].args
        self.ep = ep
        self.app = ep["app"]
        self.metrics_url = ep.get("metrics")
        self.model_id = self.args.model_for_role("orchestrator").model_id

    @classmethod
    @contextmanager
    def start(cls, cfg_path: Path, *, metrics: bool) -> Iterator[DriverApp]:
        """Start Ray, Serve and the app from ``cfg_path``; shut both down on exit."""
        import ray
        from ray import serve

        from serve.launch import start_app, wait_ready
        from serve.loadtest.cli import free_port

        ep = start_app(str(cfg_path), http_port=free_port(), grpc_port=free_port(),
                       metrics_port=free_port() if metrics else None)
        try:
            waited = wait_ready(ep["http"], timeout_s=1500)
            print(f"app ready after {waited:.0f} s", file=sys.stderr, flush=True)
            yield cls(cfg_path, ep)
        finally:
            try:
                serve.shutdown()
            finally:
                ray.shutdown()

    def _handle(self, name: str) -> Any:
        from ray import serve

        return serve.get_deployment_handle(name, app_name=self.app)

    def model_handle(self) -> Any:
        return self._handle(f"LLMServer:{self.model_id}")

    def replica_count(self) -> int:
        from ray import serve

        deps = serve.status().applications[self.app].deployments
        return sum(d.replica_states.get("RUNNING", 0) for n, d in deps.items() if n.startswith("LLMServer"))

    def runner(self, kind: str, models: Any) -> Any:
        """A turn runner over a ``kind`` pipeline (tandem or dr) on the app's deployments."""
        from pipelines.counters import Counters
        from pipelines.guardrails import LocalGuardrails
        from pipelines.registry import DRConfig, Parts, build_pipeline
        from pipelines.turn import TurnRunner
        from serve.adapters import HandleGuardrails, HandleRuleKernels, tool_port
        from serve.stores.sqlite import SQLiteSessionStore

        s = self.args.pipeline
        if kind == "tandem":
            settings: Any = s.model_copy(update={"model_timeout_s": 300.0})
        else:
            settings = DRConfig(max_steps=s.max_steps, orchestrator_max_tokens=s.orchestrator_max_tokens,
                                model_timeout_s=300.0, tool_timeout_s=s.tool_timeout_s,
                                max_reply_tokens=s.max_reply_tokens, temperature=s.temperature, seed=s.seed)
        parts = Parts(models=models, domain=self.args.domain.name,
                      tools=tool_port(self._handle("ToolsServer")),
                      guardrails=(LocalGuardrails() if self.args.guardrails.placement == "ingress"  # as the app
                                  else HandleGuardrails(self._handle("GuardrailsServer"))),
                      kernels=HandleRuleKernels(self._handle("RuleKernels")), counters=Counters())
        store = SQLiteSessionStore(Path(self.args.store.path or "sessions.db").with_suffix(f".{kind}.db"))
        return TurnRunner(build_pipeline(settings, parts), store, max_history_turns=s.max_history_turns,
                          deadline_s=900.0)

    async def turn(self, runner: Any, session_id: str, text: str) -> str:
        """One whole turn; returns its status (``ok`` / ``fallback`` / ``failed``)."""
        from pipelines.events import TurnRequest

        status = "?"
        async for ev in runner.run(session_id, TurnRequest(text=text), trace_id=uuid.uuid4().hex):
            if ev.type == "done":
                status = ev.status
        return status

    async def warmup(self, models: RecordingModels) -> None:
        """One throwaway turn per kind (grammar and schema compilers, the domain heads)."""
        for kind in ("dr", "tandem"):
            models.context(layout="warmup", session=f"warm-{kind}", turn=1)
            await self.turn(self.runner(kind, models), f"warm-{kind}", "Hi! What can you help me with?")


OPENINGS = ("Hi, I'm {first} {last}. My email is {email}.",
            "Hello, my email is {email} and I have a question about an order.",
            "Good morning! You can find me under {email}.")
FOLLOWUPS = ("What is the status of order {order}?", "Can you tell me where my order {order} is?",
             "Has my order {order} shipped yet?")
THIRDS = ("Please cancel order {order}, I ordered it by mistake.",
          "What is your return policy for delivered orders?",
          "I would like to change the shipping address of order {order}.")
FOURTHS = ("Thanks. Anything else I should know about that order?", "Ok, thank you for the help.",
           "Could you summarise what we just discussed?")


def session_scripts(n: int, turns: int, *, seed: int = 7) -> list[list[str]]:
    """``n`` support sessions of ``turns`` user messages, each a different user of the seeded world."""
    from pipelines.domains.support import generate_world

    users = [u for u in generate_world(seed).users.values() if u.orders]
    if n > len(users):
        raise ValueError(f"{n} sessions need {n} users; the world has {len(users)}")
    out = []
    for i, u in enumerate(users[:n]):
        f = {"first": u.name.first_name, "last": u.name.last_name, "email": u.email, "order": u.orders[-1]}
        texts = [OPENINGS[i % 3], FOLLOWUPS[(i // 3) % 3], THIRDS[i % 3], FOURTHS[(i + 1) % 3]]
        out.append([t.format(**f) for t in texts[:turns]])
    return out


def _scrape(url: str) -> dict[str, float]:
    text = httpx.get(url, timeout=10).text
    out: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        m = _PROM_LINE.match(line)
        if m and "prefix_cache_" in m.group(1) and "external" not in m.group(1) and not m.group(1).endswith("_created"):
            try:
                out[m.group(1)] += float(m.group(3))
            except ValueError:
                continue
    return dict(out)


def prometheus_prefix_counters(url: str | None, *, settle_s: float = 8.0, max_wait_s: float = 60.0) -> dict[str, Any]:
    """vLLM's prefix-cache queries / hits (tokens) summed over replicas, once Ray's export settles."""
    if not url:
        return {"queries": 0.0, "hits": 0.0, "series": []}
    time.sleep(settle_s)
    prev, t0 = None, time.monotonic()
    while True:
        cur = _scrape(url)
        if cur == prev or time.monotonic() - t0 > max_wait_s:
            break
        prev = cur
        time.sleep(3.0)
    q = sum(v for k, v in cur.items() if "queries" in k)
    h = sum(v for k, v in cur.items() if "hits" in k)
    return {"queries": q, "hits": h, "series": sorted(cur)}


def _block(rows: list[dict[str, Any]]) -> dict[str, Any]:
    known = [r for r in rows if r["prompt_tokens"] is not None]
    q = sum(r["prompt_tokens"] for r in known)
    h = sum(r["cached_tokens"] or 0 for r in known)
    ttft = [r["ttft_ms"] for r in rows if r["ttft_ms"] is not None]
    return {"n": len(rows), "usage_missing": len(rows) - len(known), "queries": q, "hits": h,
            "hit_rate": h / q if q else None, "ttft_ms": {"p50": pct(ttft, 0.5), "p90": pct(ttft, 0.9)}}


def summarize_calls(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per layout: the measured orchestrator calls, their parts, per call index, and all calls."""
    out: dict[str, Any] = {"layouts": {}, "calls": records}
    for layout in sorted({r["layout"] for r in records}):
        rows = [r for r in records if r["layout"] == layout]
        orch = [r for r in rows if r["role"] == "orchestrator"]
        out["layouts"][layout] = {
            "measured": _block([r for r in orch if r["index"] >= 1 or r["turn"] >= 2]),
            "later_calls_of_a_turn": _block([r for r in orch if r["index"] >= 1]),
            "first_call_of_turns_ge_2": _block([r for r in orch if r["index"] == 0 and r["turn"] >= 2]),
            "first_call_of_turn_1": _block([r for r in orch if r["index"] == 0 and r["turn"] == 1]),
            "by_call_index": {str(i): _block([r for r in orch if r["index"] == i])
                              for i in sorted({r["index"] for r in orch})},
            "all_calls": _block(rows),
        }
    return out
