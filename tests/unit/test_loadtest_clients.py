"""SSE parsing of a recorded stream, per-request records, the HTTP client on a mock transport,
the gRPC client on an in-process grpc.aio server (no Ray), and the loopback-only guard."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from serve.loadtest.clients import (
    GrpcTurnClient,
    HttpTurnClient,
    Recorder,
    RemoteTargetRefused,
    RequestRecord,
    SSEParser,
    check_target,
)

# A turn as the ingress streams it (serve.ingress.sse_frame: "event: <type>\ndata: <json>\n\n").
DONE = {"type": "done", "session_id": "s1", "turn_id": "t_1", "trace_id": "ab" * 16, "status": "ok",
        "pipeline": "prompting", "rules_version": None,
        "timings": {"queue_ms": 4.9, "first_token_ms": 120.5, "end_ms": 900.0, "stages": {"generate": 880.1}}}
RECORDED = (
    'event: narration.delta\ndata: {"type":"narration.delta","text":"Checking your order"}\n\n'
    'event: reply.delta\ndata: {"type":"reply.delta","text":"Hello"}\n\n'
    ': a comment line\n\n'
    'event: reply.delta\ndata: {"type":"reply.delta","text":", how can I help?"}\n\n'
    'event: action_card\ndata: {"type":"action_card","card_id":"c1","title":"Track","params":{}}\n\n'
    f"event: done\ndata: {json.dumps(DONE)}\n\n"
)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("size", [1, 7, 64, 10_000])
def test_sse_parser_reassembles_events_across_any_chunking(size):
    p = SSEParser()
    events = [e for c in _chunks(RECORDED, size) for e in p.feed(c)]
    assert [name for name, _ in events] == ["narration.delta", "reply.delta", "reply.delta", "action_card", "done"]
    assert all(json.loads(data)["type"] == name for name, data in events)


def test_sse_parser_crlf_multiline_data_and_default_name():
    p = SSEParser()
    out = p.feed("data: a\r\ndata: b\r\n\r\nevent: x\ndata:c\n\n")
    assert out == [("message", "a\nb"), ("x", "c")]
    assert p.feed("event: y\ndata: partial") == []


def test_recorder_times_and_server_timings():
    rc = Recorder(RequestRecord("http", "s1", 0))
    t0 = rc.t0
    p = SSEParser()
    for i, (_, data) in enumerate(p.feed(RECORDED)):
        rc.observe(json.loads(data), t0 + 0.1 * (i + 1))
    r = rc.finish()
    assert r.ok and r.status == "ok" and r.error_code is None
    assert r.ttft_ms == pytest.approx(100) and r.ttfn_ms == pytest.approx(100) and r.ttfr_ms == pytest.approx(200)
    assert r.n_narration == 1 and r.n_reply == 2 and r.reply_chars == len("Hello, how can I help?")
    assert r.itls_ms == pytest.approx([100, 100]) and r.other_events == 1
    assert r.queue_ms == 4.9 and r.server_first_token_ms == 120.5 and r.stages == {"generate": 880.1}
    assert r.turn_id == "t_1" and r.trace_id == "ab" * 16


def test_recorder_error_then_done_and_missing_done():
    rc = Recorder(RequestRecord("http", "s", 0))
    rc.observe({"type": "error", "code": "model_timeout", "message": "x"})
    rc.observe({**DONE, "status": "failed"})
    r = rc.finish()
    assert not r.ok and r.error_code == "model_timeout" and r.status == "failed"
    assert Recorder(RequestRecord("http", "s", 0)).finish().error_code == "no_done_event"


def _mock_app(request: httpx.Request) -> httpx.Response:
    sid = request.url.path.split("/")[3]
    body = json.loads(request.content)
    if sid == "busy":
        return httpx.Response(503, json={"error": {"code": "overloaded", "message": "backpressure"}})
    if sid == "polite":
        return httpx.Response(503, headers={"retry-after": "7"}, json={"error": {"code": "overloaded", "message": "x"}})
    if sid == "plain":
        return httpx.Response(500, text="oops")
    assert request.headers["accept"] == "text/event-stream" and body == {"text": "hi"}
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=RECORDED.encode())


def _http_turn(sid: str) -> RequestRecord:
    async def go() -> RequestRecord:
        c = HttpTurnClient("http://127.0.0.1:1", transport=httpx.MockTransport(_mock_app))
        try:
            return await c.turn(RequestRecord("http", sid, 0), "hi")
        finally:
            await c.aclose()

    return asyncio.run(go())


def test_http_client_ok_backpressure_and_plain_errors():
    ok = _http_turn("s1")
    assert ok.ok and ok.transport_status == "200" and ok.n_reply == 2 and ok.e2e_ms is not None
    busy = _http_turn("busy")
    assert not busy.ok and busy.transport_status == "503" and busy.error_code == "overloaded"
    plain = _http_turn("plain")
    assert plain.error_code == "http_500"
    assert busy.retry_after_s is None and plain.retry_after_s is None
    polite = _http_turn("polite")
    assert polite.error_code == "overloaded" and polite.retry_after_s == 7.0


def test_grpc_client_against_an_in_process_server():
    grpc = pytest.importorskip("grpc")
    from pipelines.events import EVENT_ADAPTER
    from serve.grpc_codec import event_to_proto
    from serve.protos import assistant_pb2_grpc as pbg

    class Servicer(pbg.AssistantServicer):
        async def StreamTurn(self, request, context):  # noqa: N802
            if request.session_id == "bad":
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad session")
            for _, data in SSEParser().feed(RECORDED):
                yield event_to_proto(EVENT_ADAPTER.validate_python(json.loads(data)))

    async def go() -> tuple[RequestRecord, RequestRecord]:
        server = grpc.aio.server()
        pbg.add_AssistantServicer_to_server(Servicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        client = GrpcTurnClient(f"127.0.0.1:{port}", timeout_s=10)
        try:
            return (await client.turn(RequestRecord("grpc", "s1", 0), "hi"),
                    await client.turn(RequestRecord("grpc", "bad", 0), "hi"))
        finally:
            await client.aclose()
            await server.stop(None)

    ok, bad = asyncio.run(go())
    assert ok.ok and ok.transport_status == "OK" and ok.n_reply == 2 and ok.stages == {"generate": 880.1}
    assert not bad.ok and bad.transport_status == "INVALID_ARGUMENT" and bad.error_code == "invalid_argument"


@pytest.mark.parametrize("target", ["http://127.0.0.1:8000", "http://localhost:8000/", "127.0.0.1:9000",
                                    "localhost:9000", "http://[::1]:8000", "[::1]:9000", "127.0.0.5:9000"])
def test_loopback_targets_pass(target):
    assert check_target(target) == target


@pytest.mark.parametrize("target", ["http://10.0.0.5:8000", "https://example.com", "example.com:9000",
                                    "0.0.0.0:9000", "http://192.168.1.2", "[2001:db8::1]:9000", "http://:80"])
def test_non_loopback_targets_are_refused_unless_allowed(target):
    with pytest.raises(RemoteTargetRefused):
        check_target(target)
    if "://:" not in target:
        assert check_target(target, allow_remote=True) == target


def test_clients_and_specs_refuse_remote_targets():
    from serve.loadtest.runner import LoadSpec

    with pytest.raises(RemoteTargetRefused):
        HttpTurnClient("http://10.1.2.3:8000")
    with pytest.raises(RemoteTargetRefused):
        LoadSpec(target="http://10.1.2.3:8000")
    assert LoadSpec().target.startswith("http://127.0.0.1")
