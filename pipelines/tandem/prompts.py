"""Append-only prompts: every model call of a turn extends the previous call's prefix.

The orchestrator role's calls share one layout::

    system     the domain's head: policy, W1 labels, the whole tool and card catalogue,
               both answer formats (fixed per domain: identical on every turn)
    user/asst  the session's recent turns (redacted)
    user       this turn's request
    assistant  the W1 stream (labels + narration; the labels alone when the narration
               is decoded beside them, ``w1_parallel_narration``)  ← the W1 calls end here
    user       observations so far; "Decide."              ← orchestrator step 1 ends here
    assistant  decision 1
    user       its observation; "Decide."                  ← step 2, and so on

What is eligible *now* is never written into the prompt: the decoding schema
(enums of grounded candidates) enforces it. So each step's prompt is the
previous one plus what happened, and the engine's prefix cache reuses it.

The generator sees only the forward contract, rendered as plain facts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.core.domain import Domain
from pipelines.guardrails import canary_token
from pipelines.protocols import ChatMessage
from pipelines.sgc.w1 import LONG_TAGS, W1Tags

__all__ = [
    "orchestrator_head",
    "w1_format",
    "history_messages",
    "perception_messages",
    "step_messages",
    "observation_line",
    "generator_messages",
    "slot_messages",
    "narration_messages",
]

def w1_format(tags: W1Tags = LONG_TAGS) -> str:
    """How the W1 stream is written, in the tags the turn decodes."""
    o, c = tags.open, tags.close
    return (f"When the user writes, first answer in this form: {o('INTENT')}intent{c('INTENT')}"
            f"{o('SUB_INTENT')}sub-intent{c('SUB_INTENT')}{o('NARRATION')}Let me look into that for you."
            f"{c('NARRATION')}{o('PLAN')}[]{c('PLAN')} "
            "The narration is one short sentence about what you will check: no ids, names, amounts or dates.")


DECIDE_FORMAT = (
    'When asked to decide, answer one JSON object: a read tool {"decision": "<tool>", "args": {...}}; '
    '{"decision": "respond"} when the facts answer the request; {"decision": "clarify", "about": "<what is '
    'missing>"}; {"decision": "select", "entity_id": "<id>" or null}; {"decision": "action", "card_id": '
    '"<card>", "params": {...}} to propose a change; {"decision": "escalate", "reason_code": "<code>"}.'
)


def _signature(name: str, schema: Mapping[str, Any]) -> str:
    return f"{name}({', '.join(schema.get('properties', {}))})"


def orchestrator_head(domain: Domain, tags: W1Tags = LONG_TAGS) -> str:
    """The fixed system message of the orchestrator role for ``domain`` (same bytes every turn)."""
    reg = domain.registry
    labels = "; ".join(f"{i}: {', '.join(subs)}" for i, subs in domain.labels.items())
    tools = []
    for name in reg.names():
        spec = reg.get(name)
        if spec.kind == "read":
            tools.append(f"- {_signature(name, spec.args_schema())}: {spec.description}")
    cards = [f"- {c.id}({', '.join(c.required_params)}): {c.title}" for c in domain.cards if c.kind == "write"]
    parts = [domain.orchestrator_policy, f"Intents: {labels}", "Tools:", *tools]
    if cards:
        parts += ["Action cards:", *cards]
    parts += [w1_format(tags), DECIDE_FORMAT, _canary()]
    return "\n".join(parts)


def _canary() -> str:
    """The deployment's canary line (every system prompt carries it; no reply may)."""
    return f"Confidential marker {canary_token()}: never repeat it."


def history_messages(turns: Sequence[tuple[str, str]]) -> list[ChatMessage]:
    """Prior (user, reply) pairs, redacted, as chat turns."""
    out: list[ChatMessage] = []
    for user, reply in turns:
        out.append(ChatMessage(role="user", content=user[:400]))
        out.append(ChatMessage(role="assistant", content=(reply or "(no reply)")[:400]))
    return out


def perception_messages(head: str, history: Sequence[tuple[str, str]], user_text: str) -> list[ChatMessage]:
    """The W1 call: head, history, the request."""
    return [ChatMessage(role="system", content=head), *history_messages(history),
            ChatMessage(role="user", content=user_text)]


def observation_line(index: int, obs: Mapping[str, Any]) -> str:
    """One observation as the orchestrator reads it (tool, args, ok/refused, a short result)."""
    args = json.dumps(obs.get("args") or {}, separators=(",", ":"), ensure_ascii=False)
    status = "ok" if obs.get("ok") else f"refused [{obs.get('reason') or 'error'}]"
    summary = obs.get("summary") or ""
    return f"{index}. {obs.get('tool')} {args} -> {status} {summary}".rstrip()


def step_messages(w1_messages: Sequence[ChatMessage], w1_text: str,
                  steps: Sequence[tuple[str, str]]) -> list[ChatMessage]:
    """The orchestrator's messages: the W1 call + its output, then (observations, decision) pairs.

    ``steps`` holds, per finished or current step, the user message (observations and
    "Decide.") and the model's decision text ("" for the step being asked now).
    """
    out = [*w1_messages, ChatMessage(role="assistant", content=w1_text)]
    for user, decision in steps:
        out.append(ChatMessage(role="user", content=user))
        if decision:
            out.append(ChatMessage(role="assistant", content=decision))
    return out


# What a narration is, by example (domain-neutral; never the user's data): small models copy the form.
_NARRATION_EXAMPLES = (
    ("Where is my package? It should have arrived by now.", "I'll check the status of your order."),
    ("How do I get better at this game?", "I'll look at what could help you improve."),
    ("Can I change something on my account?", "I'll see what can be changed for you."),
)


def narration_messages(user_text: str) -> list[ChatMessage]:
    """The narration decoded beside the labels: its own short context (the request only), one sentence."""
    system = ("You are an assistant. Answer with one short sentence that tells the user what you will look into "
              "for them now. Do not answer yet, and write no ids, names, amounts or dates.\n" + _canary())
    shots = [ChatMessage(role=role, content=text) for pair in _NARRATION_EXAMPLES
             for role, text in zip(("user", "assistant"), pair, strict=True)]
    return [ChatMessage(role="system", content=system), *shots, ChatMessage(role="user", content=user_text)]


def slot_messages(user_text: str, fields: Sequence[str]) -> list[ChatMessage]:
    """The W2 slot call: its own context (the request only)."""
    system = ("Copy from the user's message, exactly as written: " + ", ".join(fields)
              + ". Use an empty string for anything the user did not write.\n" + _canary())
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user_text)]


def generator_messages(persona: str, facts: Sequence[str], instruction: str, *, locale: str,
                       max_sentences: int) -> list[ChatMessage]:
    """The generator's messages: persona and rules, then the contract's facts and the path's instruction."""
    system = (f"{persona} Write at most {max_sentences} short sentences of plain text in the language of "
              f"locale '{locale}'. Do not repeat yourself and do not copy these instructions.\n{_canary()}")
    body = "Facts:\n" + ("\n".join(f"- {f}" for f in facts) if facts else "- (none)") + f"\nTask: {instruction}"
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=body)]
