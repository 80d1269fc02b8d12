"""serve.ingress gRPC methods, in process with a fake grpc_context: auth, tenancy, hostile text, idempotency."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from pipelines import errors as E
from serve.grpc_codec import proto_to_event
from serve.protos import assistant_pb2 as pb
from serve.testing import FakeGrpcContext
from tests.unit.edge_app import KEYS, EchoLLM, harness, stored_turns

pytestmark = pytest.mark.timeout(120)


def md(who: str | None, **extra: str) -> dict[str, str]:
    out = {"authorization": f"Bearer {KEYS[who]}"} if who else {}
    return {**out, **extra}


def turn(h, sid: str, text: str, who: str | None = "alice", **extra) -> tuple[pb.TurnAnswer, FakeGrpcContext]:
    ctx = FakeGrpcContext(md(who, **extra))
    return asyncio.run(h.ingress.Turn(pb.TurnRequest(session_id=sid, text=text), ctx)), ctx


def stream(h, sid: str, text: str, who: str | None = "alice") -> tuple[list, FakeGrpcContext, BaseException | None]:
    ctx = FakeGrpcContext(md(who))

    async def go():
        out, err = [], None
        try:
            async for m in h.ingress.StreamTurn(pb.TurnRequest(session_id=sid, text=text), ctx):
                out.append(proto_to_event(m))
        except Exception as exc:  # what Ray's proxy turns into the status set on the context
            err = exc
        return out, err

    events, err = asyncio.run(go())
    return events, ctx, err


def get(h, sid: str, who: str | None = "alice") -> tuple[pb.Session, FakeGrpcContext]:
    ctx = FakeGrpcContext(md(who))
    return asyncio.run(h.ingress.GetSession(pb.GetSessionRequest(session_id=sid), ctx)), ctx


def test_turn_stream_and_get_session_for_the_owner(tmp_path: Path) -> None:
    with harness(tmp_path) as h:
        ans, ctx = turn(h, "g1", "hi")
        assert ctx.code is None and ans.status == "ok" and ans.reply == "Hello there."
        events, ctx, err = stream(h, "g1", "again")
        assert err is None and ctx.code is None and events[-1].type == "done" and events[-1].status == "ok"
        sess, ctx = get(h, "g1")
        assert ctx.code is None and [t.user_text for t in sess.turns] == ["hi", "again"]


@pytest.mark.parametrize("who", [None, "wrong"])
def test_every_method_needs_a_key(tmp_path: Path, who) -> None:
    with harness(tmp_path) as h:
        bad = {"authorization": "Bearer nope"} if who == "wrong" else {}
        ctx = FakeGrpcContext(bad)
        asyncio.run(h.ingress.Turn(pb.TurnRequest(session_id="g", text="hi"), ctx))
        assert ctx.code is grpc.StatusCode.UNAUTHENTICATED
        ctx = FakeGrpcContext(bad)
        asyncio.run(h.ingress.GetSession(pb.GetSessionRequest(session_id="g"), ctx))
        assert ctx.code is grpc.StatusCode.UNAUTHENTICATED
        ctx = FakeGrpcContext(bad)

        async def go():
            async for _ in h.ingress.StreamTurn(pb.TurnRequest(session_id="g", text="hi"), ctx):
                pass

        with pytest.raises(E.Unauthenticated):
            asyncio.run(go())
        assert ctx.code is grpc.StatusCode.UNAUTHENTICATED
    assert stored_turns(tmp_path) == []


def test_another_key_gets_not_found_on_every_method(tmp_path: Path) -> None:
    llm = EchoLLM()
    with harness(tmp_path, llm) as h:
        turn(h, "g2", "hi")
        _, ctx = turn(h, "g2", "let me in", who="bob")
        assert ctx.code is grpc.StatusCode.NOT_FOUND
        events, ctx, err = stream(h, "g2", "let me in", who="bob")
        assert ctx.code is grpc.StatusCode.NOT_FOUND and err is not None and events == []
        sess, ctx = get(h, "g2", who="bob")
        assert ctx.code is grpc.StatusCode.NOT_FOUND and list(sess.turns) == []
        _, unknown = get(h, "never", who="bob")
        assert unknown.code is grpc.StatusCode.NOT_FOUND
        assert llm.chats == 1
    assert len(stored_turns(tmp_path, "g2")) == 1


@pytest.mark.parametrize(("text", "sid", "code"), [
    ("nul\x00here", "g3", grpc.StatusCode.INVALID_ARGUMENT),
    ("a" + "\ufdd0", "g3", grpc.StatusCode.INVALID_ARGUMENT),
    ("   ", "g3", grpc.StatusCode.INVALID_ARGUMENT),
    ("hi", "bad id!", grpc.StatusCode.INVALID_ARGUMENT),
    ("x" * 5000, "g3", grpc.StatusCode.INVALID_ARGUMENT),
])
def test_hostile_messages_are_invalid_argument_and_store_nothing(tmp_path: Path, text, sid, code) -> None:
    with harness(tmp_path) as h:
        _, ctx = turn(h, sid, text)
        assert ctx.code is code and ctx.details
    assert stored_turns(tmp_path) == []


def test_idempotency_key_metadata_replays(tmp_path: Path) -> None:
    llm = EchoLLM()
    with harness(tmp_path, llm) as h:
        first, _ = turn(h, "g4", "hi", **{"idempotency-key": "k1"})
        again, ctx = turn(h, "g4", "hi", **{"idempotency-key": "k1"})
        assert ctx.code is None and again.turn_id == first.turn_id and again.reply == first.reply
        assert again.events[-1].done.replayed is True and llm.chats == 1


def test_rate_limit_is_resource_exhausted_with_retry_after(tmp_path: Path) -> None:
    with harness(tmp_path, limits={"rate": "1/minute"}) as h:
        turn(h, "g5", "hi")
        _, ctx = turn(h, "g5", "again")
        assert ctx.code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert ctx.trailing and ctx.trailing[0][0] == "retry-after" and int(ctx.trailing[0][1]) >= 1
