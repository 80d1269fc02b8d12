"""The ingress deployment: our HTTP API, the gRPC ``tandem.v1.Assistant`` methods, and OpenAI routes.

One class serves all three. HTTP routes are bound with ``make_fastapi_ingress``
(Ray Serve LLM's helper, which also adds ``/v1/chat/completions`` and
``/v1/models`` on the same FastAPI app); gRPC methods are plain methods named
after the rpcs, which Ray Serve's gRPC proxy calls.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from ray.serve.handle import DeploymentHandle
from ray.serve.llm.ingress import OpenAiIngress, make_fastapi_ingress
from starlette.exceptions import HTTPException as StarletteHTTPException

from models.prepare import cache_dir
from pipelines.errors import InvalidInput, NotFound, TandemError
from pipelines.events import TurnAnswer, TurnRequest
from pipelines.registry import Parts, build_pipeline
from pipelines.telemetry import current_trace_id
from pipelines.turn import TurnRunner, parse_turn_request, validate_session_id
from serve.adapters import HandleGuardrails, HandleRuleKernels, tool_port
from serve.config import AppConfig, StoreConfig, parse_app_config
from serve.edge import ApiKeys, error_body, grpc_code_for, http_error, log_error
from serve.grpc_codec import answer_to_proto, event_to_proto, session_to_proto
from serve.metrics import ServeCounters, TurnMetrics
from serve.model_client import ServeModelClient
from serve.telemetry import JsonlEventSink

__all__ = ["TandemIngress", "build_ingress_class", "make_store", "http_app", "ENDPOINTS"]

logger = logging.getLogger("tandem.ingress")


def make_store(cfg: StoreConfig) -> Any:
    if cfg.kind == "sqlite":
        from serve.stores.sqlite import SQLiteSessionStore

        return SQLiteSessionStore(Path(cfg.path).expanduser() if cfg.path else cache_dir() / "sessions.db")
    from serve.stores.redis import RedisSessionStore  # production profile

    return RedisSessionStore.from_config(cfg)


def sse_frame(ev: Any) -> str:
    return f"event: {ev.type}\ndata: {ev.model_dump_json()}\n\n"


def http_app() -> FastAPI:
    app = FastAPI(title="Tandem", version="0.1.0")

    @app.exception_handler(StarletteHTTPException)
    async def _http_exc(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        msg = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404 and msg == "Not Found":
            msg = f"no route for {request.method} {request.url.path}"
        log_error(exc, where=f"{request.method} {request.url.path}", status=exc.status_code)
        return JSONResponse(status_code=exc.status_code, content=error_body(code, msg))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [{"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()]
        return JSONResponse(status_code=422, content=error_body("validation_error", "invalid request", {"fields": problems}))

    @app.exception_handler(TandemError)
    async def _tandem(request: Request, exc: TandemError) -> JSONResponse:
        return http_error(exc, where=f"{request.method} {request.url.path}")

    try:  # OpenAI routes raise Ray's OpenAIHTTPException: keep the OpenAI error shape for them.
        from ray.llm._internal.serve.core.configs.openai_api_models import OpenAIHTTPException

        @app.exception_handler(OpenAIHTTPException)
        async def _openai(request: Request, exc: OpenAIHTTPException) -> JSONResponse:
            return JSONResponse(
                status_code=exc.status_code,
                content={"error": {"code": exc.status_code, "type": exc.type, "message": exc.message}},
            )
    except ImportError:  # pragma: no cover
        pass
    return app


class TandemIngress(OpenAiIngress):
    """Ingress replica: validates, authenticates, runs the turn pipeline, renders events."""

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
        super().__init__(llm_deployments=llm_deployments, model_cards=model_cards)
        # Import the request model now, not on the first request (it pulls in vLLM: seconds).
        import ray.serve.llm.openai_api_models  # noqa: F401

        self.config: AppConfig = parse_app_config(app_config)
        cfg = self.config
        routes = {}
        for role in ("orchestrator", "generator", "slot_extractor"):
            mid = cfg.model_for_role(role).model_id
            routes[role] = (llm_deployments[mid], mid)
        self.models = ServeModelClient(routes)
        self.store = make_store(cfg.store)
        self.sink = JsonlEventSink(cfg.telemetry.jsonl_dir, component="ingress")
        self.auth = ApiKeys(cfg.auth.enabled, cfg.auth.api_keys, cfg.auth.api_keys_env)
        self.turn_metrics = TurnMetrics()
        # The pipeline: its kind's record says what it needs; every handle is wrapped in its port.
        self.counters = ServeCounters()
        parts = Parts(
            models=self.models, domain=cfg.domain.name, tools=tool_port(cfg.domain.name, tools),
            guardrails=HandleGuardrails(guardrails) if guardrails is not None else None,
            kernels=HandleRuleKernels(rule_kernels) if rule_kernels is not None else None,
            counters=self.counters,
        )
        self._coach_tools = tools if cfg.domain.name == "coach" else None
        self.pipeline = build_pipeline(cfg.pipeline, parts)
        history = max(cfg.pipeline.max_history_turns, getattr(self.pipeline, "history_turns", 0))
        self.runner = TurnRunner(
            self.pipeline, self.store, sink=self.sink,
            max_history_turns=history, deadline_s=cfg.pipeline.turn_deadline_s,
        )
        self._llm_handles = dict(llm_deployments)
        logger.info("tandem ingress ready: pipeline=%s profile=%s", self.pipeline.name, cfg.profile)

    # -- shared core ---------------------------------------------------------------

    def _validate(self, session_id: str, body: Any) -> TurnRequest:
        validate_session_id(session_id)
        return parse_turn_request(body, max_text_chars=self.config.pipeline.max_text_chars)

    async def _events(self, session_id: str, req: TurnRequest, received_at: float) -> AsyncIterator[Any]:
        if self._coach_tools is not None:  # a coach session plays as the request's user
            await self._coach_tools.ensure_bound.remote(session_id, req.user_id)
        async for ev in self.runner.run(session_id, req, trace_id=current_trace_id(), received_at=received_at):
            if ev.type == "done":
                self.turn_metrics.record(ev)
            yield ev

    async def counters_snapshot(self) -> dict[str, dict[str, int]]:
        """This replica's DR counters (also exported as Prometheus metrics)."""
        return self.counters.snapshot()

    async def _history(self, session_id: str) -> list[Any]:
        validate_session_id(session_id)
        if not await self.store.session_exists(session_id):
            raise NotFound(f"no session {session_id!r}", details={"session_id": session_id})
        return await self.store.get_history(session_id)

    # -- HTTP ------------------------------------------------------------------------

    async def create_turn(self, session_id: str, request: Request) -> Any:
        received = time.monotonic()
        try:
            self.auth.check(request.headers.get("authorization"))
            raw = await request.body()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInput("request body is not valid UTF-8", details={"position": exc.start}) from exc
            try:
                body = json.loads(text)
            except ValueError as exc:
                raise InvalidInput(f"request body is not valid JSON: {exc}") from exc
            req = self._validate(session_id, body)
        except TandemError as exc:
            self.sink.emit("request.rejected", session_id=session_id[:64], code=exc.code, protocol="http")
            return http_error(exc, where=f"POST /v1/sessions/{session_id[:64]}/turns")
        if "text/event-stream" in request.headers.get("accept", ""):
            async def frames() -> AsyncIterator[str]:
                async for ev in self._events(session_id, req, received):
                    yield sse_frame(ev)

            return StreamingResponse(frames(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        events = [ev async for ev in self._events(session_id, req, received)]
        answer = TurnAnswer.from_events(events)
        body = json.loads(answer.model_dump_json())
        if answer.status == "failed":
            err = next((e for e in events if e.type == "error"), None)
            code = err.code if err else "turn_failed"
            status = 504 if code == "model_timeout" else 502
            return JSONResponse(status_code=status, content={**error_body(code, err.message if err else "turn failed"), "answer": body})
        return JSONResponse(content=body)

    async def get_session(self, session_id: str, request: Request) -> Any:
        try:
            self.auth.check(request.headers.get("authorization"))
            turns = await self._history(session_id)
        except TandemError as exc:
            return http_error(exc, where=f"GET /v1/sessions/{session_id[:64]}")
        return {"session_id": session_id, "turns": [t.model_dump(mode="json") for t in turns]}

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
            return JSONResponse(status_code=503, content={"status": "not_ready", "problems": problems})
        return {"status": "ready", "models": sorted(self._llm_handles), "pipeline": self.pipeline.name}

    # -- gRPC (method names equal the rpc names) -------------------------------------

    def _grpc_auth(self, grpc_context: Any) -> None:
        md = dict(grpc_context.invocation_metadata() or [])
        self.auth.check(md.get("authorization"))

    def _grpc_fail(self, grpc_context: Any, exc: BaseException, where: str) -> None:
        code = grpc_code_for(exc)
        msg = exc.message if isinstance(exc, TandemError) else "internal error"
        log_error(exc, where=where, status=exc.http_status if isinstance(exc, TandemError) else 500)
        grpc_context.set_code(code)
        grpc_context.set_details(msg)

    def _grpc_request(self, request: Any, grpc_context: Any) -> tuple[str, TurnRequest]:
        self._grpc_auth(grpc_context)
        body = {"text": request.text, "locale": request.locale or "en"}
        if request.user_id:
            body["user_id"] = request.user_id
        return request.session_id, self._validate(request.session_id, body)

    async def Turn(self, request: Any, grpc_context: Any = None) -> Any:  # noqa: N802
        received = time.monotonic()
        from serve.protos import assistant_pb2 as pb

        try:
            session_id, req = self._grpc_request(request, grpc_context)
        except TandemError as exc:
            self._grpc_fail(grpc_context, exc, "grpc Turn")
            return pb.TurnAnswer()
        events = [ev async for ev in self._events(session_id, req, received)]
        return answer_to_proto(TurnAnswer.from_events(events))

    async def StreamTurn(self, request: Any, grpc_context: Any = None) -> AsyncIterator[Any]:  # noqa: N802
        received = time.monotonic()
        try:
            session_id, req = self._grpc_request(request, grpc_context)
        except TandemError as exc:
            # A streaming method reports its status by raising after set_code (Ray Serve wraps
            # the exception into a gRPCStatusError carrying the code we set).
            self._grpc_fail(grpc_context, exc, "grpc StreamTurn")
            raise
        async for ev in self._events(session_id, req, received):
            yield event_to_proto(ev)

    async def GetSession(self, request: Any, grpc_context: Any = None) -> Any:  # noqa: N802
        from serve.protos import assistant_pb2 as pb

        try:
            self._grpc_auth(grpc_context)
            turns = await self._history(request.session_id)
        except TandemError as exc:
            self._grpc_fail(grpc_context, exc, "grpc GetSession")
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
    "create_turn": lambda app: app.post("/v1/sessions/{session_id}/turns"),
    "get_session": lambda app: app.get("/v1/sessions/{session_id}"),
    "healthz": lambda app: app.get("/healthz"),
    "readyz": lambda app: app.get("/readyz"),
}


def build_ingress_class() -> type:
    """The Serve ingress class: our routes + OpenAI routes on one FastAPI app."""
    _ = grpc  # grpc must be importable in the replica for the proxy's servicers
    return make_fastapi_ingress(TandemIngress, endpoint_map=ENDPOINTS, app=http_app())
