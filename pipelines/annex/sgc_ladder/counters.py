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
    guard              post.pass | post.block
    blocked            unowned_recommendation | unreferenced_entity | contradiction | forbidden_praise
    delivered_violations  same kinds, found by the audit of an unguarded rung (pe_agent, sgc_w1)
    fallbacks          perception_error | plan_invalid | facts_unavailable | model_error

``SgcCounters`` is :class:`pipelines.counters.Counters`: one family, one signature per counter.
"""

from __future__ import annotations

from pipelines.core.fallback import FALLBACK_TRIGGERS
from pipelines.counters import Counters

__all__ = ["SgcCounters", "sgc_fallback"]


#: The SGC ladder counts through the one family every pipeline shares.
SgcCounters = Counters

def sgc_fallback(counters: Counters, trigger: str) -> None:
    """Count one SGC fallback with its class (the one trigger table, :data:`pipelines.core.fallback.FALLBACK_TRIGGERS`)."""
    counters.fallback(trigger, FALLBACK_TRIGGERS[trigger])
