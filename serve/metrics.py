"""Our counters as Ray Serve metrics (Prometheus, through Ray's metrics export port).

``ServeCounters`` is the one counter family of every pipeline
(:class:`pipelines.counters.Counters`) with every increment mirrored to a
``ray.serve.metrics.Counter``:

    tandem_fallbacks_total{key=<trigger>}        tandem_fallback_classes_total{key=infra|policy}
    tandem_escalations_total{key=<reason_code>}  tandem_blocked_total{key=<kind>}
    tandem_guard_total{key=<stage>.<decision>}   tandem_paths_total{key=<path>}
    tandem_delivered_violations_total{key=<kind>}  (must stay 0)
    tandem_turns_total{pipeline, status}          tandem_first_token_ms (histogram, by pipeline)

and the perception / grounding families (``tandem_<family>_total{key}``: phi hit /
miss_unmapped / miss_state_unavailable, fall_through, dispatch, snapshot, tools, w2, w3, writes).
Ray's exporter adds the ``ray_`` prefix on the Prometheus side (``ray_tandem_fallbacks_total``).
"""

from __future__ import annotations

from typing import Any

from pipelines.counters import Counters

__all__ = ["exported_counters", "ServeCounters", "TurnMetrics", "METRIC_NAMES"]

def _metric_names() -> tuple[str, ...]:
    return (*(f"tandem_{f}_total" for f in Counters.FAMILIES), "tandem_turns_total", "tandem_first_token_ms")


METRIC_NAMES = _metric_names()  # every name ServeCounters, the SGC counters and TurnMetrics export


def exported_counters(base: type, prefix: str = "tandem") -> type:
    """A subclass of a pipelines counters class (``FAMILIES`` + ``_inc``) that mirrors every
    increment to a ``ray.serve.metrics.Counter`` named ``<prefix>_<family>_total{key}``."""

    class Exported(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            from ray.serve.metrics import Counter

            self._metrics: dict[str, Any] = {
                f: Counter(f"{prefix}_{f}_total", description=f"Tandem {f.replace('_', ' ')}", tag_keys=("key",))
                for f in self.FAMILIES
            }

        def _inc(self, family: str, key: str, n: int = 1) -> None:
            super()._inc(family, key, n)
            self._metrics[family].inc(n, tags={"key": key})

    Exported.__name__ = Exported.__qualname__ = f"Exported{base.__name__}"
    return Exported


ServeCounters = exported_counters(Counters)


class TurnMetrics:
    """Per-turn metrics recorded by the ingress from each ``done`` event."""

    def __init__(self) -> None:
        from ray.serve.metrics import Counter, Histogram

        self.turns = Counter("tandem_turns_total", description="Turns by pipeline and status",
                             tag_keys=("pipeline", "status"))
        self.first_token = Histogram(
            "tandem_first_token_ms", description="Time to the first narration or reply token (ms)",
            boundaries=[25, 50, 100, 200, 400, 800, 1600, 3200, 6400, 12800], tag_keys=("pipeline",),
        )

    def record(self, done: Any) -> None:
        self.turns.inc(tags={"pipeline": done.pipeline, "status": done.status})
        if done.timings.first_token_ms is not None:
            self.first_token.observe(done.timings.first_token_ms, tags={"pipeline": done.pipeline})
