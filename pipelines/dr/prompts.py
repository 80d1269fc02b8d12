"""Prompts of the two roles, kept short (the embedded model has a 2,048-token window).

* :func:`orchestrator_messages` — the tools and cards on offer, the session
  state, the redacted request and the observations so far.
* :func:`generator_messages` — the forward contract rendered compactly, and
  one instruction per selected path. The generator sees nothing else: no tool
  list, no history, no other action.

Every text reaching a prompt is already redacted; :func:`scrub` re-redacts the
whole message list as a last line of defence.
"""

from __future__ import annotations

import json
from typing import Any

from pipelines.guardrails.pii import Vault
from pipelines.protocols import ChatMessage

from .contract import ForwardContract, ObservationRecord, state_from_observation

__all__ = ["orchestrator_messages", "generator_messages", "render_contract", "scrub", "PATH_INSTRUCTIONS"]

_ORCH_FORMAT = (
    "Plan the next step. Output one JSON decision only. One tool call per step.\n"
    "Decisions: a tool name with args; respond; clarify with a question; select an entity_id "
    "(null if unsure); action with card_id and params; escalate with a reason_code."
)

PATH_INSTRUCTIONS: dict[str, str] = {
    "answer": "Answer the request from the state, observations and sources only.",
    "answer_executed": "Tell the user the action below was done, using only the observed results.",
    "action_card": "Summarise the proposed action and its details, then ask the user to reply yes to confirm.",
    "fallback": (
        "Say briefly that you cannot complete this right now. Share only facts listed below. "
        "Offer to help with something else."
    ),
}


def _sig(name: str, schema: dict[str, Any]) -> str:
    return f"{name}({', '.join(schema.get('properties', {}))})"


def _obs_line(i: int, o: ObservationRecord) -> str:
    args = json.dumps(o.args, separators=(",", ":"), ensure_ascii=False)
    status = "ok" if o.ok else f"refused [{o.reason}]"
    return f"{i}. {o.tool} {args} -> {status} {o.summary}".rstrip()


def orchestrator_messages(
    *,
    policy: str = "",
    tools: dict[str, dict[str, Any]],
    cards: list[tuple[str, tuple[str, ...]]],
    history: list[tuple[str, str]],
    user_text: str,
    state: dict[str, Any],
    observations: list[ObservationRecord],
) -> list[ChatMessage]:
    """The messages of one orchestration step."""
    lines = ["Tools: " + "; ".join(_sig(n, s) for n, s in sorted(tools.items()))]
    if cards:
        lines.append("Cards: " + "; ".join(f"{cid}({', '.join(p)})" for cid, p in cards))
    system = (policy + "\n" if policy else "") + _ORCH_FORMAT + "\n" + "\n".join(lines)
    parts: list[str] = []
    for u, a in history[-2:]:
        parts.append(f"U: {u[:200]}")
        if a:
            parts.append(f"A: {a[:200]}")
    parts.append(f"User: {user_text}")
    parts.append("State: " + ("; ".join(f"{k}={v}" for k, v in state.items()) or "none"))
    if observations:
        parts.append("Observations:")
        parts += [_obs_line(i + 1, o) for i, o in enumerate(observations)]
    parts.append("Next decision:")
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content="\n".join(parts))]


def _kv(d: dict[str, Any]) -> str:
    return "; ".join(f"{k}={', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in d.items())


def render_contract(c: ForwardContract) -> str:
    """The forward contract as a few compact lines."""
    out = [f"path: {c.selected_path}", f"task: {c.task_state}"]
    if c.user_request:
        out.append(f"request: {c.user_request[:300]}")
    if c.user_state:
        out.append(f"state: {_kv(c.user_state)}")
    for i, o in enumerate(c.prior_observations[-4:], 1):
        if o.ok and state_from_observation(o.tool, o.result):
            continue  # already in the state line
        out.append("observed " + _obs_line(i, o))
    for a in c.eligible_actions:
        params = ", ".join(f"{k}={v}" for k, v in a.params.items())
        out.append(f"action: {a.title} [{a.card_id}] {params} ({a.status.replace('_', ' ')})")
    for s in c.sources[:2]:
        out.append(f"source [{s.id}] {s.title}: {s.snippet}")
    for rule in c.policy_constraints[:3]:
        out.append(f"rule: {rule}")
    if c.fallback is not None:
        out.append(f"problem: {c.fallback.trigger}" + (f" ({c.fallback.detail})" if c.fallback.detail else ""))
    return "\n".join(out)


def generator_messages(c: ForwardContract, *, max_sentences: int = 3,
                       persona: str = "You write the reply of a support assistant.") -> list[ChatMessage]:
    """The generator's messages: rules, the path's instruction, the rendered contract."""
    key = "answer_executed" if c.selected_path == "answer" and c.write_executed() else c.selected_path
    instruction = PATH_INSTRUCTIONS.get(key, PATH_INSTRUCTIONS["answer"])
    system = (
        f"{persona} Use only the facts, ids and amounts below; "
        "never promise anything else and never mention other actions. "
        f"At most {max_sentences} short sentences, plain text, language of locale '{c.locale}'.\n{instruction}"
    )
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=render_contract(c))]


def scrub(messages: list[ChatMessage], vault: Vault) -> list[ChatMessage]:
    """Re-redact every message (idempotent on already-redacted text)."""
    return [ChatMessage(role=m.role, content=vault.redact(m.content)) for m in messages]
