"""Reading the support pack's observations: the user-state keys they establish and short summaries.

The forward contract's ``user_state`` and the orchestrator's observation lines
read tool results through these two functions only.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["state_from_observation", "summarize_result"]


def state_from_observation(tool: str, result: dict[str, Any] | None) -> dict[str, Any]:
    """User-state keys and values read off one successful observation."""
    if not result:
        return {}
    out: dict[str, Any] = {}
    if "order_id" in result and "status" in result:
        oid = result["order_id"]
        out[f"order.{oid}.status"] = result["status"]
        items = result.get("items") or []
        out[f"order.{oid}.items"] = [f"{i.get('name')} ({i.get('item_id')})" for i in items]
        pays = result.get("payment_history") or []
        paid = sum(p["amount"] for p in pays if p.get("transaction_type") == "payment")
        refunded = sum(p["amount"] for p in pays if p.get("transaction_type") == "refund")
        out[f"order.{oid}.total"] = round(paid, 2)
        if refunded:
            out[f"order.{oid}.refund"] = round(refunded, 2)
            out[f"order.{oid}.refund_methods"] = sorted(
                {p["payment_method_id"] for p in pays if p.get("transaction_type") == "refund"}
            )
    elif "user_id" in result and "orders" in result:
        out["user.orders"] = list(result["orders"])
        out["user.payment_methods"] = sorted(result.get("payment_methods") or {})
    elif tool.startswith("find_user_id") and "user_id" in result:
        out["user_id"] = result["user_id"]
    elif tool == "get_product_details" and "variants" in result and result.get("name"):
        variants = [v for v in (result.get("variants") or {}).values() if isinstance(v, dict)]
        out[f"product.{result['name']}.options_available"] = sum(1 for v in variants if v.get("available"))
        out[f"product.{result['name']}.options_total"] = len(variants)
    return out


def summarize_result(tool: str, result: dict[str, Any] | None, limit: int = 360) -> str:
    """A short, whole-token summary of an observation for prompts."""
    if result is None:
        return ""
    state = state_from_observation(tool, result)
    if "articles" in result:
        state = {"articles": [f"{a['id']}: {a['title']}" for a in result["articles"]]}
    text = json.dumps(state or result, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return cut[: max(cut.rfind(","), 1)] + ",...}"
