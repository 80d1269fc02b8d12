"""The SGC ladder's port to the tools' live state, as the W1 snapshot reads it.

The tools themselves are the one tool port with live state
(:class:`~pipelines.core.ports.LiveStateTools`); :class:`ToolsStateLoader` adapts its
``load_state`` to the W1 snapshot's :class:`~pipelines.sgc.snapshot.StateLoader`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.core.ports import LiveStateTools
from pipelines.sgc.snapshot import LoadedState

__all__ = ["ToolsStateLoader"]


class ToolsStateLoader:
    """Adapts :meth:`LiveStateTools.load_state` to the W1 :class:`~pipelines.sgc.snapshot.StateLoader` protocol."""

    def __init__(self, tools: LiveStateTools) -> None:
        self.tools = tools

    async def load(self, session_id: str, keys: Sequence[str]) -> LoadedState:
        out = await self.tools.load_state(session_id, list(keys))
        return out if isinstance(out, LoadedState) else LoadedState.model_validate(out)
