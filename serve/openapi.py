"""The OpenAPI description of the session routes (their handlers take a raw Request, so it is declared here).

The turn body schema is :class:`pipelines.events.TurnRequest`'s own JSON schema;
the responses list every status of the error table the route can answer, so a
schema-driven fuzzer (schemathesis) both generates valid bodies and checks that
nothing outside the table comes back.
"""

from __future__ import annotations

from typing import Any

from pipelines.errors import all_error_classes
from pipelines.events import TurnRequest

__all__ = ["TURN_ROUTE_DOC", "SESSION_ROUTE_DOC", "ERROR_SCHEMA", "TABLE_STATUSES"]

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "enum": sorted({c.code for c in all_error_classes()}
                                                          | {"validation_error", "method_not_allowed"})},
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
        },
    },
}

# Every HTTP status an error of the table can take (plus 500 for an unexpected bug).
TABLE_STATUSES = sorted({c.http_status for c in all_error_classes()} | {500})


def _responses(ok: str) -> dict[int | str, dict[str, Any]]:
    out: dict[int | str, dict[str, Any]] = {200: {"description": ok}}
    for status in TABLE_STATUSES:
        out[status] = {"description": "an error of the table (pipelines/errors.py)",
                       "content": {"application/json": {"schema": ERROR_SCHEMA}}}
    return out


TURN_ROUTE_DOC: dict[str, Any] = {
    "summary": "Run one turn of a session (JSON answer, or SSE with Accept: text/event-stream)",
    "responses": _responses("the turn's answer (or its event stream)"),
    "openapi_extra": {
        "parameters": [
            {"name": "Idempotency-Key", "in": "header", "required": False,
             "schema": {"type": "string", "pattern": r"^[\x21-\x7e]{1,128}$"},
             "description": "a retried turn with the same key returns the recorded answer"},
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": TurnRequest.model_json_schema()}},
        },
    },
}

SESSION_ROUTE_DOC: dict[str, Any] = {
    "summary": "The stored history of a session (its owner only; anyone else gets 404)",
    "responses": _responses("the session's turns"),
}
