"""A small help-article knowledge base for the retail domain, and its deterministic search.

Articles are of two kinds: ``policy`` (what is allowed and why) and
``procedural`` (the steps to get something done). :func:`classify_question`
reads the question's form: "why", "can I", "am I allowed" ask for policy;
"how", "what do I do", "steps" ask for a procedure. :func:`search_help_articles`
ranks by keyword overlap and gives the preferred kind a bonus, so the same
words route to different articles depending on how the question is asked.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "HelpArticle",
    "HelpHit",
    "QuestionKind",
    "HELP_ARTICLES",
    "classify_question",
    "search_help_articles",
    "get_article",
]

QuestionKind = Literal["policy", "procedural", "any"]


class HelpArticle(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^KB-(POL|HOW)-\d{3}$")
    kind: Literal["policy", "procedural"]
    title: str
    body: str
    tags: tuple[str, ...]


class HelpHit(BaseModel):
    """One ranked search result."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: Literal["policy", "procedural"]
    title: str
    body: str
    score: float


def _a(id: str, title: str, body: str, *tags: str) -> HelpArticle:
    kind = "policy" if id.startswith("KB-POL") else "procedural"
    return HelpArticle(id=id, kind=kind, title=title, body=body, tags=tags)


HELP_ARTICLES: tuple[HelpArticle, ...] = (
    _a("KB-POL-001", "Why we verify who you are",
       "Before we discuss any account or order, we confirm your identity with your email address, or with your full name and zip code. We do this even if you already know your user id. We can only help one customer per conversation.",
       "identity", "verify", "authenticate", "account", "email", "zip", "security"),
    _a("KB-POL-002", "Which orders can be cancelled",
       "Only an order that is still pending can be cancelled. Once it has been processed, shipped or delivered, cancelling is no longer possible. An order whose items were already changed cannot be cancelled either. The accepted reasons are that the order is no longer needed or was placed by mistake.",
       "cancel", "cancellation", "pending", "processed", "order", "reason"),
    _a("KB-POL-003", "When a cancellation refund arrives",
       "A cancelled order is refunded to the payment methods it was paid with. Money paid by gift card goes back onto the gift card right away; card and PayPal refunds take five to seven business days.",
       "refund", "cancel", "gift", "card", "paypal", "credit", "days", "money"),
    _a("KB-POL-004", "What can be changed on a pending order",
       "While an order is pending you may change its shipping address, its payment method, or the options of its items (for example size or color). Nothing else can be changed. Item options can be changed only once per order, so gather every change first.",
       "modify", "change", "pending", "address", "payment", "options", "items", "order"),
    _a("KB-POL-005", "Rules for changing item options",
       "An item can only be swapped for another available variant of the same product, never for a different kind of product. The price difference is charged to, or refunded to, a payment method you choose; a gift card must hold enough to cover an extra charge.",
       "modify", "exchange", "variant", "options", "same", "product", "price", "difference", "gift"),
    _a("KB-POL-006", "Which orders can be returned",
       "Only delivered orders can be returned. The refund goes either to the original payment method or to one of your existing gift cards. After the request the order shows 'return requested' and you receive an email explaining how to send the items back.",
       "return", "delivered", "refund", "gift", "card", "original", "payment"),
    _a("KB-POL-007", "Which orders can be exchanged",
       "Only delivered orders can be exchanged, and only for another available variant of the same product. An exchange can be requested once per order, so list every item you want to exchange in one go. No new order is needed.",
       "exchange", "delivered", "variant", "same", "product", "once"),
    _a("KB-POL-008", "Changing the payment method of an order",
       "A pending order can be moved to one other payment method that is different from the current one. A gift card must have enough balance for the whole order total. The old method is refunded: instantly for a gift card, within five to seven business days otherwise.",
       "payment", "method", "change", "gift", "card", "balance", "pending"),
    _a("KB-POL-009", "Confirmation before any change",
       "We always read back the exact change (order, items, amounts, payment method) and wait for your explicit yes before cancelling, modifying, returning or exchanging anything.",
       "confirm", "confirmation", "yes", "change", "action"),
    _a("KB-POL-010", "When we hand you to a person",
       "If your request cannot be handled with the actions available to us, we transfer you to a human agent with a short summary, so you do not have to repeat yourself.",
       "human", "agent", "transfer", "person", "escalate", "representative"),
    _a("KB-HOW-001", "How to cancel a pending order",
       "1. Verify your identity. 2. Give the order id (it starts with #W). 3. Tell us the reason: no longer needed, or ordered by mistake. 4. Check the summary and reply yes. The order becomes cancelled and the refund starts.",
       "cancel", "steps", "order", "pending", "reason"),
    _a("KB-HOW-002", "How to return delivered items",
       "1. Verify your identity. 2. Give the order id and the items to return. 3. Choose where the refund goes: the original payment method or a gift card. 4. Confirm with yes. 5. Follow the emailed instructions to ship the items back.",
       "return", "steps", "delivered", "items", "refund", "email"),
    _a("KB-HOW-003", "How to exchange delivered items",
       "1. Verify your identity. 2. Give the order id and every item you want to exchange. 3. Pick the new option of the same product for each item. 4. Choose a payment method for any price difference. 5. Confirm with yes; you will get an email with return instructions.",
       "exchange", "steps", "delivered", "items", "options", "size", "color"),
    _a("KB-HOW-004", "How to change the shipping address",
       "For one pending order: give the order id and the full new address, then confirm. To change the default address on your profile, give the new address and confirm; existing orders keep their address unless you change them too.",
       "address", "shipping", "change", "steps", "default", "profile", "move"),
    _a("KB-HOW-005", "How to change item options on a pending order",
       "1. Verify your identity. 2. Give the order id and all the items to change. 3. Pick the new option for each (same product). 4. Choose the payment method for the price difference. 5. Confirm with yes. After this the order can no longer be changed or cancelled.",
       "modify", "items", "options", "size", "color", "steps", "pending"),
    _a("KB-HOW-006", "How to check an order or refund status",
       "Verify your identity and give the order id. We read its status (pending, processed, delivered, cancelled, return or exchange requested) and its payment history, which lists every payment and refund with its payment method.",
       "status", "track", "order", "refund", "payment", "history", "where"),
)

