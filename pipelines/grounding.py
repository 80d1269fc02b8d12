"""Grounded candidates: the only values a tool or card argument may take.

Every argument of a tool or an action card carries a *grounding kind* (for the
support pack: ``email``, ``first_name``, ``zip``, ``order_id``, ``item_id``,
``payment_method_id``, ``reason``…). Per turn, the session's candidates for
each kind come from two sources only:

* ``user`` — what the user typed in this session, found by the domain's
  deterministic extractors (and by the slot model, whose proposals are kept only
  when they occur in the user's own words);
* ``record`` — values observed in the authenticated user's own records (their
  orders, items, payment methods, addresses on file), plus the domain's fixed
  vocabularies (reason codes).

World text that is not the user's own record never becomes a candidate.

Two uses, one set:

* decode time — :func:`constrain_args` turns a tool's argument schema into one
  whose grounded arguments are enums of the candidates of their kind (a tool
  whose required argument has no candidate is not offered at all);
* the backend — :func:`ungrounded` re-checks every argument before a card is
  shown and before a write executes (the decoding constraint is a speed-up; this
  check is the guarantee).

Values are compared after :func:`normalize_value` (NFKC, case-folded,
whitespace collapsed, surrounding punctuation dropped).

An argument that is a list of objects (a booking's passengers, its flights) is grounded field by field:
its kinds are keyed by path, ``passengers[].first_name`` (:func:`nested_path`), and every item's field
must be a candidate of that kind.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Source",
    "CandidateSet",
    "normalize_value",
    "appears_in",
    "constrain_args",
    "ungrounded",
    "MAX_ENUM",
    "nested_path",
    "split_path",
]

Source = Literal["user", "record"]
MAX_ENUM = 24  # an enum longer than this is cut (newest first): the decoding schema stays small
_WS = re.compile(r"\s+")
_EDGE = " \t\r\n.,;:!?\"'()[]{}"


def normalize_value(value: Any) -> str:
    """The comparable form of a value: NFKC, case-folded, whitespace collapsed, edge punctuation dropped."""
    text = unicodedata.normalize("NFKC", str(value)).casefold()
    return _WS.sub(" ", text).strip(_EDGE)


@functools.lru_cache(maxsize=4096)
def _mention(needle: str) -> re.Pattern[str]:
    """A whole-word mention of a normalised value: not right after a letter and an apostrophe (a contraction's
    tail: "I'm" names no size M)."""
    return re.compile(r"(?<![\w])(?<!\w['’])" + re.escape(needle) + r"(?![\w])")


def mention_end(value: str, text: str) -> int | None:
    """Where the first mention of ``value`` in ``text`` ends (offsets of the normalised text), or None; a mention
    is as :func:`appears_in` reads one."""
    needle = normalize_value(value)
    m = _mention(needle).search(normalize_value(text)) if needle else None
    return None if m is None else m.end()


def appears_in(value: str, texts: Iterable[str]) -> bool:
    """True when ``value`` occurs in one of ``texts`` as whole words (after normalisation); a word right after a
    letter and an apostrophe is a contraction's tail, not a value ("I'm" names no size M, "it's" no size S), a
    quoted one still names ("the 'blue' one")."""
    needle = normalize_value(value)
    if not needle:
        return False
    rx = _mention(needle)
    return any(rx.search(normalize_value(t)) for t in texts)


class CandidateSet(BaseModel):
    """Kind → ordered candidate values, each with its source (JSON round-trips through turn metas)."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, list[str]] = Field(default_factory=dict)
    sources: dict[str, dict[str, Source]] = Field(default_factory=dict)

    def add(self, kind: str, value: Any, source: Source) -> None:
        """Add one value (first source wins; empty values are ignored)."""
        text = str(value).strip()
        if not text:
            return
        seen = self.values.setdefault(kind, [])
        norm = normalize_value(text)
        if any(normalize_value(v) == norm for v in seen):
            return
        seen.append(text)
        self.sources.setdefault(kind, {})[text] = source

    def add_all(self, found: Mapping[str, Iterable[Any]], source: Source) -> None:
        for kind, vals in found.items():
            for v in vals:
                self.add(kind, v, source)

    def merged(self, other: CandidateSet) -> CandidateSet:
        out = self.model_copy(deep=True)
        for kind, vals in other.values.items():
            for v in vals:
                out.add(kind, v, other.sources.get(kind, {}).get(v, "user"))
        return out

    def of(self, kind: str) -> list[str]:
        """The candidates of ``kind``, newest last (empty when none)."""
        return list(self.values.get(kind, []))

    def has(self, kind: str) -> bool:
        return bool(self.values.get(kind))

    def contains(self, kind: str, value: Any) -> bool:
        norm = normalize_value(value)
        return any(normalize_value(v) == norm for v in self.values.get(kind, []))

    def source_of(self, kind: str, value: Any) -> Source | None:
        norm = normalize_value(value)
        for v, src in self.sources.get(kind, {}).items():
            if normalize_value(v) == norm:
                return src
        return None

    def kinds(self) -> list[str]:
        return sorted(k for k, v in self.values.items() if v)

    def keep(self, kind: str, values: Iterable[Any]) -> None:
        """Narrow ``kind`` to the candidates among ``values`` (order kept; the others are dropped)."""
        wanted = {normalize_value(v) for v in values}
        kept = [v for v in self.values.get(kind, []) if normalize_value(v) in wanted]
        if kind in self.values:
            self.values[kind] = kept
            self.sources[kind] = {v: src for v, src in self.sources.get(kind, {}).items() if v in kept}


