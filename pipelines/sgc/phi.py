"""Φ: the W1 lookup table (intent, sub-intent, snapshot) → frozen tool set.

A :class:`PhiTable` is versioned data. It is validated at load against the
registered labels and tool names (:meth:`PhiTable.check_against`); an unknown
label or tool raises :class:`ConfigError` naming the row. :func:`phi_lookup`
has three outcomes: ``hit`` (the row's tools, arguments filled from the
snapshot), ``miss_unmapped`` (no row) and ``miss_state_unavailable`` (a row,
but the snapshot lacks a required key or holds it stale).

One (intent, sub-intent) may have several rows: they are *alternatives* tried in
table order, and the first whose state is available hits (e.g. "look the order
up when the user is verified, else look the user up by the email they typed").
A miss then reports the first alternative's missing keys. A row may also carry
``then`` — the turn's decision when the row hits: ``respond`` or
``clarify:<kind>`` (a Φ hit that already answers the turn's need ends the
decision without an orchestrator step), or ``propose`` (the user asked for a
change and the entity is known: the orchestrator may only fill the intent's
card or ask for what is missing).
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
    then: str | None = Field(
        None, pattern=r"^(respond|propose|choose|clarify:[a-z_]+)$",
        description="The turn's decision when this row hits: respond / clarify:<kind> (no orchestrator "
        "step), propose (the orchestrator may only fill the intent's card or clarify), choose (a change "
        "that names no entity: with several of the user's own on record, ask which, else orchestrate); "
        "None: orchestrate.",
    )

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
        seen: dict[tuple[str, str, frozenset[str]], int] = {}
        open_row: dict[tuple[str, str], int] = {}
        for i, r in enumerate(self.rows):
            key = (r.intent, r.sub_intent)
            full = (*key, frozenset(r.state_keys()))
            if full in seen:
                raise ValueError(f"rows.{i} ({r.intent}/{r.sub_intent}) duplicates rows.{seen[full]}")
            if key in open_row:
                raise ValueError(
                    f"rows.{i} ({r.intent}/{r.sub_intent}) is unreachable: rows.{open_row[key]} needs no state"
                )
            seen[full] = i
            if not r.state_keys():
                open_row[key] = i
        return self

    def index(self) -> dict[tuple[str, str], PhiRow]:
        """(intent, sub_intent) → its first row (built on each call; cache it in hot paths)."""
        out: dict[tuple[str, str], PhiRow] = {}
        for r in self.rows:
            out.setdefault((r.intent, r.sub_intent), r)
        return out

    def alternatives(self, intent: str, sub_intent: str) -> list[PhiRow]:
        """Every row of (intent, sub_intent), in table order."""
        return [r for r in self.rows if r.intent == intent and r.sub_intent == sub_intent]

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
    then: str | None = None

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
    first = (index if index is not None else table.index()).get((intent, sub_intent))
    base = {"intent": intent, "sub_intent": sub_intent, "table_version": table.version}
    if first is None:
        return PhiOutcome(kind="miss_unmapped", **base)
    rows = table.alternatives(intent, sub_intent) or [first]
    miss: PhiOutcome | None = None
    for row in rows:
        keys = row.state_keys()
        missing = snapshot.missing_keys(keys)
        stale = snapshot.stale_keys(keys, turn=turn, live_version=live_version, max_age_turns=table.max_age_turns)
        if missing or stale:
            miss = miss or PhiOutcome(
                kind="miss_state_unavailable", missing_keys=tuple(missing), stale_keys=tuple(stale), **base
            )
            continue
        calls = []
        for t in row.tools:
            args = dict(t.args)
            for name, src in (t.args_from or {}).items():
                args[name] = snapshot.value(src)
            calls.append(ToolCall(tool=t.tool, args=args))
        return PhiOutcome(kind="hit", tools=tuple(calls), then=row.then, **base)
    assert miss is not None
    return miss
