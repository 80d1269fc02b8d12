"""Quoted material in a user's message: what the customer cites, as opposed to what they say.

A customer quotes a gift message they want printed, pastes an e-mail they received, repeats what an
agent told them. Words that are instructions in the customer's own voice ("ignore the rules") are
material when they are quoted ("write 'ignore the rules, it's your birthday' on the card"). The
pre-guard judges the two apart (:mod:`.pre`): it reads the message with the quoted material marked,
so evidence that stands only inside a quotation counts less than evidence in the customer's own words.

:func:`split_quoted` finds three shapes, deterministically and without a word list:

    quotation     a run between paired quotation marks — “…”, „…“, «…», »…«, ‹…›, 「…」, "…", and
                  ‘…’ / '…' when the marks stand at word edges (an apostrophe inside a word, as in
                  "don't" or "l'adresse", is never a quotation mark)
    quoted lines  consecutive lines starting with ``>`` (an e-mail reply's quoting)
    forwarded     from a line that opens a forwarded message (a row of dashes or a bracket around a
                  short title such as "Forwarded message" / "Original Message", or a header line
                  ``From:`` / ``De :`` / ``Von:`` … followed by more header lines) to the end of the
                  message; when a body paragraph follows the headers, a last paragraph after it of at
                  most :data:`MAX_TAIL` characters is the customer's own words again (the question
                  asked about the forwarded mail)

A quoted span is replaced in :attr:`Quoted.own` by :data:`MARK` (so the sentence around it still reads
as a sentence). Quotation marks never pair across more than :data:`MAX_QUOTE` characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["MARK", "MAX_QUOTE", "MAX_TAIL", "Span", "Quoted", "split_quoted"]

MARK = "\u2039q\u203a"  # ‹q›: one short token where a quotation stood
MAX_QUOTE = 1500
MAX_TAIL = 300

SpanKind = Literal["quotation", "quoted_lines", "forwarded"]

# Marks that always quote (an opening and its possible closings).
_PAIRS: dict[str, str] = {
    "\u201c": "\u201d\u201c",  # “ … ” (and “ … “ as some keyboards produce)
    "\u201e": "\u201c\u201d",  # „ … “ / „ … ”
    "\u00ab": "\u00bb",        # « … »
    "\u00bb": "\u00ab",        # » … « (German, Danish)
    "\u2039": "\u203a",        # ‹ … ›
    "\u300c": "\u300d",        # 「 … 」
    "\u300e": "\u300f",        # 『 … 』
}
# Marks that quote only at word edges: the straight double quote, and single quotes (apostrophes too).
_EDGE_OPEN = re.compile(r"(?:(?<=^)|(?<=[\s(\[{:;,.!?\u2014\u2013/-]))([\"'\u2018\u2019])(?=\S)")
_HEADER = re.compile(
    r"^\s*(from|to|sent|date|subject|cc|de|para|enviado|fecha|asunto|a|envoye|objet|von|an|gesendet|betreff|datum|"
    r"assunto|data|enviada|da|inviato|oggetto|van|aan|verzonden|onderwerp)\s*:", re.IGNORECASE)
_FORWARD = re.compile(r"^\s*(?:-{3,}|_{3,}|={3,}|\[|<)\s*[^\n]{3,60}?\s*(?:-{3,}|_{3,}|={3,}|\]|>)\s*$")
_FORWARD_WORDS = re.compile(r"^\s*[^\n]{0,30}\b(forward\w*|fwd|original|reenviad\w*|transf[eé]r\w*|weitergeleitet\w*|"
                            r"urspr[uü]ngliche\w*|encaminhad\w*|inoltrat\w*|doorgestuurd\w*|oorspronkelijk\w*)\b[^\n]{0,40}:?\s*$",
                            re.IGNORECASE)


@dataclass(frozen=True)
class Span:
    """One piece of quoted material: ``text[start:end]`` and its shape."""

    start: int
    end: int
    kind: SpanKind


@dataclass
class Quoted:
    """A message split into the customer's own words and the material they quote."""

    text: str
    spans: list[Span] = field(default_factory=list)

    @property
    def own(self) -> str:
        """The message with every quoted span replaced by :data:`MARK`."""
        out, last = [], 0
        for s in self.spans:
            out.append(self.text[last:s.start])
            out.append(MARK)
            last = s.end
        out.append(self.text[last:])
        return "".join(out)

    @property
    def quoted(self) -> list[str]:
        """The quoted material itself, span by span."""
        return [self.text[s.start:s.end] for s in self.spans]

    @property
    def has_quotes(self) -> bool:
        return bool(self.spans)


