"""serve.foreign: every exception class Ray exports is translated at the handle boundary (httpx style).

The inventory below is every class ``ray.exceptions`` and ``ray.serve.exceptions``
export today. When Ray adds one, the completeness test fails until someone decides
where it belongs (and adds it here).
"""

from __future__ import annotations

import asyncio
import inspect

import pytest
import ray.exceptions as ray_exc
import ray.serve.exceptions as serve_exc

from pipelines import errors as E
from pipelines.errors import TandemError
from serve.adapters import HandleGuardrails, HandleRuleKernels, HandleTools
from serve.foreign import CPU_ERRORS, MODEL_ERRORS, PASSTHROUGH, translate
from serve.testing import FakeHandle, RemoteError

INVENTORY = {
    "ActorAlreadyExistsError", "ActorDiedError", "ActorHandleNotFoundError", "ActorPlacementGroupRemoved",
    "ActorUnavailableError", "ActorUnschedulableError", "AsyncioActorExit", "AuthenticationError",
    "CrossLanguageError", "GetTimeoutError", "LocalRayletDiedError", "NodeDiedError", "ObjectFetchTimedOutError",
    "ObjectFreedError", "ObjectLostError", "ObjectReconstructionFailedError", "ObjectRefStreamEndOfStreamError",
    "ObjectStoreFullError", "OufOfBandObjectRefSerializationException", "OutOfDiskError", "OutOfMemoryError",
    "OwnerDiedError", "PendingCallsLimitExceeded", "PlasmaObjectNotAvailable", "RayActorError",
    "RayCgraphCapacityExceeded", "RayChannelError", "RayChannelTimeoutError", "RayDirectTransportError",
    "RayError", "RaySystemError", "RayTaskError", "ReferenceCountingAssertionError", "RpcError",
    "RuntimeEnvSetupError", "StreamingGeneratorReplayInconsistentError", "TaskCancelledError",
    "TaskPlacementGroupRemoved", "TaskUnschedulableError", "UnserializableException", "UserCodeException",
    "WorkerCrashedError", "BackPressureError", "DeploymentUnavailableError", "RayServeException",
    "ReplicaUnavailableError", "RequestCancelledError", "gRPCStatusError",
}


def _foreign() -> list[type[BaseException]]:
    out = {}
    for mod in (ray_exc, serve_exc):
        for name, cls in vars(mod).items():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__.startswith("ray"):
                out[cls] = name
    return sorted(out, key=lambda c: (c.__module__, c.__name__))


def _instance(cls: type[BaseException]) -> BaseException:
    return cls.__new__(cls)  # no constructor arguments needed: only the type matters here


def test_the_inventory_is_complete() -> None:
    """Fails when Ray exports an exception class nobody has reviewed."""
    assert {c.__name__ for c in _foreign()} == INVENTORY


@pytest.mark.parametrize("table", [MODEL_ERRORS, CPU_ERRORS], ids=["model", "cpu"])
@pytest.mark.parametrize("cls", _foreign(), ids=lambda c: f"{c.__module__.split('.')[-1]}.{c.__name__}")
def test_every_foreign_error_becomes_a_tandem_error_or_passes_as_cancellation(table, cls) -> None:
    exc = _instance(cls)
    out = translate(exc, table, what="x", default=E.UpstreamError if table is MODEL_ERRORS else E.ToolError)
    if isinstance(exc, PASSTHROUGH):
        assert out is exc
    else:
        assert isinstance(out, TandemError), cls


@pytest.mark.parametrize(("foreign", "model", "cpu"), [
    ("BackPressureError", E.Overloaded, E.Overloaded),
    ("PendingCallsLimitExceeded", E.Overloaded, E.Overloaded),
    ("DeploymentUnavailableError", E.ModelUnavailable, E.ToolError),
    ("ReplicaUnavailableError", E.ModelUnavailable, E.ToolError),
    ("ActorDiedError", E.ModelUnavailable, E.ToolError),
    ("ActorUnavailableError", E.ModelUnavailable, E.ToolError),
    ("WorkerCrashedError", E.ModelUnavailable, E.ToolError),
    ("NodeDiedError", E.ModelUnavailable, E.ToolError),
    ("OutOfMemoryError", E.ModelUnavailable, E.ToolError),
    ("GetTimeoutError", E.ModelTimeout, E.ToolTimeout),
    ("ObjectFetchTimedOutError", E.ModelTimeout, E.ToolTimeout),
    ("RayServeException", E.UpstreamError, E.ToolError),
    ("RuntimeEnvSetupError", E.UpstreamError, E.ToolError),
])
def test_the_most_specific_class(foreign: str, model: type, cpu: type) -> None:
    cls = getattr(serve_exc, foreign, None) or getattr(ray_exc, foreign)
    assert type(translate(_instance(cls), MODEL_ERRORS, what="m", default=E.UpstreamError)) is model
    assert type(translate(_instance(cls), CPU_ERRORS, what="c", default=E.ToolError)) is cpu


def test_a_tandem_error_raised_in_the_replica_keeps_its_class() -> None:
    inner = E.PayloadTooLarge("too long", details={"limit": 3})
    assert translate(RemoteError(inner), CPU_ERRORS, what="x", default=E.ToolError) is inner
    assert translate(RemoteError(RemoteError(inner)), MODEL_ERRORS, what="x", default=E.UpstreamError) is inner


def test_a_plain_python_error_gets_the_default() -> None:
    assert type(translate(KeyError("k"), CPU_ERRORS, what="x", default=E.ToolError)) is E.ToolError


# -- the adapters use it for every method ------------------------------------------------------


def _raising(exc: BaseException) -> FakeHandle:
    def handler(method, args, kwargs):
        raise exc
    return FakeHandle(handler)


def _calls(handle: FakeHandle) -> list:
    from pipelines.guardrails import PostGuardView

    view = PostGuardView(path="answer")
    return [
        lambda: HandleTools(handle).call("t", {}, None),
        lambda: HandleTools(handle).precheck("t", {}, None),
        lambda: HandleGuardrails(handle).pre("hi"),
        lambda: HandleGuardrails(handle).post("s.", view),
        lambda: HandleTools(handle).call("t", {}, "s"),
        lambda: HandleTools(handle).load_state("s", ["k"]),
        lambda: HandleTools(handle).live_facts("s"),
        lambda: HandleRuleKernels(handle).tables_version(),
        lambda: HandleRuleKernels(handle).w1_tables(),
        lambda: HandleRuleKernels(handle).ground({}, {}, "i"),
        lambda: HandleRuleKernels(handle).schedule("s", [], {}, [], 0),
    ]


@pytest.mark.parametrize(("raised", "expected"), [
    (serve_exc.BackPressureError.__new__(serve_exc.BackPressureError), E.Overloaded),
    (ray_exc.ActorDiedError.__new__(ray_exc.ActorDiedError), E.ToolError),
    (ray_exc.GetTimeoutError.__new__(ray_exc.GetTimeoutError), E.ToolTimeout),
    (RemoteError(E.InvalidInput("bad")), E.InvalidInput),
    (RemoteError(E.IneligibleAction("no")), E.IneligibleAction),
    (RuntimeError("boom"), E.ToolError),
], ids=lambda x: type(x).__name__ if isinstance(x, BaseException) else x.__name__)
def test_every_adapter_method_translates(raised, expected) -> None:
    for call in _calls(_raising(raised)):
        with pytest.raises(expected) as err:
            asyncio.run(call())
        assert type(err.value) is expected
