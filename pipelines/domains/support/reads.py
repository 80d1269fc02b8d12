"""Read tools that show nothing personal: user lookups, catalogue, help, calculator, transfer.

The lookups (``find_user_id_by_*``) return an id and do not authenticate; the
pipeline calls :func:`.eligibility.authenticate` with the id they return.
"""

from __future__ import annotations

import ast
import operator
import unicodedata

from pipelines.tools import ToolContext

from . import eligibility as el
from .help import search_help_articles
from .schemas import (
    CalculateArgs,
    CalculateResult,
    EmailArgs,
    HelpSearchArgs,
    HelpSearchResult,
    ItemIdArgs,
    NameZipArgs,
    NoArgs,
    ProductIdArgs,
    ProductTypesResult,
    TransferArgs,
    TransferResult,
    UserIdResult,
)
from .world import Product, RetailWorld, Variant

__all__ = [
    "fold",
    "find_user_id_by_email",
    "find_user_id_by_name_zip",
    "get_product_details",
    "get_item_details",
    "list_all_product_types",
    "search_help",
    "transfer_to_human_agents",
    "calculate",
]

def fold(text: str) -> str:
    """Case- and accent-insensitive form used to match names and emails."""
    decomposed = unicodedata.normalize("NFKD", text.strip())
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def find_user_id_by_email(args: EmailArgs, ctx: ToolContext, world: RetailWorld) -> UserIdResult:
    """The user id for an email (case- and accent-insensitive). Does not authenticate."""
    wanted = fold(args.email)
    for uid in sorted(world.users):
        if fold(world.users[uid].email) == wanted:
            return UserIdResult(user_id=uid)
    el.not_found("user_not_found", "no user with this email")


def find_user_id_by_name_zip(args: NameZipArgs, ctx: ToolContext, world: RetailWorld) -> UserIdResult:
    """The user id for first + last name (folded) and exact zip. Does not authenticate."""
    first, last, zip_ = fold(args.first_name), fold(args.last_name), args.zip.strip()
    for uid in sorted(world.users):
        user = world.users[uid]
        if (
            fold(user.name.first_name) == first
            and fold(user.name.last_name) == last
            and user.address.zip == zip_
        ):
            return UserIdResult(user_id=uid)
    el.not_found("user_not_found", "no user with this name and zip code")


def get_product_details(args: ProductIdArgs, ctx: ToolContext, world: RetailWorld) -> Product:
    """A product with all its variants (catalogue data; open)."""
    product = world.products.get(args.product_id)
    if product is None:
        el.not_found("product_not_found", f"product {args.product_id!r} not found")
    return product


def get_item_details(args: ItemIdArgs, ctx: ToolContext, world: RetailWorld) -> Variant:
    """One variant by item id (catalogue data; open)."""
    found = world.find_variant(args.item_id)
    if found is None:
        el.not_found("item_not_found", f"item {args.item_id!r} not found")
    return found[1]


def list_all_product_types(args: NoArgs, ctx: ToolContext, world: RetailWorld) -> ProductTypesResult:
    """Product name -> product id for the whole catalogue, sorted by name."""
    pairs = sorted((p.name, p.product_id) for p in world.products.values())
    return ProductTypesResult(products=dict(pairs))


def search_help(args: HelpSearchArgs, ctx: ToolContext, world: RetailWorld) -> HelpSearchResult:
    """Search the help articles (policy vs procedural routing by question form)."""
    kind, hits = search_help_articles(args.query, args.limit)
    return HelpSearchResult(query=args.query, question_kind=kind, articles=hits)


def transfer_to_human_agents(args: TransferArgs, ctx: ToolContext, world: RetailWorld) -> TransferResult:
    """Hand the conversation to a human agent with a summary and a typed reason."""
    return TransferResult(transferred=True, summary=args.summary, reason_code=args.reason_code)


_OPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.UAdd: operator.pos, ast.USub: operator.neg,
}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ValueError("unsupported expression")


def calculate(args: CalculateArgs, ctx: ToolContext, world: RetailWorld) -> CalculateResult:
    """Evaluate + - * / and parentheses over numbers (no names, no calls); rounded to cents."""
    if not all(c in "0123456789+-*/(). " for c in args.expression):
        el.not_found("invalid_expression", "only numbers, + - * / and parentheses are allowed")
    try:
        value = round(_eval(ast.parse(args.expression, mode="eval")), 2)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        el.not_found("invalid_expression", f"cannot evaluate {args.expression!r}")
    return CalculateResult(value=value, text=str(value))

