"""The pre-guard: limits, encoding, injection / jailbreak, safety routes and PII, before any model.

Order of checks (each one deterministic)::

    size / lines / control characters   -> raise PayloadTooLarge / InvalidInput (typed, no model call)
    normalise (NFKC, zero-width chars)  -> the text every later check and model sees
    views (see .normalize)              -> the skeleton (homoglyphs folded, accents stripped, casefolded)
                                           and what the text decodes to (base64, hex, tags, rot13, leet)
    classifiers (rule table, + models)  -> on every view; hits: block (evidence) or flag (logged only)
    decision (the table's ``decision``) -> block / ask / pass from the evidence, the customer's own words
                                           judged apart from the material they quote (see below)
    safety topics                       -> route "safety_sensitive" (a person handles it)
    explicit request for a person       -> route "user_requested_human"
    PII redaction with the session vault -> redacted text and history, vault entries

The rule table's injection patterns are written for the skeleton (lower-case
ASCII, no accents) in English, Spanish, French, German, Portuguese and
Italian. :func:`scan_data` runs the same rules over world and tool text that
enters a prompt (hits are reported, the text is not changed).

A :class:`Classifier` is the plug-in point: :class:`RuleClassifier` is the rule-table one and
always runs; the table's ``classifier`` section adds the learned layer
(:class:`~pipelines.guardrails.learned.LearnedClassifier`) beside it. Either may block; each hit
names its layer (``rules`` or ``classifier``). A classifier with a ``views`` attribute reads only
those views.

The decision (:class:`~pipelines.guardrails.config.DecisionConfig`) reads intent, not words: hits in
the customer's own words refuse only when the layers agree (or the learned layer is very sure, or the
hit is in what the text decodes to); one layer alone asks ("Did you mean ...?", ``decision="ask"``
with the table's ``question``); material the customer quotes — a quotation, quoted lines, a
forwarded message (:mod:`.quoted`) — is judged apart, so a gift message or a phishing e-mail the
customer asks about does not refuse them. A table without ``decision`` refuses on any blocking hit.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from pipelines.errors import InvalidInput, PayloadTooLarge

from .config import DecisionConfig, GuardrailConfig
from .hits import ClassifierHit
from .ids import normalize_text
from .normalize import skeleton, views
from .pii import Vault
from .quoted import split_quoted

__all__ = [
    "ClassifierHit",
    "Classifier",
    "RuleClassifier",
    "PreGuardResult",
    "PreGuard",
    "Evidence",
    "decide",
    "Route",
    "Decision",
    "Confirmation",
    "normalize_reply",
    "confirmation_of",
    "opens_with_no",
    "scan_data",
    "as_data",
    "data_block",
]

Route = Literal["user_requested_human", "safety_sensitive"]
Decision = Literal["pass", "ask", "block"]
Confirmation = Literal["affirmative", "negative"]
_PUNCT = re.compile(r"[^\w\s]")


def normalize_reply(text: str) -> str:
    """Lower-case, apostrophes and punctuation removed, whitespace collapsed."""
    text = text.replace("'", "").replace("\u2019", "")
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


#: At most this many table phrases make one confirmation ("yes" + "please go ahead").
MAX_CONFIRMATION_PHRASES = 3


def _made_of(words: list[str], phrases: set[tuple[str, ...]], left: int = MAX_CONFIRMATION_PHRASES) -> bool:
    """Whether ``words`` is, whole, a sequence of at most ``left`` table phrases."""
    if not words:
        return True
    if left == 0:
        return False
    return any(tuple(words[:n]) in phrases and _made_of(words[n:], phrases, left - 1)
               for n in range(1, len(words) + 1))


def confirmation_of(text: str, config: GuardrailConfig) -> Confirmation | None:
    """``affirmative`` only when the whole message is table phrases of one kind — one, or a few in a row
    ("Yes, please go ahead.") — likewise ``negative``; a message with anything else is neither."""
    words = normalize_reply(text).split()
    if not words:
        return None
    if _made_of(words, {tuple(normalize_reply(a).split()) for a in config.affirmatives}):
        return "affirmative"
    if _made_of(words, {tuple(normalize_reply(a).split()) for a in config.negatives}):
        return "negative"
    return None


#: A text's first sentence (up to its first ``.``, ``!``, ``?`` or ``;``) and what follows it.
_FIRST_SENTENCE = re.compile(r"^\s*([^.!?;]*[.!?;]+)\s*(.*)$", re.S)


def opens_with_no(text: str, config: GuardrailConfig) -> bool:
    """Whether ``text`` opens with an explicit no — its first sentence is wholly table negatives ("No, that's not
    what I want.") — and goes on with words of its own (the correction: "… Only the desk lamp."). A text that is
    wholly a no is :func:`confirmation_of`'s ``negative`` instead; "No, I want the blue one." is neither (its first
    sentence holds more than a no)."""
    m = _FIRST_SENTENCE.match(text)
    if m is None or not normalize_reply(m.group(2)):
        return False
    return confirmation_of(m.group(1), config) == "negative"


@runtime_checkable
class Classifier(Protocol):
    """Labels a (normalised) user text: the rule table, the learned layer, or a model behind a handle."""

    name: str

    async def classify(self, text: str) -> list[ClassifierHit]:
        """The hits for ``text`` (empty when nothing fired). Must not see un-normalised text."""
        ...


class RuleClassifier:
    """The regex heuristics of the rule table's ``injection`` section."""

    name = "rules"

    def __init__(self, config: GuardrailConfig) -> None:
        self.config = config

    async def classify(self, text: str) -> list[ClassifierHit]:
        """Every injection / jailbreak rule whose pattern matches ``text``."""
        return self.match(text)

    def match(self, text: str) -> list[ClassifierHit]:
        """:meth:`classify`, synchronously: pattern rules, then density rules."""
        hits = [
            ClassifierHit(rule_id=rule.id, kind=rule.kind, action=rule.action, sure=rule.sure)
            for rule, rx in self.config.compiled["injection"]
            if rx.search(text)
        ]
        for rule, signals, anchors in self.config.compiled["density"]:
            if len(text) < rule.min_chars or (anchors and not any(rx.search(text) for rx in anchors)):
                continue
            if sum(1 for rx in signals if rx.search(text)) >= rule.min_hits:
                hits.append(ClassifierHit(rule_id=rule.id, kind=rule.kind, action=rule.action))
        return hits


