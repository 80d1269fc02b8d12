"""Load tests of the public turn API: clients, arrival processes, mixes, metrics, plots, runner.

* :mod:`.arrivals` — seeded Poisson / gamma (bursty) arrival processes;
* :mod:`.workload` — session scripts from tau2 openings, coach sessions, JSONL, built-ins;
* :mod:`.clients`  — HTTP/SSE (httpx) and gRPC (grpc.aio) streaming clients, per-request records,
  the loopback-only guard;
* :mod:`.metrics`  — percentiles, SLOs, goodput, throughput series, Pareto fronts;
* :mod:`.replicas` — replica counts over time from ``serve.status()``;
* :mod:`.runner`   — closed- and open-loop, bounded runs;
* :mod:`.report`   — JSON / CSV writers and matplotlib plots;
* :mod:`.cli`      — ``main(argv)`` (``tandem load``, ``scripts/loadtest.py``).
"""

from __future__ import annotations

from .arrivals import GammaArrivals, PoissonArrivals, arrival_times, make_arrivals
from .clients import (
    GrpcTurnClient,
    HttpTurnClient,
    RemoteTargetRefused,
    RequestRecord,
    SSEParser,
    check_target,
)
from .metrics import SLO, distribution, meets_slo, pareto_front, percentile, summarize
from .replicas import ReplicaPoller, connect_ray, serve_replica_counts
from .runner import HARD_CAPS, LoadResult, LoadSpec, run_load, run_load_sync
from .workload import Workload, WorkloadUnavailable, load_workload

__all__ = [
    "GammaArrivals", "PoissonArrivals", "arrival_times", "make_arrivals",
    "GrpcTurnClient", "HttpTurnClient", "RemoteTargetRefused", "RequestRecord", "SSEParser", "check_target",
    "SLO", "distribution", "meets_slo", "pareto_front", "percentile", "summarize",
    "ReplicaPoller", "connect_ray", "serve_replica_counts",
    "HARD_CAPS", "LoadResult", "LoadSpec", "run_load", "run_load_sync",
    "Workload", "WorkloadUnavailable", "load_workload",
    "main",
]


def main(argv: list[str] | None = None) -> int:
    """The ``tandem load`` command (see :mod:`serve.loadtest.cli`)."""
    from .cli import main as _main

    return _main(argv)
