"""What the DR and monolithic rungs read of a pack beyond the :class:`~pipelines.core.domain.Domain` protocol.

The two rungs were built on the support pack's shape: reads open to anyone and reads open once the user is
verified, the pack's rule for verifying a user, and a help knowledge base searched before the reply. A pack
that has these (the support pack) runs the rungs; the ``tandem`` turn needs none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pipelines.core.domain import Domain
from pipelines.tools import ToolContext

__all__ = ["RungPack"]


@runtime_checkable
class RungPack(Domain, Protocol):
    """A pack the DR and monolithic rungs run on."""

    open_reads: Sequence[str]
    """Reads the orchestrator may call before the user is verified."""
    private_reads: Sequence[str]
    """Reads open once the user is verified (their profile, their orders)."""

    def authenticate(self, ctx: ToolContext, user_id: str) -> ToolContext:
        """Make ``user_id`` the session's verified user (raises a typed refusal: one user per session)."""
        ...

    def search_help(self, text: str, limit: int = 3) -> tuple[str, Sequence[Any]]:
        """The help knowledge base's deterministic search: ``(question kind, articles)``, each article with
        ``id``, ``title`` and ``body``."""
        ...
