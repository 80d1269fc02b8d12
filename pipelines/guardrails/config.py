"""The versioned guardrail rule table (``configs/guardrails.yaml``), validated strictly.

Every regex is compiled at load, so a broken pattern is a :class:`ConfigError`
at start-up (or a refused hot reload), never a failure inside a turn. The
table holds data only: limits, injection / jailbreak rules, safety topics that
route to a person, phrases that ask for a person, the affirmatives that
confirm a pending action, and the post-guard's phrase lists and safe wording.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pipelines.errors import ConfigError

from .pii import PII_KINDS

__all__ = [
    "DEFAULT_GUARDRAILS_PATH",
    "LimitsConfig",
    "PatternRule",
    "DensityRule",
    "SafetyTopic",
    "LearnedConfig",
    "DecisionConfig",
    "PostConfig",
    "CanaryConfig",
    "canary_token",
    "GuardrailConfig",
    "load_guardrail_config",
    "default_guardrail_config",
]

DEFAULT_GUARDRAILS_PATH = Path(__file__).resolve().parents[2] / "configs" / "guardrails.yaml"


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _compile_all(patterns: tuple[str, ...]) -> tuple[str, ...]:
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise ValueError(f"invalid regex {p!r}: {exc}") from exc
    return patterns


class LimitsConfig(_Config):
    """Size and encoding limits of the user's text."""

    max_chars: int = Field(4000, ge=1)
    max_lines: int = Field(100, ge=1)
    max_control_ratio: float = Field(0.02, ge=0.0, le=1.0)


class PatternRule(_Config):
    """One injection / jailbreak heuristic: a case-insensitive regex and what a hit does."""

    id: str = Field(..., min_length=1)
    kind: Literal["injection", "jailbreak"]
    pattern: str
    action: Literal["block", "flag"] = "block"
    sure: bool = Field(False, description="A hit refuses on its own, in the customer's words or in what they "
                       "quote: a shape no customer message carries (chat-template tokens, a forged decision).")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        return _compile_all((v,))[0]


