"""Process-wide counters of the SGC ladder (``serve/`` exports a snapshot as metrics).

Families (``family -> key -> count``)::

    phi                hit | miss_unmapped | miss_state_unavailable
    fall_through       unmapped | state_unavailable       (W1 misses: the turn waited for <PLAN>)
    dispatch           phi | plan                         (who chose the executed tool set)
    plan_ignored       <intent>/<sub_intent>              (a PLAN that came after a frozen set)
    snapshot           prewarm | restored | fill | refresh | probe_failed
    tools              ok | failed | timeout
    w2                 slots_ok | slots_invalid | grounded | ground_failed | repairs | conflicts.<tier>
    w3                 issued.<branch> | none
    post_guard         pass | block
    blocked            unowned_recommendation | unreferenced_entity | contradiction | forbidden_praise
    delivered_violations  same kinds, found by the audit of an unguarded rung (pe_agent, sgc_w1)
    fallbacks          perception_error | plan_invalid | facts_unavailable | model_error

Every increment goes through :meth:`SgcCounters._inc`.
"""

from __future__ import annotations

from pipelines.counters import CounterFamilies
from pipelines.sgc.phi import PhiOutcome

__all__ = ["SgcCounters"]


class SgcCounters(CounterFamilies):
    """Plain dict counters, shared by every pipeline of one replica."""

    FAMILIES = (
        "phi", "fall_through", "dispatch", "plan_ignored", "snapshot", "tools", "w2", "w3",
        "post_guard", "blocked", "delivered_violations", "fallbacks",
    )



    def phi(self, outcome: PhiOutcome) -> None:
        """One Φ lookup; a miss is also a fall-through (unmapped vs state unavailable)."""
        self._inc("phi", outcome.kind)
        if outcome.kind == "miss_unmapped":
            self._inc("fall_through", "unmapped")
        elif outcome.kind == "miss_state_unavailable":
            self._inc("fall_through", "state_unavailable")

    def dispatch(self, source: str) -> None:
        self._inc("dispatch", source)

    def plan_ignored(self, intent: str, sub_intent: str) -> None:
        self._inc("plan_ignored", f"{intent}/{sub_intent}")

    def state_load(self, kind: str) -> None:
        """A snapshot event: prewarm, restored, fill, refresh, probe_failed."""
        self._inc("snapshot", kind)

    def tool(self, outcome: str) -> None:
        self._inc("tools", outcome)

    def w2(self, key: str, n: int = 1) -> None:
        self._inc("w2", key, n)

    def w3(self, key: str) -> None:
        self._inc("w3", key)

    def guard(self, decision: str) -> None:
        self._inc("post_guard", decision)

    def blocked(self, kind: str) -> None:
        self._inc("blocked", kind)

    def delivered_violation(self, kind: str) -> None:
        self._inc("delivered_violations", kind)

    def fallback(self, trigger: str) -> None:
        self._inc("fallbacks", trigger)



