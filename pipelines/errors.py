"""One error tree for Tandem, raised (never returned) and mapped at the edges.

    TandemError                     base; carries a stable ``code`` and an HTTP / gRPC status
    ├── InvalidInput                the request is malformed or breaks a limit (400 / INVALID_ARGUMENT)
    │   ├── ValidationFailed        a field is missing, mistyped or empty (422 / INVALID_ARGUMENT)
    │   ├── PayloadTooLarge         text over the configured size (413 / INVALID_ARGUMENT)
    │   └── InvalidSessionId        the session id breaks the id rules (400 / INVALID_ARGUMENT)
    ├── Unauthenticated             missing or unknown API key (401 / UNAUTHENTICATED)
    ├── NotFound                    unknown session or route, or a session of another principal (404 / NOT_FOUND)
    ├── SessionBusy                 another turn of the session holds it past the wait (409 / ABORTED)
    │   └── LeaseLost               the turn's lease passed to another turn: its fencing token is stale (409 / ABORTED)
    ├── PolicyBlocked               a guardrail refused the request (403 / PERMISSION_DENIED)
    ├── ToolError                   a tool failed or refused (500 / INTERNAL)
    │   ├── ToolTimeout             a tool ran past its deadline (504 / DEADLINE_EXCEEDED)
    │   └── IneligibleAction        a write tool's eligibility rule refused the call (409 / FAILED_PRECONDITION)
    │       └── UnconfirmedWrite    the tool port refused a write without the user's yes to its card (409 / FAILED_PRECONDITION)
    ├── UpstreamError               a model deployment failed (502 / UNAVAILABLE)
    │   ├── ModelUnavailable        no model replica could take the call (503 / UNAVAILABLE)
    │   ├── ModelTimeout            the model ran past the turn deadline (504 / DEADLINE_EXCEEDED)
    │   └── InvalidModelOutput      the model's output broke its contract (502 / INTERNAL)
    ├── Overloaded                  back-pressure: a bounded queue is full, try again (503 / UNAVAILABLE)
    │   └── RateLimited             the API key is over its rate limit (429 / RESOURCE_EXHAUSTED)
    ├── StoreUnavailable            the session store failed; nothing of the turn was written (503 / UNAVAILABLE)
    └── ConfigError                 a config or rule table is invalid at start-up or reload

Two more attributes complete the table:

* ``retry_after_s`` — seconds for the HTTP ``Retry-After`` header and the stream
  ``error`` event (``None``: no retry hint). An instance may carry its own value
  (a rate limiter knows when the bucket refills).
* ``rejects_turn`` — the turn is refused as a whole: before any side effect it
  stores nothing and the client gets the status (not ``200`` + an ``error``
  event), so a retry starts from a clean history. Other errors fail the turn:
  it is stored with status ``failed`` and the reply so far.

The status table lives on the classes (``http_status`` and ``grpc_status``,
the name of a ``grpc.StatusCode`` member) so that HTTP, gRPC and the stream's
``error`` event are derived from one place.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "TandemError",
    "InvalidInput",
    "ValidationFailed",
    "PayloadTooLarge",
    "InvalidSessionId",
    "Unauthenticated",
    "NotFound",
    "PolicyBlocked",
    "ToolError",
    "ToolTimeout",
    "IneligibleAction",
    "UnconfirmedWrite",
    "UpstreamError",
    "ModelUnavailable",
    "ModelTimeout",
    "InvalidModelOutput",
    "Overloaded",
    "RateLimited",
    "SessionBusy",
    "LeaseLost",
    "StoreUnavailable",
    "ConfigError",
    "all_error_classes",
    "error_class_for_code",
    "retry_after_of",
]


class TandemError(Exception):
    """Base of every error Tandem raises on purpose."""

    code: str = "internal"
    http_status: int = 500
    grpc_status: str = "INTERNAL"
    retry_after_s: float | None = None
    rejects_turn: bool = False

    def __init__(
        self, message: str, *, details: dict[str, Any] | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        if retry_after_s is not None:
            self.retry_after_s = retry_after_s

    def to_dict(self) -> dict[str, Any]:
        """The JSON body sent to clients: ``{"code", "message"}`` plus details if any."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


