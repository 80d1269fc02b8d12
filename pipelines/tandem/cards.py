"""A card as the user sees it: its signature (to tell a card shown again), the cards refused or done, its read-back
in words. Pack-neutral; the pack's ``readback`` hook gives the words (:mod:`pipelines.tandem.asking` has the rest
of how the turn asks)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.core.domain import Domain
from pipelines.core.outcome import Outcome

__all__ = ["signature", "declined_before", "declined_outcome", "readback_parts", "norm"]

_WORDS = re.compile(r"[a-z0-9]+")


def norm(text: str | None) -> str:
    """A question as compared with the ones asked before: lower-case words, nothing else."""
    return " ".join(_WORDS.findall(str(text or "").lower()))


def signature(card_id: str, args: Mapping[str, Any]) -> str:
    """A card as shown: its id and arguments (lists as sorted records)."""
    norm = {k: sorted(map(str, v)) if isinstance(v, list | tuple) else str(v) for k, v in sorted(args.items())}
    return card_id + ":" + json.dumps(norm, sort_keys=True)


def declined_before(declined: Sequence[str], card_id: str, args: Mapping[str, Any]) -> bool:
    """Whether the user said no to this very card earlier in the session (``declined``: their signatures)."""
    return signature(card_id, args) in list(declined)


def readback_parts(domain: Domain, tool: str, args: Mapping[str, Any], facts: Any, shown: str = "") -> list[str]:
    """Every argument of a card in words: the pack's wording (``readback``; a key may name several arguments,
    comma-separated), then each argument it left out by its value — unless ``shown`` (the card's phrase) carries
    that value already."""
    words = domain.readback(tool, args, facts)
    covered = {a.strip() for key in words for a in key.split(",")}
    parts = [w for w in words.values() if w]
    for arg, value in args.items():
        if arg in covered or value in ("", None, []):
            continue
        text = ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
        if text and text not in shown:
            parts.append(f"{arg.replace('_', ' ')}: {text}")
    return parts


def declined_outcome(domain: Domain, asked: list[str] | None = None, card_id: str = "",
                     args: Mapping[str, Any] | None = None) -> Outcome:
    """A card the user refused (or one they refused before): ask what should change (recorded in ``asked``, the
    session's questions, when the route decides it without :func:`vary_question`). A pack with a ``change_card``
    question names the card in it (its title and the record it is about: "What should I change on the card to
    exchange items (#W1)?"), so a second refusal of another card is asked about that card, not the same words."""
    card = next((c for c in domain.cards if c.id == card_id), None)
    entity = (args or {}).get(domain.entity_kind or "") if card is not None else None
    named = f"{card.title[:1].lower()}{card.title[1:]}" + (f" ({entity})" if entity else "") if card else ""
    question = domain.texts.question("change_card", options=named) if named and "change_card" in \
        domain.texts.clarify else domain.texts.question("change")
    if asked is not None:
        asked.append(norm(question))
    return Outcome(path="clarify", clarify_question=question, clarify_about="change")
