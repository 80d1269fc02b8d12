"""The SGC ladder's settings and the prompts of every model call.

The generator never sees the user's history or the tools: it writes from the forward contract
(:class:`pipelines.core.contract.ForwardContract`) rendered in the ladder's format
(:func:`sgc_view`) — the intent context (c1), the compacted tool observations, the live-state
values, W2's conflicts and paragraph plan (c2) and W3's guidance pick (c3). Each rung of the
ladder fills what it has and leaves the rest ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.core.contract import (
    C1,
    C2,
    C3,
    ConflictView,
    ForwardContract,
    ObservationRecord,
    compact,
    task_state,
)
from pipelines.domains.coach import build_registry
from pipelines.protocols import ChatMessage, TurnRecord
from pipelines.sgc.canonical import session_seed
from pipelines.sgc.w1_grammar import NARRATION_MAX_CHARS
from pipelines.sgc.w2 import GroundingResult
from pipelines.sgc.w3 import HISTORY_WINDOW
from pipelines.tools import ToolObservation
from pipelines.turn import TurnContext

__all__ = [
    "SgcSettings",
    "C1",
    "C2",
    "C3",
    "ladder_contract",
    "sgc_view",
    "compact",
    "observation_record",
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


def observation_record(obs: ToolObservation) -> ObservationRecord:
    """A tool observation as the forward contract keeps it."""
    return ObservationRecord(step=0, tool=obs.tool, args=dict(obs.args), ok=obs.ok, reason=obs.error_code,
                             result=obs.result if obs.ok else None)


def ladder_contract(ctx: TurnContext, state: Mapping[str, Any], observations: Sequence[ToolObservation], *,
                    narration: str = "", c1: C1 | None = None) -> ForwardContract:
    """The forward contract of a ladder turn: the request, the live-state values, the observations, c1
    (c2 and c3 are added by the rungs that have them)."""
    return ForwardContract(turn_id=ctx.turn_id, locale=ctx.request.locale,
                           task_state=task_state("answer", executed=False, verified=bool(state.get("user_id"))),
                           selected_path="answer", user_request=ctx.request.text, user_state=dict(state),
                           prior_observations=[observation_record(o) for o in observations], narration=narration,
                           c1=c1.model_dump() if c1 is not None else None)


def sgc_view(contract: ForwardContract, max_items: int) -> str:
    """The forward contract in the ladder's prompt format: one JSON object (intent context, compacted
    observations, live-state values, c2, c3) — what the generator writes from and the judge reads."""
    view: dict[str, Any] = {"locale": contract.locale, "user_text": contract.user_request,
                            "narration": contract.narration, "state": contract.user_state,
                            "observations": [{"tool": o.tool, "ok": o.ok,
                                              **({"result": compact(o.result, max_items)}
                                                 if o.ok and o.result is not None else {}),
                                              **({"error_code": o.reason} if o.reason is not None else {})}
                                             for o in contract.prior_observations]}
    for key in ("c1", "c2", "c3"):
        block = getattr(contract, key)
        if block is not None:
            view[key] = _fields(block)
    return json.dumps(view, separators=(",", ":"), ensure_ascii=False)


def _fields(block: Any) -> Any:
    """A context block's fields without the unset ones (its models' ``None``), at every depth."""
    if isinstance(block, dict):
        return {k: _fields(v) for k, v in block.items() if v is not None}
    if isinstance(block, list):
        return [_fields(v) for v in block]
    return block


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


def generator_messages(contract: ForwardContract, max_items: int) -> list[ChatMessage]:
    """The generator writes from the contract only."""
    rules = [
        "You are a creature-battle coach. Write the reply to the user from the contract below only.",
        "Only recommend creatures and skills the user owns (see the observations).",
        f"Reply in the language of locale '{contract.locale}'.",
    ]
    if contract.c2 is not None:
        rules.append("Write exactly the paragraphs of c2.plan, in order, one short paragraph each; "
                     "account for every conflict it lists and never praise a conflicted constraint.")
    if contract.c3 is not None and contract.c3.get("subject_id"):
        rules.append("Weave in the guidance of c3 in one sentence.")
    return [ChatMessage(role="system", content=" ".join(rules)),
            ChatMessage(role="user", content=f"Contract: {sgc_view(contract, max_items)}")]
