"""The ingress deployment: our HTTP API, the gRPC ``tandem.v1.Assistant`` methods, and OpenAI routes.

One class serves all three. HTTP routes are bound with ``make_fastapi_ingress``
(Ray Serve LLM's helper, which also adds ``/v1/chat/completions`` and
``/v1/models`` on the same FastAPI app); gRPC methods are plain methods named
after the rpcs, which Ray Serve's gRPC proxy calls.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from fastapi import Request
from fastapi.responses import StreamingResponse
from ray.serve.handle import DeploymentHandle
from ray.serve.llm.ingress import OpenAiIngress, make_fastapi_ingress

from models.llm import SharedModel
from pipelines.admission import AdaptiveAdmission, Ticket
from pipelines.domains import load_domain
from pipelines.errors import ModelTimeout, NotFound, TandemError, error_class_for_code
from pipelines.events import ErrorEvent, TurnAnswer, TurnRequest
from pipelines.registry import Parts, build_pipeline
from pipelines.sessions import LOCAL_PRINCIPAL
from pipelines.telemetry import current_trace_id
from pipelines.turn import TurnRunner, parse_turn_request, validate_session_id
from pipelines.turn_input import check_idempotency_key
from serve.adapters import HandleGuardrails, HandleRuleKernels, tool_port
from serve.auth import ApiKeys, RateLimiter, parse_key_entries
from serve.config import AppConfig, parse_app_config
from serve.deployments.guardrails import LiveGuardrails
from serve.edge import (
    SafeJSONResponse,
    decode_json,
    error_body,
    grpc_fail,
    http_error,
    http_error_for_event,
    read_body,
)
from serve.grpc_codec import answer_to_proto, event_to_proto, session_to_proto
from serve.http_app import OPEN_PATHS, http_app
from serve.metrics import ServeCounters, TurnMetrics
from serve.model_client import ServeModelClient
from serve.openapi import SESSION_ROUTE_DOC, TURN_ROUTE_DOC
from serve.stores import make_store
from serve.streaming import sse_frame, with_heartbeats
from serve.telemetry import JsonlEventSink

__all__ = ["TandemIngress", "build_ingress_class", "make_store", "http_app", "ENDPOINTS", "OPEN_PATHS"]

logger = logging.getLogger("tandem.ingress")


def _refusal(ev: Any) -> bool:
    """An ``error`` event of a class that refuses turns (as the first event: nothing happened)."""
    return getattr(ev, "type", None) == "error" and error_class_for_code(ev.code).rejects_turn


def _retry_hint(exc: TandemError) -> list[Any]:
    """A refused stream's one message when the refusal has a retry hint: its ``error`` event (code, message,
    ``retry_after_s``). Ray Serve's proxy drops the trailers of a streaming method that raises, so the
    ``retry-after`` trailer ``grpc_fail`` sets reaches unary callers only; without a hint, nothing."""
    if exc.retry_after_s is None:
        return []
    return [event_to_proto(ErrorEvent(code=exc.code, message=exc.message, retry_after_s=exc.retry_after_s))]


def _answer(events: list[Any]) -> dict[str, Any] | None:
    done = [e for e in events if getattr(e, "type", None) in ("error", "done", "reply.delta", "narration.delta")]
    if not done or done[-1].type != "done":
        return None
    return TurnAnswer.from_events(done).model_dump(mode="json")


class _Recorded:
    """A started turn's events, recording the ``done`` in the turn metrics and ending the turn's admission
    ticket (a latency sample when it completed; a back-off when it ran past its deadline); closable unstarted."""

    def __init__(self, events: Any, metrics: TurnMetrics, admission: AdaptiveAdmission | None = None,
                 ticket: Ticket | None = None) -> None:
        self._events = events
        self._metrics = metrics
        self._admission, self._ticket = admission, ticket
        self._late = False

    def __aiter__(self) -> _Recorded:
        return self

    def _release(self, *, completed: bool) -> None:
        if self._admission is not None and self._ticket is not None:
            self._admission.release(self._ticket, completed=completed, late=self._late)

    async def __anext__(self) -> Any:
        ev = await self._events.__anext__()
        if ev.type == "error" and ev.code == ModelTimeout.code:
            self._late = True
        elif ev.type == "done":
            self._metrics.record(ev)
            self._release(completed=ev.status in ("ok", "fallback") and not ev.replayed)
        return ev

    async def aclose(self) -> None:
        try:
            await self._events.aclose()
        finally:
            self._release(completed=False)


class TandemIngress(OpenAiIngress):
    """Ingress replica: authenticates, validates, runs the turn pipeline, renders events.

    Every route and rpc answers errors from the one table (:mod:`pipelines.errors`):
    a turn refused before it started gets its status (HTTP) / code (gRPC); a turn that
    failed on the way keeps its ``error`` event in the stream and, as one answer
    (JSON, unary ``Turn``), the status of that error.
    """

    def __init__(
        self,
        llm_deployments: dict[str, DeploymentHandle],
        model_cards: dict[str, Any],
        *,
        app_config: dict[str, Any],
        tools: DeploymentHandle | None = None,
        guardrails: DeploymentHandle | None = None,
        rule_kernels: DeploymentHandle | None = None,
    ) -> None:
        # A model served by another application (models.<name>.shared_app) arrives as its reference.
        llm_deployments = {mid: h.handle() if isinstance(h, SharedModel) else h for mid, h in llm_deployments.items()}
        super().__init__(llm_deployments=llm_deployments, model_cards=model_cards)
        # Import the request model now, not on the first request (it pulls in vLLM: seconds).
        import ray.serve.llm.openai_api_models  # noqa: F401

        self.config: AppConfig = parse_app_config(app_config)
        cfg = self.config
        if cfg.ingress.switch_interval_ms is not None:
            sys.setswitchinterval(cfg.ingress.switch_interval_ms / 1000)
        routes = {}
        for role in ("orchestrator", "generator", "slot_extractor"):
            mid = cfg.model_for_role(role).model_id
            routes[role] = (llm_deployments[mid], mid)
        self.models = ServeModelClient(routes)
        self.store = make_store(cfg.store)
        self.sink = JsonlEventSink(cfg.telemetry.jsonl_dir, component="ingress")
        self.auth = ApiKeys(cfg.auth)
        self.limiter = RateLimiter(cfg.limits)
        self.turn_metrics = TurnMetrics()
        # The pipeline: its kind's record says what it needs; every handle is wrapped in its port.
        self.counters = ServeCounters()
        # guardrails.placement: ingress — the guard runs here, its table from this deployment's user_config
        self.guard = LiveGuardrails() if cfg.guardrails.placement == "ingress" else None
        parts = Parts(
            models=self.models, domain=cfg.domain.name, tools=tool_port(tools),
            guardrails=self.guard if self.guard is not None else
            HandleGuardrails(guardrails) if guardrails is not None else None,
            kernels=HandleRuleKernels(rule_kernels) if rule_kernels is not None else None,
            counters=self.counters,
        )
        # A pack whose sessions play as the request's user has them bound on the tools before the turn.
        self._binding = parts.tools if parts.tools is not None and load_domain(cfg.domain.name).binds_user else None
        self.pipeline = build_pipeline(cfg.pipeline, parts)
        history = max(cfg.pipeline.max_history_turns, getattr(self.pipeline, "history_turns", 0))
        self.runner = TurnRunner(
            self.pipeline, self.store, sink=self.sink,
            max_history_turns=history, deadline_s=cfg.pipeline.turn_deadline_s,
            lock_wait_s=cfg.ingress.session_lock_wait_s,
        )
        adm = cfg.ingress.admission
        self.admission = None if adm.mode == "off" else AdaptiveAdmission(
            cfg.pipeline.turn_deadline_s, target=adm.target, initial_limit=adm.initial_limit,
            min_limit=adm.min_limit, max_limit=adm.max_limit)
        self._llm_handles = dict(llm_deployments)
        logger.info("tandem ingress ready: pipeline=%s profile=%s auth=%s", self.pipeline.name, cfg.profile,
                    "on" if cfg.auth.enabled else "off (single-tenant development mode)")

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """Ray Serve ``user_config`` of the ingress: ``{auth: {keys: [{id, sha256}, ...]}}`` (rotation, live)
        and, where the guard runs here, ``{guardrails: {table: {...}}}`` (a refused table keeps the active one)."""
        keys = (user_config.get("auth") or {}).get("keys", [])
        self.auth.set_live_keys(parse_key_entries(keys, source="TandemIngress user_config"))
        table = (user_config.get("guardrails") or {}).get("table")
        if table and self.guard is None:
            logger.error("a guardrail table arrived on TandemIngress, but the guard runs in GuardrailsServer "
                         "(guardrails.placement: deployment): ignored")
        elif self.guard is not None:
            self.guard.apply(table)

    async def guard_info(self) -> dict[str, Any]:
        """The in-process guard's table version, pid and last refusal (``{}`` where GuardrailsServer runs it)."""
        return self.guard.info() if self.guard is not None else {}

    # -- shared core ---------------------------------------------------------------

    def _validate(self, session_id: str, body: Any) -> TurnRequest:
        validate_session_id(session_id)
        return parse_turn_request(body, max_text_chars=self.config.pipeline.max_text_chars,
                                  accepts_perception=bool(getattr(self.config.pipeline, "oracle_perception", False)))

    async def _start(self, session_id: str, req: TurnRequest, received_at: float, principal: str,
                     idempotency_key: str | None) -> AsyncIterator[Any]:
        """The started turn's events; raises the TandemError of a turn refused before it began (at the
        measured capacity: :class:`~pipelines.errors.Overloaded` at once, nothing stored)."""
        ticket = self.admission.admit() if self.admission is not None else None
        try:
            events = await self.runner.start(session_id, req, trace_id=current_trace_id(), received_at=received_at,
                                             principal=principal, idempotency_key=idempotency_key)
        except BaseException:
            if ticket is not None and self.admission is not None:
                self.admission.release(ticket, completed=False)
            raise
        recorded = _Recorded(events, self.turn_metrics, self.admission, ticket)
        if self._binding is not None:  # the session plays as the request's user
            try:
                await self._binding.bind_user(session_id, req.user_id)
            except BaseException:
                await recorded.aclose()
                raise
        return recorded

    async def admission_snapshot(self) -> dict[str, Any]:
        """This replica's admission state (limit, turns in flight, measured rate, counts); ``{}`` when off."""
        return self.admission.snapshot() if self.admission is not None else {}

    async def counters_snapshot(self) -> dict[str, dict[str, int]]:
        """This replica's DR counters (also exported as Prometheus metrics)."""
        return self.counters.snapshot()

    async def _history(self, session_id: str, principal: str) -> list[Any]:
        """The owner's history; any other principal (or no session) is 404 — no existence oracle."""
        validate_session_id(session_id)
        if await self.store.owner(session_id) != principal or not await self.store.session_exists(session_id):
            raise NotFound(f"no session {session_id!r}", details={"session_id": session_id})
        return await self.store.get_history(session_id)

    def _rejected(self, exc: TandemError, session_id: str, protocol: str) -> None:
        self.sink.emit("request.rejected", session_id=session_id[:64], code=exc.code, protocol=protocol)

    # -- HTTP ------------------------------------------------------------------------

    def _http_principal(self, request: Request) -> str:
        principal = getattr(request.state, "principal", None)
        return principal if principal is not None else self.auth.principal(request.headers.get("authorization"))

    async def create_turn(self, session_id: str, request: Request) -> Any:
        received = time.monotonic()
        where = f"POST /v1/sessions/{session_id[:64]}/turns"
        try:
            principal = self._http_principal(request)
            validate_session_id(session_id)
            idem = check_idempotency_key(request.headers.get("idempotency-key"))
            body = decode_json(await read_body(request, self.config.ingress.max_body_bytes),
                               max_depth=self.config.ingress.max_json_depth)
            req = self._validate(session_id, body)
            events = await self._start(session_id, req, received, principal, idem)
        except TandemError as exc:
            self._rejected(exc, session_id, "http")
            return http_error(exc, where=where)
        if "text/event-stream" in request.headers.get("accept", ""):
            beat = self.config.ingress.sse_heartbeat_s
            # The headers wait up to `sse_refusal_window_s` for the first event: a turn refused
            # before any output (the pre-guard's InvalidInput, back-pressure at the first model
            # call) answers with its status instead of a 200 stream.
            stream = with_heartbeats(events, beat, first_s=min(beat, self.config.ingress.sse_refusal_window_s))
            first = await anext(stream)
            if _refusal(first):  # refused before any output (pre-guard, back-pressure): its status, no stream
                rest = [ev async for ev in stream]
                return http_error_for_event(first, where=where, extra={"answer": _answer([first, *rest])})

            async def frames() -> AsyncIterator[str]:
                yield sse_frame(first)
                async for ev in stream:
                    yield sse_frame(ev)

            return StreamingResponse(frames(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        async with contextlib.aclosing(events) as evs:  # type: ignore[type-var]  # a client that left frees the turn
            got = [ev async for ev in evs]
        answer = TurnAnswer.from_events(got)
        body = answer.model_dump(mode="json")
        if answer.status == "failed":
            err = next((e for e in reversed(got) if e.type == "error"), None)
            if err is not None:
                return http_error_for_event(err, where=where, extra={"answer": body})
            return SafeJSONResponse(status_code=500, content={**error_body("internal", "turn failed"),
                                                              "answer": body})
        return SafeJSONResponse(content=body)

    async def get_session(self, session_id: str, request: Request) -> Any:
        try:
            turns = await self._history(session_id, self._http_principal(request))
        except TandemError as exc:
            return http_error(exc, where=f"GET /v1/sessions/{session_id[:64]}")
        return SafeJSONResponse(content={"session_id": session_id, "turns": [t.model_dump(mode="json") for t in turns]})

    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}

    async def readyz(self) -> Any:
        problems = {}
        for mid, handle in self._llm_handles.items():
            try:
                await handle.check_health.remote()
            except Exception as exc:  # readiness reports, never raises
                problems[mid] = type(exc).__name__
        try:
            await self.store.session_exists("readyz-probe")
        except Exception as exc:
            problems["store"] = type(exc).__name__
        if problems:
            return SafeJSONResponse(status_code=503, content={"status": "not_ready", "problems": problems})
        return {"status": "ready", "models": sorted(self._llm_handles), "pipeline": self.pipeline.name}

    # -- gRPC (method names equal the rpc names) -------------------------------------

    def _grpc_caller(self, grpc_context: Any) -> tuple[str, str | None]:
        """(principal, idempotency key) from the call's metadata; rate-limited like HTTP."""
        md = dict(grpc_context.invocation_metadata() or []) if grpc_context is not None else {}
        principal = self.auth.principal(md.get("authorization")) if grpc_context is not None else LOCAL_PRINCIPAL
        self.limiter.hit(principal)
        return principal, check_idempotency_key(md.get("idempotency-key"))

    def _grpc_request(self, request: Any) -> tuple[str, TurnRequest]:
        body: dict[str, Any] = {"text": request.text, "locale": request.locale or "en"}
        if request.user_id:
            body["user_id"] = request.user_id
        return request.session_id, self._validate(request.session_id, body)

    async def _grpc_start(self, request: Any, grpc_context: Any, received: float) -> AsyncIterator[Any]:
        principal, idem = self._grpc_caller(grpc_context)
        session_id, req = self._grpc_request(request)
        return await self._start(session_id, req, received, principal, idem)

    @staticmethod
    def _failure(events: list[Any]) -> TandemError | None:
        """The table row of a failed turn (its last ``error`` event), or None when it did not fail."""
        if not events or events[-1].type != "done" or events[-1].status != "failed":
            return None
        err = next((e for e in reversed(events) if e.type == "error"), None)
        if err is None:
            return TandemError("turn failed")
        return error_class_for_code(err.code)(err.message, retry_after_s=err.retry_after_s)

    async def Turn(self, request: Any, grpc_context: Any = None) -> Any:  # noqa: N802
        received = time.monotonic()
        from serve.protos import assistant_pb2 as pb

        try:
            events = await self._grpc_start(request, grpc_context, received)
        except TandemError as exc:
            self._rejected(exc, str(request.session_id), "grpc")
            grpc_fail(grpc_context, exc, where="grpc Turn")
            return pb.TurnAnswer()
        async with contextlib.aclosing(events) as evs:  # type: ignore[type-var]  # a cancelled call frees the turn
            got = [ev async for ev in evs]
        failure = self._failure(got)
        if failure is not None:  # never OK for a failed turn
            grpc_fail(grpc_context, failure, where="grpc Turn")
        return answer_to_proto(TurnAnswer.from_events(got))

    def _refuse_stream(self, exc: TandemError, request: Any, grpc_context: Any) -> list[Any]:
        """A ``StreamTurn`` refused before any output: counted, its status set (the caller raises ``exc`` after it:
        Ray Serve wraps it into a gRPCStatusError carrying the code we set); returns the messages to send first
        (:func:`_retry_hint`)."""
        self._rejected(exc, str(request.session_id), "grpc")
        grpc_fail(grpc_context, exc, where="grpc StreamTurn")
        return _retry_hint(exc)

    async def StreamTurn(self, request: Any, grpc_context: Any = None) -> AsyncIterator[Any]:  # noqa: N802
        received = time.monotonic()
        try:
            events = await self._grpc_start(request, grpc_context, received)
        except TandemError as exc:
            for hint in self._refuse_stream(exc, request, grpc_context):
                yield hint
            raise
        err_ev = None
        async with contextlib.aclosing(events) as evs:  # type: ignore[type-var]
            first = True
            async for ev in evs:
                if first and _refusal(ev):  # refused before any output: as an early refusal
                    _ = [e async for e in evs]
                    failure = error_class_for_code(ev.code)(ev.message, retry_after_s=ev.retry_after_s)
                    for hint in self._refuse_stream(failure, request, grpc_context):
                        yield hint
                    raise failure
                first = False
                yield event_to_proto(ev)
                if ev.type == "error":
                    err_ev = ev
                elif ev.type == "done" and ev.status == "failed":  # the stream ends with the table's code
                    failure = self._failure([err_ev, ev] if err_ev is not None else [ev])
                    if failure is not None:
                        grpc_fail(grpc_context, failure, where="grpc StreamTurn")
                        raise failure

    async def GetSession(self, request: Any, grpc_context: Any = None) -> Any:  # noqa: N802
        from serve.protos import assistant_pb2 as pb

        try:
            principal, _ = self._grpc_caller(grpc_context)
            turns = await self._history(request.session_id, principal)
        except TandemError as exc:
            grpc_fail(grpc_context, exc, where="grpc GetSession")
            return pb.Session()
        return session_to_proto(request.session_id, turns)

    async def Check(self, request: Any, grpc_context: Any = None) -> Any:  # noqa: N802
        """Standard ``grpc.health.v1.Health/Check``."""
        from grpc_health.v1 import health_pb2

        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


ENDPOINTS = {
    "models": lambda app: app.get("/v1/models"),
    "model_data": lambda app: app.get("/v1/models/{model:path}"),
    "chat": lambda app: app.post("/v1/chat/completions"),
    "completions": lambda app: app.post("/v1/completions"),
    "create_turn": lambda app: app.post("/v1/sessions/{session_id}/turns", **TURN_ROUTE_DOC),
    "get_session": lambda app: app.get("/v1/sessions/{session_id}", **SESSION_ROUTE_DOC),
    "healthz": lambda app: app.get("/healthz"),
    "readyz": lambda app: app.get("/readyz"),
}


def build_ingress_class() -> type:
    """The Serve ingress class: our routes + OpenAI routes on one FastAPI app."""
    _ = grpc  # grpc must be importable in the replica for the proxy's servicers
    return make_fastapi_ingress(TandemIngress, endpoint_map=ENDPOINTS, app=http_app())
