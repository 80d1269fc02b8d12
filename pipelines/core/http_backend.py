"""Pack tools over an HTTP service: per-call timeouts, retries for reads only, errors in the one table.

A pack whose records live in a service of its own (an orders API, a booking system) calls it through an
:class:`HttpBackend` from its tool handlers. Each call has a deadline (``timeout_s``, connect and read
together; a call may lower it). A **read** that fails in a way a second try may cure (a timeout, a
refused or dropped connection, 429, 502, 503, 504) is tried again, at most ``read_retries`` more times,
after ``backoff_s × 2^attempt`` seconds (capped at ``backoff_max_s``; a ``Retry-After`` header the
service sends is honoured up to that cap). A **write** is sent exactly once, whatever happens: a retry
could apply it twice. It carries the ``Idempotency-Key`` header — the core's write key of the confirmed
card (``ToolContext.idempotency_key``) — so a service that deduplicates on it applies it at most once even
when a caller's retry of the whole turn sends it again; the core's write ledger replays a recorded
outcome without calling the service at all.

Every failure is raised as a typed error of :mod:`pipelines.errors`, with its reason code both in
``details["reason"]`` and at the end of the message (``"... [reason]"``, the form packs read back with
:func:`reason_of`). The tool registry turns it into a failed observation, so the turn goes on:

==========================================  ====================  =====================================
the service                                 error                 reason
==========================================  ====================  =====================================
no answer within the deadline               ``ToolTimeout``       ``backend_timeout``
connection refused / dropped, DNS, TLS      ``ToolError``         ``backend_unreachable``
5xx (502, 503, 504 after the read retries)  ``ToolError``         ``backend_error``
429 (after the read retries)                ``ToolError``         ``backend_busy`` (+ ``retry_after_s``)
400, 422: it refused the arguments          ``InvalidInput``      ``backend_rejected_arguments``
401, 403: it refused our credentials        ``ToolError``         ``backend_auth``
404                                         ``ToolError``         the body's ``reason``, or ``not_found``
409: a business rule refused the change     ``IneligibleAction``  the body's ``reason``, or ``conflict``
any other 4xx                               ``ToolError``         ``backend_refused``
a body that is not JSON, or not the         ``ToolError``         ``malformed_response``
result model
==========================================  ====================  =====================================

A body's ``reason`` is used only when it is a short snake_case code (``[a-z][a-z0-9_]{0,63}``), so
a service cannot put arbitrary text where a reason code belongs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from pipelines.errors import IneligibleAction, InvalidInput, TandemError, ToolError, ToolTimeout

from .refusal import REASON_CODE, reason_of
from .runner import WriteScope

__all__ = [
    "HttpBackend",
    "RemoteWorld",
    "RETRYABLE_STATUS",
    "IDEMPOTENCY_HEADER",
    "error_for_status",
    "reason_of",
    "BACKEND_REASONS",
]

M = TypeVar("M", bound=BaseModel)

#: Statuses a read is tried again on (the service said: not now).
RETRYABLE_STATUS: frozenset[int] = frozenset({429, 502, 503, 504})
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: The reasons a backend failure carries (besides a service's own, from the body): a pack over a service
#: needs a refusal text for each (``tandem domain check`` asks for them).
BACKEND_REASONS: tuple[str, ...] = ("backend_timeout", "backend_unreachable", "backend_error", "backend_busy",
                                    "backend_rejected_arguments", "backend_auth", "backend_refused",
                                    "malformed_response", "not_found", "conflict")
_REASON = REASON_CODE


def _body_reason(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    reason = body.get("reason") if isinstance(body, dict) else None
    return reason if isinstance(reason, str) and _REASON.match(reason) else None


def _retry_after(response: httpx.Response) -> float | None:
    raw = response.headers.get("Retry-After")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None  # an HTTP date: no hint we rely on


def _error(cls: type[TandemError], what: str, reason: str, **details: Any) -> TandemError:
    return cls(f"{what} [{reason}]", details={"reason": reason, **details})


def error_for_status(response: httpx.Response, what: str) -> TandemError:
    """The typed error for a non-2xx answer (see the module's table)."""
    status = response.status_code
    if status == 409:
        return _error(IneligibleAction, f"{what} was refused", _body_reason(response) or "conflict", status=status)
    if status == 404:
        return _error(ToolError, f"{what}: not found", _body_reason(response) or "not_found", status=status)
    if status in (400, 422):
        return _error(InvalidInput, f"{what}: the service refused the arguments", "backend_rejected_arguments",
                      status=status)
    if status in (401, 403):
        return _error(ToolError, f"{what}: the service refused our credentials", "backend_auth", status=status)
    if status == 429:
        exc = _error(ToolError, f"{what}: the service is busy", "backend_busy", status=status)
        exc.retry_after_s = _retry_after(response)
        return exc
    if status >= 500:
        return _error(ToolError, f"{what}: the service failed ({status})", "backend_error", status=status)
    return _error(ToolError, f"{what}: the service refused the call ({status})", "backend_refused", status=status)


class HttpBackend:
    """A client of one HTTP service for a pack's tools (see module docstring).

    ``transport`` replaces the network (``httpx.MockTransport`` in tests); ``sleep`` is the backoff's
    wait (tests pass a recorder, so no test waits on the clock).
    """

    def __init__(self, base_url: str, *, timeout_s: float = 5.0, read_retries: int = 2, backoff_s: float = 0.1,
                 backoff_max_s: float = 2.0, headers: Mapping[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None, sleep: Callable[[float], None] = time.sleep,
                 name: str = "backend") -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if read_retries < 0 or backoff_s < 0 or backoff_max_s < 0:
            raise ValueError("read_retries, backoff_s and backoff_max_s must not be negative")
        self.base_url, self.name = base_url.rstrip("/"), name
        self.timeout_s, self.read_retries = timeout_s, read_retries
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self._sleep = sleep
        self._client = httpx.Client(base_url=self.base_url, headers=dict(headers or {}), transport=transport,
                                    timeout=timeout_s)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the two kinds of call -------------------------------------------------------------------

    def read(self, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None, method: str = "GET",
             timeout_s: float | None = None, result: type[M] | None = None) -> Any:
        """A call that changes nothing: tried again on a timeout, a lost connection, 429, 502, 503, 504."""
        what = f"{self.name} {method} {path}"
        attempt = 0
        while True:
            try:
                response = self._send(method, path, params=params, json=json, timeout_s=timeout_s, headers=None)
            except TandemError as exc:
                if attempt >= self.read_retries or exc.details.get("reason") not in (
                        "backend_timeout", "backend_unreachable"):
                    raise
                self._sleep(self._backoff(attempt, None))
                attempt += 1
                continue
            if response.status_code in RETRYABLE_STATUS and attempt < self.read_retries:
                self._sleep(self._backoff(attempt, _retry_after(response)))
                attempt += 1
                continue
            return self._decode(response, what, result)

    def write(self, path: str, *, json: Any = None, method: str = "POST", idempotency_key: str | None = None,
              timeout_s: float | None = None, result: type[M] | None = None) -> Any:
        """A call that changes the service's state: sent exactly once, never retried here."""
        headers = {IDEMPOTENCY_HEADER: idempotency_key} if idempotency_key else None
        response = self._send(method, path, params=None, json=json, timeout_s=timeout_s, headers=headers)
        return self._decode(response, f"{self.name} {method} {path}", result)

    # -- pieces -------------------------------------------------------------------------------------

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        wait = self.backoff_s * (2**attempt)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, self.backoff_max_s)

    def _send(self, method: str, path: str, *, params: Mapping[str, Any] | None, json: Any,
              timeout_s: float | None, headers: Mapping[str, str] | None) -> httpx.Response:
        what = f"{self.name} {method} {path}"
        deadline = self.timeout_s if timeout_s is None else timeout_s
        try:
            return self._client.request(method, path, params=params, json=json, headers=headers,
                                        timeout=deadline)
        except httpx.TimeoutException as exc:
            raise _error(ToolTimeout, f"{what}: no answer within {deadline:g} s", "backend_timeout") from exc
        except httpx.TransportError as exc:
            raise _error(ToolError, f"{what}: the service could not be reached ({type(exc).__name__})",
                         "backend_unreachable") from exc

    @staticmethod
    def _decode(response: httpx.Response, what: str, result: type[M] | None) -> Any:
        if not response.is_success:
            raise error_for_status(response, what)
        try:
            body = response.json()
        except ValueError as exc:
            raise _error(ToolError, f"{what}: the answer is not JSON", "malformed_response") from exc
        if result is None:
            return body
        try:
            return result.model_validate(body)
        except ValidationError as exc:
            raise _error(ToolError, f"{what}: the answer is not a {result.__name__}", "malformed_response",
                         errors=exc.errors(include_url=False, include_context=False)) from exc


class RemoteWorld:
    """The world of a pack whose records live in a service: the tool port's ``World`` with nothing local.

    The core's runner still serializes writes and records each keyed write's outcome in its ledger
    (a replay of the key answers from there, without a second call); the service is the state, so a
    write changes no local entity (its scope is empty and ``changed`` stays empty).
    """

    def __init__(self, backend: HttpBackend) -> None:
        self.backend = backend

    def entities(self) -> list[tuple[str, str, str]]:
        return []

    def write_scope(self, tool: str, args: Mapping[str, Any], user_id: str | None) -> WriteScope:
        return WriteScope()

    def fork(self, scope: WriteScope) -> RemoteWorld:
        return self

    def has(self, kind: str, key: str) -> bool:
        return False

    def adopt(self, other: Any, changed: Mapping[str, Any]) -> None:
        return None

    def diff(self, other: Any, scope: WriteScope) -> dict[str, list[str]]:
        return {}  # the service is the state: nothing local changes

    def entity_json(self, kind: str, key: str) -> str:
        raise KeyError(f"{kind} {key}: the records live in the service")