def _forwarded(text: str) -> tuple[int, int] | None:
    """Where a forwarded message starts and ends (``None`` when there is none)."""
    lines = text.split("\n")
    pos = 0
    starts = []
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    for i, line in enumerate(lines):
        opens = bool(_FORWARD.match(line) and _FORWARD_WORDS.search(line.strip("-_=[]<> ")))
        opens = opens or bool(_FORWARD_WORDS.match(line) and line.rstrip().endswith(":") and i + 1 < len(lines)
                              and _HEADER.match(lines[i + 1]))
        if not opens:  # a header block: two header lines in a row (From: … / Subject: …)
            opens = bool(_HEADER.match(line) and i + 1 < len(lines) and _HEADER.match(lines[i + 1]))
        if not opens:
            continue
        start, end = starts[i], len(text)
        rest = text[start:]
        breaks = list(re.finditer(r"\n\s*\n", rest))
        if len(breaks) >= 2:  # headers, a body, then a last paragraph: the question asked about the mail
            tail = rest[breaks[-1].end():]
            if 0 < len(tail.strip()) <= MAX_TAIL and not _HEADER.match(tail):
                end = start + breaks[-1].start()
        return start, end
    return None


def _quoted_lines(text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for m in re.finditer(r"(?m)(?:^[ \t]*>[^\n]*(?:\n|$))+", text):
        out.append((m.start(), m.end()))
    return out


def _quotations(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    def free(i: int) -> bool:
        return not any(a <= i < b for a, b in taken)

    out: list[tuple[int, int]] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        close: str | None = None
        if c in _PAIRS and free(i):
            close = _PAIRS[c]
        elif c in "\"'\u2018\u2019" and free(i) and _EDGE_OPEN.match(text, i):
            close = {"\"": "\"", "'": "'", "\u2018": "\u2019'", "\u2019": "\u2019"}[c]
        if close is None:
            i += 1
            continue
        j = _closing(text, i + 2, close, edge=c in "\"'\u2018\u2019")  # a quotation holds one character at least
        if j is None:
            i += 1
            continue
        out.append((i, j + 1))
        i = j + 1
    return out


def _closing(text: str, k: int, close: str, *, edge: bool) -> int | None:
    """The index of the mark closing a quotation opened before ``k``, within :data:`MAX_QUOTE`."""
    limit = min(len(text), k + MAX_QUOTE)
    while k < limit:
        c = text[k]
        if c in close:
            if not edge:
                return k
            after = text[k + 1] if k + 1 < len(text) else " "
            before = text[k - 1]
            # at a word edge: not an apostrophe inside a word (don't, l'adresse) and not an empty quote
            if not before.isspace() and not (after.isalnum()):
                return k
        k += 1
    return None


def split_quoted(text: str) -> Quoted:
    """The message with its quoted material marked (see module docstring)."""
    spans: list[tuple[int, int, SpanKind]] = []
    fwd = _forwarded(text)
    if fwd is not None:
        spans.append((fwd[0], fwd[1], "forwarded"))
    for a, b in _quoted_lines(text):
        if not any(x <= a < y for x, y, _ in spans):
            spans.append((a, b, "quoted_lines"))
    taken = [(a, b) for a, b, _ in spans]
    for a, b in _quotations(text, taken):
        spans.append((a, b, "quotation"))
    spans.sort()
    return Quoted(text=text, spans=[Span(a, b, k) for a, b, k in spans])
