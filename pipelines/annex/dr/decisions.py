"""The orchestrator's decisions: pydantic models, the per-step JSON schema, and the parser.

One step = one JSON object whose ``"decision"`` field discriminates:

    {"decision": "<read tool>", "args": {...}}                  a typed tool call (read tools only)
    {"decision": "respond"}                                      answer from what is known
    {"decision": "clarify", "question": "..."}                   ask the user
    {"decision": "select", "entity_id": "<id>" | null}           pick the entity the user means
    {"decision": "action", "card_id": "card....", "params": {}}  propose a write from the catalogue
    {"decision": "escalate", "reason_code": "<enum>"}            hand over to a person

:func:`decision_schema` builds the union (``anyOf`` of ``const``-discriminated
branches) of what is eligible *now*. It drops the tools' own annotation keywords,
inlines ``$ref``, and bounds every free string and integer (:func:`bound_schema`)
so a greedy small model always finishes a parseable object within max_tokens
(vLLM's ``auto`` backend serves these bounds with ``guidance``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipelines.core.decisions import clean_schema
from pipelines.schema_bounds import bound_schema

__all__ = [
    "REASON_CODES",
    "TERMINALS",
    "ToolCall",
    "Respond",
    "Clarify",
    "Select",
    "Action",
    "Escalate",
    "Decision",
    "DecisionError",
    "decision_schema",
    "clean_schema",
    "bound_schema",
    "parse_decision",
]

REASON_CODES: tuple[str, ...] = (
    "user_requested_human",
    "safety_sensitive",
    "out_of_scope",
    "policy_exception",
    "technical_issue",
)
TERMINALS: tuple[str, ...] = ("respond", "clarify", "select", "action", "escalate")


class _Decision(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCall(_Decision):
    decision: str
    args: dict[str, Any] = Field(default_factory=dict)


class Respond(_Decision):
    decision: Literal["respond"] = "respond"


class Clarify(_Decision):
    decision: Literal["clarify"] = "clarify"
    question: str = Field(..., min_length=1)


class Select(_Decision):
    decision: Literal["select"] = "select"
    entity_id: str | None


class Action(_Decision):
    decision: Literal["action"] = "action"
    card_id: str
    params: dict[str, Any] = Field(default_factory=dict)


class Escalate(_Decision):
    decision: Literal["escalate"] = "escalate"
    reason_code: Literal[
        "user_requested_human", "safety_sensitive", "out_of_scope", "policy_exception", "technical_issue"
    ]


Decision = ToolCall | Respond | Clarify | Select | Action | Escalate
_TERMINAL_MODELS: dict[str, type[_Decision]] = {
    "respond": Respond, "clarify": Clarify, "select": Select, "action": Action, "escalate": Escalate,
}


class DecisionError(ValueError):
    """The model's output is not one valid decision."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


MAX_ARG_CHARS = 64
MAX_QUESTION_CHARS = 160


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
    }


def _params_schema(args_schema: dict[str, Any], params: tuple[str, ...], order_ids: list[str]) -> dict[str, Any]:
    clean = clean_schema(args_schema)
    props = {p: clean["properties"][p] for p in params}
    if "order_id" in props and order_ids:
        props["order_id"] = {"enum": list(order_ids)}
    return _obj(props)


def decision_schema(
    tools: dict[str, dict[str, Any]],
    cards: list[tuple[str, tuple[str, ...], dict[str, Any]]],
    select_ids: list[str],
) -> dict[str, Any]:
    """The JSON schema of one step.

    ``tools``: read tool name -> its argument JSON schema; ``cards``: (card id,
    required params, the card tool's argument schema) for the write cards on
    offer; ``select_ids``: entity ids the user may mean.
    """
    branches: list[dict[str, Any]] = []
    for name, args_schema in sorted(tools.items()):
        branches.append(_obj({"decision": {"const": name}, "args": bound_schema(clean_schema(args_schema))}))
    branches.append(_obj({"decision": {"const": "respond"}}))
    branches.append(_obj({"decision": {"const": "clarify"},
                          "question": {"type": "string", "maxLength": MAX_QUESTION_CHARS}}))
    entity: dict[str, Any] = {"anyOf": [{"enum": list(select_ids)}, {"type": "null"}]} if select_ids else {"type": "null"}
    branches.append(_obj({"decision": {"const": "select"}, "entity_id": entity}))
    order_ids = list(select_ids)
    for card_id, params, args_schema in cards:
        branches.append(
            _obj({
                "decision": {"const": "action"},
                "card_id": {"const": card_id},
                "params": bound_schema(_params_schema(args_schema, params, order_ids)),
            })
        )
    branches.append(_obj({"decision": {"const": "escalate"}, "reason_code": {"enum": list(REASON_CODES)}}))
    return {"anyOf": branches}


def _first_object(raw: str) -> str:
    text = raw.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("{") :] if "{" in text else text
    start = text.find("{")
    if start < 0:
        raise DecisionError("no JSON object in the output")
    depth, in_str, esc = 0, False, False
    for i, ch in enumerate(text[start:], start):
        if in_str:
            esc = not esc and ch == "\\"
            if ch == '"' and not esc:
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    raise DecisionError("unterminated JSON object")


def parse_decision(raw: str) -> Decision:
    """Parse one step's output; raises :class:`DecisionError` when it is not a valid decision."""
    try:
        data = json.loads(_first_object(raw))
    except json.JSONDecodeError as exc:
        raise DecisionError(f"invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("decision"), str):
        raise DecisionError("the object has no string 'decision'")
    kind = data["decision"]
    model: type[_Decision] = _TERMINAL_MODELS.get(kind, ToolCall)
    try:
        return model.model_validate(data)  # type: ignore[return-value]
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "decision"
        raise DecisionError(f"{kind}: {where}: {first['msg']}") from exc
