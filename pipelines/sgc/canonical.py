"""Canonical serialisation and stable seed derivation shared by the SGC kernels.

Replayability rests on two things here: a JSON form that is byte-identical for
equal values (sorted keys, no whitespace, no NaN), and seeds derived with
SHA-256 from strings, never from Python's salted :func:`hash`.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

__all__ = [
    "canonical_json",
    "stable_hash",
    "derive_seed",
    "session_seed",
    "derived_rng",
]


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):  # the fields a JSON dump writes, a set field sorted like any set
        return {k: _plain(getattr(value, k)) for k in value.model_dump(mode="json")}
    if isinstance(value, (set, frozenset)):
        items = [_plain(v) for v in value]
        try:
            return sorted(items)
        except TypeError:  # objects do not order: by their canonical text
            return sorted(items, key=canonical_json)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float)):
        return value
    return to_jsonable_python(value)  # dates, enums, paths…: their JSON form, as a JSON-mode dump writes it


def canonical_json(value: Any) -> str:
    """Serialise ``value`` (pydantic models, dicts, lists, sets) to canonical JSON text.

    Keys are sorted, separators carry no whitespace, non-ASCII is kept, and
    NaN / infinity are refused, so equal values give byte-identical strings.
    """
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def stable_hash(value: Any, *, length: int = 16) -> str:
    """Hex SHA-256 prefix of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:length]


def derive_seed(*parts: Any) -> int:
    """A 64-bit seed from ``parts`` (joined canonically and hashed with SHA-256)."""
    digest = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def session_seed(session_id: str) -> int:
    """The session RNG seed, fixed at session open from the session id."""
    return derive_seed("tandem.session", session_id)


def derived_rng(seed: int, *parts: Any) -> random.Random:
    """A fresh :class:`random.Random` for one use (e.g. one turn) under a session seed."""
    return random.Random(derive_seed(seed, *parts))
