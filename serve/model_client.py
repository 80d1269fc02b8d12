"""Role-addressed model client over Ray Serve handles to ``LLMServer`` deployments.

Implements :class:`pipelines.protocols.ModelClient`. Each streamed item from
``LLMServer.chat`` is a list of complete SSE events (``data: {chunk}``) or an
``ErrorResponse``; this module turns them into text deltas and translates
foreign errors into :mod:`pipelines.errors` at this one boundary.

Every call asks the engine for its usage (``stream_options``: a running count on every chunk and a
final usage chunk with the cached prompt tokens and vLLM's per-request timing where the engine
enables them); when the call ends its :class:`~pipelines.cost.CallCost` goes to the turn's meter
(:func:`pipelines.cost.record`) and its counts to the LLM span.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from ray.serve.exceptions import RequestCancelledError
from ray.serve.handle import DeploymentHandle

from pipelines.cost import CallCost, purpose_of, record
from pipelines.errors import (
    InvalidModelOutput,
    ModelUnavailable,
    TandemError,
    UpstreamError,
)
from pipelines.protocols import ModelCall
from pipelines.spans import start_llm_span
from serve.foreign import MODEL_ERRORS, translate

__all__ = ["ServeModelClient", "to_chat_request", "parse_sse_item", "read_sse_item", "call_cost",
           "call_params", "FOREIGN_ERRORS"]

# Foreign error → our error class (serve.foreign; a test checks every Ray error class against it).
FOREIGN_ERRORS = MODEL_ERRORS


def to_chat_request(model_id: str, call: ModelCall) -> Any:
    """Our :class:`ModelCall` as Ray Serve LLM's ``ChatCompletionRequest`` (streaming)."""
    from ray.serve.llm.openai_api_models import ChatCompletionRequest

    messages = [m.model_dump() for m in call.messages]
    if call.prefix:  # the reply starts with fixed text: the model continues it instead of decoding it
        messages.append({"role": "assistant", "content": call.prefix})
    body: dict[str, Any] = {
        "model": model_id,
        "messages": messages,
        "max_tokens": call.max_tokens,
        "temperature": call.temperature,
        "top_p": call.top_p,
        "stream": True,
        # a running usage count on every chunk (a call stopped early still has the engine's counts) and a final
        # usage chunk (cached prompt tokens, the engine's timing): the turn's cost and the LLM span
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if call.priority:
        body["priority"] = call.priority
    if call.seed is not None:
        body["seed"] = call.seed
    if call.stop:
        body["stop"] = list(call.stop)
    if call.repetition_penalty != 1.0:
        body["repetition_penalty"] = call.repetition_penalty
    if call.prefix:
        body["continue_final_message"] = True
        body["add_generation_prompt"] = False
    so = call.structured_output
    if so is not None:
        body["structured_outputs"] = {so.kind: so.spec}
    return ChatCompletionRequest(**body)


def parse_sse_item(item: Any) -> list[str]:
    """Text deltas in one streamed item; raises :class:`InvalidModelOutput` on an engine error."""
    return read_sse_item(item)[0]


def read_sse_item(item: Any) -> tuple[list[str], dict[str, Any] | None]:
    """Text deltas in one streamed item and the last usage it carries (the chunk's ``usage`` with its
    ``metrics`` added, when vLLM sent them); raises :class:`InvalidModelOutput` on an engine error."""
    events = item if isinstance(item, list) else [item]
    out: list[str] = []
    usage: dict[str, Any] | None = None
    for ev in events:
        if not isinstance(ev, str):
            err = getattr(ev, "error", None)
            if err is not None:  # an ErrorResponse
                raise InvalidModelOutput(
                    f"model rejected the request: {getattr(err, 'message', err)}",
                    details={"upstream_code": getattr(err, "code", None)},
                )
            raise InvalidModelOutput(f"unexpected item from the model deployment: {type(ev).__name__}")
        for line in ev.splitlines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if not payload or payload == "[DONE]":
                continue
            try:
                chunk = json.loads(payload)
            except ValueError as exc:
                raise InvalidModelOutput("unparseable chunk from the model deployment") from exc
            if "error" in chunk:
                e = chunk["error"]
                msg = e.get("message") if isinstance(e, dict) else str(e)
                raise InvalidModelOutput(f"model error: {msg}")
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    out.append(text)
            if isinstance(chunk.get("usage"), dict):
                usage = dict(chunk["usage"])
                if isinstance(chunk.get("metrics"), dict):
                    usage["metrics"] = chunk["metrics"]
    return out, usage


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def call_cost(role: str, purpose: str, usage: dict[str, Any] | None, *, wall_ms: float, final: bool) -> CallCost:
    """One call's :class:`CallCost` from the last usage it streamed (``final``: the call's last chunk was read).

    The engine's time is vLLM's scheduled → first token plus first → last token; a usage without the
    final chunk's details (a call stopped early) keeps its running counts and is marked unreported.
    """
    u = usage or {}
    details = u.get("prompt_tokens_details") if isinstance(u.get("prompt_tokens_details"), dict) else {}
    metrics = u.get("metrics") if isinstance(u.get("metrics"), dict) else {}
    ttft, gen = _num(metrics.get("time_to_first_token_ms")), _num(metrics.get("generation_time_ms"))
    engine = None if ttft is None else round(ttft + (gen or 0.0), 3)
    queue = _num(metrics.get("queue_time_ms"))
    return CallCost(role=role, purpose=purpose, prompt_tokens=int(_num(u.get("prompt_tokens")) or 0),
                    cached_tokens=int(_num(details.get("cached_tokens")) or 0),
                    decode_tokens=int(_num(u.get("completion_tokens")) or 0), engine_ms=engine,
                    queue_ms=None if queue is None else round(queue, 3), wall_ms=round(wall_ms, 3),
                    reported=final and usage is not None)


def call_params(call: ModelCall) -> dict[str, Any]:
    """The invocation parameters recorded on the LLM span."""
    params = call.model_dump(exclude={"messages", "structured_output"}, exclude_defaults=True)
    if call.structured_output is not None:
        params["structured_output"] = call.structured_output.model_dump()
    return params


class ServeModelClient:
    """``role → (handle, model_id)``; streams text deltas from the role's deployment."""

    def __init__(self, routes: dict[str, tuple[DeploymentHandle, str]]) -> None:
        self._routes = {role: (h.options(stream=True), mid) for role, (h, mid) in routes.items()}

    def model_id(self, role: str) -> str:
        return self._routes[role][1]

    async def stream(self, role: str, call: ModelCall) -> AsyncIterator[str]:
        try:
            handle, model_id = self._routes[role]
        except KeyError:
            raise ModelUnavailable(f"no model deployment serves role {role!r}") from None
        request = to_chat_request(model_id, call)
        llm = start_llm_span(role, call.messages, model_id=model_id, params=call_params(call))
        purpose = purpose_of(role, call.purpose)
        llm.purpose(purpose)
        gen = None
        finished = False
        usage: dict[str, Any] | None = None
        t0 = time.perf_counter()
        try:
            with llm.activate():  # the model deployment's spans nest under the LLM span
                gen = handle.chat.remote(request)
            async for item in gen:
                texts, got = read_sse_item(item)
                if got is not None:  # before the text goes out: a caller that stops here still has the counts
                    usage = got
                for text in texts:
                    llm.add(text)
                    yield text
            finished = True
        except (TandemError, RequestCancelledError):
            raise
        except Exception as exc:
            raise translate(exc, MODEL_ERRORS, what=f"model deployment for role {role!r} failed",
                            default=UpstreamError) from exc
        finally:
            if not finished and gen is not None:  # the caller stopped early (or failed): stop the engine
                gen.cancel()
            if gen is not None:
                cost = call_cost(role, purpose, usage, wall_ms=(time.perf_counter() - t0) * 1000, final=finished)
                record(cost)
                if usage is not None:
                    llm.usage(cost.prompt_tokens, cost.decode_tokens, cached=cost.cached_tokens,
                              engine_ms=cost.engine_ms)
            llm.end(None if finished else sys.exc_info()[1])
