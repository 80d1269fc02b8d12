"""The rule-table bundle (Φ, Ψ, tiers, W3 branch tables) and its hot-reload holder.

:func:`load_rule_tables` validates a plain dict — as it arrives in a Ray Serve
``user_config`` — strictly: unknown fields, bad values, unknown labels or
tools all raise :class:`ConfigError` with a dotted path
(``rules.phi.rows.3.tools.0.tool``). :class:`RuleTablesHolder` keeps the
active bundle; a malformed reload leaves the previous one active and reports
why.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from pipelines.errors import ConfigError
from pipelines.sgc.config import TableConfig, load_model
from pipelines.sgc.phi import PhiRow, PhiTable
from pipelines.sgc.psi import PsiTable
from pipelines.sgc.w2_diff import CONFLICT_KINDS, TierTable
from pipelines.sgc.w3 import Branch, BranchTable

__all__ = ["RuleTables", "ReloadOutcome", "RuleTablesHolder", "load_rule_tables"]


class RuleTables(TableConfig):
    """Every rule table a turn reads, under one bundle version."""

    version: str = Field(..., min_length=1)
    phi: PhiTable
    psi: PsiTable
    tiers: TierTable
    w3: dict[Branch, BranchTable]
    _phi_index: dict[tuple[str, str], PhiRow] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _branches(self) -> RuleTables:
        for key, table in self.w3.items():
            if table.branch != key:
                raise ValueError(f"w3.{key} holds the table of branch {table.branch!r}")
        self._phi_index = self.phi.index()
        return self

    @property
    def phi_index(self) -> dict[tuple[str, str], PhiRow]:
        """(intent, sub_intent) → Φ row, built once at load."""
        return self._phi_index

    def versions(self) -> dict[str, str]:
        """The bundle version and each table's own version (for events and ``done.rules_version``)."""
        out = {"rules": self.version, "phi": self.phi.version, "psi": self.psi.version, "tiers": self.tiers.version}
        out.update({f"w3.{k}": v.version for k, v in sorted(self.w3.items())})
        return out


def load_rule_tables(
    data: Any,
    *,
    labels: Mapping[str, Collection[str]] | None = None,
    tools: Collection[str] | None = None,
    conflict_kinds: Collection[str] = CONFLICT_KINDS,
    branches: Collection[str] | None = None,
) -> RuleTables:
    """Validate a rule bundle; with ``labels`` and ``tools`` also check Φ against them.

    ``conflict_kinds``: the domain's conflict kinds, each of which the tier table must
    grade (default: the coach's); ``branches``: the W3 branches the domain serves (the
    bundle's ``w3`` may hold no other). Raises :class:`ConfigError` (``details["path"]``
    names the bad field or row).
    """
    tables = load_model(RuleTables, data, "rules")
    missing = tables.tiers.missing(conflict_kinds)
    if missing:
        raise ConfigError(f"tiers: tiers missing for conflict kinds {missing}", details={"path": "tiers.tiers"})
    if branches is not None:
        unknown = sorted(set(tables.w3) - set(branches))
        if unknown:
            raise ConfigError(f"rules.w3: unknown branches {unknown}; known: {sorted(branches)}",
                              details={"path": f"rules.w3.{unknown[0]}.[key]"})
    if labels is not None and tools is not None:
        tables.phi.check_against(labels, tools)
    for i, rule in enumerate(tables.psi.rules):
        if labels is not None and rule.intents is not None:
            unknown = [x for x in rule.intents if x not in labels]
            if unknown:
                raise ConfigError(
                    f"psi.rules.{i} ({rule.id}): unknown intents {unknown}", details={"path": f"psi.rules.{i}.intents"}
                )
    return tables


class ReloadOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    applied: bool
    active_version: str
    error: str | None = None
    error_path: str | None = None


class RuleTablesHolder:
    """The active rule tables of a replica; reloads are all-or-nothing."""

    def __init__(
        self,
        initial: RuleTables | Mapping[str, Any],
        *,
        labels: Mapping[str, Collection[str]] | None = None,
        tools: Collection[str] | None = None,
        conflict_kinds: Collection[str] = CONFLICT_KINDS,
        branches: Collection[str] | None = None,
    ) -> None:
        """Load ``initial`` (a malformed initial bundle raises: there is nothing to keep)."""
        self._labels = labels
        self._tools = tools
        self._kinds = tuple(conflict_kinds)
        self._branches = None if branches is None else tuple(branches)
        self._active = initial if isinstance(initial, RuleTables) else self._load(initial)
        self.last_error: ConfigError | None = None
        self.rejected = 0

    def _load(self, data: Any) -> RuleTables:
        return load_rule_tables(data, labels=self._labels, tools=self._tools, conflict_kinds=self._kinds,
                                branches=self._branches)

    @property
    def active(self) -> RuleTables:
        return self._active

    @property
    def version(self) -> str:
        return self._active.version

    def reload(self, data: Any, *, strict: bool = False) -> ReloadOutcome:
        """Swap in ``data`` if valid; otherwise keep the active tables.

        With ``strict`` the ConfigError is re-raised after the old tables are kept.
        """
        try:
            new = self._load(data)
        except ConfigError as exc:
            self.last_error = exc
            self.rejected += 1
            if strict:
                raise
            return ReloadOutcome(
                applied=False, active_version=self.version, error=exc.message, error_path=exc.details.get("path")
            )
        self._active = new
        self.last_error = None
        return ReloadOutcome(applied=True, active_version=new.version)
