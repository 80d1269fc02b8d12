"""The mid-guard: checks on each decision inside the orchestration loop, before anything runs.

    tool_not_eligible          the tool is not offered at this step (e.g. a private read before login)
    write_outside_action_path  a write tool named as a plain tool call (writes go through action cards)
    invalid_args               the arguments do not validate against the tool's argument model
    unresolved_placeholder     a PII placeholder the session vault does not hold
    unobserved_entity          an order id never seen in this session's observations (or, for reads,
                               in the user's own words)
    other_user                 a user id that is not the authenticated user's

Each function returns a :class:`~pipelines.guardrails.post.Violation` or ``None``;
the orchestrator logs, counts and turns a violation into a fallback.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pydantic import BaseModel

from .ids import extract_ids, walk_strings
from .pii import Vault
from .post import Violation

__all__ = ["MID_KINDS", "check_tool_choice", "check_args", "check_placeholders", "check_consistency"]

MID_KINDS: tuple[str, ...] = (
    "malformed_output",
    "tool_not_eligible",
    "write_outside_action_path",
    "invalid_args",
    "unresolved_placeholder",
    "unobserved_entity",
    "other_user",
    "unknown_card",
    "missing_params",
)


def check_tool_choice(name: str, eligible: Collection[str], write_tools: Collection[str]) -> Violation | None:
    """The tool must be one offered at this step; a write is never a plain tool call."""
    if name in write_tools:
        return Violation(kind="write_outside_action_path", detail=name)
    if name not in eligible:
        return Violation(kind="tool_not_eligible", detail=name)
    return None


def check_args(registry: Any, name: str, args: Mapping[str, Any]) -> tuple[BaseModel | None, Violation | None]:
    """Validate ``args`` with the registry's argument model for ``name``."""
    try:
        return registry.parse_args(name, dict(args)), None
    except Exception as exc:  # InvalidInput from the registry: unknown tool or bad arguments
        return None, Violation(kind="invalid_args", detail=f"{name}: {getattr(exc, 'message', str(exc))}"[:200])


def check_placeholders(args: Any, vault: Vault) -> Violation | None:
    """Every placeholder in ``args`` must be resolvable by the session vault."""
    missing = vault.unresolved(args)
    return Violation(kind="unresolved_placeholder", detail=",".join(missing)) if missing else None


def check_consistency(
    args: Mapping[str, Any],
    *,
    observed_ids: Collection[str],
    mentioned_ids: Collection[str] = (),
    authenticated_user_id: str | None = None,
) -> Violation | None:
    """Act only on entities this session has seen.

    Order ids in ``args`` must be in ``observed_ids`` (ids that came back in
    tool observations) or in ``mentioned_ids`` (ids the user typed; pass
    ``()`` for writes, which need an observed order). A ``user_id`` argument
    must be the authenticated user.
    """
    ids = extract_ids(" ".join(walk_strings(dict(args))))
    known = set(observed_ids) | set(mentioned_ids)
    for order_id in sorted(ids.get("order", set())):
        if order_id not in known:
            return Violation(kind="unobserved_entity", detail=order_id)
    user_id = args.get("user_id")
    if isinstance(user_id, str) and user_id != authenticated_user_id:
        return Violation(kind="other_user", detail=user_id)
    return None
