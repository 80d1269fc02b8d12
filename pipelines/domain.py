"""What a domain pack implements and uses: the one import surface for pack authors.

A pack is an object behind the :class:`Domain` protocol (see ``docs/domains.md``). It declares its
tools in a :class:`ToolRegistry` of :class:`ToolSpec` (typed arguments and results, ``read`` or
``write``), its action cards (:class:`CardSpec`), its texts (:class:`DomainTexts`), and reads and
writes its session facts through :class:`TurnFacts`; its tool backend is run by the core's
:class:`LocalToolRunner` (exactly-once writes through a :class:`WriteLedger`), which answers with
:class:`ToolCallResult` for a :class:`ToolSession`.
"""

from __future__ import annotations

from pipelines.core.contract import EligibleAction, ForwardContract, ObservationRecord, PendingCard
from pipelines.core.domain import CardSpec, Domain, DomainTexts, TurnFacts
from pipelines.core.http_backend import HttpBackend, RemoteWorld, reason_of
from pipelines.core.packbase import PackBase, read_state, read_tables
from pipelines.core.ports import LedgerEntry, MemoryLedger, ToolCallResult, ToolSession, WriteLedger
from pipelines.core.runner import (
    CallOutcome,
    LocalToolRunner,
    ToolBackend,
    ToolOutcome,
    World,
    WriteScope,
)
from pipelines.grounding import CandidateSet
from pipelines.tools import ToolContext, ToolObservation, ToolRegistry, ToolSpec

__all__ = [
    "Domain",
    "PackBase",
    "read_state",
    "read_tables",
    "DomainTexts",
    "CardSpec",
    "TurnFacts",
    "ForwardContract",
    "EligibleAction",
    "PendingCard",
    "ObservationRecord",
    "ToolRegistry",
    "ToolSpec",
    "ToolContext",
    "ToolObservation",
    "ToolSession",
    "ToolCallResult",
    "ToolBackend",
    "ToolOutcome",
    "CallOutcome",
    "World",
    "WriteScope",
    "LocalToolRunner",
    "LedgerEntry",
    "WriteLedger",
    "MemoryLedger",
    "CandidateSet",
    "HttpBackend",
    "RemoteWorld",
    "reason_of",
]
