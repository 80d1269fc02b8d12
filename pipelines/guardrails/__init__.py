"""Guardrails before, inside and after the orchestration loop — pure, table-driven, hostable on CPU.

* :mod:`.config` — the versioned rule table (``configs/guardrails.yaml``), validated with pydantic.
* :mod:`.pii` — PII detection, redaction and the placeholder vault.
* :mod:`.normalize` — the skeleton and decoded views the injection rules read.
* :mod:`.pre` — limits, encoding, injection / jailbreak (a :class:`Classifier` protocol),
  safety and human-request routes, redaction; :func:`scan_data` and :func:`data_block` for
  world and tool text that enters a prompt.
* :mod:`.mid` — tool-call schema, eligibility and consistency checks inside the loop.
* :mod:`.post` — the incremental :class:`SentenceSplitter` and per-sentence reply checks.
* :mod:`.ids` — the shared extractors (ids, amounts, dates) the post-guard and contracts use.

:class:`LocalGuardrails` bundles pre and post behind the async interface the
DR pipeline's ``Guardrails`` port expects, so ``serve/`` can host it as a
separate CPU deployment unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import GuardrailConfig, canary_token, default_guardrail_config, load_guardrail_config
from .mid import MID_KINDS
from .pii import PII_KINDS, Vault, detect_pii
from .post import POST_KINDS, PostGuard, PostGuardView, SentenceSplitter, SentenceVerdict, Violation
from .pre import (
    Classifier,
    ClassifierHit,
    PreGuard,
    PreGuardResult,
    RuleClassifier,
    as_data,
    data_block,
    scan_data,
)

__all__ = [
    "GuardrailConfig",
    "load_guardrail_config",
    "default_guardrail_config",
    "canary_token",
    "scan_data",
    "as_data",
    "data_block",
    "Vault",
    "detect_pii",
    "PII_KINDS",
    "Classifier",
    "ClassifierHit",
    "RuleClassifier",
    "PreGuard",
    "PreGuardResult",
    "PostGuard",
    "PostGuardView",
    "SentenceSplitter",
    "SentenceVerdict",
    "Violation",
    "POST_KINDS",
    "MID_KINDS",
    "LocalGuardrails",
]


class LocalGuardrails:
    """Pre- and post-guard in process; the same methods a CPU deployment would expose."""

    def __init__(
        self,
        config: GuardrailConfig | str | Path | dict[str, Any] | None = None,
        classifiers: Sequence[Classifier] = (),
    ) -> None:
        self._classifiers = tuple(classifiers)
        self.reload(config)

    def reload(self, config: GuardrailConfig | str | Path | dict[str, Any] | None) -> None:
        """Swap the rule table (validated first; a bad table raises and leaves the old one)."""
        cfg = default_guardrail_config() if config is None else load_guardrail_config(config)
        self.config = cfg
        self._pre = PreGuard(cfg, self._classifiers)
        self._post = PostGuard(cfg)

    @property
    def version(self) -> str:
        return self.config.version

    async def pre(self, text: str, history: Sequence[str] = ()) -> PreGuardResult:
        """Run the pre-guard on the user's text (raises typed errors for limit violations)."""
        return await self._pre.check(text, history)

    async def post(self, sentence: str, view: PostGuardView, context: str = "") -> SentenceVerdict:
        """Judge one reply sentence against what the forward contract allows."""
        return self._post.check(sentence, view, context)
