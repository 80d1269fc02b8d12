"""The time a pack's policy windows are measured against ("within 24 hours of booking").

A pack whose rules read "now" takes a :class:`Clock` instead of calling ``datetime.now()``: served, a
:class:`SystemClock`; on a dataset whose policy fixes the current time (a benchmark world), a
:class:`FixedClock`. :func:`clock_from` reads the configured form: ``None`` or ``"system"``, or an ISO
timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from pipelines.errors import ConfigError

__all__ = ["Clock", "FixedClock", "SystemClock", "clock_from"]


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime:
        """The current time (naive: in the pack's own time zone)."""
        ...


@dataclass(frozen=True)
class FixedClock:
    """Always the same instant."""

    at: datetime

    def now(self) -> datetime:
        return self.at


class SystemClock:
    """The machine's local time."""

    def now(self) -> datetime:
        return datetime.now()


def clock_from(spec: str | None) -> Clock:
    """``None`` / ``"system"`` → :class:`SystemClock`; an ISO timestamp → :class:`FixedClock`."""
    if spec is None or spec.strip().lower() == "system":
        return SystemClock()
    try:
        return FixedClock(datetime.fromisoformat(spec.strip()))
    except ValueError as exc:
        raise ConfigError(f"not a clock: {spec!r} (an ISO timestamp or 'system')", details={"clock": spec}) from exc