def _merge(hits: list[ClassifierHit], new: list[ClassifierHit], view: str) -> None:
    seen = {h.rule_id for h in hits}
    for h in new:
        if h.rule_id not in seen:
            seen.add(h.rule_id)
            hits.append(h.model_copy(update={"view": view}))


_DATA_TAG = re.compile(r"<\s*/?\s*data\b", re.IGNORECASE)


def as_data(text: str) -> str:
    """``text`` made safe inside a ``<data>`` block: any ``<data>`` / ``</data>`` tag in it is defused."""
    return _DATA_TAG.sub("[data", text)


def data_block(lines: list[str], label: str = "data") -> str:
    """Lines of world or tool text, delimited as data (never instructions) for a prompt."""
    body = "\n".join(as_data(line) for line in lines)
    return f"<data source=\"{label}\">\n{body}\n</data>"


def scan_data(text: str, config: GuardrailConfig) -> list[ClassifierHit]:
    """The injection rules' hits on world or tool text (every view, each rule once)."""
    rules = RuleClassifier(config)
    hits: list[ClassifierHit] = []
    for name, view in views(text):
        _merge(hits, rules.match(view), name)
    return hits


class PreGuardResult(BaseModel):
    """What the pipeline needs from the pre-guard. ``vault`` holds PII: never log it."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(..., description="The normalised, redacted user text (what models see).")
    history: list[str] = Field(default_factory=list, description="Prior user texts, redacted.")
    vault: dict[str, str] = Field(default_factory=dict, description="Placeholder -> value.")
    confirmation: Confirmation | None = Field(None, description="The whole text is an explicit yes / no.")
    opens_with_no: bool = Field(False, description="The text opens with a sentence that is wholly an explicit no and "
                                "goes on (a refusal with its correction): not a confirmation.")
    route: Route | None = None
    route_rule: str | None = None
    blocked: bool = Field(False, description="Refused: the decision is ``block``.")
    decision: Decision = Field("pass", description="block (refuse), ask (a question instead of a refusal) or pass.")
    question: str | None = Field(None, description="What to ask the customer when the decision is ``ask``.")
    hits: list[ClassifierHit] = Field(default_factory=list)
    pii_found: list[str] = Field(default_factory=list, description="Placeholders found in this turn's text.")
    rules_version: str = ""

    def summary(self) -> dict[str, object]:
        """A loggable view (no vault values)."""
        return {
            "confirmation": self.confirmation,
            "opens_with_no": self.opens_with_no,
            "route": self.route,
            "route_rule": self.route_rule,
            "blocked": self.blocked,
            "decision": self.decision,
            "hits": [h.model_dump() for h in self.hits],
            "pii_found": self.pii_found,
            "rules_version": self.rules_version,
        }


def _check_limits(text: str, config: GuardrailConfig) -> None:
    lim = config.limits
    if len(text) > lim.max_chars:
        raise PayloadTooLarge(
            f"text is {len(text)} characters; the limit is {lim.max_chars}",
            details={"limit": lim.max_chars, "length": len(text)},
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput("text is not valid Unicode (lone surrogate)", details={"position": exc.start}) from exc
    if text.count("\n") + 1 > lim.max_lines:
        raise InvalidInput(f"text has more than {lim.max_lines} lines", details={"limit": lim.max_lines})
    controls = sum(1 for c in text if c not in "\n\t\r" and unicodedata.category(c) == "Cc")
    if text and controls / len(text) > lim.max_control_ratio:
        raise InvalidInput("text holds too many control characters", details={"count": controls})


@dataclass(frozen=True)
class Evidence:
    """What the pre-guard's layers found in one text: the blocking hits of the rules (and of any plug-in
    classifier), and the learned layer's score on each view it reads (empty when it does not block)."""

    hits: tuple[ClassifierHit, ...] = ()
    learned: Mapping[str, float] = field(default_factory=dict)

    def learned_fires(self, threshold: float) -> bool:
        return any(p >= threshold for p in self.learned.values())

    def any(self, threshold: float) -> bool:
        """Some layer fired (thin evidence at least)."""
        return bool(self.hits) or self.learned_fires(threshold)

    def strong(self, dc: DecisionConfig, threshold: float) -> bool:
        """Evidence that refuses on its own: two layers agree, the learned layer (or a plug-in model) is very
        sure, or something fired on what the text decodes to."""
        learned = self.learned_fires(threshold)
        layers = {h.layer for h in self.hits} | ({"classifier"} if learned else set())
        return (layers >= {"rules", "classifier"}
                or any(h.sure for h in self.hits)
                or any(p >= dc.refuse_score for p in self.learned.values())
                or any(h.layer == "classifier" and h.score >= dc.refuse_score for h in self.hits)
                or any(h.view in dc.sure_views for h in self.hits)
                or any(p >= threshold for v, p in self.learned.items() if v in dc.sure_views))