class InvalidInput(TandemError):
    code = "invalid_input"
    http_status = 400
    grpc_status = "INVALID_ARGUMENT"
    rejects_turn = True


class ValidationFailed(InvalidInput):
    code = "validation_error"
    http_status = 422


class PayloadTooLarge(InvalidInput):
    code = "payload_too_large"
    http_status = 413


class InvalidSessionId(InvalidInput):
    code = "invalid_session_id"


class Unauthenticated(TandemError):
    code = "unauthenticated"
    http_status = 401
    grpc_status = "UNAUTHENTICATED"
    rejects_turn = True


class NotFound(TandemError):
    code = "not_found"
    http_status = 404
    grpc_status = "NOT_FOUND"
    rejects_turn = True


class SessionBusy(TandemError):
    code = "session_busy"
    http_status = 409
    grpc_status = "ABORTED"
    retry_after_s = 1.0
    rejects_turn = True


class LeaseLost(SessionBusy):
    """A save or a write's ledger commit carried a stale fencing token: another turn took the session's lease
    meanwhile (this one froze past its TTL). Nothing of it was stored; the client retries, as on a busy session."""

    code = "lease_lost"


class PolicyBlocked(TandemError):
    code = "policy_blocked"
    http_status = 403
    grpc_status = "PERMISSION_DENIED"


class ToolError(TandemError):
    code = "tool_error"
    http_status = 500
    grpc_status = "INTERNAL"


class ToolTimeout(ToolError):
    code = "tool_timeout"
    http_status = 504
    grpc_status = "DEADLINE_EXCEEDED"


class IneligibleAction(ToolError):
    code = "ineligible_action"
    http_status = 409
    grpc_status = "FAILED_PRECONDITION"


class UnconfirmedWrite(IneligibleAction):
    """The tool port refused a write: the session is not confirmed, its confirmed card is not this call (tool and
    arguments digest), or the call has no idempotency key. The pack's tool never ran (``details["reason"]``:
    ``not_confirmed`` | ``card_mismatch`` | ``no_idempotency_key``)."""

    code = "unconfirmed_write"


class UpstreamError(TandemError):
    code = "upstream_error"
    http_status = 502
    grpc_status = "UNAVAILABLE"


class ModelUnavailable(UpstreamError):
    code = "model_unavailable"
    http_status = 503
    retry_after_s = 1.0


class ModelTimeout(UpstreamError):
    code = "model_timeout"
    http_status = 504
    grpc_status = "DEADLINE_EXCEEDED"


class InvalidModelOutput(UpstreamError):
    code = "invalid_model_output"
    http_status = 502
    grpc_status = "INTERNAL"


class Overloaded(TandemError):
    code = "overloaded"
    http_status = 503
    grpc_status = "UNAVAILABLE"
    retry_after_s = 1.0
    rejects_turn = True


class RateLimited(Overloaded):
    code = "rate_limited"
    http_status = 429
    grpc_status = "RESOURCE_EXHAUSTED"


class StoreUnavailable(TandemError):
    code = "store_unavailable"
    http_status = 503
    grpc_status = "UNAVAILABLE"
    retry_after_s = 1.0


class ConfigError(TandemError):
    code = "config_error"
    http_status = 500
    grpc_status = "FAILED_PRECONDITION"


def all_error_classes() -> list[type[TandemError]]:
    """Every class of the tree, base first (used by the completeness test of the edge tables)."""
    out: list[type[TandemError]] = []
    stack: list[type[TandemError]] = [TandemError]
    while stack:
        cls = stack.pop(0)
        out.append(cls)
        stack.extend(cls.__subclasses__())
    return out


def error_class_for_code(code: str) -> type[TandemError]:
    """The class whose ``code`` this is (an ``error`` event's code back to its table row);
    unknown codes are :class:`TandemError` (500 / INTERNAL)."""
    for cls in all_error_classes():
        if cls.code == code:
            return cls
    return TandemError


def retry_after_of(exc: BaseException) -> float | None:
    """The Retry-After hint of an error (``None`` for foreign errors and classes without one)."""
    return exc.retry_after_s if isinstance(exc, TandemError) else None
