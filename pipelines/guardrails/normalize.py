"""What the injection checks read: the text folded to a skeleton, plus what it decodes to.

:func:`skeleton` is the text as a rule should see it: NFKC, format characters
(zero-width, bidi controls, Unicode tags) removed, cross-script homoglyphs
folded to ASCII (Unicode's confusables, as shipped by ``confusable-homoglyphs``,
and Latin letter names such as small capitals), accents stripped, casefolded.
"Ignоre" with a Cyrillic ``о``, "𝐢𝐠𝐧𝐨𝐫𝐞" and "ɪɢɴᴏʀᴇ" all read ``ignore``.

:func:`views` adds what the text carries in encoded form, each as its own view:

    base64   runs of base64 (standard or url-safe) that decode to readable text
    hex      runs of hex pairs (``69 67 6e``, ``\\x69\\x67``) that decode to readable text
    tags     invisible Unicode tag characters (U+E0020–U+E007E) read as ASCII
    rot13    the skeleton, rot13-decoded
    leet     the skeleton with leetspeak digits and symbols read as letters (1 -> i and 1 -> l)
    spaced   single letters separated by spaces or dots joined (``i g n o r e``)

A view is added only when it differs from the skeleton, so an ordinary message
is one or two views. Decoding is one level deep and bounded in size.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import re
import unicodedata
from functools import lru_cache
from importlib.resources import files

__all__ = ["skeleton", "views", "fold_confusables", "MAX_DECODED"]

MAX_DECODED = 8  # encoded runs decoded per text
_LATIN_NAME = re.compile(r"^(?:LATIN|REGIONAL INDICATOR SYMBOL)\b.*\bLETTER (?:SMALL CAPITAL |SMALL |CAPITAL )?([A-Z])$")
_TAGS = re.compile("[\U000e0020-\U000e007e]+")
_B64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX = re.compile(r"(?:\\x[0-9a-fA-F]{2}){4,}|(?<![0-9a-fA-F])(?:[0-9a-fA-F]{2}[\s:]?){8,}(?![0-9a-fA-F])")
_SPACED = re.compile(r"\b(?:[a-z][ .·_-]){3,}[a-z]\b")
_LEET = {"0": "o", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "9": "g", "@": "a", "$": "s", "!": "i", "|": "l"}


@lru_cache(maxsize=1)
def _fold_table() -> dict[int, str]:
    """Non-ASCII character -> the ASCII letter or digit it is confusable with."""
    data = json.loads(files("confusable_homoglyphs").joinpath("confusables.json").read_text(encoding="utf-8"))
    table: dict[int, str] = {}
    for char, glyphs in data.items():
        if len(char) != 1 or ord(char) < 128:
            continue
        targets = [g["c"] for g in glyphs if len(g["c"]) == 1 and ord(g["c"]) < 128 and g["c"].isalnum()]
        if targets:
            table[ord(char)] = min(targets, key=lambda t: (not t.islower(), not t.isalpha(), t))
    return table


def _by_name(char: str) -> str | None:
    m = _LATIN_NAME.match(unicodedata.name(char, ""))
    return m.group(1).lower() if m else None


def fold_confusables(text: str) -> str:
    """Each non-ASCII character that imitates an ASCII letter or digit, replaced by it."""
    table = _fold_table()
    out = []
    for c in text:
        if ord(c) < 128:
            out.append(c)
            continue
        out.append(table.get(ord(c)) or _by_name(c) or c)
    return "".join(out)


def skeleton(text: str) -> str:
    """NFKC, format characters removed, homoglyphs folded, accents stripped, casefolded, spaces collapsed."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    text = fold_confusables(text)
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return re.sub(r"[ \t]+", " ", text.casefold())


def _readable(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(1 for c in text if c.isprintable() or c in "\n\t")
    letters = sum(1 for c in text if c.isalpha())
    if not text or printable / len(text) < 0.9 or letters < 4:
        return None
    return text


def _base64(run: str) -> str | None:
    s = run.rstrip("=")
    padded = s + "=" * (-len(s) % 4)
    for alt in (None, b"-_"):
        try:
            raw = base64.b64decode(padded, altchars=alt, validate=True)
        except (binascii.Error, ValueError):
            continue
        text = _readable(raw)
        if text is not None:
            return text
    return None


def _hex(run: str) -> str | None:
    digits = re.sub(r"\\x|[\s:]", "", run)
    if len(digits) % 2:
        digits = digits[:-1]
    try:
        return _readable(bytes.fromhex(digits))
    except ValueError:
        return None


def _decoded(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, rx, dec in (("base64", _B64, _base64), ("hex", _HEX, _hex)):
        for m in rx.finditer(text):
            if len(out) >= MAX_DECODED:
                return out
            plain = dec(m.group(0))
            if plain:
                out.append((name, plain))
    tags = "".join(chr(ord(c) - 0xE0000) for run in _TAGS.findall(text) for c in run)
    if tags.strip():
        out.append(("tags", tags))
    return out


def views(text: str) -> list[tuple[str, str]]:
    """``[(name, text), ...]`` to match rules against: the skeleton first, then every decoded view."""
    skel = skeleton(text)
    out = [("text", skel)]
    for name, plain in _decoded(text):
        out.append((name, skeleton(plain)))
    derived = [
        ("rot13", codecs.decode(skel, "rot13")),
        ("leet", skel.translate(str.maketrans({**_LEET, "1": "i"}))),
        ("leet", skel.translate(str.maketrans({**_LEET, "1": "l"}))),
        ("spaced", _SPACED.sub(lambda m: re.sub(r"[ .·_-]", "", m.group(0)), skel)),
    ]
    seen = {skel}
    for name, view in derived:
        if view not in seen:
            seen.add(view)
            out.append((name, view))
    return out
