"""Foreign errors (Ray, Ray Serve) become :mod:`pipelines.errors` here, at the handle boundary.

Two tables, one per kind of deployment behind a handle:

* :data:`MODEL_ERRORS` — the model deployments (``LLMServer``): a full queue is
  back-pressure (``Overloaded``, 503 + Retry-After), a replica or node gone is
  ``ModelUnavailable`` (503), a timed-out get is ``ModelTimeout`` (504), and any
  other Ray error is an ``UpstreamError`` (502).
* :data:`CPU_ERRORS` — tools, guardrails, rule kernels: back-pressure is
  ``Overloaded``, a timeout ``ToolTimeout``, anything else a ``ToolError``.

A :class:`~pipelines.errors.TandemError` raised *inside* the remote replica
comes back wrapped by Ray; :func:`unwrap` finds it and it keeps its own class.
Cancellation (:class:`RequestCancelledError`, ``asyncio.CancelledError``) is
not an error and passes through unchanged. When several entries match, the
most specific class wins. ``tests/unit/test_foreign_errors.py`` checks every
exception class Ray exports against these tables, so a new one cannot slip
through unreviewed.
"""

from __future__ import annotations

from ray.exceptions import (
    ActorDiedError,
    ActorUnavailableError,
    ActorUnschedulableError,
    GetTimeoutError,
    LocalRayletDiedError,
    NodeDiedError,
    ObjectFetchTimedOutError,
    ObjectLostError,
    OutOfMemoryError,
    OwnerDiedError,
    PendingCallsLimitExceeded,
    RayActorError,
    RayChannelTimeoutError,
    RayError,
    RaySystemError,
    WorkerCrashedError,
)
from ray.serve.exceptions import (
    BackPressureError,
    DeploymentUnavailableError,
    RayServeException,
    ReplicaUnavailableError,
    RequestCancelledError,
)

from pipelines.errors import (
    ModelTimeout,
    ModelUnavailable,
    Overloaded,
    TandemError,
    ToolError,
    ToolTimeout,
    UpstreamError,
)

__all__ = ["MODEL_ERRORS", "CPU_ERRORS", "PASSTHROUGH", "unwrap", "translate"]

def _specific_first(table: dict[type[BaseException], type[TandemError]]) -> dict[type[BaseException], type[TandemError]]:
    """The table ordered so that no entry comes after one of its base classes."""
    return dict(sorted(table.items(), key=lambda kv: -len(kv[0].__mro__)))


PASSTHROUGH: tuple[type[BaseException], ...] = (RequestCancelledError,)

_BACKPRESSURE: dict[type[BaseException], type[TandemError]] = {
    BackPressureError: Overloaded,
    PendingCallsLimitExceeded: Overloaded,
}

MODEL_ERRORS: dict[type[BaseException], type[TandemError]] = _specific_first({
    **_BACKPRESSURE,
    DeploymentUnavailableError: ModelUnavailable,
    ReplicaUnavailableError: ModelUnavailable,
    ActorDiedError: ModelUnavailable,
    ActorUnavailableError: ModelUnavailable,
    ActorUnschedulableError: ModelUnavailable,
    RayActorError: ModelUnavailable,
    WorkerCrashedError: ModelUnavailable,
    NodeDiedError: ModelUnavailable,
    LocalRayletDiedError: ModelUnavailable,
    OwnerDiedError: ModelUnavailable,
    ObjectLostError: ModelUnavailable,
    OutOfMemoryError: ModelUnavailable,
    RaySystemError: ModelUnavailable,
    GetTimeoutError: ModelTimeout,
    ObjectFetchTimedOutError: ModelTimeout,
    RayChannelTimeoutError: ModelTimeout,
    RayServeException: UpstreamError,
    RayError: UpstreamError,
})

CPU_ERRORS: dict[type[BaseException], type[TandemError]] = _specific_first({
    **_BACKPRESSURE,
    GetTimeoutError: ToolTimeout,
    ObjectFetchTimedOutError: ToolTimeout,
    RayChannelTimeoutError: ToolTimeout,
    RayServeException: ToolError,
    RayError: ToolError,
})


def unwrap(exc: BaseException) -> BaseException:
    """The :class:`TandemError` a remote replica raised, if that is what Ray wrapped."""
    cause = getattr(exc, "cause", None)
    while cause is not None and not isinstance(exc, TandemError):
        exc, cause = cause, getattr(cause, "cause", None)
    return exc


def translate(exc: BaseException, table: dict[type[BaseException], type[TandemError]], *, what: str,
              default: type[TandemError]) -> BaseException:
    """The error to raise instead of ``exc`` (``raise translate(...) from exc``).

    A TandemError (also one wrapped by Ray) and the passthrough types come back
    as they are; otherwise the most specific matching entry of ``table``, else ``default``.
    """
    if isinstance(exc, (TandemError, *PASSTHROUGH)):
        return exc
    inner = unwrap(exc)
    if isinstance(inner, TandemError):
        return inner
    matches = [k for k in table if isinstance(exc, k)]
    cls = table[max(matches, key=lambda k: len(k.__mro__))] if matches else default
    return cls(f"{what}: {type(exc).__name__}")
