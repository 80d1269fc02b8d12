"""serve.edge: one status table for HTTP and gRPC, derived from the error classes."""

from __future__ import annotations

import asyncio
import json
import logging

import grpc
import pytest

from pipelines import errors as E
from pipelines.errors import TandemError, all_error_classes
from serve.edge import (
    INTERNAL_MESSAGE,
    decode_json,
    error_body,
    grpc_code_for,
    grpc_fail,
    http_error,
    http_error_for_event,
    json_depth,
    read_body,
    retry_after_header,
)
from serve.testing import FakeGrpcContext


def _body(resp) -> dict:
    return json.loads(resp.body)


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_http_error_maps_every_class(cls: type[TandemError]) -> None:
    resp = http_error(cls("something specific", details={"k": "v"}))
    assert resp.status_code == cls.http_status
    assert _body(resp) == {"error": {"code": cls.code, "message": "something specific", "details": {"k": "v"}}}
    if cls.retry_after_s is not None:
        assert resp.headers["retry-after"] == "1"
    else:
        assert "retry-after" not in resp.headers
    assert ("www-authenticate" in resp.headers) == (cls.http_status == 401)


# Back-pressure and unavailability carry a retry hint; nothing else does (written from the table).
RETRYABLE = {E.Overloaded, E.RateLimited, E.ModelUnavailable, E.StoreUnavailable, E.SessionBusy, E.LeaseLost}


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_retry_after_only_on_retryable_classes(cls: type[TandemError]) -> None:
    assert (cls.retry_after_s is not None) == (cls in RETRYABLE)


def test_instance_retry_after_overrides_the_class_and_rounds_up() -> None:
    resp = http_error(E.RateLimited("slow down", retry_after_s=2.2))
    assert resp.status_code == 429 and resp.headers["retry-after"] == "3"
    assert retry_after_header(0.01) == {"Retry-After": "1"}
    assert retry_after_header(None) == {}


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_error_event_maps_back_to_its_row(cls: type[TandemError]) -> None:
    from pipelines.events import ErrorEvent

    resp = http_error_for_event(ErrorEvent(code=cls.code, message="m", retry_after_s=cls.retry_after_s),
                                where="t", extra={"answer": {"x": 1}})
    assert resp.status_code == cls.http_status
    assert _body(resp)["error"]["code"] == cls.code and _body(resp)["answer"] == {"x": 1}


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_grpc_fail_sets_code_details_and_retry_after(cls: type[TandemError]) -> None:
    ctx = FakeGrpcContext()
    grpc_fail(ctx, cls("why"), where="t")
    assert ctx.code is getattr(grpc.StatusCode, cls.grpc_status) and ctx.details == "why"
    assert ctx.trailing == ([("retry-after", "1")] if cls.retry_after_s is not None else ())


class _ServicerContext:
    """What Ray Serve's gRPC context reads from the servicer context it wraps (one request id set)."""

    def auth_context(self):
        return {}

    def code(self):
        return None

    def details(self):
        return None

    def invocation_metadata(self):
        return [("application", "tandem")]

    def peer(self):
        return "ipv4:127.0.0.1:1"

    def peer_identities(self):
        return None

    def peer_identity_key(self):
        return None

    def trailing_metadata(self):
        return [("request_id", "r-1")]


def test_retry_after_reaches_ray_serves_own_grpc_context_beside_its_request_id() -> None:
    from ray.serve.grpc_util import RayServegRPCContext

    ctx = RayServegRPCContext(_ServicerContext())
    grpc_fail(ctx, E.StoreUnavailable("Redis is down"), where="t")
    assert ctx.code() is grpc.StatusCode.UNAVAILABLE and ctx.details() == "Redis is down"
    assert ctx.trailing_metadata() == [("request_id", "r-1"), ("retry-after", "1")]


def test_lone_surrogate_in_a_message_still_renders() -> None:
    resp = http_error(E.InvalidInput("bad " + chr(0xD800) + " text"))
    assert resp.status_code == 400 and json.loads(resp.body)["error"]["code"] == "invalid_input"


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_grpc_code_for_maps_every_class(cls: type[TandemError]) -> None:
    code = grpc_code_for(cls("x"))
    assert isinstance(code, grpc.StatusCode)
    assert code is getattr(grpc.StatusCode, cls.grpc_status)


