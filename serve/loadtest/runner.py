"""The load generator: closed-loop virtual users or open-loop session arrivals, bounded.

Closed loop: ``concurrency`` virtual users, each replaying sessions back to back.
Open loop: sessions start at the instants of an arrival process (Poisson or gamma),
whatever the server's state; ``max_inflight`` caps the sessions in flight, arrivals
beyond it are counted as ``dropped_arrivals``. Either way a session's turns go in
order on one session id. The run stops issuing at the first of: the request budget,
the duration, or ``stop_when()``; turns in flight then finish (each bounded by
``timeout_s``). Hard caps bound every knob.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .arrivals import make_arrivals
from .clients import GrpcTurnClient, HttpTurnClient, RequestRecord, check_target
from .metrics import SLO, summarize, throughput_series
from .replicas import ReplicaPoller
from .workload import Workload

__all__ = ["LoadSpec", "LoadResult", "run_load", "run_load_sync", "HARD_CAPS"]

HARD_CAPS = {"requests": 100_000, "duration_s": 3600.0, "concurrency": 1024, "rate": 1000.0,
             "max_inflight": 4096, "timeout_s": 600.0, "warmup": 1000}


@dataclass
class LoadSpec:
    """What to send, how, and for how long."""

    protocol: Literal["http", "grpc"] = "http"
    target: str = "http://127.0.0.1:8000"
    mode: Literal["closed", "open"] = "closed"
    concurrency: int = 4
    rate: float = 1.0
    arrival: Literal["poisson", "gamma"] = "poisson"
    cv: float = 1.0
    requests: int = 100
    duration_s: float = 60.0
    warmup: int = 0
    timeout_s: float = 120.0
    think_s: float = 0.0
    seed: int = 0
    max_inflight: int = 256
    allow_remote: bool = False
    application: str | None = None
    api_key: str | None = None
    session_prefix: str = "lt"
    progress: bool = True
    honor_retry_after: bool = False  # a turn refused with Retry-After is sent again after it (a polite client)

    def __post_init__(self) -> None:
        if self.protocol not in ("http", "grpc") or self.mode not in ("closed", "open"):
            raise ValueError(f"bad protocol/mode {self.protocol!r}/{self.mode!r}")
        for name in ("requests", "duration_s", "concurrency", "rate", "max_inflight", "timeout_s"):
            v = getattr(self, name)
            if not 0 < v <= HARD_CAPS[name]:
                raise ValueError(f"{name}={v} outside (0, {HARD_CAPS[name]}]")
        if not 0 <= self.warmup <= HARD_CAPS["warmup"]:
            raise ValueError(f"warmup={self.warmup} outside [0, {HARD_CAPS['warmup']}]")
        check_target(self.target, allow_remote=self.allow_remote)

    def client(self) -> HttpTurnClient | GrpcTurnClient:
        if self.protocol == "http":
            return HttpTurnClient(self.target, timeout_s=self.timeout_s, api_key=self.api_key,
                                  max_connections=max(self.concurrency, self.max_inflight if self.mode == "open" else 1),
                                  allow_remote=self.allow_remote)
        return GrpcTurnClient(self.target, timeout_s=self.timeout_s, application=self.application,
                              api_key=self.api_key, allow_remote=self.allow_remote)


@dataclass
class LoadResult:
    """Records, their summary, throughput and replica series of one run."""

    spec: LoadSpec
    workload: str
    records: list[RequestRecord]
    summary: dict[str, Any]
    started_at: float
    series: list[dict[str, float]] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)
    dropped_arrivals: int = 0

    def to_dict(self) -> dict[str, Any]:
        spec = asdict(self.spec)
        spec.pop("api_key", None)
        return {"spec": spec, "workload": self.workload, "started_at": self.started_at,
                "summary": self.summary, "dropped_arrivals": self.dropped_arrivals,
                "throughput_series": self.series, "replicas": self.replicas}


class _Run:
    def __init__(self, spec: LoadSpec, workload: Workload, stop_when: Callable[[], bool] | None) -> None:
        self.spec, self.workload, self.stop_when = spec, workload, stop_when
        self.records: list[RequestRecord] = []
        self.issued = 0
        self.dropped = 0
        self.run_id = uuid.uuid4().hex[:8]
        self.t0 = time.perf_counter()
        self.deadline = self.t0 + spec.duration_s
        self.bar: Any = None

    def stopping(self) -> bool:
        return (self.issued >= self.spec.requests or time.perf_counter() >= self.deadline
                or bool(self.stop_when and self.stop_when()))

    async def session(self, client: Any, script: tuple[str, ...], user: int, sid: str, record: bool = True) -> None:
        i = 0
        while i < len(script):
            if record and self.stopping():
                return
            self.issued += int(record)
            rec = RequestRecord(self.spec.protocol, sid, i, user=user, start_s=time.perf_counter() - self.t0)
            await client.turn(rec, script[i])
            if record:
                self.records.append(rec)
                if self.bar is not None:
                    self.bar.update(1)
                    if not rec.ok:
                        self.bar.set_postfix(errors=sum(1 for r in self.records if not r.ok), refresh=False)
            if self.spec.honor_retry_after and rec.retry_after_s is not None:
                # refused before it ran (nothing stored): the same turn again once the server said to
                await asyncio.sleep(min(rec.retry_after_s, max(0.0, self.deadline - time.perf_counter())))
                continue
            i += 1
            if self.spec.think_s:
                await asyncio.sleep(self.spec.think_s)

    async def closed_user(self, client: Any, user: int) -> None:
        sessions = self.workload.cycle(seed=self.spec.seed * 100_003 + user)
        k = 0
        while not self.stopping():
            await self.session(client, next(sessions), user, f"{self.spec.session_prefix}-{self.run_id}-{user}-{k}")
            k += 1

    async def open_loop(self, client: Any) -> None:
        proc = make_arrivals(self.spec.arrival, self.spec.rate, seed=self.spec.seed, cv=self.spec.cv)
        sessions = self.workload.cycle(seed=self.spec.seed)
        tasks: set[asyncio.Task[None]] = set()
        next_t = self.t0
        for k, gap in enumerate(proc.gaps()):
            next_t += gap
            delay = next_t - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(min(delay, max(0.0, self.deadline - time.perf_counter())))
            if self.stopping():
                break
            if len(tasks) >= self.spec.max_inflight:
                self.dropped += 1
                continue
            t = asyncio.create_task(self.session(client, next(sessions), k, f"{self.spec.session_prefix}-{self.run_id}-o-{k}"))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)

    async def warmup(self, client: Any) -> None:
        n = self.spec.warmup
        if not n:
            return
        sessions = self.workload.cycle(seed=self.spec.seed + 7)
        width = max(1, min(self.spec.concurrency, n))
        for start in range(0, n, width):
            await asyncio.gather(*(self.session(client, next(sessions)[:1], -1, f"warm-{self.run_id}-{start + j}", record=False)
                                   for j in range(min(width, n - start))))


async def run_load(spec: LoadSpec, workload: Workload, *, slo: SLO | None = None,
                   poller: ReplicaPoller | None = None, stop_when: Callable[[], bool] | None = None,
                   client: Any = None) -> LoadResult:
    """Run one bounded load test; returns records and summary.

    ``poller`` is started with the measured window and stopped after it; ``client`` (an object
    with ``async turn(record, text)`` and ``async aclose()``) replaces the spec's client (tests).
    """
    run = _Run(spec, workload, stop_when)
    client = client if client is not None else spec.client()
    started_at = time.time()
    try:
        await run.warmup(client)
        if spec.progress:
            from tqdm import tqdm

            run.bar = tqdm(total=spec.requests, file=sys.stderr, desc=f"{spec.protocol} {spec.mode}",
                           unit="req", mininterval=0.5, leave=False)
        run.t0 = time.perf_counter()
        run.deadline = run.t0 + spec.duration_s
        started_at = time.time()
        if poller is not None:
            poller.start()
        hard_limit = spec.duration_s + spec.timeout_s + 30.0
        if spec.mode == "closed":
            body = asyncio.gather(*(run.closed_user(client, u) for u in range(spec.concurrency)))
        else:
            body = run.open_loop(client)
        await asyncio.wait_for(body, timeout=hard_limit)
    finally:
        duration = time.perf_counter() - run.t0
        if poller is not None:
            poller.stop()
        if run.bar is not None:
            run.bar.close()
        await client.aclose()
    ends = [r.start_s + (r.e2e_ms or 0) / 1000 for r in run.records]
    window = max(ends) if ends else duration
    return LoadResult(spec, workload.name, run.records, summarize(run.records, window, slo), started_at,
                      throughput_series(run.records), poller.timeline() if poller else [], run.dropped)


def run_load_sync(spec: LoadSpec, workload: Workload, **kwargs: Any) -> LoadResult:
    """:func:`run_load` from synchronous code (its own event loop)."""
    return asyncio.run(run_load(spec, workload, **kwargs))