def nested_path(argument: str, field: str) -> str:
    """The grounding key of ``field`` in each item of the list argument ``argument``."""
    return f"{argument}[].{field}"


def split_path(key: str) -> tuple[str, str | None]:
    """``passengers[].dob`` → ``("passengers", "dob")``; a plain argument → ``(name, None)``."""
    if "[]." in key:
        base, field = key.split("[].", 1)
        return base, field
    return key, None


def _item_schema(prop: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any] | None:
    items = prop.get("items")
    if not isinstance(items, Mapping):
        return None
    ref = items.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        items = defs.get(ref.rsplit("/", 1)[1], {})
    return dict(items) if isinstance(items, Mapping) and "properties" in items else None


def _enum(values: list[str]) -> dict[str, Any]:
    return {"enum": list(dict.fromkeys(values[-MAX_ENUM:]))}


def constrain_args(
    args_schema: Mapping[str, Any],
    kinds: Mapping[str, str],
    candidates: CandidateSet,
    *,
    optional_empty: Iterable[str] = (),
) -> dict[str, Any] | None:
    """``args_schema`` with each grounded argument replaced by an enum of its kind's candidates.

    ``kinds`` maps argument name → grounding kind (arguments not listed keep their
    schema: non-grounded constants such as a result limit). An array argument
    becomes an array of that enum (1 to as many items as there are candidates).
    ``optional_empty`` names arguments that may also be the empty string (an
    optional address line). Returns ``None`` when a required grounded argument
    has no candidate — the tool or card is then not offered.
    """
    props = dict(args_schema.get("properties", {}))
    required = set(args_schema.get("required", []))
    blank = set(optional_empty)
    defs = args_schema.get("$defs", {})
    for key, kind in kinds.items():
        base, field = split_path(key)
        if field is None or base not in props:
            continue
        item = _item_schema(props[base], defs)
        if item is None or field not in item["properties"]:
            continue
        vals = candidates.of(kind)
        if not vals:
            if base in required:
                return None
            props.pop(base)
            continue
        item["properties"] = dict(item["properties"], **{field: _enum(vals)})
        item["additionalProperties"] = False
        props[base] = dict(props[base], items=item)
    for name, kind in kinds.items():
        if "[]." in name or name not in props:
            continue
        vals = candidates.of(kind)
        if name in blank:
            vals = vals + [""]
        if not vals:
            if name in required:
                return None
            props.pop(name)
            continue
        if props[name].get("type") == "array":
            n = min(len(set(vals)), 4)
            props[name] = {"type": "array", "items": _enum(vals), "minItems": 1, "maxItems": n}
        else:
            props[name] = _enum(vals)
    out = {k: v for k, v in args_schema.items() if k not in ("properties", "required")}
    out["type"] = "object"
    out["properties"] = props
    out["required"] = [r for r in args_schema.get("required", []) if r in props]
    out["additionalProperties"] = False
    return out


def ungrounded(
    args: Mapping[str, Any],
    kinds: Mapping[str, str],
    candidates: CandidateSet,
    *,
    optional_empty: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """The ``(argument, value)`` pairs of ``args`` that are not candidates of their kind (empty: grounded)."""
    bad: list[tuple[str, str]] = []
    blank = set(optional_empty)
    for name, kind in kinds.items():
        base, field = split_path(name)
        if base not in args:
            continue
        value = args[base]
        if field is not None:
            rows = value if isinstance(value, list | tuple) else [value]
            for row in rows:
                v = row.get(field) if isinstance(row, Mapping) else None
                if v is None or not candidates.contains(kind, v):
                    bad.append((name, "" if v is None else str(v)))
            continue
        items = value if isinstance(value, list | tuple) else [value]
        for v in items:
            if name in blank and str(v).strip() == "":
                continue
            if not candidates.contains(kind, v):
                bad.append((name, str(v)))
    return bad
