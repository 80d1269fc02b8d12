"""Ids for entities a write creates (a new booking, a new voucher), allocated deterministically.

A pack names the first id of its sequence; :func:`allocate` returns the first id of the sequence the
world does not hold yet. :func:`successor` counts up the id's last letter or digit in its own class
(``0-9``, ``A-Z``, ``a-z``), carrying to the left like an odometer; other characters stay
(``ABC09`` → ``ABC10``, ``AZZ`` → ``BAA``, ``cert_19`` → ``cert_20``). The same world and start give the
same id, so a replay of the same writes allocates the same ids.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["successor", "allocate"]

_CLASSES = ("0123456789", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _class_of(ch: str) -> str | None:
    return next((c for c in _CLASSES if ch in c), None)


def successor(value: str) -> str:
    """The next id after ``value`` (see module docstring); ``ValueError`` when it has no letter or digit
    or every position has rolled over."""
    chars = list(value)
    for i in range(len(chars) - 1, -1, -1):
        alphabet = _class_of(chars[i])
        if alphabet is None:
            if any(_class_of(c) for c in chars[:i]):
                continue
            break
        pos = alphabet.index(chars[i])
        if pos + 1 < len(alphabet):
            chars[i] = alphabet[pos + 1]
            return "".join(chars)
        chars[i] = alphabet[0]
    raise ValueError(f"no successor of {value!r}: the sequence is exhausted")


def allocate(start: str, taken: Callable[[str], bool], *, limit: int = 100_000) -> str:
    """The first id from ``start`` on (``start`` included) that ``taken`` does not hold."""
    value = start
    for _ in range(limit):
        if not taken(value):
            return value
        value = successor(value)
    raise ValueError(f"no free id within {limit} of {start!r}")
