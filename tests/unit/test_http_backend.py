"""``HttpBackend``: reads are retried (with backoff) on what a second try may cure, writes are sent exactly
once with the write key as ``Idempotency-Key``, every failure is a typed error of the one table.

Most tests drive ``httpx.MockTransport`` (the handler counts the calls); the backoff's waits are recorded,
never slept. The last tests run against a real HTTP server on a free local port.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from pydantic import BaseModel

from pipelines.core.http_backend import HttpBackend, RemoteWorld, reason_of
from pipelines.core.ports import MemoryLedger, ToolSession
from pipelines.core.runner import CallOutcome, LocalToolRunner
from pipelines.errors import (
    IneligibleAction,
    InvalidInput,
    ToolError,
    ToolTimeout,
    UnconfirmedWrite,
)
from pipelines.tools import ToolContext, ToolRegistry, ToolSpec


class Calls:
    """A MockTransport handler answering from a script of responses (the last one repeats)."""

    def __init__(self, *script: httpx.Response | type[Exception]) -> None:
        self.script = list(script)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.script[min(len(self.requests), len(self.script)) - 1]
        if isinstance(step, type):
            raise step("scripted", request=request)
        return step


def backend(calls: Calls, waits: list[float], **kw) -> HttpBackend:
    return HttpBackend("http://svc.test", transport=httpx.MockTransport(calls), sleep=waits.append,
                       name="svc", **kw)


def ok(body: object) -> httpx.Response:
    return httpx.Response(200, json=body)


# -- reads: retried on what a second try may cure -------------------------------------------------


def test_a_read_that_succeeds_is_sent_once() -> None:
    calls, waits = Calls(ok({"a": 1})), []
    assert backend(calls, waits).read("/items/1") == {"a": 1}
    assert len(calls.requests) == 1 and waits == []


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_a_read_is_retried_on_a_busy_or_failing_gateway(status: int) -> None:
    calls, waits = Calls(httpx.Response(status), httpx.Response(status), ok({"a": 1})), []
    assert backend(calls, waits, read_retries=2, backoff_s=0.1).read("/items/1") == {"a": 1}
    assert len(calls.requests) == 3
    assert waits == [0.1, 0.2]  # 0.1 × 2^0, 0.1 × 2^1


@pytest.mark.parametrize("exc, reason, cls", [(httpx.ConnectError, "backend_unreachable", ToolError),
                                              (httpx.ReadTimeout, "backend_timeout", ToolTimeout)])
def test_a_read_gives_up_after_its_retries(exc: type[Exception], reason: str, cls: type) -> None:
    calls, waits = Calls(exc), []
    with pytest.raises(cls) as info:
        backend(calls, waits, read_retries=3, backoff_s=0.5, backoff_max_s=1.5).read("/items/1")
    assert len(calls.requests) == 4  # one try + three retries
    assert waits == [0.5, 1.0, 1.5]  # doubling, capped at backoff_max_s
    assert info.value.details["reason"] == reason and reason_of(info.value.message) == reason


def test_a_read_waits_what_retry_after_says_up_to_the_cap() -> None:
    calls, waits = Calls(httpx.Response(503, headers={"Retry-After": "0.7"}),
                         httpx.Response(429, headers={"Retry-After": "30"}), ok([])), []
    assert backend(calls, waits, read_retries=2, backoff_s=0.1, backoff_max_s=2.0).read("/x") == []
    assert waits == [0.7, 2.0]


def test_a_500_is_not_retried_only_the_busy_statuses_are() -> None:
    calls, waits = Calls(httpx.Response(500, json={"detail": "boom"})), []
    with pytest.raises(ToolError) as info:
        backend(calls, waits, read_retries=2).read("/x")
    assert len(calls.requests) == 1 and waits == []
    assert info.value.code == "tool_error" and info.value.details == {"reason": "backend_error", "status": 500}


def test_the_last_busy_answer_is_the_error_with_its_retry_hint() -> None:
    calls, waits = Calls(httpx.Response(429, headers={"Retry-After": "4"})), []
    with pytest.raises(ToolError) as info:
        backend(calls, waits, read_retries=1).read("/x")
    assert len(calls.requests) == 2
    assert info.value.details["reason"] == "backend_busy" and info.value.retry_after_s == 4.0


@pytest.mark.parametrize("status", [400, 404, 409, 422])
def test_a_read_refused_by_the_service_is_not_retried(status: int) -> None:
    calls, waits = Calls(httpx.Response(status, json={})), []
    with pytest.raises((ToolError, InvalidInput)):
        backend(calls, waits, read_retries=3).read("/x")
    assert len(calls.requests) == 1 and waits == []


# -- writes: exactly once ------------------------------------------------------------------------


@pytest.mark.parametrize("failure", [httpx.Response(503), httpx.Response(502), httpx.Response(429),
                                     httpx.ConnectError, httpx.ReadTimeout])
def test_a_write_is_never_retried(failure: httpx.Response | type[Exception]) -> None:
    calls, waits = Calls(failure, ok({"done": True})), []
    with pytest.raises(ToolError):
        backend(calls, waits, read_retries=5).write("/items/1/archive", json={"by": "u1"}, idempotency_key="k1")
    assert len(calls.requests) == 1 and waits == []


def test_a_write_carries_its_idempotency_key_and_body() -> None:
    calls, waits = Calls(ok({"status": "archived"})), []
    out = backend(calls, waits).write("/items/1/archive", json={"by": "u1"}, idempotency_key='["s","c","t"]')
    request = calls.requests[0]
    assert out == {"status": "archived"} and request.method == "POST"
    assert request.headers["Idempotency-Key"] == '["s","c","t"]'
    assert json.loads(request.content) == {"by": "u1"}


def test_a_write_without_a_key_sends_no_key_header() -> None:
    calls, waits = Calls(ok({})), []
    backend(calls, waits).write("/w")
    assert "Idempotency-Key" not in calls.requests[0].headers


# -- the error table -----------------------------------------------------------------------------


@pytest.mark.parametrize("response, cls, code, reason", [
    (httpx.Response(409, json={"reason": "not_active"}), IneligibleAction, "ineligible_action", "not_active"),
    (httpx.Response(409, json={"reason": "Free text! not a code"}), IneligibleAction, "ineligible_action",
     "conflict"),
    (httpx.Response(409, text="nope"), IneligibleAction, "ineligible_action", "conflict"),
    (httpx.Response(404, json={"reason": "record_not_found"}), ToolError, "tool_error", "record_not_found"),
    (httpx.Response(404), ToolError, "tool_error", "not_found"),
    (httpx.Response(400), InvalidInput, "invalid_input", "backend_rejected_arguments"),
    (httpx.Response(422, json={"detail": []}), InvalidInput, "invalid_input", "backend_rejected_arguments"),
    (httpx.Response(401), ToolError, "tool_error", "backend_auth"),
    (httpx.Response(403), ToolError, "tool_error", "backend_auth"),
    (httpx.Response(418), ToolError, "tool_error", "backend_refused"),
    (httpx.Response(500), ToolError, "tool_error", "backend_error"),
    (httpx.Response(200, text="<html>oops</html>"), ToolError, "tool_error", "malformed_response"),
])
def test_each_answer_maps_to_its_row(response: httpx.Response, cls: type, code: str, reason: str) -> None:
    calls, waits = Calls(response), []
    with pytest.raises(cls) as info:
        backend(calls, waits, read_retries=0).read("/x")
    assert type(info.value) is cls and info.value.code == code
    assert info.value.details["reason"] == reason and info.value.message.endswith(f"[{reason}]")


def test_timeouts_are_tool_timeouts_with_the_504_row() -> None:
    calls, waits = Calls(httpx.ConnectTimeout), []
    with pytest.raises(ToolTimeout) as info:
        backend(calls, waits, timeout_s=0.25).write("/w")
    assert info.value.code == "tool_timeout" and info.value.http_status == 504
    assert info.value.message == "svc POST /w: no answer within 0.25 s [backend_timeout]"


class Item(BaseModel):
    item_id: str
    title: str


def test_a_result_model_checks_the_answer() -> None:
    calls, waits = Calls(ok({"item_id": "I1", "title": "x"}), ok({"item_id": "I1"})), []
    svc = backend(calls, waits)
    assert svc.read("/items/I1", result=Item) == Item(item_id="I1", title="x")
    with pytest.raises(ToolError) as info:
        svc.read("/items/I1", result=Item)
    assert info.value.details["reason"] == "malformed_response"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        HttpBackend("http://x", timeout_s=0)
    with pytest.raises(ValueError):
        HttpBackend("http://x", read_retries=-1)


def test_reason_of_reads_only_codes() -> None:
    assert reason_of("refused [not_active]") == "not_active"
    assert reason_of("refused [Not A Code]") is None
    assert reason_of("no brackets") is None and reason_of(None) is None


# -- through the core's tool port: a failure is an observation, a write's outcome is replayed --------


class ArchiveArgs(BaseModel):
    item_id: str


class Archived(BaseModel):
    item_id: str
    status: str


def _archive(args: ArchiveArgs, ctx: ToolContext, world: RemoteWorld) -> Archived:
    return world.backend.write(f"/items/{args.item_id}/archive", idempotency_key=ctx.idempotency_key,
                               result=Archived)


class RemotePack:
    write_tools = frozenset({"archive"})

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.registry.register(ToolSpec("archive", "Archive an item.", ArchiveArgs, Archived, _archive, "write"))

    def invoke(self, name, args, ctx, world) -> CallOutcome:
        obs = self.registry.call(name, dict(args), ctx, world)
        return CallOutcome(observation=obs, reason=None if obs.ok else reason_of(obs.error_message))

    def precheck(self, name, args, ctx, world):
        return None

    def ungrounded(self, name, args, user_texts, world, user_id):
        return []


def _runner(calls: Calls) -> LocalToolRunner:
    svc = HttpBackend("http://svc.test", transport=httpx.MockTransport(calls), sleep=lambda s: None)
    return LocalToolRunner(RemotePack(), RemoteWorld(svc), ledger=MemoryLedger())


def test_a_keyed_write_reaches_the_service_once_and_replays_from_the_ledger() -> None:
    import asyncio

    calls = Calls(ok({"item_id": "I1", "status": "archived"}))
    runner = _runner(calls)
    session = ToolSession(session_id="s").confirm("archive", {"item_id": "I1"}, "key-1")
    first = asyncio.run(runner.call("archive", {"item_id": "I1"}, session))
    again = asyncio.run(runner.call("archive", {"item_id": "I1"}, session))
    assert first.observation.ok and first.observation.result == {"item_id": "I1", "status": "archived"}
    assert again.replayed and again.observation == first.observation
    assert len(calls.requests) == 1 and calls.requests[0].headers["Idempotency-Key"] == "key-1"


def test_a_failed_write_is_a_failed_observation_with_its_reason_and_is_not_sent_again() -> None:
    import asyncio

    calls = Calls(httpx.Response(409, json={"reason": "not_active"}))
    runner = _runner(calls)
    session = ToolSession(session_id="s").confirm("archive", {"item_id": "I1"}, "key-2")
    first = asyncio.run(runner.call("archive", {"item_id": "I1"}, session))
    again = asyncio.run(runner.call("archive", {"item_id": "I1"}, session))
    assert not first.observation.ok and first.observation.error_code == "ineligible_action"
    assert first.reason == "not_active" and again.replayed
    assert len(calls.requests) == 1


def test_a_write_the_user_did_not_confirm_as_shown_never_reaches_the_service() -> None:
    """``_archive`` never looks at ``ctx.confirmed`` (a pack that forgot): the core's port refuses for it, typed,
    before the pack runs — unconfirmed, confirmed for other arguments or another tool, or without a key."""
    import asyncio

    calls = Calls(ok({"item_id": "I1", "status": "archived"}))
    runner = _runner(calls)
    base = ToolSession(session_id="s")
    tries = {
        "not_confirmed": base.model_copy(update={"idempotency_key": "k"}),
        "card_mismatch": base.confirm("archive", {"item_id": "I2"}, "k"),
        "no_idempotency_key": base.confirm("archive", {"item_id": "I1"}, "k").model_copy(
            update={"idempotency_key": None}),
    }
    for reason, session in tries.items():
        with pytest.raises(UnconfirmedWrite) as exc:
            asyncio.run(runner.call("archive", {"item_id": "I1"}, session))
        assert exc.value.details == {"reason": reason, "tool": "archive"} and exc.value.http_status == 409
    unconfirmed_card = base.confirm("archive", {"item_id": "I1"}, "k").model_copy(update={"confirmed": False})
    with pytest.raises(UnconfirmedWrite):
        asyncio.run(runner.call("archive", {"item_id": "I1"}, unconfirmed_card))
    assert calls.requests == [] and runner.calls == [] and runner.ledger.entries == {}


# -- a real server on a free local port -------------------------------------------------------------


class _Service(BaseHTTPRequestHandler):
    """GET /flaky answers 503 twice, then 200; POST /flaky-write answers 503; GET /slow never answers in time;
    GET /garbled answers a body that is not JSON. Every request is counted by path."""

    counts: dict[str, int]
    release: threading.Event

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _count(self) -> int:
        self.counts[self.path] = self.counts.get(self.path, 0) + 1
        return self.counts[self.path]

    def do_GET(self) -> None:  # noqa: N802
        n = self._count()
        if self.path == "/flaky":
            self._send(503 if n <= 2 else 200, json.dumps({"n": n}).encode())
        elif self.path == "/slow":
            self.release.wait(5)
            self._send(200, b"{}")
        elif self.path == "/garbled":
            self._send(200, b"not json", "text/plain")
        else:
            self._send(404, b'{"reason": "no_such_path"}')

    def do_POST(self) -> None:  # noqa: N802
        self._count()
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(503, b'{"detail": "down"}')


@pytest.fixture
def service() -> Iterator[tuple[str, dict[str, int], Callable[[], None]]]:
    counts: dict[str, int] = {}
    release = threading.Event()
    handler = type("Handler", (_Service,), {"counts": counts, "release": release})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", counts, release.set
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_a_real_service_read_is_retried_and_a_write_is_not(service) -> None:
    url, counts, _ = service
    waits: list[float] = []
    with HttpBackend(url, read_retries=2, backoff_s=0.01, sleep=waits.append, timeout_s=5) as svc:
        assert svc.read("/flaky") == {"n": 3}
        with pytest.raises(ToolError) as info:
            svc.write("/flaky-write", json={"x": 1}, idempotency_key="k")
        with pytest.raises(ToolError) as garbled:
            svc.read("/garbled")
        with pytest.raises(ToolError) as missing:
            svc.read("/nothing")
    assert counts == {"/flaky": 3, "/flaky-write": 1, "/garbled": 1, "/nothing": 1}
    assert waits == [0.01, 0.02]
    assert info.value.details == {"reason": "backend_error", "status": 503}
    assert garbled.value.details["reason"] == "malformed_response"
    assert missing.value.details == {"reason": "no_such_path", "status": 404}


def test_a_real_service_past_the_deadline_is_a_tool_timeout(service) -> None:
    url, counts, release = service
    with HttpBackend(url, read_retries=1, backoff_s=0, sleep=lambda s: None, timeout_s=0.2) as svc:
        with pytest.raises(ToolTimeout) as info:
            svc.read("/slow")
    release()
    assert counts["/slow"] == 2 and info.value.details["reason"] == "backend_timeout"


def test_a_refused_connection_is_unreachable_after_the_read_retries() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    waits: list[float] = []
    with HttpBackend(f"http://127.0.0.1:{port}", read_retries=2, backoff_s=0.05, sleep=waits.append) as svc:
        with pytest.raises(ToolError) as info:
            svc.read("/x")
        with pytest.raises(ToolError):
            svc.write("/x")
    assert info.value.details == {"reason": "backend_unreachable"} and waits == [0.05, 0.1]


def test_a_remote_world_keeps_nothing_locally() -> None:
    world = RemoteWorld(HttpBackend("http://svc.test", transport=httpx.MockTransport(Calls(ok({})))))
    scope = world.write_scope("archive", {"item_id": "I1"}, "u1")
    assert world.entities() == [] and not scope.existing and not scope.creates
    assert world.fork(scope) is world and not world.has("item", "I1")
    assert world.adopt(world, {}) is None
    with pytest.raises(KeyError):
        world.entity_json("item", "I1")


def test_a_retry_after_date_is_no_hint_the_backoff_stands() -> None:
    calls = Calls(httpx.Response(503, headers={"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}), ok({}))
    waits: list[float] = []
    assert backend(calls, waits, read_retries=1, backoff_s=0.3).read("/x") == {}
    assert waits == [0.3]
