"""Streaming clients of the public turn API (HTTP/SSE with httpx, gRPC StreamTurn with grpc.aio).

Each turn becomes one :class:`RequestRecord`: client-side times to the first
narration / reply / any token, inter-delta gaps, end-to-end time, the server's own
timings from the ``done`` event, and how it ended (turn status, error code,
HTTP status or gRPC code). Targets are loopback-only unless ``allow_remote``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["RequestRecord", "SSEParser", "RemoteTargetRefused", "check_target", "HttpTurnClient",
           "GrpcTurnClient", "Recorder"]

OK_STATUSES = ("ok", "fallback")


class RemoteTargetRefused(ValueError):
    """A non-loopback target without an explicit ``allow_remote``."""


def _host_of(target: str) -> str:
    if "://" in target:
        import httpx

        return httpx.URL(target).host
    if target.startswith("["):
        return target[1:target.index("]")]
    return target.rsplit(":", 1)[0] if target.count(":") == 1 else target


def check_target(target: str, *, allow_remote: bool = False) -> str:
    """Return ``target`` if its host is loopback (or ``allow_remote``); else raise."""
    host = _host_of(target).strip().lower()
    if not host:
        raise RemoteTargetRefused(f"target {target!r} has no host")
    loopback = host == "localhost"
    if not loopback:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
    if not loopback and not allow_remote:
        raise RemoteTargetRefused(f"refusing non-loopback target {target!r}: pass --allow-remote to load it")
    return target


@dataclass
class RequestRecord:
    """One turn as the load generator saw it (times in ms from the request's start)."""

    protocol: str
    session_id: str
    turn_index: int
    user: int = 0
    start_s: float = 0.0
    ttft_ms: float | None = None
    ttfn_ms: float | None = None
    ttfr_ms: float | None = None
    e2e_ms: float | None = None
    n_narration: int = 0
    n_reply: int = 0
    reply_chars: int = 0
    other_events: int = 0
    status: str | None = None
    error_code: str | None = None
    transport_status: str = ""
    turn_id: str = ""
    trace_id: str = ""
    queue_ms: float | None = None
    server_first_token_ms: float | None = None
    server_end_ms: float | None = None
    stages: dict[str, float] = field(default_factory=dict)
    itls_ms: list[float] = field(default_factory=list)
    retry_after_s: float | None = None  # a refusal's Retry-After (HTTP 429 / 503)

    @property
    def ok(self) -> bool:
        """A done event arrived with a non-failed status and no error along the way."""
        return self.status in OK_STATUSES and self.error_code is None

    @property
    def n_deltas(self) -> int:
        return self.n_narration + self.n_reply

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        return d


class Recorder:
    """Turns a stream of event dicts into a :class:`RequestRecord` (shared by both protocols)."""

    def __init__(self, rec: RequestRecord) -> None:
        self.rec = rec
        self.t0 = time.perf_counter()
        self._last_delta: float | None = None

    def _ms(self, now: float) -> float:
        return (now - self.t0) * 1000.0

    def observe(self, ev: dict[str, Any], now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        r, kind = self.rec, ev.get("type")
        if kind in ("narration.delta", "reply.delta"):
            ms = self._ms(now)
            if r.ttft_ms is None:
                r.ttft_ms = ms
            if kind == "narration.delta":
                r.n_narration += 1
                r.ttfn_ms = ms if r.ttfn_ms is None else r.ttfn_ms
            else:
                r.n_reply += 1
                r.reply_chars += len(ev.get("text") or "")
                r.ttfr_ms = ms if r.ttfr_ms is None else r.ttfr_ms
            if self._last_delta is not None:
                r.itls_ms.append((now - self._last_delta) * 1000.0)
            self._last_delta = now
        elif kind == "error":
            r.error_code = r.error_code or str(ev.get("code") or "error")
        elif kind == "done":
            r.status = str(ev.get("status"))
            r.turn_id, r.trace_id = str(ev.get("turn_id", "")), str(ev.get("trace_id", ""))
            t = ev.get("timings") or {}
            r.queue_ms, r.server_first_token_ms, r.server_end_ms = (
                t.get("queue_ms"), t.get("first_token_ms"), t.get("end_ms"))
            r.stages = {str(k): float(v) for k, v in (t.get("stages") or {}).items()}
        else:
            r.other_events += 1

    def finish(self, error_code: str | None = None) -> RequestRecord:
        r = self.rec
        r.e2e_ms = self._ms(time.perf_counter())
        if error_code and not r.error_code:
            r.error_code = error_code
        if r.status is None and not r.error_code:
            r.error_code = "no_done_event"
        return r


class SSEParser:
    """Incremental server-sent-events parser: feed text chunks, get ``(event, data)`` pairs."""

    def __init__(self) -> None:
        self._buf = ""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: str) -> list[tuple[str, str]]:
        self._buf += chunk.replace("\r\n", "\n").replace("\r", "\n")
        out: list[tuple[str, str]] = []
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            if line == "":
                if self._data:
                    out.append((self._event or "message", "\n".join(self._data)))
                self._event, self._data = None, []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    self._event = value
                elif name == "data":
                    self._data.append(value)
        return out


def _error_code_from_body(body: bytes, status: int) -> str:
    try:
        err = json.loads(body).get("error") or {}
        return str(err.get("code") or f"http_{status}")
    except (ValueError, AttributeError):
        return f"http_{status}"


class HttpTurnClient:
    """``POST /v1/sessions/{id}/turns`` with ``Accept: text/event-stream`` over one httpx pool."""

    def __init__(self, base_url: str, *, timeout_s: float = 120.0, max_connections: int = 256,
                 api_key: str | None = None, allow_remote: bool = False, transport: Any = None) -> None:
        import httpx

        self.base_url = check_target(base_url.rstrip("/"), allow_remote=allow_remote)
        headers = {"Accept": "text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.timeout_s = timeout_s
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=httpx.Timeout(timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            transport=transport)

    async def turn(self, rec: RequestRecord, text: str) -> RequestRecord:
        import httpx

        rec.protocol = "http"
        rc = Recorder(rec)
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._client.stream("POST", f"/v1/sessions/{rec.session_id}/turns",
                                               json={"text": text}) as resp:
                    rec.transport_status = str(resp.status_code)
                    if resp.status_code != 200:
                        retry = resp.headers.get("retry-after")
                        if resp.status_code in (429, 503) and retry is not None and retry.strip().isdigit():
                            rec.retry_after_s = float(retry)
                        return rc.finish(_error_code_from_body(await resp.aread(), resp.status_code))
                    parser = SSEParser()
                    async for chunk in resp.aiter_text():
                        now = time.perf_counter()
                        for _name, data in parser.feed(chunk):
                            rc.observe(json.loads(data), now)
        except TimeoutError:
            return rc.finish("client_timeout")
        except httpx.HTTPError as exc:
            return rc.finish(f"transport_{type(exc).__name__}")
        return rc.finish()

    async def aclose(self) -> None:
        await self._client.aclose()


class GrpcTurnClient:
    """``tandem.v1.Assistant/StreamTurn`` over one grpc.aio channel."""

    def __init__(self, target: str, *, timeout_s: float = 120.0, application: str | None = None,
                 api_key: str | None = None, allow_remote: bool = False) -> None:
        import grpc

        from serve.protos import assistant_pb2_grpc

        self.target = check_target(target, allow_remote=allow_remote)
        self.timeout_s = timeout_s
        md = []
        if application:
            md.append(("application", application))
        if api_key:
            md.append(("authorization", f"Bearer {api_key}"))
        self._metadata = tuple(md)
        self._channel = grpc.aio.insecure_channel(target)
        self._stub = assistant_pb2_grpc.AssistantStub(self._channel)

    async def turn(self, rec: RequestRecord, text: str) -> RequestRecord:
        import grpc

        from serve.grpc_codec import proto_to_event
        from serve.protos import assistant_pb2 as pb

        rec.protocol = "grpc"
        rc = Recorder(rec)
        try:
            call = self._stub.StreamTurn(pb.TurnRequest(session_id=rec.session_id, text=text),
                                         metadata=self._metadata or None, timeout=self.timeout_s)
            async for msg in call:
                now = time.perf_counter()
                rc.observe(proto_to_event(msg).model_dump(mode="json"), now)
            rec.transport_status = "OK"
        except grpc.aio.AioRpcError as exc:
            rec.transport_status = exc.code().name
            code = "client_timeout" if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED else exc.code().name.lower()
            return rc.finish(code)
        return rc.finish()

    async def aclose(self) -> None:
        await self._channel.close()
