"""The prefix / priority benchmarks' own logic: layouts, accounting and the recorded-call summaries
(the engines they drive are replaced by a fake prefix cache here)."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import device_prefix_priority as dpp  # noqa: E402

from scripts.prefix_driver import _usage, pct, session_scripts, summarize_calls  # noqa: E402

BLOCK = 16


@dataclass
class _Out:
    token_ids: list[int]
    text: str


@dataclass
class _Result:
    outputs: list[_Out]
    prompt_token_ids: list[int]
    num_cached_tokens: int


@dataclass
class FakeEngine:
    """A prefix cache in characters: a prompt's cached part is its longest block-aligned prefix
    shared with any earlier prompt (one character = one token)."""

    seen: list[str] = field(default_factory=list)
    priorities: list[tuple[str, int]] = field(default_factory=list)

    def cached(self, prompt: str) -> int:
        best = 0
        for old in self.seen:
            n = len(os.path.commonprefix([old, prompt]))
            best = max(best, n - n % BLOCK)
        return min(best, len(prompt) - 1)

    async def generate(self, prompt: str, params: Any, rid: str, priority: int = 0):
        self.priorities.append((rid, priority))
        cached = self.cached(prompt)
        self.seen.append(prompt)
        await asyncio.sleep(0)
        yield _Result([_Out([1, 2], '{"decision": "respond"}')], list(range(len(prompt))), cached)


def render(msgs: list[dict[str, str]]) -> str:
    return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in msgs)


SPEC = {"head": "POLICY " * 40 + "Tools: a; b; c; d; e; f", "policy": "POLICY " * 40, "requests": ["Where is my order?"],
        "sessions": 3, "turns": 3, "steps": 3, "concurrency": 1}


def test_append_only_prompts_extend_the_previous_step() -> None:
    s1 = dpp.append_messages("H", [("u0", "a0")], "req", [("obs1", "")])
    s2 = dpp.append_messages("H", [("u0", "a0")], "req", [("obs1", "d1"), ("obs2", "")])
    assert s2[: len(s1)] == s1  # step 2's messages start with step 1's
    r1 = dpp.rewrite_messages("P", [], "req", [], 1)
    r2 = dpp.rewrite_messages("P", [], "req", ["o1"], 2)
    assert r1[0] != r2[0]  # the rewrite layout changes its system message between steps


def test_the_append_layout_is_served_from_the_cache_and_the_rewrite_layout_much_less() -> None:
    engine = FakeEngine()
    out = asyncio.run(dpp.run_prefix(engine, render, None, SPEC, lambda: {}, pct))
    append, rewrite = out["append"]["measured"], out["rewrite"]["measured"]
    assert append["n"] == rewrite["n"] == 3 * (3 * 3 - 1)  # all but each session's first step
    assert append["hit_rate"] > rewrite["hit_rate"]
    for layout, reused in (("append", True), ("rewrite", False)):
        calls = out[layout]["calls"]
        for prev, cur in zip(calls, calls[1:], strict=False):
            if cur["step"] >= 2:  # the previous step's whole prompt is (append) / is not (rewrite) reused
                assert (cur["cached_tokens"] >= prev["prompt_tokens"] - BLOCK) is reused, (layout, cur)
    assert out["append"]["first_step_of_turn_1"]["n"] == 3
    assert len({rid for rid, _ in engine.priorities}) == 2 * 3 * 3 * 3  # every request id distinct


def test_hit_summary_counts_tokens_over_the_measured_calls() -> None:
    rows = [{"turn": 1, "step": 1, "prompt_tokens": 100, "cached_tokens": 0, "ttft_s": 0.1},
            {"turn": 1, "step": 2, "prompt_tokens": 120, "cached_tokens": 96, "ttft_s": 0.05},
            {"turn": 2, "step": 1, "prompt_tokens": 150, "cached_tokens": 120, "ttft_s": 0.04}]
    s = dpp.hit_summary(rows, pct)
    assert s["measured"]["queries"] == 270 and s["measured"]["hits"] == 216
    assert s["measured"]["hit_rate"] == pytest.approx(0.8)
    assert s["first_step_of_turn_1"]["n"] == 1 and s["all"]["queries"] == 370


def test_the_priority_run_asks_first_calls_at_the_first_priority() -> None:
    engine = FakeEngine()
    spec = {**SPEC, "first_priority": -1, "concurrency": 3, "turns": 7, "first_tokens": 8, "step_tokens": 8,
            "reply_tokens": 8}
    out = asyncio.run(dpp.run_priority(engine, render, lambda n: n, spec, pct))
    firsts = [p for rid, p in engine.priorities if rid.endswith("-0")]
    others = [p for rid, p in engine.priorities if not rid.endswith("-0")]
    assert firsts == [-1] * 7 and others == [0] * 21
    assert out["turns"] == 7 and out["first_call_ttft_ms"]["p50"] is not None


# -- the app-side benchmark (scripts/bench_prefix.py) --------------------------------------


def test_usage_is_read_from_the_final_chunk() -> None:
    item = ['data: {"choices": [{"delta": {"content": "hi"}}]}\n\n',
            'data: {"choices": [], "usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 32}}}\n\n',
            "data: [DONE]\n\n"]
    assert _usage(item) == {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 32}}
    assert _usage(['data: {"choices": [{"delta": {"content": "hi"}}]}\n\n']) is None


def _rec(layout: str, turn: int, index: int, role: str = "orchestrator", p: int = 100, c: int = 50) -> dict[str, Any]:
    return {"layout": layout, "session": "s", "turn": turn, "role": role, "index": index, "prompt_tokens": p,
            "cached_tokens": c, "ttft_ms": 10.0 * (index + 1)}


def test_the_measured_calls_are_later_calls_of_a_turn_and_every_call_of_later_turns() -> None:
    recs = [_rec("after", 1, 0, p=100, c=0), _rec("after", 1, 1, p=200, c=150), _rec("after", 2, 0, p=300, c=200),
            _rec("after", 2, 0, role="generator", p=80, c=0), {**_rec("after", 2, 1), "prompt_tokens": None,
                                                                "cached_tokens": None}]
    s = summarize_calls(recs)["layouts"]["after"]
    assert s["measured"]["n"] == 3 and s["measured"]["usage_missing"] == 1
    assert s["measured"]["queries"] == 500 and s["measured"]["hits"] == 350
    assert s["first_call_of_turn_1"]["n"] == 1 and s["first_call_of_turns_ge_2"]["n"] == 1
    assert s["all_calls"]["queries"] == 680


def test_sessions_are_distinct_users_and_never_confirm_a_write() -> None:
    scripts = session_scripts(12, 4)
    assert len({s[0] for s in scripts}) == 12 and all(len(s) == 4 for s in scripts)
    assert not any(t.strip().lower().rstrip(".!") in ("yes", "y", "confirm") for s in scripts for t in s)
    with pytest.raises(ValueError):
        session_scripts(10_000, 2)


def test_the_benchmark_config_turns_on_per_request_cache_reports(tmp_path: Path) -> None:
    from scripts.bench_prefix import derive_config
    from serve.config import load_serve_file

    path = derive_config(ROOT / "configs" / "embedded.yaml", tmp_path, replicas=2,
                         router="ray.serve.llm.request_router.PrefixCacheAffinityRouter")
    args = load_serve_file(path).applications[0].args
    m = args.model_for_role("orchestrator")
    assert m.engine_kwargs["enable_prompt_tokens_details"] is True
    assert m.deployment.num_replicas == 2
    assert m.deployment.request_router_config is not None
    raw = yaml.safe_load(path.read_text())["applications"][0]["args"]
    assert raw["pipeline"]["kind"] == "tandem"