_BY_ID = {a.id: a for a in HELP_ARTICLES}
assert len(_BY_ID) == len(HELP_ARTICLES), "duplicate help article id"

_STOP = frozenset(
    "a an the i my me to of for on in is it be do can am are was with and or what why how "
    "you your we our this that if not does did at by from so".split()
)
_POLICY_RE = re.compile(r"\b(why|can i|could i|am i allowed|is it allowed|allowed|may i|is it possible|policy|rules?)\b")
_PROC_RE = re.compile(r"\b(how|what do i do|what should i do|steps?|walk me through|process for|procedure)\b")
_WORD_RE = re.compile(r"[a-z0-9#]+")


def get_article(article_id: str) -> HelpArticle | None:
    """The article with this id, or ``None``."""
    return _BY_ID.get(article_id)


def classify_question(text: str) -> QuestionKind:
    """``policy`` for why / can-I / allowed questions, ``procedural`` for how / steps, else ``any``.

    When both forms occur, the one that appears first in the text wins.
    """
    low = text.lower()
    pol = _POLICY_RE.search(low)
    proc = _PROC_RE.search(low)
    if pol and proc:
        return "policy" if pol.start() <= proc.start() else "procedural"
    if pol:
        return "policy"
    if proc:
        return "procedural"
    return "any"


def _terms(text: str) -> set[str]:
    out = set()
    for w in _WORD_RE.findall(text.lower()):
        if w in _STOP or len(w) < 2:
            continue
        out.add(w[:-1] if len(w) > 4 and w.endswith("s") else w)
    return out


def search_help_articles(query: str, limit: int = 3) -> tuple[QuestionKind, list[HelpHit]]:
    """Rank articles by keyword overlap (tags and title weigh 2, body 1) plus a kind bonus.

    Returns the question kind and up to ``limit`` hits with a positive score,
    best first, ties broken by article id. Deterministic.
    """
    kind = classify_question(query)
    q = _terms(query)
    hits: list[HelpHit] = []
    for art in HELP_ARTICLES:
        strong = _terms(" ".join(art.tags) + " " + art.title)
        body = _terms(art.body)
        overlap = 2.0 * len(q & strong) + 1.0 * len(q & (body - strong))
        if overlap <= 0:
            continue
        if kind != "any" and art.kind == kind:
            overlap += 3.0
        hits.append(HelpHit(id=art.id, kind=art.kind, title=art.title, body=art.body, score=overlap))
    hits.sort(key=lambda h: (-h.score, h.id))
    return kind, hits[: max(0, limit)]
