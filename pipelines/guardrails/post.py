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
    canary_leak                 the system prompts' canary token, or half of it (spaced, dotted or
                                homoglyphed too)

Checks run on the normalised sentence together with the tail of what was
already released, and count only what the new sentence adds: an id or amount
cannot be smuggled out in two halves across a sentence boundary.
"""

from __future__ import annotations

import bisect
import itertools
import re

from pydantic import BaseModel, ConfigDict, Field

from .config import GuardrailConfig, canary_token
from .ids import extract_amounts, extract_ids, extract_time_promises, normalize_text
from .normalize import skeleton
from .pii import PLACEHOLDER_RE

__all__ = [
    "POST_KINDS",
    "SentenceSplitter",
    "PostGuardView",
    "Violation",
    "SentenceVerdict",
    "PostGuard",
    "canary_leak",
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
    "canary_leak",
)
# A sentence ends at terminal punctuation followed by whitespace. A bare line break is not an end:
# "within 2\ndays." must be judged as one sentence, or its first half would be released on its own.
_END = re.compile(r"""[.!?…]+["')\]]*\s+""")
_TAIL = 80


class SentenceSplitter:
    """Incremental sentence splitter: :meth:`feed` deltas, get complete sentences back.

    Lines without terminal punctuation are held and joined with what follows, so
    a date, amount or id cut by a line break is judged whole.
    """

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
        # the table's token and the deployment default (what the prompts plant), flattened, as the
        # windows of half its length (at least 8): a token released in two halves is caught at the second
        self._canaries = {w for t in {config.canary.resolve(), canary_token()} for w in _windows(_flat(t))}

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
        flat = _flat(both)
        if any(w in flat for w in self._canaries):
            out.append(Violation(kind="canary_leak"))
        return SentenceVerdict(text=text, violations=out, replacement=self.config.post.safe_sentence if out else "")


def canary_leak(text: str, context: str = "") -> bool:
    """True when ``context + text`` carries the deployment's canary token, or half of it (any judge may ask)."""
    flat = _flat(f"{normalize_text(context)[-_TAIL:]} {normalize_text(text)}")
    return any(w in flat for w in _windows(_flat(canary_token())))


CANARY_TAIL_MIN = 3


def canary_forming(words: list[str]) -> int | None:
    """The index of the first of ``words`` that the canary may be growing from.

    The longest tail of the flattened words that is part of the canary token, when it is at
    least ``CANARY_TAIL_MIN`` characters: text that goes on from it could still become a
    leaking window. A shorter tail (``"e"`` of "see", ``"nd"`` of "and") ends most words and
    tells nothing of the token; whatever follows it is judged with it before it goes out,
    so a window across it is still never released. ``None`` when no tail is.
    """
    token = _flat(canary_token())
    flats = [_flat(normalize_text(w)) for w in words]
    flat = "".join(flats)
    size = next((n for n in range(min(len(flat), len(token)), 0, -1) if flat[-n:] in token), 0)
    if size < CANARY_TAIL_MIN:
        return None
    # the word holding the tail's first character: the first whose running end passes it
    return bisect.bisect_right(list(itertools.accumulate(len(f) for f in flats)), len(flat) - size)


def _windows(token: str) -> set[str]:
    n = min(len(token), max(8, (len(token) + 1) // 2))
    return {token[i : i + n] for i in range(len(token) - n + 1)}


def _flat(text: str) -> str:
    """Letters and digits only, homoglyphs folded: ``t d m-c.n r y`` and ``tdmcnry`` compare equal."""
    return re.sub(r"[\W_]+", "", skeleton(text))


def _diff_ids(both: dict[str, set[str]], ctx: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for kind, ids in both.items():
        new = ids - ctx.get(kind, set())
        if new:
            out[kind] = new
    return out
