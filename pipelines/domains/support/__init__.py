"""The retail customer-support domain pack (tau2-retail shaped).

Everything the pipeline needs comes through :func:`build_support_domain`,
which returns a :class:`SupportDomain` bundle: the tool registry, the world
loader and generator, the help knowledge base, the action cards and the
intent labels. Typical wiring::

    domain = build_support_domain()
    world = domain.generate_world(seed=7)            # or domain.load_world(path)
    ctx = ToolContext(session_id="s1")
    out = invoke(domain.registry, "find_user_id_by_email", {"email": ...}, ctx, world)
    authenticate(ctx, out.observation.result["user_id"], world)
    ctx.confirmed = True                              # only after the user's explicit yes
    out = invoke(domain.registry, "cancel_pending_order", {...}, ctx, world)
    store.save_entities(world, users=out.changed_user_ids, orders=out.changed_order_ids)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.tools import ToolRegistry

from .cards import ACTION_CARDS, ActionCard, get_card
from .eligibility import REASONS, authenticate
from .generator import FIXTURES, generate_world
from .help import HELP_ARTICLES, HelpArticle, classify_question, search_help_articles
from .tools import (
    LOOKUP_TOOLS,
    TOOL_NAMES,
    WRITE_TOOLS,
    ToolOutcome,
    build_registry,
    invoke,
    precheck,
)
from .world import RetailWorld, load_tau2_world

__all__ = [
    "INTENT_LABELS",
    "SupportDomain",
    "build_support_domain",
    "RetailWorld",
    "ToolOutcome",
    "authenticate",
    "invoke",
    "precheck",
    "build_registry",
    "generate_world",
    "load_tau2_world",
    "search_help_articles",
    "classify_question",
    "get_card",
    "FIXTURES",
    "REASONS",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "LOOKUP_TOOLS",
]

INTENT_LABELS: tuple[str, ...] = (
    "order_status",
    "cancel",
    "return",
    "exchange",
    "modify",
    "account",
    "policy_question",
    "human",
    "other",
)


@dataclass(frozen=True)
class SupportDomain:
    """The retail support pack, bundled for the pipeline and the serve layer."""

    name: str
    registry: ToolRegistry[RetailWorld]
    load_world: Callable[[str | Path], RetailWorld]
    generate_world: Callable[..., RetailWorld]
    help_articles: tuple[HelpArticle, ...]
    search_help: Callable[..., object]
    classify_question: Callable[[str], str]
    cards: tuple[ActionCard, ...]
    intents: tuple[str, ...]
    write_tools: frozenset[str]
    lookup_tools: frozenset[str]
    reasons: tuple[str, ...] = field(default=REASONS)


def build_support_domain() -> SupportDomain:
    """A fresh :class:`SupportDomain` (its registry is new each call)."""
    return SupportDomain(
        name="support",
        registry=build_registry(),
        load_world=load_tau2_world,
        generate_world=generate_world,
        help_articles=HELP_ARTICLES,
        search_help=search_help_articles,
        classify_question=classify_question,
        cards=ACTION_CARDS,
        intents=INTENT_LABELS,
        write_tools=WRITE_TOOLS,
        lookup_tools=LOOKUP_TOOLS,
    )
