"""What ``tandem cost`` measures on one running app: each turn's cost alone, then goodput under load.

::

    workload     the pack's tau2 openings (``tandem eval``'s) and a few whole sessions of the pack's own
                 suites (the support pack's flows), interleaved; the same list for every kind
    alone        the workload's first ``turns`` turns one at a time, every session on a fresh id
                 (:func:`serve.eval.runner.run_turn`): each turn's ``done`` event carries its cost block
                 (the engine's usage), its first token and end-to-end time; one user, closed loop
    load         the same workload at each level of concurrent users, closed loop
                 (:func:`serve.loadtest.run_load`): turns per second and goodput at the SLO

Everything is a client of the public turn API; nothing here knows the pipeline kind.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve.loadtest import SLO, LoadSpec, Workload, WorkloadUnavailable, run_load_sync

__all__ = ["TurnCostRecord", "cost_workload", "play_alone", "play_load", "goodput_of", "server_split"]


@dataclass
class TurnCostRecord:
    """One turn played alone: how it ended, its client-side times and its cost block (``None``: none came)."""

    session: int
    index: int
    status: str
    first_token_ms: float | None
    e2e_ms: float
    cost: dict[str, Any] | None = None
    error: str | None = None
    pipeline: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.status in ("ok", "fallback")

    def as_dict(self) -> dict[str, Any]:
        return {"session": self.session, "index": self.index, "status": self.status, "error": self.error,
                "first_token_ms": self.first_token_ms, "e2e_ms": round(self.e2e_ms, 3), "pipeline": self.pipeline,
                "cost": self.cost}


def cost_workload(domain: str, *, tau2: str | None = None, pack_sessions: int = 2,
                  world_seed: int = 7) -> Workload:
    """The pack's tau2 openings (``tandem eval``'s ``tau2-openings`` texts: one turn each, nobody verified)
    with the first ``pack_sessions`` whole sessions of the pack's own suites among them (one after every two
    openings, so a short run has both; ``world_seed``: the world those sessions are written for). Raises
    :class:`WorkloadUnavailable` when the pack has neither."""
    from pipelines.core.evaluation import SuiteOptions, evaluation_of
    from pipelines.domains import load_domain
    from serve.eval.suites import tau2_cases, tau2_dir_of

    pack = load_domain(domain)
    base = Path(tau2) if tau2 else tau2_dir_of(pack)
    openings = [(c["text"],) for c in tau2_cases(base, 0, False)] if base and (base / "tasks_train.json").is_file() else []
    whole: list[tuple[str, ...]] = []
    for build in evaluation_of(pack).suites().values():
        whole += [tuple(t.text for t in c.turns) for c in build(SuiteOptions(world_seed=world_seed)) if len(c.turns) > 1]
    whole = whole[:max(0, pack_sessions)]
    if not openings and not whole:
        raise WorkloadUnavailable(f"the {domain} pack has no tau2 openings and no multi-turn sessions")
    sessions: list[tuple[str, ...]] = []
    for i, s in enumerate(openings):
        if whole and i and i % 2 == 0:  # a whole session after every two openings: a short run holds one
            sessions.append(whole.pop(0))
        sessions.append(s)
    sessions += whole
    return Workload("cost", tuple(sessions))


def _first(sessions: Sequence[tuple[str, ...]], turns: int) -> list[tuple[int, tuple[str, ...]]]:
    """The sessions holding the first ``turns`` turns (the last one cut short if it must be)."""
    out: list[tuple[int, tuple[str, ...]]] = []
    left = turns
    for i, s in enumerate(sessions):
        if left <= 0:
            break
        out.append((i, s[:left]))
        left -= len(out[-1][1])
    return out


def play_alone(http: str, workload: Workload, turns: int, *, tag: str, timeout_s: float,
               api_key: str | None = None) -> list[TurnCostRecord]:
    """The first ``turns`` turns of ``workload``, one at a time (see module docstring)."""
    import httpx

    from serve.eval.runner import run_turn

    out: list[TurnCostRecord] = []
    stamp = time.strftime("%H%M%S")
    with httpx.Client() as client:
        for i, script in _first(workload.sessions, turns):
            sid = f"cost-{tag}-{stamp}-{i}"
            for k, text in enumerate(script):
                r = run_turn(http, sid, text, timeout_s=timeout_s, api_key=api_key, client=client)
                done = r.done
                timings = done.get("timings") or {}
                out.append(TurnCostRecord(session=i, index=k, status=str(done.get("status") or "failed"),
                                          first_token_ms=r.first_token_ms, e2e_ms=r.e2e_ms,
                                          cost=timings.get("cost"), error=r.error, pipeline=str(done.get("pipeline", ""))))
    return out


def goodput_of(records: Sequence[TurnCostRecord], slo: SLO) -> dict[str, float]:
    """Goodput of turns played one at a time: those that succeeded within both SLOs, per second of play."""
    good = [r for r in records if r.ok and (slo.ttft_ms is None or (r.first_token_ms is not None
                                                                   and r.first_token_ms <= slo.ttft_ms))
            and (slo.e2e_ms is None or r.e2e_ms <= slo.e2e_ms)]
    wall_s = sum(r.e2e_ms for r in records) / 1000.0
    n = len(records)
    return {"users": 1, "requests": n, "turns_per_s": sum(1 for r in records if r.ok) / wall_s if wall_s else 0.0,
            "goodput_rps": len(good) / wall_s if wall_s else 0.0, "goodput_fraction": len(good) / n if n else 0.0}


def play_load(http: str, workload: Workload, *, users: int, requests: int, slo: SLO, timeout_s: float,
              tag: str, seed: int = 0, api_key: str | None = None, duration_s: float = 3600.0) -> dict[str, Any]:
    """One closed-loop level: ``users`` users replay the workload's sessions for ``requests`` turns (a turn
    refused with Retry-After is sent again after it, and each refusal counts as a request)."""
    spec = LoadSpec(protocol="http", target=http, mode="closed", concurrency=users, requests=requests,
                    duration_s=duration_s, warmup=0, timeout_s=timeout_s, seed=seed, api_key=api_key,
                    session_prefix=f"cost-{tag}-u{users}", progress=False, honor_retry_after=True)
    res = run_load_sync(spec, workload, slo=slo)
    s = res.summary
    lat = s["latency_ms"]
    return {"users": users, "requests": s["requests"], "ok": s["ok"], "errors": s["errors"],
            "duration_s": round(s["duration_s"], 3), "turns_per_s": s["ok_rps"], "goodput_rps": s["goodput_rps"],
            "goodput_fraction": s["goodput_fraction"], "slo_attainment": s["slo_attainment"],
            "ttft_ms": {"p50": lat["ttft_ms"]["p50"], "p90": lat["ttft_ms"]["p90"]},
            "e2e_ms": {"p50": lat["e2e_ms"]["p50"], "p90": lat["e2e_ms"]["p90"]},
            "server_ms": server_split(lat)}


#: The server's own times of a turn (its ``done`` event's timings) kept per load level.
SERVER_FIELDS = ("queue_ms", "server_first_token_ms", "server_end_ms")


def server_split(latency: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Where a load level's turns spent their time on the server — the queue before the turn ran, the server's
    first token and end, each stage (``stage.<name>``) — as p50 / p90 of the turns that reported it: what a
    first token under load waits on."""
    return {k: {"p50": round(v["p50"], 3), "p90": round(v["p90"], 3)} for k, v in latency.items()
            if (k in SERVER_FIELDS or k.startswith("stage.")) and v.get("n")}
