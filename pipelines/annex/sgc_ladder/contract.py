"""The SGC settings, the reply contract (c1 / c2 / c3) and the prompts of every model call.

The generator never sees the user's history or the tools: it writes from a
compact :class:`ReplyContract` — the intent context (c1), the compacted tool
observations, the live-state values, W2's conflicts and paragraph plan (c2) and
W3's guidance pick (c3). Each rung of the ladder fills what it has and leaves
the rest ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.contract import C1, C2, C3, ConflictView, compact
from pipelines.domains.coach import build_registry
from pipelines.protocols import ChatMessage, TurnRecord
from pipelines.sgc.canonical import session_seed
from pipelines.sgc.w1_grammar import NARRATION_MAX_CHARS
from pipelines.sgc.w2 import GroundingResult
from pipelines.sgc.w3 import HISTORY_WINDOW
from pipelines.tools import ToolObservation

__all__ = [
    "SgcSettings",
    "C1",
    "C2",
    "C3",
    "ObservationView",
    "ReplyContract",
    "compact",
    "observation_view",
    "c2_of",
    "tool_docs",
    "perception_messages",
    "slot_messages",
    "plan_messages",
    "generator_messages",
]


@dataclass(frozen=True)
class SgcSettings:
    """Settings shared by every rung (token budgets, determinism, limits, locale texts for ``en``)."""

    max_perception_tokens: int = 640
    max_plan_tokens: int = 320
    max_slot_tokens: int = 320
    max_reply_tokens: int = 200
    temperature: float = 0.0
    seed: int = 0
    narration_max_chars: int = NARRATION_MAX_CHARS
    history_turns: int = 2
    max_list_items: int = 12
    tool_timeout_s: float = 10.0
    w3_window: int = HISTORY_WINDOW
    session_seed_fn: Callable[[str], int] = session_seed
    audit_unguarded: bool = True
    stop_moot_plan: bool = True  # stop decoding the 4-in-1 stream once Φ froze the tools and narration closed
    safe_unowned: str = "I'll only suggest creatures and skills you already have."
    safe_contradiction: str = "Let me keep this consistent with what your roster supports."
    fallback_reply: str = "Sorry, I can't work that out right now. Could you ask me again in a moment?"


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ObservationView(_Contract):
    tool: str
    ok: bool
    result: Any = None
    error_code: str | None = None


class ReplyContract(_Contract):
    """The forward contract the generator writes from."""

    locale: str = "en"
    user_text: str
    narration: str = ""
    state: dict[str, Any] = Field(default_factory=dict)
    observations: list[ObservationView] = Field(default_factory=list)
    c1: C1 | None = None
    c2: C2 | None = None
    c3: C3 | None = None

    def render(self) -> str:
        return self.model_dump_json(exclude_none=True)


def observation_view(obs: ToolObservation, max_items: int) -> ObservationView:
    return ObservationView(tool=obs.tool, ok=obs.ok, result=compact(obs.result, max_items) if obs.ok else None,
                           error_code=obs.error_code)


def c2_of(g: GroundingResult) -> C2:
    return C2(
        conflicts=[ConflictView(**c.model_dump()) for c in g.conflicts],
        plan=list(g.plan.paragraphs),
        repairs=[f"{r.rule}:{r.entity}" for r in g.repairs],
    )


def tool_docs() -> str:
    """One line per coach tool: name(args): description."""
    lines = []
    reg = build_registry()
    for name in reg.names():
        spec = reg.get(name)
        args = ", ".join(spec.args_model.model_fields)
        lines.append(f"- {name}({args}): {spec.description}")
    return "\n".join(lines)


_TOOL_DOCS = tool_docs()


def _history(history: list[TurnRecord], n: int) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for t in history[-n:] if n else []:
        out.append(ChatMessage(role="user", content=t.user_text))
        if t.status != "failed" and t.reply_text:
            out.append(ChatMessage(role="assistant", content=t.reply_text))
    return out


def perception_messages(text: str, history: list[TurnRecord], labels: Mapping[str, list[str]],
                        state: Mapping[str, Any], s: SgcSettings) -> list[ChatMessage]:
    """The 4-in-1 call: intent, sub-intent, a short narration, then the plan."""
    label_lines = "\n".join(f"- {i}: {', '.join(subs)}" for i, subs in sorted(labels.items()))
    system = (
        "You are the orchestrator of a creature-battle coach. Answer in exactly this format and nothing else:\n"
        "<INTENT>intent</INTENT><SUB_INTENT>sub_intent</SUB_INTENT>"
        "<NARRATION>one short sentence telling the user what you are checking</NARRATION>"
        '<PLAN>[{"tool": "name", "args": {...}}]</PLAN>\n'
        f"Intents and their sub-intents:\n{label_lines}\nTools:\n{_TOOL_DOCS}\n"
        f"Known state: {json.dumps(dict(state), sort_keys=True)}\n"
        f"The narration is at most {s.narration_max_chars} characters and never contains '<'."
    )
    return [ChatMessage(role="system", content=system), *_history(history, s.history_turns),
            ChatMessage(role="user", content=text)]


def slot_messages(text: str, c1: C1) -> list[ChatMessage]:
    """The independent slot-extraction call: the user's text and c1 only."""
    system = (
        "Extract the user's request into the JSON slots of the schema: wanted, excluded and opponent "
        "entities, nature / attribute / style preferences, the swap group and global constraints. "
        "Use only what the user said."
    )
    user = f"Intent: {c1.intent}/{c1.sub_intent}\nUser: {text}"
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]


def plan_messages(text: str, history: list[TurnRecord], state: Mapping[str, Any],
                  s: SgcSettings) -> list[ChatMessage]:
    """Plan-and-Execute: one call that lists every tool call up front."""
    system = (
        "You are the planner of a creature-battle coach. Return a JSON list of the tool calls needed to "
        'answer, each {"tool": name, "args": {...}}; return [] when no tool is needed.\n'
        f"Tools:\n{_TOOL_DOCS}\nKnown state: {json.dumps(dict(state), sort_keys=True)}"
    )
    return [ChatMessage(role="system", content=system), *_history(history, s.history_turns),
            ChatMessage(role="user", content=text)]


def generator_messages(contract: ReplyContract) -> list[ChatMessage]:
    """The generator writes from the contract only."""
    rules = [
        "You are a creature-battle coach. Write the reply to the user from the contract below only.",
        "Only recommend creatures and skills the user owns (see the observations).",
        f"Reply in the language of locale '{contract.locale}'.",
    ]
    if contract.c2 is not None:
        rules.append("Write exactly the paragraphs of c2.plan, in order, one short paragraph each; "
                     "account for every conflict it lists and never praise a conflicted constraint.")
    if contract.c3 is not None and contract.c3.subject_id:
        rules.append("Weave in the guidance of c3 in one sentence.")
    return [ChatMessage(role="system", content=" ".join(rules)),
            ChatMessage(role="user", content=f"Contract: {contract.render()}")]
