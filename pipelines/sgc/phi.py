"""Φ: the W1 lookup table (intent, sub-intent, snapshot) → frozen tool set.

A :class:`PhiTable` is versioned data. It is validated at load against the
registered labels and tool names (:meth:`PhiTable.check_against`); an unknown
label or tool raises :class:`ConfigError` naming the row. :func:`phi_lookup`
has three outcomes: ``hit`` (the row's tools, arguments filled from the
snapshot), ``miss_unmapped`` (no row) and ``miss_state_unavailable`` (a row,
but the snapshot lacks a required key or holds it stale).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from pipelines.errors import ConfigError
from pipelines.sgc.config import TableConfig, load_model
from pipelines.sgc.snapshot import Snapshot
from pipelines.sgc.w1 import ToolCall

__all__ = [
    "PhiTool",
    "PhiRow",
    "PhiTable",
    "PhiOutcome",
    "PhiOutcomeKind",
    "load_phi_table",
    "phi_lookup",
]

PhiOutcomeKind = Literal["hit", "miss_unmapped", "miss_state_unavailable"]


class PhiTool(TableConfig):
    """One tool of a row; ``args_from`` maps an argument name to the snapshot key that fills it."""

    tool: str = Field(..., min_length=1)
    args: dict[str, Any] = Field(default_factory=dict, description="Constant arguments.")
    args_from: dict[str, str] | None = None


class PhiRow(TableConfig):
    intent: str = Field(..., min_length=1)
    sub_intent: str = Field(..., min_length=1)
    tools: list[PhiTool] = Field(default_factory=list)
    requires_state: list[str] = Field(default_factory=list)

    def state_keys(self) -> list[str]:
        """Every snapshot key this row reads: ``requires_state`` plus all ``args_from`` sources."""
        keys = list(self.requires_state)
        for t in self.tools:
            for src in (t.args_from or {}).values():
                if src not in keys:
                    keys.append(src)
        return keys


class PhiTable(TableConfig):
    """Versioned Φ rows, one per (intent, sub-intent)."""

    version: str = Field(..., min_length=1)
    max_age_turns: int | None = Field(
        None, ge=0, description="A snapshot entry older than this many turns counts as stale."
    )
    rows: list[PhiRow]

    @model_validator(mode="after")
    def _unique(self) -> PhiTable:
        seen: dict[tuple[str, str], int] = {}
        for i, r in enumerate(self.rows):
            key = (r.intent, r.sub_intent)
            if key in seen:
                raise ValueError(f"rows.{i} ({r.intent}/{r.sub_intent}) duplicates rows.{seen[key]}")
            seen[key] = i
        return self

    def index(self) -> dict[tuple[str, str], PhiRow]:
        """(intent, sub_intent) → row (built on each call; cache it in hot paths)."""
        return {(r.intent, r.sub_intent): r for r in self.rows}

    def check_against(self, labels: Mapping[str, Collection[str]], tools: Collection[str]) -> PhiTable:
        """Raise :class:`ConfigError` naming the first row with an unknown label or tool."""
        for i, r in enumerate(self.rows):
            where = f"phi.rows.{i} ({r.intent}/{r.sub_intent})"
            if r.intent not in labels:
                raise ConfigError(f"{where}: unknown intent {r.intent!r}", details={"path": f"phi.rows.{i}.intent"})
            if r.sub_intent not in labels[r.intent]:
                raise ConfigError(
                    f"{where}: unknown sub-intent {r.sub_intent!r}", details={"path": f"phi.rows.{i}.sub_intent"}
                )
            for j, t in enumerate(r.tools):
                if t.tool not in tools:
                    raise ConfigError(
                        f"{where}: unknown tool {t.tool!r}", details={"path": f"phi.rows.{i}.tools.{j}.tool"}
                    )
        return self


class PhiOutcome(TableConfig):
    """What one Φ lookup decided."""

    kind: PhiOutcomeKind
    intent: str
    sub_intent: str
    table_version: str
    tools: tuple[ToolCall, ...] = ()
    missing_keys: tuple[str, ...] = ()
    stale_keys: tuple[str, ...] = ()

    @property
    def hit(self) -> bool:
        return self.kind == "hit"


def load_phi_table(
    data: Any, *, labels: Mapping[str, Collection[str]] | None = None, tools: Collection[str] | None = None
) -> PhiTable:
    """Validate a Φ table from a dict (or model), and against labels / tools when given."""
    table = load_model(PhiTable, data, "phi")
    if labels is not None and tools is not None:
        table.check_against(labels, tools)
    return table


def phi_lookup(
    table: PhiTable,
    intent: str,
    sub_intent: str,
    snapshot: Snapshot,
    *,
    turn: int | None = None,
    live_version: int | None = None,
    index: Mapping[tuple[str, str], PhiRow] | None = None,
) -> PhiOutcome:
    """Φ(intent, sub_intent, snapshot): ``hit`` with the frozen tool calls, or a typed miss.

    A required key is unavailable when the snapshot lacks it, when its entry
    was read at a version older than ``live_version``, or when (with ``turn``)
    it is older than the table's ``max_age_turns``.
    """
    row = (index if index is not None else table.index()).get((intent, sub_intent))
    base = {"intent": intent, "sub_intent": sub_intent, "table_version": table.version}
    if row is None:
        return PhiOutcome(kind="miss_unmapped", **base)
    keys = row.state_keys()
    missing = snapshot.missing_keys(keys)
    stale = snapshot.stale_keys(keys, turn=turn, live_version=live_version, max_age_turns=table.max_age_turns)
    if missing or stale:
        return PhiOutcome(
            kind="miss_state_unavailable", missing_keys=tuple(missing), stale_keys=tuple(stale), **base
        )
    calls = []
    for t in row.tools:
        args = dict(t.args)
        for name, src in (t.args_from or {}).items():
            args[name] = snapshot.value(src)
        calls.append(ToolCall(tool=t.tool, args=args))
    return PhiOutcome(kind="hit", tools=tuple(calls), **base)