@pytest.mark.parametrize("exc", [RuntimeError("db password=hunter2"), KeyError("secret"), ValueError("/etc/x")])
def test_foreign_exception_is_500_internal_without_its_message(exc: Exception) -> None:
    resp = http_error(exc)
    assert resp.status_code == 500
    body = _body(resp)
    assert body == {"error": {"code": "internal", "message": INTERNAL_MESSAGE}}
    assert str(exc) not in resp.body.decode()
    assert grpc_code_for(exc) is grpc.StatusCode.INTERNAL


def test_details_left_out_when_empty() -> None:
    assert error_body("c", "m") == {"error": {"code": "c", "message": "m"}}
    assert "details" not in _body(http_error(E.NotFound("gone")))["error"]


def test_5xx_logged_at_error_4xx_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tandem.edge")
    http_error(E.NotFound("gone"), where="w4")
    http_error(E.ModelUnavailable("down"), where="w5")
    http_error(RuntimeError("boom"), where="w6")
    levels = {r.getMessage().split(":")[0]: r.levelno for r in caplog.records}
    assert levels == {"w4": logging.WARNING, "w5": logging.ERROR, "w6": logging.ERROR}
    # Only a foreign error asks for its traceback in the log (and it never reaches the client).
    assert [bool(r.exc_info) for r in caplog.records] == [False, False, True]


# -- bodies ------------------------------------------------------------------------------------


class _Req:
    def __init__(self, chunks: list[bytes], headers: dict[str, str] | None = None) -> None:
        self.headers = headers or {}
        self._chunks = chunks
        self.read = 0

    async def stream(self):
        for c in self._chunks:
            self.read += 1
            yield c


def test_read_body_refuses_a_declared_size_over_the_cap_unread() -> None:
    req = _Req([b"x" * 10], {"content-length": "2049"})
    with pytest.raises(E.PayloadTooLarge):
        asyncio.run(read_body(req, 2048))
    assert req.read == 0
    assert asyncio.run(read_body(_Req([b"ab", b"c"], {"content-length": "2048"}), 2048)) == b"abc"


def test_read_body_stops_a_streamed_body_at_the_cap() -> None:
    req = _Req([b"x" * 1000, b"x" * 1000, b"x" * 49, b"never read"])
    with pytest.raises(E.PayloadTooLarge):
        asyncio.run(read_body(req, 2048))
    assert req.read == 3
    assert asyncio.run(read_body(_Req([b"x" * 1024, b"x" * 1024]), 2048)) == b"x" * 2048  # exactly the cap


def test_read_body_bad_content_length_is_invalid_input() -> None:
    with pytest.raises(E.InvalidInput):
        asyncio.run(read_body(_Req([], {"content-length": "ten"}), 100))


@pytest.mark.parametrize(("text", "depth"), [
    ("1", 0), ("{}", 1), ('{"a": [1, {"b": []}]}', 4), ('"[[[["', 0), ('["\\"", [[]]]', 3), ('{"a": "\\\"[["}', 1),
])
def test_json_depth(text: str, depth: int) -> None:
    assert json_depth(text) == depth


def test_decode_json_depth_cap_boundary() -> None:
    assert decode_json(b"[" * 16 + b"]" * 16, max_depth=16) == eval("[" * 16 + "]" * 16)
    with pytest.raises(E.InvalidInput) as err:
        decode_json(b"[" * 17 + b"]" * 17, max_depth=16)
    assert err.value.details == {"limit": 16, "depth": 17}
    with pytest.raises(E.InvalidInput):  # deep enough to crash a recursive parser: refused before parsing
        decode_json(b"[" * 100_000, max_depth=16)


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"{not json", b"", b'{"a": 1'])
def test_decode_json_bad_bodies_are_invalid_input(raw: bytes) -> None:
    with pytest.raises(E.InvalidInput):
        decode_json(raw, max_depth=16)
