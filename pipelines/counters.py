"""Counter families: the one base every pipeline's counters share.

Each family is a ``key -> count`` dict; every increment goes through
:meth:`CounterFamilies._inc`, so ``serve/metrics.py`` can mirror all of them to
Prometheus by overriding that one method.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["CounterFamilies"]


class CounterFamilies:
    """Plain dict counters per family; subclasses name their ``FAMILIES`` and typed increments."""

    FAMILIES: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._c: dict[str, dict[str, int]] = {f: defaultdict(int) for f in self.FAMILIES}

    def _inc(self, family: str, key: str, n: int = 1) -> None:
        self._c[family][key] += n

    def get(self, family: str, key: str) -> int:
        return self._c[family].get(key, 0)

    def total(self, family: str) -> int:
        return sum(self._c[family].values())

    def snapshot(self) -> dict[str, dict[str, int]]:
        """A copy of every counter family (plain dicts, sorted keys)."""
        return {f: dict(sorted(v.items())) for f, v in self._c.items()}
