"""Every error class raised at every stage of a turn reaches all four edges as its row of the table.

A staged pipeline calls the real adapters and the real model client over fake handles, in
the order of a turn: pre-guard → model (orchestrator) → tool → kernel → generator; the
store stage fails the real SQLite store's save. For each (class, stage) the HTTP JSON
status + code + Retry-After, the SSE answer (the status itself for a class that refuses turns,
since nothing was streamed yet; else the ``error`` event in the stream), the gRPC ``Turn``
status and the gRPC ``StreamTurn`` status must all be the class's row, and a turn is stored
only when the class does not refuse turns.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from typing import Any

import grpc
import pytest
import ray.exceptions as ray_exc
import ray.serve.exceptions as serve_exc

from pipelines import errors as E
from pipelines.errors import TandemError, all_error_classes
from pipelines.events import ReplyDelta
from pipelines.protocols import ChatMessage, ModelCall
from serve.adapters import HandleGuardrails, HandleRuleKernels, HandleTools
from serve.grpc_codec import proto_to_event
from serve.protos import assistant_pb2 as pb
from serve.testing import FakeGrpcContext, FakeHandle, IngressHarness, RemoteError, llm_chunks
from tests.unit.edge_app import KEYS, config, sse_events, stored_turns

pytestmark = pytest.mark.timeout(600)

STAGES = ["pre_guard", "model", "tool", "kernel", "generator"]
FAULT: dict[str, Any] = {"stage": None, "exc": None}
_ids = itertools.count()


def _maybe_fail(stage: str) -> None:
    if FAULT["stage"] == stage:
        exc = FAULT["exc"]
        raise RemoteError(exc) if isinstance(exc, TandemError) else exc  # as Ray hands a replica's error back


def _llm(method: str, args: tuple, kwargs: dict) -> Any:
    if method != "chat":
        return None
    role = args[0].messages[0]["content"]
    _maybe_fail(role)
    return llm_chunks("All ", "good.")


def _cpu(stage: str):
    def handler(method: str, args: tuple, kwargs: dict) -> Any:
        _maybe_fail(stage)
        if method == "pre":
            from pipelines.guardrails import PreGuardResult

            return PreGuardResult(text=args[0])
        return {}
    return handler


class StagedPipeline:
    """A turn that touches every port in order (see module docstring)."""

    name = "staged"

    def __init__(self, models: Any, guardrails: Any, tools: Any, kernels: Any) -> None:
        self.models, self.guardrails, self.tools, self.kernels = models, guardrails, tools, kernels

    @staticmethod
    def _call(role: str) -> ModelCall:
        return ModelCall(messages=[ChatMessage(role="system", content=role), ChatMessage(role="user", content="x")])

    async def run(self, ctx: Any) -> Any:
        await self.guardrails.pre(ctx.request.text, [])
        async for _ in self.models.stream("orchestrator", self._call("model")):
            pass
        await self.tools.call("find_user", {}, None)
        await self.kernels.ground({}, {}, "intent")
        async for text in self.models.stream("generator", self._call("generator")):
            yield ReplyDelta(text=text)


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("matrix")
    import os

    os.environ["TANDEM_CACHE"] = str(tmp / "cache")
    handles = {name: FakeHandle(_cpu(stage)) for name, stage in
               [("tools", "tool"), ("guardrails", "pre_guard"), ("rule_kernels", "kernel")]}
    # A refusal window longer than the turn deadline: a refusal is always the status itself here,
    # however slow the machine (the window itself: tests/unit/test_streaming.py).
    with IngressHarness(config(tmp, ingress={"sse_refusal_window_s": 30}), llm=FakeHandle(_llm),
                        **handles) as harness:
        ing = harness.ingress
        ing.runner.pipeline = StagedPipeline(ing.models, HandleGuardrails(handles["guardrails"]),
                                             HandleTools(handles["tools"]), HandleRuleKernels(handles["rule_kernels"]))
        harness.tmp = tmp
        yield harness


AUTH = {"authorization": f"Bearer {KEYS['alice']}"}


def _edges(h: IngressHarness) -> dict[str, Any]:
    """One turn per edge, each in a fresh session: what every edge answered."""
    sids = {k: f"m{next(_ids)}" for k in ("json", "sse", "turn", "stream")}

    async def http() -> tuple[Any, Any]:
        async with h.client() as c:
            j = await c.post(f"/v1/sessions/{sids['json']}/turns", json={"text": "hi"}, headers=AUTH)
            s = await c.post(f"/v1/sessions/{sids['sse']}/turns", json={"text": "hi"},
                             headers={**AUTH, "accept": "text/event-stream"})
            return j, s

    j, s = asyncio.run(http())
    tctx = FakeGrpcContext(AUTH)
    asyncio.run(h.ingress.Turn(pb.TurnRequest(session_id=sids["turn"], text="hi"), tctx))
    sctx = FakeGrpcContext(AUTH)

    async def stream() -> tuple[list, BaseException | None]:
        out = []
        try:
            async for m in h.ingress.StreamTurn(pb.TurnRequest(session_id=sids["stream"], text="hi"), sctx):
                out.append(proto_to_event(m))
        except Exception as exc:
            return out, exc
        return out, None

    sevents, serr = asyncio.run(stream())
    return {"json": j, "sse": s, "turn": tctx, "stream": (sctx, sevents, serr), "sids": sids}


def _check(h: IngressHarness, out: dict[str, Any], cls: type[TandemError], retry: float | None,
           stored: list[str] | None = None) -> None:
    j = out["json"]
    assert j.status_code == cls.http_status and j.json()["error"]["code"] == cls.code
    assert j.headers.get("retry-after") == (None if retry is None else "1")
    s = out["sse"]
    sctx, sevents, serr = out["stream"]
    grpc_code = getattr(grpc.StatusCode, cls.grpc_status)
    if cls.rejects_turn:  # refused before any output: the status itself, on the stream routes too
        assert s.status_code == cls.http_status and s.json()["error"]["code"] == cls.code
        assert s.headers.get("retry-after") == (None if retry is None else "1")
        # the stream's trailers are dropped by Ray Serve's proxy when it fails: a retry hint is its one message
        assert [(e.type, e.code, e.retry_after_s) for e in sevents] == ([] if retry is None else
                                                                         [("error", cls.code, retry)])
    else:
        assert s.status_code == 200
        evs = sse_events(s.text)
        err = [e for e in evs if e["type"] == "error"]
        assert err and err[-1]["code"] == cls.code and err[-1]["retry_after_s"] == retry
        assert evs[-1]["type"] == "done" and evs[-1]["status"] == "failed"
        assert [e.type for e in sevents][-2:] == ["error", "done"] and sevents[-2].code == cls.code
    assert out["turn"].code is grpc_code
    assert out["turn"].trailing == ([("retry-after", "1")] if retry is not None else ())
    assert sctx.code is grpc_code and serr is not None
    for sid in out["sids"].values():
        rows = stored_turns(h.tmp, sid)
        want = stored if stored is not None else [] if cls.rejects_turn else ["failed"]
        assert [r["status"] for r in rows] == want, (sid, cls)


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_every_class_at_every_stage(h: IngressHarness, cls: type[TandemError], stage: str) -> None:
    FAULT.update(stage=stage, exc=cls(f"{cls.__name__} at {stage}"))
    try:
        out = _edges(h)
    finally:
        FAULT.update(stage=None, exc=None)
    _check(h, out, cls, cls.retry_after_s)


def _foreign(cls: type[BaseException]) -> BaseException:
    return cls.__new__(cls)


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize(("foreign", "model_cls", "cpu_cls"), [
    (serve_exc.BackPressureError, E.Overloaded, E.Overloaded),
    (ray_exc.ActorDiedError, E.ModelUnavailable, E.ToolError),
    (ray_exc.GetTimeoutError, E.ModelTimeout, E.ToolTimeout),
    (RuntimeError, E.UpstreamError, E.ToolError),
], ids=lambda x: getattr(x, "__name__", x))
def test_foreign_errors_at_every_stage(h: IngressHarness, stage: str, foreign, model_cls, cpu_cls) -> None:
    FAULT.update(stage=stage, exc=_foreign(foreign) if foreign is not RuntimeError else RuntimeError("x"))
    try:
        out = _edges(h)
    finally:
        FAULT.update(stage=None, exc=None)
    cls = model_cls if stage in ("model", "generator") else cpu_cls
    _check(h, out, cls, cls.retry_after_s)


def test_the_store_stage(h: IngressHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*a: Any, **k: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(h.ingress.store.inner, "_save", broken)
    out = _edges(h)
    _check(h, out, E.StoreUnavailable, 1.0, stored=[])  # nothing half-written
    evs = sse_events(out["sse"].text)
    assert [e["type"] for e in evs] == ["reply.delta", "reply.delta", "error", "done"]  # the reply was streamed
    monkeypatch.undo()
    after = _edges(h)  # and the app keeps serving
    assert after["json"].status_code == 200 and after["turn"].code is None
