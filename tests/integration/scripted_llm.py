"""A scripted model deployment for integration tests (never used by a profile).

``ScriptedOrchestrator`` is an ``LLMServer`` subclass that starts no engine: its
``chat`` answers the DR orchestrator's prompt with a deterministic policy read
off the prompt (the user's words and the observations so far), streamed as the
same SSE chunks vLLM sends. It proves the wiring of multi-step flows without
leaning on a 135M model's competence.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from ray.serve.llm.deployment import LLMServer

ORDER_RE = re.compile(r"#W\d{7}")
EMAIL_RE = re.compile(r"\[EMAIL_\d+\]")


def _user_block(prompt: str) -> tuple[str, list[str]]:
    user = ""
    obs: list[str] = []
    in_obs = False
    for line in prompt.splitlines():
        if line.startswith("User: "):
            user = line[6:]
        elif line.startswith("Observations:"):
            in_obs = True
        elif line.startswith("Next decision:"):
            in_obs = False
        elif in_obs:
            obs.append(line)
    return user, obs


def orchestrator_policy(prompt: str) -> dict[str, Any]:
    """The decision for one orchestration step."""
    user, obs = _user_block(prompt)
    low = user.lower()
    seen = " ".join(obs)
    if "keep looking" in low:  # drives the loop into its step cap
        return {"decision": "list_all_product_types", "args": {}}
    email = EMAIL_RE.search(user)
    if email and "find_user_id_by_email" not in seen:
        return {"decision": "find_user_id_by_email", "args": {"email": email.group(0)}}
    order = ORDER_RE.search(user)
    if order and "get_order_details" not in seen:
        return {"decision": "get_order_details", "args": {"order_id": order.group(0)}}
    if order and "cancel" in low:
        return {"decision": "action", "card_id": "card.cancel_order",
                "params": {"order_id": order.group(0), "reason": "no longer needed"}}
    if "my order" in low and not order:
        known = re.search(r"orders=([^;\n]+)", prompt)
        if known is None and "get_user_details" not in seen:
            m = re.search(r"authenticated_user(?:_id)?=([\w.-]+)", prompt)
            return {"decision": "get_user_details", "args": {"user_id": m.group(1) if m else ""}}
        return {"decision": "select", "entity_id": None}
    return {"decision": "respond"}


def sse(model: str, text: str) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {"id": "scripted", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(body)}\n\n"

    pieces = [text[i:i + 12] for i in range(0, len(text), 12)] or [""]
    return ([chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in pieces]
            + [chunk({}, "stop"), "data: [DONE]\n\n"])


class ScriptedOrchestrator(LLMServer):
    async def __init__(self, llm_config: Any, **kwargs: Any) -> None:  # no engine
        self._llm_config = llm_config
        self.prompts: list[str] = []

    async def check_health(self) -> None:
        return None

    async def llm_config(self) -> Any:
        return self._llm_config

    async def chat(self, request: Any, raw_request_info: Any = None) -> AsyncIterator[list[str]]:
        prompt = "\n".join(str(m.get("content") if isinstance(m, dict) else m.content) for m in request.messages)
        self.prompts.append(prompt)
        decision = orchestrator_policy(prompt)
        for ev in sse(request.model, json.dumps(decision)):
            yield [ev]

    async def seen_prompts(self) -> list[str]:
        return list(self.prompts)

    async def __del__(self) -> None:
        return None
