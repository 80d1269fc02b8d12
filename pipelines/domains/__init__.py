"""Domain packs: each ``pipelines/domains/<name>/`` holds one domain's tools, rule tables,
knowledge, action cards and seeded data generator (pure Python, no Ray, no vLLM).

Packs are imported by name (``pipelines.domains.support``); this package
imports none of them, so loading one never loads another.
"""

from __future__ import annotations

__all__ = ["DOMAIN_PACKS"]

DOMAIN_PACKS: tuple[str, ...] = ("support",)
