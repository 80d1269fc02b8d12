"""Counter families: the one base every pipeline's counters share.

Each family is a ``key -> count`` dict; every increment goes through
:meth:`CounterFamilies._inc`, so ``serve/metrics.py`` can mirror all of them to
Prometheus by overriding that one method.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["CounterFamilies", "Counters"]


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


class Counters(CounterFamilies):
    """The one counter family every pipeline increments (``serve/`` exports it as Prometheus metrics).

    Families (``family -> key -> count``)::

        fallbacks             <trigger>                  fallback_classes   infra | policy
        escalations           <reason_code>              paths              answer | clarify | action_card | ...
        guard                 <stage>.<decision>         blocked            <violation kind>
        delivered_violations  <kind>  (must stay 0)      tools              ok | failed | timeout
        phi                   hit | miss_unmapped | miss_state_unavailable
        fall_through          unmapped | state_unavailable
        dispatch              phi | plan | orchestrator  plan_ignored       <intent>/<sub_intent>
        snapshot              prewarm | restored | fill | refresh | probe_failed
        w2                    slots_ok | slots_invalid | grounded | ground_failed | conflicts.<tier> | ...
        w3                    issued.<branch> | none     writes             executed | replayed | refused
    """

    FAMILIES = (
        "fallbacks", "fallback_classes", "escalations", "blocked", "guard", "paths", "delivered_violations",
        "tools", "phi", "fall_through", "dispatch", "plan_ignored", "snapshot", "w2", "w3", "writes",
    )

    def fallback(self, trigger: str, cls: str) -> None:
        """One fallback, by trigger and by class (``infra`` | ``policy``)."""
        self._inc("fallbacks", trigger)
        self._inc("fallback_classes", cls)

    def escalation(self, reason_code: str) -> None:
        self._inc("escalations", reason_code)

    def blocked(self, kind: str) -> None:
        """One blocked attempt (a withheld sentence, a refused tool call or card), by kind."""
        self._inc("blocked", kind)

    def guard(self, stage: str, decision: str) -> None:
        """One guardrail decision, e.g. ``("post", "pass")``, ``("narration", "block")``."""
        self._inc("guard", f"{stage}.{decision}")

    def path(self, path: str) -> None:
        self._inc("paths", path)

    def delivered_violation(self, kind: str) -> None:
        """A violation found in delivered text by the final closure check (must stay at zero)."""
        self._inc("delivered_violations", kind)

    def tool(self, outcome: str) -> None:
        self._inc("tools", outcome)

    def phi(self, kind: str) -> None:
        """One Φ lookup; a miss is also a fall-through (unmapped vs state unavailable)."""
        self._inc("phi", kind)
        if kind == "miss_unmapped":
            self._inc("fall_through", "unmapped")
        elif kind == "miss_state_unavailable":
            self._inc("fall_through", "state_unavailable")

    def dispatch(self, source: str) -> None:
        self._inc("dispatch", source)

    def plan_ignored(self, intent: str, sub_intent: str) -> None:
        self._inc("plan_ignored", f"{intent}/{sub_intent}")

    def state_load(self, kind: str) -> None:
        self._inc("snapshot", kind)

    def w2(self, key: str, n: int = 1) -> None:
        self._inc("w2", key, n)

    def w3(self, key: str) -> None:
        self._inc("w3", key)

    def write(self, outcome: str) -> None:
        """One confirmed write: executed, replayed (recorded outcome returned), refused, or unknown (its reply lost twice)."""
        self._inc("writes", outcome)
