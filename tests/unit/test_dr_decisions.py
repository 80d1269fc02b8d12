"""The DR rung's per-step offer, its decoding schema and the parser (the core's, in ``open`` mode)."""

from __future__ import annotations

import json

import pytest

from pipelines.annex.dr.inputs import OrchestratorInput
from pipelines.annex.dr.orchestrator import Orchestrator
from pipelines.annex.dr.state import SessionFacts
from pipelines.core.decisions import (
    REASON_CODES,
    DecisionError,
    Offer,
    decision_schema,
    parse_decision,
)
from pipelines.counters import Counters
from pipelines.domains.support import build_support_domain
from pipelines.guardrails.pii import Vault

D = build_support_domain()
FORBIDDEN = {"pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
             "format", "$ref", "$defs"}
ORDERS = ["#W1000001", "#W1000002"]


def offer(*, verified: bool = True, text: str = "my email is [EMAIL_1]") -> Offer:
    """DR's offer for a turn: verified with two orders of the user's observed, or not yet verified."""
    facts = SessionFacts(authenticated_user_id="alex_rivera_1001" if verified else None,
                         observed_ids=["alex_rivera_1001", *ORDERS] if verified else [],
                         user_order_ids=ORDERS if verified else [])
    inp = OrchestratorInput(session_id="s", turn_id="t", user_text=text, facts=facts,
                            vault=Vault.from_entries({"[EMAIL_1]": "alex.rivera@example.com"}))
    return Orchestrator(D, None, None, counters=Counters()).offer(inp)  # type: ignore[arg-type]


def keys(node) -> set[str]:
    if isinstance(node, dict):
        return set(node) | set().union(*(keys(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(keys(v) for v in node)) if node else set()
    return set()


def test_schema_bounds_every_free_string_and_integer() -> None:
    """A greedy small model must finish a parseable object within max_tokens (seen: an email
    argument repeated until the token cap cut the JSON off)."""
    s = decision_schema(offer())
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


def test_the_offer_is_what_is_eligible_now() -> None:
    before = offer(verified=False)
    assert not before.cards  # no card before the user is verified
    assert "find_user_id_by_email" in before.tools and "get_order_details" not in before.tools
    assert before.tools["find_user_id_by_email"]["properties"]["email"] == {"enum": ["[EMAIL_1]"]}
    assert "find_user_id_by_email" not in offer(verified=False, text="hello").tools  # nothing to look up
    after = offer()
    assert "get_order_details" in after.tools and "find_user_id_by_email" not in after.tools
    assert after.select_ids == ORDERS and after.clarify_free and after.open


def test_schema_is_a_const_discriminated_union_of_what_is_eligible() -> None:
    branches = decision_schema(offer())["anyOf"]
    consts = [b["properties"]["decision"]["const"] for b in branches]
    assert {"get_order_details", "respond", "clarify", "select", "action", "escalate"} <= set(consts)
    assert "cancel_pending_order" not in consts  # writes only through the action path
    assert all(b["additionalProperties"] is False for b in branches)
    cards = [b["properties"]["card_id"]["const"] for b in branches if "card_id" in b["properties"]]
    assert set(cards) == {c.id for c in D.cards if c.kind == "write"}
    cancel = next(b for b in branches if b["properties"].get("card_id", {}).get("const") == "card.cancel_order")
    assert cancel["properties"]["params"]["properties"]["order_id"] == {"enum": ORDERS}
    clarify = next(b for b in branches if b["properties"]["decision"]["const"] == "clarify")
    assert clarify["properties"]["question"] == {"type": "string", "maxLength": 160}
    esc = next(b for b in branches if b["properties"]["decision"]["const"] == "escalate")
    assert esc["properties"]["reason_code"]["enum"] == list(REASON_CODES)


def test_no_action_branch_without_cards() -> None:
    consts = [b["properties"]["decision"]["const"] for b in decision_schema(offer(verified=False))["anyOf"]]
    assert "action" not in consts


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"decision": "respond"}', {"decision": "respond"}),
        ('{"decision": "clarify", "question": "Which one?"}', {"decision": "clarify", "question": "Which one?"}),
        ('{"decision": "select", "entity_id": null}', {"decision": "select", "entity_id": None}),
        # open: an id the mid-guard will judge (it is not among the selectable ones)
        ('{"decision": "select", "entity_id": "#W1"}', {"decision": "select", "entity_id": "#W1"}),
        ('{"decision": "escalate", "reason_code": "out_of_scope"}',
         {"decision": "escalate", "reason_code": "out_of_scope"}),
        ('{"decision": "action", "card_id": "card.cancel_order", "params": {"order_id": "#W1"}}',
         {"decision": "action", "card_id": "card.cancel_order", "params": {"order_id": "#W1"}}),
        ('```json\n{"decision": "get_order_details", "args": {"order_id": "#W1"}}\n```',
         {"decision": "get_order_details", "args": {"order_id": "#W1"}}),
        # open: a tool not offered parses; the mid-guard refuses it
        ('{"decision": "cancel_pending_order", "args": {}}', {"decision": "cancel_pending_order", "args": {}}),
        ('noise {"decision": "respond"} trailing {"x": 1}', {"decision": "respond"}),
    ],
)
def test_parse_valid(raw: str, expected) -> None:
    assert parse_decision(raw, offer()) == expected


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
        '{"decision": "clarify", "question": "  "}',
        '{"decision": "select"}',
        '{"decision": "select", "entity_id": 3}',
        '{"decision": "get_order_details", "args": "x"}',
        '{"decision": "action", "card_id": 1, "params": {}}',
    ],
)
def test_parse_invalid_raises(raw: str) -> None:
    with pytest.raises(DecisionError):
        parse_decision(raw, offer())


def test_a_grounded_offer_refuses_what_it_did_not_offer() -> None:
    """The same parser, not open: a tool, card or entity that was not offered is not a decision."""
    closed = Offer(tools={"get_order_details": {}}, select_ids=ORDERS, clarify=["details"])
    for raw in ('{"decision": "cancel_pending_order", "args": {}}', '{"decision": "select", "entity_id": "#W1"}',
                '{"decision": "action", "card_id": "card.cancel_order", "params": {}}'):
        with pytest.raises(DecisionError):
            parse_decision(raw, closed)
    assert parse_decision('{"decision": "clarify", "about": "nope"}', closed) == {"decision": "clarify",
                                                                                  "about": "details"}


def test_schema_accepts_exactly_the_eligible_decisions() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    o = offer()
    s = decision_schema(o)
    good = [
        {"decision": "get_order_details", "args": {"order_id": "#W1000001"}},
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
        assert parse_decision(json.dumps(d), o)
