"""Bounds on JSON schemas used for constrained decoding.

A greedy small model can loop inside an unbounded string, array or number until
the token cap cuts the JSON off, and a cut-off object does not parse. Bounding
every free string (``maxLength``), array (``maxItems``) and integer
(``minimum`` / ``maximum``) makes every constrained output finish inside its
budget. xgrammar declines these keywords; vLLM's ``auto`` structured-output
backend then falls back to ``guidance``, which supports them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["bound_schema", "MAX_CHARS", "MAX_ITEMS", "MAX_INT"]

MAX_CHARS = 64
MAX_ITEMS = 6
MAX_INT = 1_000_000


def bound_schema(node: Any, max_chars: int = MAX_CHARS, max_items: int = MAX_ITEMS) -> Any:
    """A copy of ``node`` with every free string, array and integer bounded (existing bounds kept)."""
    if isinstance(node, list):
        return [bound_schema(v, max_chars, max_items) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: bound_schema(v, max_chars, max_items) for k, v in node.items()}
    if "enum" in out or "const" in out:
        return out
    kind = out.get("type")
    if kind == "string":
        out.setdefault("maxLength", max_chars)
    elif kind == "array":
        out.setdefault("maxItems", max_items)
    elif kind == "integer":
        out.setdefault("minimum", 0)
        out.setdefault("maximum", MAX_INT)
    return out
