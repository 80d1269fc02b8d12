"""Replica counts over time, polled from Ray Serve (``serve.status()``) in a background thread.

Works wherever the process is a Ray driver of the cluster that runs the app: the
in-process app of a test or of ``loadtest --start``, or a driver attached with
``ray.init(address="auto")`` (:func:`connect_ray`). The status source is
injectable so the bookkeeping is testable without Ray.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ReplicaSample", "ReplicaPoller", "serve_replica_counts", "connect_ray"]

StatusFn = Callable[[], dict[str, dict[str, Any]]]


@dataclass(frozen=True)
class ReplicaSample:
    """One poll: seconds since the poller's zero, then per deployment its replica states."""

    t_s: float
    deployments: dict[str, dict[str, Any]]

    def running(self, deployment: str) -> int:
        return int(self.deployments.get(deployment, {}).get("RUNNING", 0))

    def total(self, deployment: str) -> int:
        """Replicas that exist or are coming up (not STOPPING)."""
        d = self.deployments.get(deployment, {})
        return sum(int(v) for k, v in d.items() if k.isupper() and k != "STOPPING")


def serve_replica_counts(app_name: str) -> dict[str, dict[str, Any]]:
    """``{deployment: {"RUNNING": n, "STARTING": m, ..., "status": "HEALTHY"}}`` from serve.status()."""
    from ray import serve

    app = serve.status().applications.get(app_name)
    if app is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name, dep in app.deployments.items():
        states: dict[str, Any] = {str(getattr(k, "value", k)): int(v) for k, v in dep.replica_states.items()}
        states["status"] = str(getattr(dep.status, "value", dep.status))
        out[name] = states
    return out


def connect_ray(address: str = "auto") -> None:
    """Attach this process to a running cluster as a driver (no-op when already attached)."""
    import ray

    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)


class ReplicaPoller:
    """Polls replica counts every ``interval_s`` until :meth:`stop`; thread-safe reads."""

    def __init__(self, app_name: str = "tandem", *, interval_s: float = 1.0,
                 status_fn: StatusFn | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.app_name = app_name
        self.interval_s = interval_s
        self._status_fn = status_fn or (lambda: serve_replica_counts(app_name))
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.t0 = clock()
        self.samples: list[ReplicaSample] = []
        self.errors = 0

    def poll_once(self) -> ReplicaSample | None:
        try:
            counts = self._status_fn()
        except Exception:  # a status call can fail while the controller is busy: keep polling
            self.errors += 1
            return None
        s = ReplicaSample(self._clock() - self.t0, counts)
        with self._lock:
            self.samples.append(s)
        return s

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.interval_s)

    def start(self, t0: float | None = None) -> ReplicaPoller:
        self.t0 = self._clock() if t0 is None else t0
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="replica-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
            self._thread = None

    def latest(self) -> ReplicaSample | None:
        with self._lock:
            return self.samples[-1] if self.samples else None

    def deployments(self) -> list[str]:
        with self._lock:
            return sorted({d for s in self.samples for d in s.deployments})

    def first_time(self, pred: Callable[[ReplicaSample], bool], *, after_s: float = float("-inf")) -> float | None:
        """Time of the first sample (at or after ``after_s``) that satisfies ``pred``."""
        with self._lock:
            return next((s.t_s for s in self.samples if s.t_s >= after_s and pred(s)), None)

    def timeline(self) -> list[dict[str, Any]]:
        """JSON-ready samples: ``[{"t_s": .., "running": {dep: n}, "total": {dep: n}}]``."""
        with self._lock:
            return [{"t_s": s.t_s, "running": {d: s.running(d) for d in s.deployments},
                     "total": {d: s.total(d) for d in s.deployments}} for s in self.samples]

    def max_running(self) -> dict[str, int]:
        with self._lock:
            return {d: max(s.running(d) for s in self.samples) for d in {d for s in self.samples for d in s.deployments}}
