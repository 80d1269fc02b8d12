"""Every model call of a turn in its event log: what was asked (a fingerprint) and what came back.

::

    bind_turn(emit)       the turn's event log for the calls made from here on (the prologue binds it;
                          tasks the turn starts inherit it)
    RecordingModels       a ModelClient that logs each call it relays as one ``model.call`` event when the
                          call ends: role, purpose, ``key`` (the call's fingerprint), ``text`` (what the
                          reader took of the stream), ``done`` (read to its end) and ``error`` (its code;
                          ``cancelled``: cut off while waiting for the model, as a timeout does)
    call_key(role, call)  the fingerprint: a hash of everything that shapes the output (messages, prefix,
                          decoding constraint and parameters; never the engine priority or the purpose)
    call_slot(role, call) which of the turn's calls it is (a W1 label, the narration, a step, the reply)
    picks / unpick        a JSON output's values that the log masks (names, address lines, zip…), kept as
                          their index in the decoding schema's enum, and put back from that enum

So a logged turn can be played back without a model (``pipelines.core.whatif``): a call whose fingerprint
is in the log gets the logged output, byte for byte. The text goes through the turn's emitter like every
other event: vault placeholders for PII, personal fields masked (a JSON output's masked values come back
from their ``picks``; a value decoded without an enum does not).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any

from pipelines.errors import TandemError
from pipelines.guardrails.pii import mask_pii_fields
from pipelines.protocols import ModelCall, ModelClient

__all__ = ["EVENT", "CANCELLED", "bind_turn", "call_key", "call_slot", "picks", "unpick", "record_call", "RecordingModels"]

EVENT = "model.call"
#: The ``error`` of a call cut off while it waited for the model (its caller's timeout): played back as one.
CANCELLED = "cancelled"
_TURN: ContextVar[Callable[..., None] | None] = ContextVar("tandem_model_record", default=None)


def bind_turn(emit: Callable[..., None] | None) -> None:
    """Log the model calls made from this context (and the tasks it starts) with ``emit``."""
    _TURN.set(emit)


def call_key(role: str, call: ModelCall) -> str:
    """A fingerprint of the call's input: two calls with the same key decode the same output."""
    body = call.model_dump(mode="json", exclude={"priority", "purpose"})
    raw = json.dumps({"role": role, **body}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def call_slot(role: str, call: ModelCall) -> str:
    """What kind of call of its turn this is (a W1 label, the narration, a decision step, the reply…): the
    role, the purpose, the decoding constraint's kind, the token budget and the system prompt. Calls of one
    slot come one after the other in a turn, so a call and its logged counterpart share slot and position."""
    so = call.structured_output
    head = call.messages[0].content if call.messages else ""
    digest = hashlib.sha256(head.encode()).hexdigest()[:8]
    return f"{role}:{getattr(call, 'purpose', '')}:{so.kind if so else 'text'}:{call.max_tokens}:{digest}"


def _branch(node: dict[str, Any], value: Any) -> dict[str, Any]:
    """The ``anyOf`` branch of ``node`` that ``value`` was decoded from (its ``const`` fields match)."""
    branches = node.get("anyOf")
    if not isinstance(branches, list):
        return node
    for b in branches:
        props = b.get("properties") or {}
        if isinstance(value, dict) and props and all(
                value.get(k) == p["const"] for k, p in props.items() if isinstance(p, dict) and "const" in p):
            return b
        if not isinstance(value, dict) and "enum" in b:
            return b
    return node


def _enum_at(schema: Any, root: Any, path: list[Any]) -> list[Any] | None:
    node, value = schema if isinstance(schema, dict) else {}, root
    for step in path:
        node = _branch(node, value)
        node = (node.get("items") if isinstance(step, int) else (node.get("properties") or {}).get(step)) or {}
        value = value[step]
    node = _branch(node, value)
    enum = node.get("enum")
    return enum if isinstance(enum, list) else None


def _masked_paths(raw: Any, masked: Any, path: list[Any]) -> list[list[Any]]:
    if isinstance(raw, dict) and isinstance(masked, dict):
        return [p for k in raw for p in _masked_paths(raw[k], masked.get(k), [*path, k])]
    if isinstance(raw, list) and isinstance(masked, list):
        return [p for i, v in enumerate(raw) for p in _masked_paths(v, masked[i], [*path, i])]
    return [] if raw == masked else [path]


def _json_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def picks(text: str, call: ModelCall) -> dict[str, int]:
    """``{json path: enum index}`` of the values of a JSON output that the log masks (-1: no enum holds it)."""
    so = call.structured_output
    data = _json_object(text)
    if data is None:
        return {}
    out: dict[str, int] = {}
    for path in _masked_paths(data, mask_pii_fields(data), []):
        enum = _enum_at(so.spec if so is not None and so.kind == "json" else None, data, path)
        value = data
        for step in path:
            value = value[step]
        out[json.dumps(path)] = enum.index(value) if enum is not None and value in enum else -1
    return out


def unpick(text: str, chosen: dict[str, int], call: ModelCall) -> str:
    """``text`` with every masked value put back from the call's enum (the inverse of :func:`picks`)."""
    so = call.structured_output
    data = _json_object(text) if chosen else None
    if data is None or so is None or so.kind != "json":
        return text
    for key, index in chosen.items():
        path = json.loads(key)
        try:
            enum = _enum_at(so.spec, data, path)
            if enum is None or not 0 <= index < len(enum):
                continue
            node = data
            for step in path[:-1]:
                node = node[step]
            node[path[-1]] = enum[index]
        except (KeyError, IndexError, TypeError):
            continue
    return json.dumps(data, ensure_ascii=False)


def record_call(role: str, call: ModelCall, text: str, *, done: bool, error: str | None = None) -> None:
    """Log one ended call on the bound turn's event log (nothing outside a turn)."""
    emit = _TURN.get()
    if emit is None:
        return
    emit(EVENT, role=role, purpose=getattr(call, "purpose", ""), key=call_key(role, call),
         slot=call_slot(role, call), text=text, picks=picks(text, call), done=done, error=error)


class RecordingModels:
    """A :class:`~pipelines.protocols.ModelClient` that logs every call it relays (see module docstring)."""

    def __init__(self, inner: ModelClient) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # the inner client's own extras (``model_id`` …)
        return getattr(self.inner, name)

    async def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        parts: list[str] = []
        done, error = False, None
        try:
            stream = self.inner.stream(role, call)
            closing = contextlib.aclosing(stream) if hasattr(stream, "aclose") else contextlib.nullcontext(stream)
            async with closing as deltas:
                async for delta in deltas:
                    parts.append(delta)
                    yield delta
            done = True
        except TandemError as exc:
            error = exc.code
            raise
        except asyncio.CancelledError:  # cut off while waiting for the model: its caller's timeout
            error = CANCELLED
            raise
        finally:
            record_call(role, call, "".join(parts), done=done, error=error)
