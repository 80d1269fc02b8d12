"""Errors and bodies at the edge, in one place: HTTP responses, gRPC statuses, logging, body limits.

Every status comes from the table on the classes of :mod:`pipelines.errors`
(``http_status``, ``grpc_status``, ``code``, ``retry_after_s``): an exception
is mapped by its class, an ``error`` event by its code. 5xx are logged at
error, 4xx at warning; internal exception text never reaches a client.

Bodies: :func:`read_body` refuses a declared or streamed size over the cap
before anything is parsed (413), :func:`decode_json` refuses invalid UTF-8 and
malformed JSON (400) and JSON nested deeper than the cap (400) before the
parser could recurse. Responses are rendered with ASCII escapes, so even a
lone surrogate echoed in a message can never break the encoder.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import grpc
from fastapi.responses import JSONResponse

from pipelines.errors import InvalidInput, PayloadTooLarge, TandemError, error_class_for_code

__all__ = [
    "error_body",
    "SafeJSONResponse",
    "http_error",
    "http_error_for_event",
    "grpc_code_for",
    "grpc_fail",
    "log_error",
    "read_body",
    "decode_json",
    "json_depth",
    "retry_after_header",
    "INTERNAL_MESSAGE",
]

logger = logging.getLogger("tandem.edge")
INTERNAL_MESSAGE = "internal error; see the server log with this request's trace id"


class SafeJSONResponse(JSONResponse):
    """JSON with ASCII escapes: any Python string renders, lone surrogates included."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


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


def retry_after_header(seconds: float | None) -> dict[str, str]:
    """``{"Retry-After": "<whole seconds>"}`` (rounded up, at least 1), or {} without a hint."""
    return {} if seconds is None else {"Retry-After": str(max(1, math.ceil(seconds)))}


def http_error(exc: BaseException, *, where: str = "http", extra: dict[str, Any] | None = None) -> JSONResponse:
    """A JSON error response for any exception (a TandemError keeps its row of the table)."""
    if isinstance(exc, TandemError):
        status, body = exc.http_status, error_body(exc.code, exc.message, exc.details or None)
        headers = retry_after_header(exc.retry_after_s)
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="tandem"'
    else:
        status, body, headers = 500, error_body("internal", INTERNAL_MESSAGE), {}
    log_error(exc, where=where, status=status)
    return SafeJSONResponse(status_code=status, content={**body, **(extra or {})}, headers=headers or None)


def http_error_for_event(err: Any, *, where: str, extra: dict[str, Any] | None = None) -> JSONResponse:
    """The response for a turn that ended with an ``error`` event (its code is a row of the table)."""
    cls = error_class_for_code(err.code)
    exc = cls(err.message, retry_after_s=err.retry_after_s)
    return http_error(exc, where=where, extra=extra)


def grpc_code_for(exc: BaseException) -> grpc.StatusCode:
    if isinstance(exc, TandemError):
        return getattr(grpc.StatusCode, exc.grpc_status)
    return grpc.StatusCode.INTERNAL


def grpc_fail(context: Any, exc: BaseException, *, where: str) -> None:
    """Set the gRPC status (code, details, ``retry-after`` trailing metadata) for an error."""
    code = grpc_code_for(exc)
    msg = exc.message if isinstance(exc, TandemError) else INTERNAL_MESSAGE
    log_error(exc, where=where, status=exc.http_status if isinstance(exc, TandemError) else 500)
    if context is None:
        return
    context.set_code(code)
    context.set_details(msg)
    retry = retry_after_header(exc.retry_after_s if isinstance(exc, TandemError) else None)
    if retry and hasattr(context, "set_trailing_metadata"):
        # a list: Ray Serve's context prepends its request id with ``list + metadata`` (a tuple raised there)
        context.set_trailing_metadata([("retry-after", retry["Retry-After"])])


async def read_body(request: Any, max_bytes: int) -> bytes:
    """The request body, refused (413) once it is over ``max_bytes`` — declared or streamed."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise InvalidInput("Content-Length is not a number") from None
        if size > max_bytes:
            raise PayloadTooLarge(f"body is {size} bytes; the limit is {max_bytes}",
                                  details={"limit": max_bytes, "length": size})
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > max_bytes:
            raise PayloadTooLarge(f"body is over the {max_bytes}-byte limit", details={"limit": max_bytes})
        chunks.append(chunk)
    return b"".join(chunks)


def json_depth(text: str) -> int:
    """The nesting depth of a JSON text's arrays and objects (brackets inside strings ignored)."""
    depth = deepest = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def decode_json(raw: bytes, *, max_depth: int) -> Any:
    """A UTF-8 JSON body, parsed only once it is known to be no deeper than ``max_depth``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("request body is not valid UTF-8", details={"position": exc.start}) from exc
    depth = json_depth(text)
    if depth > max_depth:
        raise InvalidInput(f"JSON nested {depth} deep; the limit is {max_depth}",
                           details={"limit": max_depth, "depth": depth})
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(f"request body is not valid JSON: {str(exc)[:200]}") from exc
