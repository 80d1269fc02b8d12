"""The coach rule tables (Φ, Ψ, tiers, W3) as data files, and their validated bundle.

The YAML files under ``tables/`` each carry their own version; the bundle
version joins them. :func:`coach_rule_tables_dict` gives the plain dict (what a
Serve ``user_config`` would carry); :func:`load_coach_rule_tables` validates it
against the coach labels and tools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.domain import read_tables
from pipelines.sgc.tables import RuleTables, RuleTablesHolder, load_rule_tables

from .labels import BRANCH_OF_INTENT, INTENT_LABELS
from .tools import TOOL_NAMES

__all__ = ["TABLES_DIR", "coach_rule_tables_dict", "load_coach_rule_tables", "coach_tables_holder"]

TABLES_DIR = Path(__file__).with_name("tables")
BRANCHES: frozenset[str] = frozenset(BRANCH_OF_INTENT.values())


def coach_rule_tables_dict() -> dict[str, Any]:
    """The coach rule bundle as a plain dict: ``{version, phi, psi, tiers, w3}``."""
    return read_tables(TABLES_DIR, "coach")


def load_coach_rule_tables(data: Any | None = None) -> RuleTables:
    """Validate ``data`` (default: the packaged tables) against the coach labels and tools."""
    return load_rule_tables(coach_rule_tables_dict() if data is None else data,
                            labels=INTENT_LABELS, tools=TOOL_NAMES, branches=BRANCHES)


def coach_tables_holder() -> RuleTablesHolder:
    """A hot-reload holder primed with the packaged coach tables."""
    return RuleTablesHolder(coach_rule_tables_dict(), labels=INTENT_LABELS, tools=TOOL_NAMES, branches=BRANCHES)
