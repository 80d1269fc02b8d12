"""The retail customer-support domain pack (tau2-retail shaped).

Everything a pipeline needs comes through :func:`build_support_domain`, which
returns the :class:`~pipelines.domains.support.pack.SupportPack` (the pack behind
the ``Domain`` protocol): the tool registry, the world loader and generator, the
help knowledge base, the action cards, the labels, texts and rule tables.
Typical wiring::

    domain = build_support_domain()
    world = domain.generate_world(seed=7)            # or domain.load_world(path)
    ctx = ToolContext(session_id="s1")
    out = invoke(domain.registry, "find_user_id_by_email", {"email": ...}, ctx, world)
    authenticate(ctx, out.observation.result["user_id"], world)
    ctx.confirmed = True                              # only after the user's explicit yes
    out = invoke(domain.registry, "cancel_pending_order", {...}, ctx, world)
    store.save_changed(world, out.changed)
"""

from __future__ import annotations

from pipelines.domains.support.pack import SupportPack

from .cards import ACTION_CARDS, ActionCard, get_card
from .eligibility import REASONS, authenticate
from .generator import FIXTURES, generate_world
from .help import HELP_ARTICLES, HelpArticle, classify_question, search_help_articles
from .labels import CARD_INTENT_LABELS as INTENT_LABELS
from .tools import (
    LOOKUP_TOOLS,
    TOOL_NAMES,
    WRITE_TOOLS,
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
    "authenticate",
    "invoke",
    "precheck",
    "build_registry",
    "generate_world",
    "load_tau2_world",
    "search_help_articles",
    "classify_question",
    "get_card",
    "ACTION_CARDS",
    "ActionCard",
    "HELP_ARTICLES",
    "HelpArticle",
    "SupportPack",
    "FIXTURES",
    "REASONS",
    "TOOL_NAMES",
    "WRITE_TOOLS",
    "LOOKUP_TOOLS",
]


#: The support pack (one object behind :class:`pipelines.domain.Domain`, also what DR reads).
SupportDomain = SupportPack


def build_support_domain() -> SupportPack:
    """A fresh support pack (its registry is new each call)."""
    return SupportPack()
