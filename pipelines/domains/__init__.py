"""Domain packs: each ``pipelines/domains/<name>/`` holds one domain's tools, rule tables,
knowledge, action cards, texts and seeded data generator (pure Python, no Ray, no vLLM),
and implements :class:`pipelines.domain.Domain`.

:data:`DOMAIN_PACKS` is the one registry: name → the pack's module. Packs are
imported by name on first use, so loading one never loads another. A new
domain is a folder with a ``DomainPack`` class, a ``rule_tables_holder()`` and a
``load_rule_tables(data)``, and one line here.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DOMAIN_PACKS", "domain_module", "load_domain", "rule_tables_holder", "load_rule_bundle"]

DOMAIN_PACKS: dict[str, str] = {
    "support": "pipelines.domains.support.pack",
    "coach": "pipelines.domains.coach.domain",
}


def domain_module(name: str) -> Any:
    """The pack module registered as ``name`` (raises ValueError for an unknown domain)."""
    try:
        return importlib.import_module(DOMAIN_PACKS[name])
    except KeyError:
        raise ValueError(f"unknown domain {name!r}; known: {', '.join(sorted(DOMAIN_PACKS))}") from None


def load_domain(name: str, **options: Any) -> Any:
    """A fresh :class:`pipelines.domain.Domain` for ``name``."""
    return domain_module(name).DomainPack(**options)


def rule_tables_holder(name: str) -> Any:
    """A hot-reload holder primed with the pack's packaged rule tables (checked against its labels)."""
    return domain_module(name).rule_tables_holder()


def load_rule_bundle(name: str, data: Any) -> Any:
    """Validate a rule bundle (a ``user_config``) against the pack's labels, tools, kinds and branches."""
    return domain_module(name).load_rule_tables(data)
