"""The ingress's adaptive admission: turns over the measured limit are refused at once through the error table
(503 + Retry-After over HTTP, UNAVAILABLE over gRPC), nothing of them stored; admitted ones complete and teach
the limit the box's rate."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import grpc

from serve.protos import assistant_pb2 as pb
from serve.testing import FakeGrpcContext, FakeHandle

from .edge_app import auth, config, stored_turns


class GatedLLM:
    """A model deployment whose answers wait for ``gate`` (created inside the test's loop)."""

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None
        self.handle = FakeHandle(self)

    def __call__(self, method: str, args: tuple, kwargs: dict) -> Any:
        if method != "chat":
            return None

        async def answer():
            assert self.gate is not None
            await self.gate.wait()
            for text in ("All ", "done."):
                yield [f"data: {json.dumps({'choices': [{'delta': {'content': text}}]})}\n\n"]
            yield ["data: [DONE]\n\n"]
        return answer()


def _harness(tmp: Path, llm: GatedLLM, **admission: Any):
    import os

    from serve.testing import IngressHarness

    os.environ["TANDEM_CACHE"] = str(tmp / "cache")
    adm = {"mode": "adaptive", "initial_limit": 2, **admission}
    return IngressHarness(config(tmp, ingress={"admission": adm}), llm=llm.handle)


def test_a_burst_over_the_limit_is_refused_at_once_and_the_admitted_turns_complete(tmp_path: Path) -> None:
    llm = GatedLLM()
    with _harness(tmp_path, llm) as h:
        async def burst() -> list[Any]:
            llm.gate = asyncio.Event()
            async with h.client() as c:
                posts = [asyncio.create_task(c.post(f"/v1/sessions/b{i}/turns", json={"text": "hi"},
                                                    headers=auth("alice"))) for i in range(5)]
                for _ in range(50):  # the refusals come back while the admitted two still wait for the model
                    await asyncio.sleep(0.01)
                    if sum(p.done() for p in posts) == 3:
                        break
                refused_first = sum(p.done() for p in posts)
                llm.gate.set()
                return [refused_first, *await asyncio.gather(*posts)]

        refused_first, *answers = asyncio.run(burst())
        assert refused_first == 3
        codes = sorted(r.status_code for r in answers)
        assert codes == [200, 200, 503, 503, 503]
        for r in answers:
            if r.status_code == 503:
                body = r.json()
                assert body["error"]["code"] == "overloaded" and int(r.headers["retry-after"]) >= 1
                assert body["error"]["details"] == {"in_flight": 2, "limit": 2}
        for i, r in enumerate(answers):  # a refused turn stored nothing
            assert len(stored_turns(tmp_path, f"b{i}")) == (1 if r.status_code == 200 else 0)
        snap = asyncio.run(h.ingress.admission_snapshot())
        assert snap["in_flight"] == 0 and snap["admitted"] == 2 and snap["refused"] == 3 and snap["completed"] == 2
        assert snap["rate_per_s"] is not None and snap["rate_per_s"] > 0


def test_grpc_turns_over_the_limit_are_unavailable_with_a_retry_hint(tmp_path: Path) -> None:
    llm = GatedLLM()
    with _harness(tmp_path, llm, initial_limit=1) as h:
        async def two() -> tuple[FakeGrpcContext, FakeGrpcContext]:
            llm.gate = asyncio.Event()
            first_ctx, second_ctx = FakeGrpcContext(auth("alice")), FakeGrpcContext(auth("alice"))
            first = asyncio.create_task(h.ingress.Turn(pb.TurnRequest(session_id="g1", text="hi"), first_ctx))
            await asyncio.sleep(0.05)
            await h.ingress.Turn(pb.TurnRequest(session_id="g2", text="hi"), second_ctx)
            llm.gate.set()
            await first
            return first_ctx, second_ctx

        first, second = asyncio.run(two())
        assert first.code is None
        assert second.code == grpc.StatusCode.UNAVAILABLE and dict(second.trailing)["retry-after"] >= "1"
        assert len(stored_turns(tmp_path, "g1")) == 1 and stored_turns(tmp_path, "g2") == []


def test_admission_off_admits_everything_the_deployment_lets_in(tmp_path: Path) -> None:
    llm = GatedLLM()
    with _harness(tmp_path, llm, mode="off") as h:
        assert h.ingress.admission is None
        assert asyncio.run(h.ingress.admission_snapshot()) == {}


def test_a_turn_refused_after_admission_frees_its_slot(tmp_path: Path) -> None:
    llm = GatedLLM()
    with _harness(tmp_path, llm, initial_limit=1) as h:
        async def go() -> list[int]:
            llm.gate = asyncio.Event()
            llm.gate.set()
            async with h.client() as c:
                a = await c.post("/v1/sessions/own/turns", json={"text": "hi"}, headers=auth("alice"))
                b = await c.post("/v1/sessions/own/turns", json={"text": "hi"}, headers=auth("bob"))  # not bob's
                d = await c.post("/v1/sessions/next/turns", json={"text": "hi"}, headers=auth("bob"))
                return [a.status_code, b.status_code, d.status_code]

        assert asyncio.run(go()) == [200, 404, 200]
        assert asyncio.run(h.ingress.admission_snapshot())["in_flight"] == 0


def test_a_call_cancelled_mid_turn_frees_its_slot(tmp_path: Path) -> None:
    llm = GatedLLM()
    with _harness(tmp_path, llm, initial_limit=1) as h:
        async def go() -> dict[str, Any]:
            llm.gate = asyncio.Event()  # never set: the turn waits for the model until cancelled
            call = asyncio.create_task(h.ingress.Turn(pb.TurnRequest(session_id="c1", text="hi"),
                                                      FakeGrpcContext(auth("alice"))))
            for _ in range(100):
                await asyncio.sleep(0.01)
                if (await h.ingress.admission_snapshot())["in_flight"] == 1:
                    break
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            return await h.ingress.admission_snapshot()

        snap = asyncio.run(go())
        assert snap["admitted"] == 1 and snap["in_flight"] == 0 and snap["completed"] == 0
