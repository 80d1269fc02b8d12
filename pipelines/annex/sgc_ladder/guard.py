"""The SGC rungs' reply gate: the coach's judge plugged into the one sentence gate.

In ``enforce`` mode (``sgc_w1w2``, ``sgc_full``) a violating sentence is withheld and replaced by a
safe wording (never the same one twice in a row); in ``observe`` mode (the audit of the unguarded
rungs ``pe_agent`` and ``sgc_w1``) it is released and counted as a delivered violation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pipelines.domains.coach.judge import CoachJudge, ReplyJudge
from pipelines.gate import SentenceGate

__all__ = ["guard_gate"]


def guard_gate(judge: ReplyJudge, counters: Any, emit: Callable[..., None], *, mode: Literal["enforce", "observe"],
               safe_unowned: str, safe_contradiction: str) -> SentenceGate:
    """The coach reply's sentence gate (``enforce``: withhold and replace; ``observe``: audit only)."""
    return SentenceGate([CoachJudge(judge, safe_unowned=safe_unowned, safe_contradiction=safe_contradiction)],
                        counters, emit, stage="post", safe="", mode=mode, event="sgc.post_guard")
