"""What a domain pack implements and uses: the one import surface for pack authors.

A pack is an object behind the :class:`Domain` protocol, usually a subclass of :class:`PackBase` (which gives
every optional hook its default). ``docs/domains.md`` is the reference, hook by hook; ``tandem domain new``
writes a pack that uses this module only, and ``tandem domain check`` exercises one.

=====================  =====================================================================================
the pack               :class:`Domain`, :class:`PackBase`, :class:`DomainTexts`, :class:`Card`, :class:`TurnFacts`,
                       :func:`read_state` (the pack's session facts), :func:`read_tables`, :class:`SampleWrite`
its world              :class:`RecordWorld` (tables of records: rows, fork, adopt, diff, JSON), :class:`World`,
                       :class:`WriteScope`; over a service: :class:`HttpBackend`, :class:`RemoteWorld`,
                       :data:`BACKEND_REASONS`; time and ids: :class:`Clock`, :class:`FixedClock`,
                       :class:`SystemClock`, :func:`clock_from`, :func:`allocate`
its tools              :class:`ToolSpec`, :class:`ToolRegistry`, :class:`ToolContext`, :class:`ToolObservation`,
                       :class:`CallOutcome`; refusals: :func:`refuse`, :func:`fail`, :func:`reason_of`,
                       :func:`reason_from`, :data:`NOT_CONFIRMED`; errors: :class:`IneligibleAction`,
                       :class:`ToolError`, :class:`InvalidInput`, :class:`ConfigError`, :class:`TandemError`,
                       :class:`UnconfirmedWrite` (the tool port's: a write without the yes to its card)
grounding              :class:`CandidateSet`, :func:`ungrounded`
the tool port          :class:`LocalToolRunner`, :class:`ToolBackend`, :class:`ToolOutcome`, :class:`ToolSession`,
                       :class:`ToolCallResult`, :class:`WriteLedger`, :class:`MemoryLedger`, :class:`LedgerEntry`
the contract           :class:`ForwardContract`, :class:`EligibleAction`, :class:`PendingCard`,
                       :class:`ObservationRecord`
evaluation, replay     :class:`PackEvaluation`, :class:`Case`, :class:`EvalTurn`, :class:`SuiteOptions`,
                       :class:`TaskReplayHook`, :func:`replay_file`, the scripted tau2 user
                       (:class:`InstructedUser`, :class:`InstructedVocabulary`)
=====================  =====================================================================================
"""

from __future__ import annotations

from pipelines.core.clock import Clock, FixedClock, SystemClock, clock_from
from pipelines.core.contract import EligibleAction, ForwardContract, ObservationRecord, PendingCard
from pipelines.core.domain import Card, CardSpec, Domain, DomainTexts, SampleWrite, TurnFacts
from pipelines.core.evaluation import Case, EvalTurn, PackEvaluation, SuiteOptions
from pipelines.core.http_backend import BACKEND_REASONS, HttpBackend, RemoteWorld
from pipelines.core.ids import allocate
from pipelines.core.packbase import PackBase, read_state, read_tables
from pipelines.core.ports import LedgerEntry, MemoryLedger, ToolCallResult, ToolSession, WriteLedger
from pipelines.core.refusal import NOT_CONFIRMED, fail, reason_from, reason_of, refuse
from pipelines.core.runner import (
    CallOutcome,
    LocalToolRunner,
    ToolBackend,
    ToolOutcome,
    World,
    WriteScope,
)
from pipelines.core.taskreplay import TaskReplayHook, replay_file
from pipelines.core.tau2_user import InstructedUser, InstructedVocabulary
from pipelines.core.world import RecordWorld
from pipelines.errors import (
    ConfigError,
    IneligibleAction,
    InvalidInput,
    TandemError,
    ToolError,
    UnconfirmedWrite,
)
from pipelines.grounding import MAX_ENUM, CandidateSet, ungrounded
from pipelines.tools import ToolContext, ToolObservation, ToolRegistry, ToolSpec

__all__ = [
    # the pack
    "Domain", "PackBase", "DomainTexts", "Card", "CardSpec", "TurnFacts", "SampleWrite", "read_state",
    "read_tables",
    # its world
    "RecordWorld", "World", "WriteScope", "HttpBackend", "RemoteWorld", "BACKEND_REASONS", "Clock", "FixedClock",
    "SystemClock", "clock_from", "allocate",
    # its tools
    "ToolSpec", "ToolRegistry", "ToolContext", "ToolObservation", "CallOutcome", "refuse", "fail", "reason_of",
    "reason_from", "NOT_CONFIRMED", "IneligibleAction", "ToolError", "InvalidInput", "ConfigError", "TandemError",
    "UnconfirmedWrite",
    # grounding (MAX_ENUM: how many candidates a decoding enum keeps, the newest)
    "CandidateSet", "ungrounded", "MAX_ENUM",
    # the tool port
    "LocalToolRunner", "ToolBackend", "ToolOutcome", "ToolSession", "ToolCallResult", "WriteLedger",
    "MemoryLedger", "LedgerEntry",
    # the contract
    "ForwardContract", "EligibleAction", "PendingCard", "ObservationRecord",
    # evaluation and replay
    "PackEvaluation", "Case", "EvalTurn", "SuiteOptions", "TaskReplayHook", "replay_file", "InstructedUser",
    "InstructedVocabulary",
]
