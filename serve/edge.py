"""Errors at the edge, in one place: HTTP responses, gRPC statuses, logging, auth.

5xx are logged at error, 4xx at warning; internal exception text never
reaches a client. ``status_for`` / ``grpc_code_for`` are derived from the
class attributes of :mod:`pipelines.errors`, so the tables cannot drift.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Iterable
from typing import Any

import grpc
from fastapi.responses import JSONResponse

from pipelines.errors import TandemError, Unauthenticated

__all__ = [
    "error_body",
    "http_error",
    "grpc_code_for",
    "log_error",
    "ApiKeys",
    "INTERNAL_MESSAGE",
]

logger = logging.getLogger("tandem.edge")
INTERNAL_MESSAGE = "internal error; see the server log with this request's trace id"


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if details:
        err["details"] = details
    return {"error": err}


def log_error(exc: BaseException, *, where: str, status: int) -> None:
    if status >= 500:
        logger.error("%s: %s", where, exc, exc_info=None if isinstance(exc, TandemError) else exc)
    else:
        logger.warning("%s: %s", where, exc)


def http_error(exc: BaseException, *, where: str = "http") -> JSONResponse:
    """A JSON error response for any exception (TandemError keeps its status and code)."""
    if isinstance(exc, TandemError):
        status, body = exc.http_status, error_body(exc.code, exc.message, exc.details or None)
    else:
        status, body = 500, error_body("internal", INTERNAL_MESSAGE)
    log_error(exc, where=where, status=status)
    headers = {"Retry-After": "1"} if status in (429, 503) else None
    return JSONResponse(status_code=status, content=body, headers=headers)


def grpc_code_for(exc: BaseException) -> grpc.StatusCode:
    if isinstance(exc, TandemError):
        return getattr(grpc.StatusCode, exc.grpc_status)
    return grpc.StatusCode.INTERNAL


class ApiKeys:
    """Static API keys (``Authorization: Bearer <key>``, gRPC metadata ``authorization``)."""

    def __init__(self, enabled: bool, keys: Iterable[str] = (), keys_env: str | None = None) -> None:
        found = [k for k in keys if k]
        if keys_env:
            found += [k.strip() for k in os.environ.get(keys_env, "").split(",") if k.strip()]
        self.enabled = enabled
        self._keys = [k.encode() for k in found]
        if enabled and not self._keys:
            logger.warning("auth is enabled but no API key is configured: every request will be refused")

    def check(self, header: str | None) -> None:
        if not self.enabled:
            return
        if not header or not header.lower().startswith("bearer "):
            raise Unauthenticated("missing bearer token (Authorization: Bearer <api key>)")
        token = header[7:].strip().encode()
        if not any(hmac.compare_digest(token, k) for k in self._keys):
            raise Unauthenticated("unknown API key")