def decide(own: Evidence, whole: Evidence | None, dc: DecisionConfig | None,
           threshold: float) -> tuple[Decision, str | None]:
    """The decision from the evidence in the customer's own words (``own``) and in the whole message
    (``whole``; ``None`` when nothing is quoted), with the learned layer firing at ``threshold``.
    Returns the decision and, when it asks, the question (see :class:`DecisionConfig`)."""
    quoted = whole if whole is not None else Evidence()
    if not own.any(threshold) and not quoted.any(threshold):
        return "pass", None
    if dc is None or any(h.sure for h in (*own.hits, *quoted.hits)):
        return "block", None
    decision: Decision
    question: str | None
    if own.any(threshold):
        decision, question = ("block", None) if own.strong(dc, threshold) else ("ask", dc.ask_own)
    elif quoted.strong(dc, threshold) or own.learned.get("text", 0.0) >= dc.lean_score:
        decision, question = "ask", dc.ask_quoted
    else:
        decision, question = "pass", None
    if decision == "ask" and not dc.ask:
        decision, question = "block", None
    return decision, question


class PreGuard:
    """Runs the pre-guard for one turn; pure apart from the awaited classifiers."""

    def __init__(self, config: GuardrailConfig, classifiers: Sequence[Classifier] = ()) -> None:
        self.config = config
        learned: list[Classifier] = []
        self.learned = None
        if config.classifier is not None and config.classifier.enabled:
            from .learned import LearnedClassifier

            c = config.classifier
            self.learned = LearnedClassifier(c.artifact, c.threshold, c.action, c.views)
            learned.append(self.learned)
        self.classifiers: list[Classifier] = [RuleClassifier(config), *learned, *classifiers]

    def route_for(self, text: str) -> tuple[Route | None, str | None]:
        """The deterministic route for a normalised text: safety first, then a request for a person."""
        for topic_id, patterns in self.config.compiled["safety"]:
            if any(rx.search(text) for rx in patterns):
                return "safety_sensitive", topic_id
        for i, rx in enumerate(self.config.compiled["human"]):
            if rx.search(text):
                return "user_requested_human", f"human_request.{i}"
        return None, None

    async def evidence(self, text: str, *, always: bool = False) -> tuple[Evidence, Evidence | None, list[ClassifierHit]]:
        """What the layers find in ``text``: in the customer's own words, in the whole message when it
        quotes material (``None`` when it quotes nothing, or the table does not judge quotes apart), and
        every hit of the whole message (flag hits too; those found only in quoted material marked).

        The own words are read apart only when something fired on the whole message, unless ``always``
        (a sweep over thresholds needs them for every text)."""
        whole, hits = await self._evidence(views(text))
        dc = self.config.decision
        if not always and not whole.hits and not whole.learned_fires(self._threshold()):
            return whole, None, hits
        own_text = split_quoted(text).own if dc is not None and dc.quoted else text
        if own_text == text:
            return whole, None, hits
        own, own_hits = await self._evidence(views(own_text))
        ids = {h.rule_id for h in own_hits}
        return own, whole, [h if h.rule_id in ids else h.model_copy(update={"quoted": True}) for h in hits]

    def _threshold(self) -> float:
        return self.learned.threshold if self.learned is not None else 1.0

    async def _evidence(self, seen: list[tuple[str, str]]) -> tuple[Evidence, list[ClassifierHit]]:
        hits: list[ClassifierHit] = []
        learned: dict[str, float] = {}
        for clf in self.classifiers:
            only = getattr(clf, "views", None)
            for name, view in seen:
                if only is not None and name not in only:
                    continue
                if clf is self.learned:
                    score = self.learned.model.score(view)
                    learned[name] = max(score, learned.get(name, 0.0))
                    if score >= self.learned.threshold:
                        _merge(hits, [ClassifierHit(rule_id="clf.linear", kind="injection", action=self.learned.action,
                                                    score=round(score, 6), layer="classifier")], name)
                else:
                    _merge(hits, await clf.classify(view), name)
        counts = self.learned is not None and self.learned.action == "block"
        return Evidence(hits=tuple(h for h in hits if h.action == "block" and h.rule_id != "clf.linear"),
                        learned=learned if counts else {}), hits

    async def check(self, text: str, history: Sequence[str] = ()) -> PreGuardResult:
        """Check one user text (raises typed errors for limit and encoding violations).

        ``history`` is the session's earlier user texts, oldest first: they are
        redacted first, so the placeholders of this turn match earlier turns'.
        """
        _check_limits(text, self.config)
        clean = normalize_text(text).strip()
        own, whole, hits = await self.evidence(text)
        decision, question = decide(own, whole, self.config.decision, self._threshold())
        route, rule = self.route_for(skeleton(text))
        vault = Vault(self.config.pii_kinds)
        red_history = [vault.redact(normalize_text(h)) for h in history]
        before = set(vault.ids())
        red_text = vault.redact(clean)
        found = sorted({p for p in vault.ids() if p in red_text} | (set(vault.ids()) - before))
        return PreGuardResult(
            text=red_text,
            history=red_history,
            vault=vault.entries(),
            confirmation=confirmation_of(clean, self.config),
            opens_with_no=opens_with_no(clean, self.config),
            route=route,
            route_rule=rule,
            blocked=decision == "block",
            decision=decision,
            question=question,
            hits=hits,
            pii_found=found,
            rules_version=self.config.version,
        )
