"""The per-step decision schema and the parser."""

from __future__ import annotations

import json

import pytest

from pipelines.annex.dr.decisions import (
    REASON_CODES,
    Action,
    Clarify,
    DecisionError,
    Escalate,
    Respond,
    Select,
    ToolCall,
    decision_schema,
    parse_decision,
)
from pipelines.domains.support import build_support_domain

D = build_support_domain()
FORBIDDEN = {"pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
             "format", "$ref", "$defs"}


def schema(with_cards: bool = True) -> dict:
    tools = {n: D.registry.get(n).args_schema() for n in ("find_user_id_by_email", "search_help_articles", "get_order_details")}
    cards = [(c.id, c.required_params, D.registry.get(c.tool).args_schema()) for c in D.cards if c.kind == "write"]
    return decision_schema(tools, cards if with_cards else [], ["#W1000001", "#W1000002"])


def keys(node) -> set[str]:
    if isinstance(node, dict):
        return set(node) | set().union(*(keys(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(keys(v) for v in node)) if node else set()
    return set()


def test_schema_bounds_every_free_string_and_integer() -> None:
    """A greedy small model must finish a parseable object within max_tokens (seen: an email
    argument repeated until the token cap cut the JSON off)."""
    s = schema()
    json.dumps(s)
    assert not keys(s) & (FORBIDDEN - {"maxLength", "minimum", "maximum"})

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "string" and "enum" not in node and "const" not in node:
                assert 0 < node["maxLength"] <= 160, node
            if node.get("type") == "integer":
                assert "maximum" in node and "minimum" in node, node
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(s)


def test_schema_is_a_const_discriminated_union_of_what_is_eligible() -> None:
    branches = schema()["anyOf"]
    consts = [b["properties"]["decision"]["const"] for b in branches]
    assert {"find_user_id_by_email", "respond", "clarify", "select", "action", "escalate"} <= set(consts)
    assert "cancel_pending_order" not in consts  # writes only through the action path
    assert all(b["additionalProperties"] is False for b in branches)
    cards = [b["properties"]["card_id"]["const"] for b in branches if "card_id" in b["properties"]]
    assert set(cards) == {c.id for c in D.cards if c.kind == "write"}
    cancel = next(b for b in branches if b["properties"].get("card_id", {}).get("const") == "card.cancel_order")
    assert cancel["properties"]["params"]["properties"]["order_id"] == {"enum": ["#W1000001", "#W1000002"]}
    esc = next(b for b in branches if b["properties"]["decision"]["const"] == "escalate")
    assert esc["properties"]["reason_code"]["enum"] == list(REASON_CODES)


def test_no_action_branch_without_cards() -> None:
    consts = [b["properties"]["decision"]["const"] for b in schema(False)["anyOf"]]
    assert "action" not in consts


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"decision": "respond"}', Respond()),
        ('{"decision": "clarify", "question": "Which one?"}', Clarify(question="Which one?")),
        ('{"decision": "select", "entity_id": null}', Select(entity_id=None)),
        ('{"decision": "select", "entity_id": "#W1"}', Select(entity_id="#W1")),
        ('{"decision": "escalate", "reason_code": "out_of_scope"}', Escalate(reason_code="out_of_scope")),
        ('{"decision": "action", "card_id": "card.cancel_order", "params": {"order_id": "#W1"}}',
         Action(card_id="card.cancel_order", params={"order_id": "#W1"})),
        ('```json\n{"decision": "get_order_details", "args": {"order_id": "#W1"}}\n```',
         ToolCall(decision="get_order_details", args={"order_id": "#W1"})),
        ('noise {"decision": "respond"} trailing {"x": 1}', Respond()),
    ],
)
def test_parse_valid(raw: str, expected) -> None:
    assert parse_decision(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "I think we should respond",
        '{"decision": "respond"',
        '{"decision": 3}',
        '["respond"]',
        '{"decision": "respond", "extra": 1}',
        '{"decision": "escalate", "reason_code": "because"}',
        '{"decision": "clarify"}',
        '{"decision": "select"}',
        '{"decision": "get_order_details", "args": "x"}',
    ],
)
def test_parse_invalid_raises(raw: str) -> None:
    with pytest.raises(DecisionError):
        parse_decision(raw)


def test_schema_accepts_exactly_the_eligible_decisions() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    s = schema()
    good = [
        {"decision": "find_user_id_by_email", "args": {"email": "[EMAIL_1]"}},
        {"decision": "respond"},
        {"decision": "select", "entity_id": None},
        {"decision": "select", "entity_id": "#W1000002"},
        {"decision": "escalate", "reason_code": "user_requested_human"},
        {"decision": "action", "card_id": "card.cancel_order",
         "params": {"order_id": "#W1000001", "reason": "no longer needed"}},
    ]
    bad = [
        {"decision": "cancel_pending_order", "args": {"order_id": "#W1000001", "reason": "no longer needed"}},
        {"decision": "action", "card_id": "card.cancel_order", "params": {"order_id": "#W9999999", "reason": "no longer needed"}},
        {"decision": "action", "card_id": "card.cancel_order", "params": {"order_id": "#W1000001", "reason": "bored"}},
        {"decision": "action", "card_id": "card.refund_status", "params": {"order_id": "#W1000001"}},
        {"decision": "select", "entity_id": "#W5555555"},
        {"decision": "escalate", "reason_code": "because"},
        {"decision": "respond", "text": "hi"},
    ]
    for d in good:
        jsonschema.validate(d, s)
    for d in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(d, s)
    for d in good:
        assert parse_decision(json.dumps(d))
