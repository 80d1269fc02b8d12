"""The HTTP side of the ingress: the FastAPI app, its error handlers, and auth + rate limits for every route.

:func:`http_app` is the app every ingress replica serves (``make_fastapi_ingress`` binds our
routes and Ray Serve LLM's OpenAI routes onto it). :class:`EdgeMiddleware` runs before any
route: the caller's key becomes ``request.state.principal`` (or a 401 / 429 from the error
table); only :data:`OPEN_PATHS` — the probes — are served without a key.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from pipelines.errors import TandemError
from serve.edge import SafeJSONResponse, error_body, http_error, log_error

__all__ = ["OPEN_PATHS", "EdgeMiddleware", "http_app"]

# The only routes served without an API key (auth on): liveness and readiness probes.
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def _ingress_of(scope: dict[str, Any]) -> Any:
    app = scope.get("app")
    found = getattr(getattr(app, "state", None), "ingress", None)
    if found is not None:
        return found
    from ray import serve

    return serve.get_replica_context().servable_object


class EdgeMiddleware:
    """Auth and per-key rate limits for every HTTP route but the probes — OpenAI routes included.

    Puts the caller's principal (an API key id, or ``local``) in ``request.state.principal``.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        ingress = _ingress_of(scope)
        header = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"authorization"),
                      None)
        try:
            principal = ingress.auth.principal(header)
            ingress.limiter.hit(principal)
        except TandemError as exc:
            ingress.sink.emit("request.rejected", code=exc.code, protocol="http", path=str(scope.get("path"))[:128])
            await http_error(exc, where=f"{scope.get('method')} {str(scope.get('path'))[:128]}")(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def http_app() -> FastAPI:
    app = FastAPI(title="Tandem", version="0.1.0")
    app.add_middleware(EdgeMiddleware)

    @app.exception_handler(StarletteHTTPException)
    async def _http_exc(request: Request, exc: StarletteHTTPException) -> SafeJSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        msg = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404 and msg == "Not Found":
            msg = f"no route for {request.method} {request.url.path[:128]}"
        log_error(exc, where=f"{request.method} {request.url.path[:128]}", status=exc.status_code)
        return SafeJSONResponse(status_code=exc.status_code, content=error_body(code, msg))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> SafeJSONResponse:
        problems = [{"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()]
        return SafeJSONResponse(status_code=422, content=error_body("validation_error", "invalid request",
                                                                    {"fields": problems}))

    @app.exception_handler(TandemError)
    async def _tandem(request: Request, exc: TandemError) -> SafeJSONResponse:
        return http_error(exc, where=f"{request.method} {request.url.path[:128]}")

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> SafeJSONResponse:
        return http_error(exc, where=f"{request.method} {request.url.path[:128]}")

    try:  # OpenAI routes raise Ray's OpenAIHTTPException: keep the OpenAI error shape for them.
        from ray.llm._internal.serve.core.configs.openai_api_models import OpenAIHTTPException

        @app.exception_handler(OpenAIHTTPException)
        async def _openai(request: Request, exc: OpenAIHTTPException) -> SafeJSONResponse:
            return SafeJSONResponse(
                status_code=exc.status_code,
                content={"error": {"code": exc.status_code, "type": exc.type, "message": exc.message}},
            )
    except ImportError:  # pragma: no cover
        pass
    return app
