"""The retail tool registry, and two helpers the orchestrator needs around it.

* :func:`build_registry` registers every tool into a ``ToolRegistry[RetailWorld]``.
* :func:`invoke` runs one call like ``ToolRegistry.call`` and also returns the
  refusal reason code and the ids of the entities a write changed (what a
  store must persist).
* :func:`precheck` runs a write's eligibility as if the user had confirmed,
  so an action card can be offered only when the action is eligible.
"""

from __future__ import annotations

from typing import Any

from pipelines.core.runner import CallOutcome
from pipelines.errors import IneligibleAction, InvalidInput, ToolError
from pipelines.tools import ToolContext, ToolRegistry, ToolSpec

from . import actions as act
from . import reads
from .eligibility import reason_of
from .schemas import (
    CalculateArgs,
    CalculateResult,
    CancelArgs,
    EmailArgs,
    HelpSearchArgs,
    HelpSearchResult,
    ItemIdArgs,
    ItemSwapArgs,
    NameZipArgs,
    NoArgs,
    OrderAddressArgs,
    OrderIdArgs,
    OrderPaymentArgs,
    ProductIdArgs,
    ProductTypesResult,
    ReturnArgs,
    TransferArgs,
    TransferResult,
    UserAddressArgs,
    UserIdArgs,
    UserIdResult,
)
from .world import Order, Product, RetailWorld, User, Variant

__all__ = [
    "TOOL_SPECS",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "LOOKUP_TOOLS",
    "build_registry",
    "invoke",
    "precheck",
]


def _spec(name, description, args, result, handler, kind="read", eligibility=None) -> ToolSpec:
    return ToolSpec(
        name=name, description=description, args_model=args, result_model=result,
        handler=handler, kind=kind, eligibility=eligibility,
    )


TOOL_SPECS: tuple[ToolSpec[Any, Any, RetailWorld], ...] = (
    _spec("find_user_id_by_email", "Find a user id by email. Does not authenticate by itself.",
          EmailArgs, UserIdResult, reads.find_user_id_by_email),
    _spec("find_user_id_by_name_zip", "Find a user id by first name, last name and zip code.",
          NameZipArgs, UserIdResult, reads.find_user_id_by_name_zip),
    _spec("get_user_details", "Profile of the authenticated user: address, payment methods, orders.",
          UserIdArgs, User, act.get_user_details, eligibility=act.check_get_user_details),
    _spec("get_order_details", "Status, items, fulfillments and payments of one of the user's orders.",
          OrderIdArgs, Order, act.get_order_details, eligibility=act.check_get_order_details),
    _spec("get_product_details", "A product type and all its variant items (by product id).",
          ProductIdArgs, Product, reads.get_product_details),
    _spec("get_item_details", "One variant item (by item id): options, availability, price.",
          ItemIdArgs, Variant, reads.get_item_details),
    _spec("list_all_product_types", "Name and product id of every product type.",
          NoArgs, ProductTypesResult, reads.list_all_product_types),
    _spec("search_help_articles", "Search help articles; why/can-I questions prefer policy articles.",
          HelpSearchArgs, HelpSearchResult, reads.search_help),
    _spec("calculate", "Evaluate an arithmetic expression (+ - * / parentheses), rounded to cents.",
          CalculateArgs, CalculateResult, reads.calculate),
    _spec("transfer_to_human_agents", "Transfer the user to a human agent with a summary and reason.",
          TransferArgs, TransferResult, reads.transfer_to_human_agents),
    _spec("cancel_pending_order", "Cancel a pending order ('no longer needed' or 'ordered by mistake').",
          CancelArgs, Order, act.cancel_pending_order, "write", act.check_cancel_pending_order),
    _spec("modify_pending_order_items", "Swap items of a pending order to other variants of the same product (once).",
          ItemSwapArgs, Order, act.modify_pending_order_items, "write", act.check_modify_pending_order_items),
    _spec("modify_pending_order_address", "Change the shipping address of a pending order.",
          OrderAddressArgs, Order, act.modify_pending_order_address, "write",
          act.check_modify_pending_order_address),
    _spec("modify_pending_order_payment", "Move a pending order to another payment method of the user.",
          OrderPaymentArgs, Order, act.modify_pending_order_payment, "write",
          act.check_modify_pending_order_payment),
    _spec("return_delivered_order_items", "Request a return of items of a delivered order.",
          ReturnArgs, Order, act.return_delivered_order_items, "write",
          act.check_return_delivered_order_items),
    _spec("exchange_delivered_order_items", "Request an exchange of items of a delivered order (once).",
          ItemSwapArgs, Order, act.exchange_delivered_order_items, "write",
          act.check_exchange_delivered_order_items),
    _spec("modify_user_address", "Change the authenticated user's default address.",
          UserAddressArgs, User, act.modify_user_address, "write", act.check_modify_user_address),
)

TOOL_NAMES: tuple[str, ...] = tuple(s.name for s in TOOL_SPECS)
WRITE_TOOLS: frozenset[str] = frozenset(s.name for s in TOOL_SPECS if s.kind == "write")
LOOKUP_TOOLS: frozenset[str] = frozenset({"find_user_id_by_email", "find_user_id_by_name_zip"})


def build_registry() -> ToolRegistry[RetailWorld]:
    """A fresh registry holding every retail tool."""
    registry: ToolRegistry[RetailWorld] = ToolRegistry()
    for spec in TOOL_SPECS:
        registry.register(spec)
    return registry


def invoke(
    registry: ToolRegistry[RetailWorld], name: str, raw_args: dict[str, Any], ctx: ToolContext, world: RetailWorld
) -> CallOutcome:
    """Run one tool call; on success of a write, list the changed users and orders (``changed``)."""
    obs = registry.call(name, raw_args, ctx, world)
    if not obs.ok:
        return CallOutcome(observation=obs, reason=reason_of(obs.error_message) or obs.error_code)
    users: list[str] = []
    orders: list[str] = []
    if name in WRITE_TOOLS and obs.result is not None:
        if "order_id" in obs.result:
            orders.append(obs.result["order_id"])
        users.append(obs.result["user_id"])
    changed = {"user": users, "order": orders}
    return CallOutcome(observation=obs, changed={k: v for k, v in changed.items() if v})


def precheck(
    registry: ToolRegistry[RetailWorld], name: str, raw_args: dict[str, Any], ctx: ToolContext, world: RetailWorld
) -> str | None:
    """``None`` when the call would be eligible once confirmed, else the reason code.

    Runs only argument validation and the eligibility rule (never the
    handler); the world and ``ctx`` are left unchanged.
    """
    trial = ctx.model_copy(update={"confirmed": True}, deep=True)
    try:
        spec = registry.get(name)
        args = registry.parse_args(name, raw_args)
        if spec.eligibility is not None:
            spec.eligibility(args, trial, world)
    except (IneligibleAction, ToolError) as exc:
        return str(exc.details.get("reason") or exc.code)
    except InvalidInput as exc:
        return exc.code
    return None
