"""Prompts and the decision schema of ``scripts/device_orchestrator_p90.py`` (no vLLM needed).

One orchestrator step: a shared system part (policy, every tool and card; prefix-cacheable)
and a per-request user part (history, the request, the state, the observations so far).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["SYSTEM", "POLICY", "REQUESTS", "HISTORY", "decision_schema_and_tools", "policy_text",
           "shared_head", "build_prompts"]

REPO = Path(__file__).resolve().parents[1]

SYSTEM = (
    "You plan the next step of a retail support assistant. Output one JSON decision only.\n"
    "Verify the user first (email, or name and zip). One tool call per step. "
    "Changes to orders only through an action card; the user confirms later. "
    "Use only ids from the observations or the user's words.\n"
    "Decisions: a tool name with args; respond; clarify with a question; select an entity_id "
    "(null if unsure); action with card_id and params; escalate with a reason_code."
)
POLICY = [
    "Authenticate the user by email, or by first name, last name and zip, before any account action.",
    "Act only for the authenticated user; never read or change another user's orders.",
    "Only pending orders can be cancelled; the reason is 'no longer needed' or 'ordered by mistake'.",
    "Only pending orders can have items, the shipping address or the payment method modified.",
    "Item options of a pending order can be modified only once; list every item to change at once.",
    "Only delivered orders can be returned or exchanged; an exchange keeps the same product type.",
    "Refunds go to the original payment method or to an existing gift card, never elsewhere.",
    "Gift card refunds are immediate; other refunds take five to seven business days.",
    "Before any change, show an action card with the exact details and wait for an explicit yes.",
    "Transfer to a human agent only when the request is out of scope or the user insists.",
    "Never invent ids, prices, addresses or policies; use only the observations and the user's words.",
    "One tool call per step; at most three steps per turn; then answer, clarify or escalate.",
]
REQUESTS = [
    # (user text, state, observation lines)
    ("Hi, I want to cancel my order, I ordered it by mistake.", {"authenticated_user": "no"}, []),
    ("My email is [EMAIL_1], where is my order #W1000002?", {"authenticated_user": "no"}, []),
    ("Please cancel order #W1000001.", {"authenticated_user": "alex_rivera_1001",
                                        "orders": "#W1000001,#W1000002,#W1000003"},
     ['1. get_order_details {"order_id":"#W1000001"} -> ok status=pending total=231.40 items=2']),
    ("I want to return my order.", {"authenticated_user": "priya_shah_2002",
                                    "orders": "#W2000001,#W2000002,#W2000003"}, []),
    ("Do you ship to Canada?", {"authenticated_user": "no"}, []),
    ("Can I exchange the running shoes in #W2000002 for a size 10?",
     {"authenticated_user": "priya_shah_2002", "orders": "#W2000001,#W2000002,#W2000003"},
     ['1. get_order_details {"order_id":"#W2000002"} -> ok status=delivered items=3 '
      'running shoes size=9 color=black item_id=4107812777']),
    ("I'm Yusuf Rossi, zip 19122. I need to change the address of my pending order.",
     {"authenticated_user": "no"}, []),
    ("The refund for my cancelled order never arrived, this is the third time I ask.",
     {"authenticated_user": "alex_rivera_1001", "orders": "#W1000001,#W1000002,#W1000003"}, []),
    ("How many t-shirt options do you have right now?", {"authenticated_user": "no"}, []),
    ("yes, change the payment of #W1000001 to my gift card",
     {"authenticated_user": "alex_rivera_1001", "orders": "#W1000001,#W1000002,#W1000003"},
     ['1. get_user_details {"user_id":"alex_rivera_1001"} -> ok payment_methods=credit_card_1000001,'
      'gift_card_1000002(balance 15.00)']),
]
HISTORY = [
    ("U: hi, I have a question about an order", "A: Sure, I can help. Could you give me your email?"),
    ("U: it is the one I placed last week", "A: Thanks. Which order do you mean?"),
    ("U: the one with the lamp", "A: I found two orders with a lamp; please pick one."),
]


def _inline_schema() -> tuple[dict[str, Any], list[str]]:
    """A small schema of the same shape as the dr rung's pipelines.core.decisions.decision_schema."""

    def obj(props: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

    s = {"type": "string", "maxLength": 64}
    tools = {
        "find_user_id_by_email": {"email": s},
        "find_user_id_by_name_zip": {"first_name": s, "last_name": s, "zip": s},
        "get_order_details": {"order_id": s},
        "get_user_details": {"user_id": s},
        "search_help_articles": {"query": s},
    }
    branches = [obj({"decision": {"const": n}, "args": obj(a)}) for n, a in tools.items()]
    branches += [
        obj({"decision": {"const": "respond"}}),
        obj({"decision": {"const": "clarify"}, "question": {"type": "string", "maxLength": 160}}),
        obj({"decision": {"const": "select"}, "entity_id": {"anyOf": [{"type": "string", "maxLength": 16},
                                                                      {"type": "null"}]}}),
        obj({"decision": {"const": "action"}, "card_id": {"enum": ["card.cancel_order", "card.modify_payment"]},
             "params": obj({"order_id": s, "reason": s})}),
        obj({"decision": {"const": "escalate"}, "reason_code": {"enum": [
            "user_requested_human", "safety_sensitive", "out_of_scope", "policy_exception", "technical_issue"]}}),
    ]
    sigs = [f"{n}({', '.join(a)})" for n, a in tools.items()]
    return {"anyOf": branches}, sigs


def decision_schema_and_tools() -> tuple[dict[str, Any], list[str], str]:
    """(schema, tool signatures, source): the repo's schema when importable, else the inline one."""
    try:
        sys.path.insert(0, str(REPO))
        from pipelines.core.decisions import Offer, clean_schema, decision_schema
        from pipelines.domains.support import build_support_domain
        from pipelines.schema_bounds import bound_schema

        d = build_support_domain()
        names = list(d.open_reads) + list(d.private_reads) + sorted(d.lookup_tools)
        tools = {n: bound_schema(clean_schema(d.registry.get(n).args_schema())) for n in names
                 if n in d.registry.tools}
        ids = ["#W1000001", "#W1000002", "#W1000003", "#W2000001", "#W2000002", "#W2000003"]
        cards = {}
        for c in d.cards:
            if c.kind != "write":
                continue
            full = clean_schema(d.registry.get(c.tool).args_schema())
            props = {p: full["properties"][p] for p in c.required_params}
            if "order_id" in props:
                props["order_id"] = {"enum": ids}
            cards[c.id] = (c, bound_schema({"type": "object", "properties": props, "required": list(props),
                                            "additionalProperties": False}))
        schema = decision_schema(Offer(tools=tools, cards=cards, select_ids=ids, clarify_free=True, open=True))
        sigs = [f"{n}({', '.join(s.get('properties', {}))})" for n, s in sorted(tools.items())]
        sigs += [f"{cid}({', '.join(c.required_params)})" for cid, (c, _) in cards.items()]
        return schema, sigs, "pipelines.core.decisions.decision_schema (the dr rung's offer)"
    except Exception as exc:  # not run from the repo, or its dependencies are missing
        schema, sigs = _inline_schema()
        return schema, sigs, f"inline ({type(exc).__name__})"


def policy_text(shared_tokens: int, sigs: list[str]) -> str:
    """The policy part of the system prompt, padded so that policy + tool list is ~shared_tokens."""
    text = SYSTEM + "\nPolicy:\n"
    budget = shared_tokens * 4 - len("; ".join(sigs)) - 20
    i = 0
    while len(text) < budget or i == 0:
        text += f"{i + 1}. {POLICY[i % len(POLICY)]}\n"
        i += 1
    return text


def shared_head(shared_tokens: int, sigs: list[str]) -> str:
    """The fixed system head: policy and every tool and card (~shared_tokens, prefix-cacheable)."""
    return policy_text(shared_tokens, sigs) + "Tools and cards: " + "; ".join(sigs)


def build_prompts(n: int, shared_tokens: int, unique_tokens: int, sigs: list[str]) -> list[list[dict[str, str]]]:
    """n chat prompts: a shared system part (~shared_tokens, prefix-cacheable) + a unique user part.

    Token counts are approximate (~4 characters per token); the engine's real counts are reported.
    """
    system = shared_head(shared_tokens, sigs)
    prompts = []
    for k in range(n):
        text, state, obs = REQUESTS[k % len(REQUESTS)]
        parts: list[str] = []
        j = 0
        while sum(len(p) for p in parts) < unique_tokens * 4:
            u, a = HISTORY[(k + j) % len(HISTORY)]
            parts += [f"{u} (ref {k}-{j})", a]
            j += 1
        parts.append(f"User: {text}")
        parts.append("State: " + "; ".join(f"{a}={b}" for a, b in state.items()))
        if obs:
            parts += ["Observations:", *obs]
        parts.append("Next decision:")
        prompts.append([{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}])
    return prompts
