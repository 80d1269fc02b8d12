"""Logged sessions as the what-if reads them: each turn's input and its events, in order.

A :class:`LoggedTurn` holds what the turn received (the user's text as the pre-guard got it, the request's
user id and locale) and every event the turn logged (its decisions, its tool observations, its model
calls: ``model.call``). The text may hold PII values: it stays in memory, is given to the pre-guard again
and never written anywhere; every text a report shows is the redacted one the re-run logs.

:func:`group_events` groups event records by turn; :func:`sessions_of_events` orders the turns of each
session by their ``turn.start``. Reading files is the caller's (``serve/whatif.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LoggedTurn", "LoggedSession", "group_events", "sessions_of_events", "turn_pipeline"]


class LoggedTurn(BaseModel):
    """One logged turn: its input and its events (see module docstring)."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str
    index: int = Field(..., ge=0)
    text: str = Field(..., description="The user's text as the turn received it (in memory only).")
    user_id: str | None = None
    locale: str = "en"
    events: list[dict[str, Any]] = Field(default_factory=list)

    def of(self, *kinds: str) -> list[dict[str, Any]]:
        """The turn's events of these kinds, in log order."""
        return [e for e in self.events if e.get("kind") in kinds]

    @property
    def started_at(self) -> float | None:
        start = self.of("turn.start")
        return float(start[0]["ts"]) if start and "ts" in start[0] else None


class LoggedSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str
    turns: list[LoggedTurn]


def turn_pipeline(turn: LoggedTurn) -> str | None:
    """The pipeline kind that ran the turn (its ``turn.start``), or ``None`` when it was not logged."""
    start = turn.of("turn.start")
    return str(start[0].get("pipeline")) if start and start[0].get("pipeline") else None


def group_events(records: Iterable[Mapping[str, Any]], turn_ids: set[str] | None = None
                 ) -> dict[str, list[dict[str, Any]]]:
    """Event records grouped by turn id (only ``turn_ids`` when given), each turn's in time order."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in records:
        tid = ev.get("turn_id")
        if isinstance(tid, str) and (turn_ids is None or tid in turn_ids):
            out[tid].append(dict(ev))
    for evs in out.values():
        evs.sort(key=lambda e: e.get("ts", 0.0))
    return dict(out)


def sessions_of_events(events: Mapping[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Session id → its turn ids in the order they started (from each turn's ``turn.start``)."""
    starts: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for tid, evs in events.items():
        for e in evs:
            if e.get("kind") == "turn.start" and e.get("session_id"):
                starts[str(e["session_id"])].append((float(e.get("ts", 0.0)), tid))
                break
    return {sid: [tid for _, tid in sorted(pairs)] for sid, pairs in starts.items()}