class DensityRule(_Config):
    """Fires when at least ``min_hits`` of its signal patterns match a text of at least ``min_chars``
    (and, when ``anchors`` are given, at least one of them matches too).

    For jailbreaks that are long and talk *about* the model (its responses, rules, character, format)
    without any single telltale phrase; ordinary support messages rarely hit several signals at once.
    An anchor (the text names an AI model, or sets up a persona) lets a rule ask for fewer signals
    without firing on a long complaint about "your replies" and "your rules".
    """

    id: str = Field(..., min_length=1)
    kind: Literal["injection", "jailbreak"] = "jailbreak"
    action: Literal["block", "flag"] = "block"
    min_hits: int = Field(..., ge=2)
    min_chars: int = Field(0, ge=0)
    signals: tuple[str, ...] = Field(..., min_length=2)
    anchors: tuple[str, ...] = Field((), description="At least one must match as well (empty: no anchor).")

    @field_validator("signals", "anchors")
    @classmethod
    def _compiles(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _compile_all(v)


class SafetyTopic(_Config):
    """A topic a person must handle: any pattern hit routes the turn to a human."""

    id: str = Field(..., min_length=1)
    patterns: tuple[str, ...] = Field(..., min_length=1)

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _compile_all(v)


class LearnedConfig(_Config):
    """The learned layer beside the rules (``pipelines/guardrails/learned.py``): either may block."""

    enabled: bool = True
    artifact: str = Field("guard-linear.npz", min_length=1,
                          description="A file in pipelines/guardrails/models/ (or a path); rebuilt by scripts/train_guard.py.")
    threshold: float | None = Field(None, gt=0.0, lt=1.0, description="P(attack) that counts as a hit; "
                                    "unset: the one chosen on the validation split (stored in the artifact).")
    action: Literal["block", "flag"] = "block"
    views: tuple[str, ...] = Field(("text", "base64", "hex", "tags"), min_length=1,
                                   description="The views it reads: the text and what it decodes to. rot13, leet "
                                   "and spaced are guesses made on every text (rot13 of a message is gibberish, "
                                   "leet of an order id is a word): the rules read those.")

    @field_validator("artifact")
    @classmethod
    def _exists(cls, v: str) -> str:
        from .learned import MODELS_DIR

        if not (Path(v).is_file() or (MODELS_DIR / v).is_file()):
            raise ValueError(f"no classifier artifact {v!r} (in {MODELS_DIR.name}/ or as a path)")
        return v


class DecisionConfig(_Config):
    """How the layers' evidence becomes the pre-guard's decision: ``block`` (refuse), ``ask`` or ``pass``.

    Evidence is *strong* when the rules and the learned layer agree, when the learned layer alone scores
    at least ``refuse_score``, or when a rule or model fires on what the text decodes to (``sure_views``:
    a customer does not send instructions in base64); *thin* when one layer fires. The customer's own
    words are judged apart from the material they quote (``quoted``; see ``pipelines/guardrails/quoted.py``)::

        a hit of a rule marked ``sure``, anywhere                           -> block
        strong evidence in the customer's own words                        -> block
        thin evidence in their own words                                   -> ask
        strong evidence in quoted material only                            -> ask
        thin evidence in quoted material, own words scoring >= lean_score  -> ask
        anything else                                                      -> pass

    ``ask: false`` turns every ``ask`` into ``block`` (the guard as it was: either layer refuses).
    """

    quoted: bool = Field(True, description="Judge quoted material (quotations, quoted lines, a forwarded "
                         "message) apart from the customer's own words.")
    ask: bool = Field(True, description="Thin evidence asks the customer instead of refusing.")
    refuse_score: float = Field(0.9, gt=0.0, le=1.0, description="The learned layer alone refuses at this score.")
    lean_score: float = Field(0.45, ge=0.0, le=1.0, description="Own words scoring this make thin evidence in "
                              "quoted material an ask (below it, quoted material alone passes).")
    sure_views: tuple[str, ...] = Field(("base64", "hex", "tags"), description="Views whose hits are strong.")
    ask_own: str = Field(..., min_length=1, description="The question when the customer's own words read like "
                         "instructions to the assistant.")
    ask_quoted: str = Field(..., min_length=1, description="The question when quoted material does.")


DEFAULT_CANARY = "tdm-cnry-4e9b71c2d8"


class CanaryConfig(_Config):
    """The token planted in every system prompt; a delivered reply must never contain it."""

    env: str = Field("TANDEM_CANARY", min_length=1, description="Environment variable holding the secret token.")
    token: str | None = Field(None, min_length=8, description="Used when the variable is unset (not a secret).")

    def resolve(self) -> str:
        """The active token: the environment variable, else ``token``, else the built-in default."""
        value = os.environ.get(self.env, "").strip()
        return value if len(value) >= 8 else (self.token or DEFAULT_CANARY)


class PostConfig(_Config):
    """The post-guard's phrase lists and the wording that replaces a withheld sentence."""

    safe_sentence: str = Field(..., min_length=1)
    fallback_reply: str = Field(..., min_length=1)
    handoff_message: str = Field(..., min_length=1)
    handoff_patterns: tuple[str, ...] = Field(..., min_length=1)
    completion_patterns: tuple[str, ...] = ()

    @field_validator("handoff_patterns", "completion_patterns")
    @classmethod
    def _compiles(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _compile_all(v)


class GuardrailConfig(_Config):
    """The whole rule table, under one version."""

    version: str = Field(..., min_length=1)
    limits: LimitsConfig = LimitsConfig()
    pii_kinds: tuple[str, ...] = PII_KINDS
    injection: tuple[PatternRule, ...] = ()
    density: tuple[DensityRule, ...] = ()
    classifier: LearnedConfig | None = Field(None, description="The learned layer; absent: rules only.")
    decision: DecisionConfig | None = Field(None, description="How evidence becomes block / ask / pass; "
                                            "absent: any blocking hit refuses.")
    safety: tuple[SafetyTopic, ...] = ()
    human_request: tuple[str, ...] = ()
    affirmatives: tuple[str, ...] = Field(..., min_length=1)
    negatives: tuple[str, ...] = ()
    post: PostConfig
    canary: CanaryConfig = CanaryConfig()

    @field_validator("pii_kinds")
    @classmethod
    def _kinds(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = set(v) - set(PII_KINDS)
        if unknown:
            raise ValueError(f"unknown PII kinds {sorted(unknown)}; known: {list(PII_KINDS)}")
        return v

    @field_validator("human_request")
    @classmethod
    def _compiles(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _compile_all(v)

    @field_validator("injection", "density")
    @classmethod
    def _unique_ids(cls, v: tuple[Any, ...]) -> tuple[Any, ...]:
        ids = [r.id for r in v]
        if len(ids) != len(set(ids)):
            raise ValueError("rule ids must be unique")
        return v

    @cached_property
    def compiled(self) -> dict[str, Any]:
        """Compiled regexes, built once per config object."""
        flags = re.IGNORECASE | re.MULTILINE
        return {
            "injection": [(r, re.compile(r.pattern, flags)) for r in self.injection],
            "density": [(r, [re.compile(p, flags) for p in r.signals], [re.compile(p, flags) for p in r.anchors])
                        for r in self.density],
            "safety": [(t.id, [re.compile(p, flags) for p in t.patterns]) for t in self.safety],
            "human": [re.compile(p, flags) for p in self.human_request],
            "handoff": [re.compile(p, flags) for p in self.post.handoff_patterns],
            "completion": [re.compile(p, flags) for p in self.post.completion_patterns],
        }


def load_guardrail_config(source: str | Path | Mapping[str, Any] | GuardrailConfig | None = None) -> GuardrailConfig:
    """Validate a path, a dict (a Serve ``user_config``) or a model; ``None`` loads the default file.

    Raises :class:`ConfigError` naming the first bad field.
    """
    if isinstance(source, GuardrailConfig):
        return source
    if source is None or isinstance(source, str | Path):
        path = Path(source) if source is not None else DEFAULT_GUARDRAILS_PATH
        import yaml  # a declared dependency; imported here so the module stays light

        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read guardrail table {path}: {exc}", details={"path": str(path)}) from exc
    else:
        data = dict(source)
    if not isinstance(data, Mapping):
        raise ConfigError("guardrail table must be a mapping", details={"path": "guardrails"})
    try:
        return GuardrailConfig.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        path_s = ".".join(["guardrails", *(str(p) for p in first["loc"])])
        raise ConfigError(f"{path_s}: {first['msg']}", details={"path": path_s}) from exc


_DEFAULT: GuardrailConfig | None = None


def default_guardrail_config() -> GuardrailConfig:
    """The table in ``configs/guardrails.yaml``, loaded once per process."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_guardrail_config(None)
    return _DEFAULT


def canary_token() -> str:
    """The canary of this deployment (the default table's setting; what prompts plant)."""
    return default_guardrail_config().canary.resolve()
