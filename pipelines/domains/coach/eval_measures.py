"""Judges of the coach measures, reused from the coach tests and benches where they exist.

* ``intent_accuracy`` (TGA) — W1's perceived intent (the turn's stored ``c1``) equals the
  turn's label (as ``scripts/bench_first_token.py`` compares W1 with the scripted intent).
* ``grounding_accuracy`` (SGA) — over turns with a reference direction, the delivered text
  names one accepted value of it (whole word, any case).
* ``unowned_mentions`` — species named in the delivered text that the player does not own,
  other than those the user named this turn and those on the opponent's team (the
  ownership judge of ``tests/integration/test_sgc_coach.py``, minus what the user asked
  about or faces).
* ``consecutive_repeats`` — consecutive turns of a session whose stored W3 metas issued
  the same guidance subject (the W3 judge of ``test_sgc_coach.py``).
* ``contradictions`` — replies holding two incompatible judgements (praise with apology or
  with a constraint account) about the same creature or skill, or about the turn when
  the sentences name none: the post-guard's keyword judge
  (:func:`pipelines.annex.sgc_ladder.guard.judge_kinds`) and Ψ's incompatibility check
  (:func:`pipelines.sgc.psi.check_paragraph_contradictions`), applied to what was delivered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipelines.sgc.psi import DEFAULT_INCOMPATIBLE, check_paragraph_contradictions

from .judge import judge_kinds

__all__ = [
    "names_in",
    "intent_ok",
    "grounding_ok",
    "unowned_mentions",
    "contradiction",
    "consecutive_repeats",
]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def names_in(text: str, names: Iterable[str]) -> list[str]:
    """The ``names`` that occur in ``text`` as whole words (any case), longest first, each once."""
    low = text.lower()
    found = []
    for n in sorted(set(names), key=lambda n: (-len(n), n)):
        if n and re.search(r"(?<![\w])" + re.escape(n.lower()) + r"(?![\w])", low):
            found.append(n)
    return found


def intent_ok(label: Mapping[str, Any] | None, intent: str | None) -> bool | None:
    """W1's intent vs the label (``None`` when the turn has no label)."""
    if not label or not label.get("intent"):
        return None
    return intent == label["intent"]


def grounding_ok(label: Mapping[str, Any] | None, delivered: str) -> bool | None:
    """Whether the delivered text points to the reference direction (``None``: no reference)."""
    ref = (label or {}).get("reference")
    if not ref or not ref.get("accept"):
        return None
    return bool(names_in(delivered, ref["accept"]))


def unowned_mentions(delivered: str, *, species: Iterable[str], owned: Iterable[str], user_text: str,
                     opponent_team: Iterable[str]) -> list[str]:
    """Species named in ``delivered`` the player does not own (see module docstring)."""
    allowed = set(owned) | set(opponent_team) | set(names_in(user_text, species))
    return [n for n in names_in(delivered, species) if n not in allowed]


def contradiction(reply: str, names: Iterable[str]) -> bool:
    """Whether the delivered reply judges one subject in incompatible ways (see module docstring)."""
    pool = list(names)
    judgements: list[tuple[str, str | None]] = []
    for sentence in _SENTENCE.split(reply.strip()):
        subjects: list[str | None] = list(names_in(sentence, pool)) or [None]
        judgements += [(kind, s) for kind in judge_kinds(sentence) for s in subjects]
    return bool(check_paragraph_contradictions(judgements, DEFAULT_INCOMPATIBLE))


def consecutive_repeats(metas: Sequence[Mapping[str, Any] | None]) -> int:
    """Pairs of consecutive turns whose W3 metas issued the same subject."""
    n = 0
    for a, b in zip(metas, metas[1:], strict=False):
        if not a or not b:
            continue
        if a.get("guidance_type", "none") == "none" or b.get("guidance_type", "none") == "none":
            continue
        if a.get("subject_id") is not None and a.get("subject_id") == b.get("subject_id"):
            n += 1
    return n
