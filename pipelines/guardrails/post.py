"""The post-guard: sentence-by-sentence checks on the streamed reply, before release.

:class:`SentenceSplitter` cuts the generator's deltas into sentences as soon
as each one completes, so the client sees the first sentence without waiting
for the whole reply. :meth:`PostGuard.check` judges one sentence against a
:class:`PostGuardView` (what the forward contract allows):

    unknown_<kind>_id           an order / user / payment / item / article id not in the contract
    action_id                   an action-card id the orchestrator did not select
    unsupported_amount          a money amount not present in the observations
    unsupported_date            a date or delay not present in the observations, sources or policy
    handoff_without_escalation  "I'll transfer you to a human" without an ``escalate`` decision
    unsupported_completion      "your order has been cancelled" with no write executed this turn
    unknown_placeholder         a PII placeholder that is not the user's own

Checks run on the normalised sentence together with the tail of what was
already released, and count only what the new sentence adds: an id or amount
cannot be smuggled out in two halves across a sentence boundary.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from .config import GuardrailConfig
from .ids import extract_amounts, extract_ids, extract_time_promises, normalize_text
from .pii import PLACEHOLDER_RE

__all__ = [
    "POST_KINDS",
    "SentenceSplitter",
    "PostGuardView",
    "Violation",
    "SentenceVerdict",
    "PostGuard",
]

POST_KINDS: tuple[str, ...] = (
    "unknown_order_id",
    "unknown_user_id",
    "unknown_payment_id",
    "unknown_item_id",
    "unknown_article_id",
    "action_id",
    "unsupported_amount",
    "unsupported_date",
    "handoff_without_escalation",
    "unsupported_completion",
    "unknown_placeholder",
)
_END = re.compile(r"""(?:[.!?…]+["')\]]*\s+|\n+)""")
_TAIL = 80


class SentenceSplitter:
    """Incremental sentence splitter: :meth:`feed` deltas, get complete sentences back."""

    def __init__(self) -> None:
        self._buf = ""

    def feed(self, delta: str) -> list[str]:
        """Append a delta; return the sentences it completed (stripped, non-empty), in order."""
        self._buf += delta
        out: list[str] = []
        while True:
            m = _END.search(self._buf)
            if m is None:
                break
            sentence = self._buf[: m.end()].strip()
            self._buf = self._buf[m.end() :]
            if sentence:
                out.append(sentence)
        return out

    @property
    def pending(self) -> str:
        """The sentence being written (what :meth:`feed` has not completed yet)."""
        return self._buf

    def flush(self) -> list[str]:
        """The unfinished remainder as a last sentence (at the end of the stream)."""
        rest, self._buf = self._buf.strip(), ""
        return [rest] if rest else []


class PostGuardView(BaseModel):
    """What a reply may refer to, derived from the forward contract."""

    model_config = ConfigDict(extra="forbid")

    path: str
    allowed_ids: list[str] = Field(default_factory=list)
    selected_card_id: str | None = None
    allowed_amounts: list[int] = Field(default_factory=list, description="Cents.")
    allowed_times: list[str] = Field(default_factory=list)
    write_executed: bool = False
    placeholders: list[str] = Field(default_factory=list)


class Violation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    detail: str = ""


class SentenceVerdict(BaseModel):
    """The judged sentence (normalised) and why it may not be released, if so."""

    model_config = ConfigDict(extra="forbid")

    text: str
    violations: list[Violation] = Field(default_factory=list)
    replacement: str = Field("", description="The safe wording to release instead, when blocked.")

    @property
    def ok(self) -> bool:
        return not self.violations


class PostGuard:
    """Pure sentence checks over a :class:`PostGuardView`."""

    def __init__(self, config: GuardrailConfig) -> None:
        self.config = config

    def check(self, sentence: str, view: PostGuardView, context: str = "") -> SentenceVerdict:
        """Judge ``sentence``; ``context`` is the tail of the text already released."""
        text = normalize_text(sentence).strip()
        ctx = normalize_text(context)[-_TAIL:]
        both = f"{ctx} {text}" if ctx else text
        out: list[Violation] = []
        allowed = set(view.allowed_ids)
        new_ids = _diff_ids(extract_ids(both), extract_ids(ctx))
        for kind, ids in sorted(new_ids.items()):
            for i in sorted(ids):
                if kind == "card":
                    if i != view.selected_card_id:
                        out.append(Violation(kind="action_id", detail=i))
                elif i not in allowed:
                    out.append(Violation(kind=f"unknown_{kind}_id", detail=i))
        amounts = extract_amounts(both) - extract_amounts(ctx)
        for cents in sorted(amounts - set(view.allowed_amounts)):
            out.append(Violation(kind="unsupported_amount", detail=f"{cents / 100:.2f}"))
        times = extract_time_promises(both) - extract_time_promises(ctx)
        for t in sorted(times - set(view.allowed_times)):
            out.append(Violation(kind="unsupported_date", detail=t))
        comp = self.config.compiled
        if view.path != "escalate" and any(rx.search(text) for rx in comp["handoff"]):
            out.append(Violation(kind="handoff_without_escalation"))
        if not view.write_executed and any(rx.search(text) for rx in comp["completion"]):
            out.append(Violation(kind="unsupported_completion"))
        for m in PLACEHOLDER_RE.finditer(text):
            if m.group(0) not in view.placeholders:
                out.append(Violation(kind="unknown_placeholder", detail=m.group(0)))
        return SentenceVerdict(text=text, violations=out, replacement=self.config.post.safe_sentence if out else "")


def _diff_ids(both: dict[str, set[str]], ctx: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for kind, ids in both.items():
        new = ids - ctx.get(kind, set())
        if new:
            out[kind] = new
    return out
