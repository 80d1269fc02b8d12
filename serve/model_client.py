"""Role-addressed model client over Ray Serve handles to ``LLMServer`` deployments.

Implements :class:`pipelines.protocols.ModelClient`. Each streamed item from
``LLMServer.chat`` is a list of complete SSE events (``data: {chunk}``) or an
``ErrorResponse``; this module turns them into text deltas and translates
foreign errors into :mod:`pipelines.errors` at this one boundary.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from ray.serve.exceptions import RequestCancelledError
from ray.serve.handle import DeploymentHandle

from pipelines.errors import (
    InvalidModelOutput,
    ModelUnavailable,
    TandemError,
    UpstreamError,
)
from pipelines.protocols import ModelCall
from pipelines.spans import start_llm_span
from serve.foreign import MODEL_ERRORS, translate

__all__ = ["ServeModelClient", "to_chat_request", "parse_sse_item", "usage_of", "call_params", "FOREIGN_ERRORS"]

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
        "stream_options": {"include_usage": True},  # a final usage chunk: token counts for the LLM span
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
    events = item if isinstance(item, list) else [item]
    out: list[str] = []
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
    return out


def usage_of(item: Any) -> tuple[int, int] | None:
    """``(prompt_tokens, completion_tokens)`` from a streamed item's usage chunk, if it holds one."""
    for ev in item if isinstance(item, list) else [item]:
        if not isinstance(ev, str) or '"prompt_tokens"' not in ev:
            continue
        for line in ev.splitlines():
            if line.startswith("data:") and '"prompt_tokens"' in line:
                try:
                    usage = json.loads(line[5:]).get("usage") or {}
                    return int(usage["prompt_tokens"]), int(usage.get("completion_tokens") or 0)
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue
    return None


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
        gen = None
        finished = False
        try:
            with llm.activate():  # the model deployment's spans nest under the LLM span
                gen = handle.chat.remote(request)
            async for item in gen:
                for text in parse_sse_item(item):
                    llm.add(text)
                    yield text
                if (usage := usage_of(item)) is not None:
                    llm.usage(*usage)
            finished = True
        except (TandemError, RequestCancelledError):
            raise
        except Exception as exc:
            raise translate(exc, MODEL_ERRORS, what=f"model deployment for role {role!r} failed",
                            default=UpstreamError) from exc
        finally:
            if not finished and gen is not None:  # the caller stopped early (or failed): stop the engine
                gen.cancel()
            llm.end(None if finished else sys.exc_info()[1])
