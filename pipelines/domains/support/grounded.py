"""Grounded write parameters: every argument of an action card is the user's words or the owner's record.

Each argument of a write tool has a *grounding kind* (:data:`ARG_KINDS`). A
value is grounded when either

* the user typed it in this session — its normalised tokens (NFKC, casefold,
  whitespace) appear, contiguously, in one of the session's user texts; for
  ``reason`` the content words may appear in another inflection ("I no longer
  need it" grounds ``no longer needed``); or
* it is a value of its kind in the authenticated user's own records
  (:class:`OwnerRecords`): their orders, the items in them, their payment
  methods, the addresses on file (profile and orders, field by field), and for
  ``new_item_id`` the available variants of the products they ordered.

Product names, help articles and tool text are never candidates: a value that
only appears there is refused. :func:`ungrounded_args` is pure and is what the
backend runs before a card is shown and again before it executes; the same
kinds give the candidates a decoder can offer as enums (:meth:`OwnerRecords.candidates`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .tools import TOOL_SPECS
from .world import Address, RetailWorld

__all__ = [
    "GroundingKind",
    "GROUNDING_KINDS",
    "ARG_KINDS",
    "OwnerRecords",
    "owner_records",
    "normalize",
    "tokens",
    "said",
    "ungrounded_args",
    "write_arg_kinds",
    "WRITE_ARG_KINDS",
]

GroundingKind = Literal[
    "order_id", "user_id", "item_id", "new_item_id", "payment_method_id",
    "address_line", "city", "state", "country", "zip", "reason",
]
GROUNDING_KINDS: tuple[str, ...] = GroundingKind.__args__  # type: ignore[attr-defined]

ARG_KINDS: dict[str, GroundingKind] = {
    "order_id": "order_id",
    "user_id": "user_id",
    "item_ids": "item_id",
    "new_item_ids": "new_item_id",
    "payment_method_id": "payment_method_id",
    "address1": "address_line",
    "address2": "address_line",
    "city": "city",
    "state": "state",
    "country": "country",
    "zip": "zip",
    "reason": "reason",
}
_LOOSE_KINDS = frozenset({"reason"})
_MAY_BE_EMPTY = frozenset({"address2"})  # a second address line is often empty, on file and in requests
_STEM = 4  # "need" ~ "needed", "mistake" ~ "mistakes"


def normalize(text: str) -> str:
    """NFKC, casefold, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def tokens(text: str) -> tuple[str, ...]:
    """The word tokens of the normalised text (punctuation such as ``#`` or ``,`` is not a token)."""
    return tuple(re.findall(r"\w+", normalize(text)))


def _contains(hay: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    n = len(needle)
    return any(hay[i : i + n] == needle for i in range(len(hay) - n + 1))


def _stem_match(a: str, b: str) -> bool:
    return a == b or (len(a) >= _STEM and len(b) >= _STEM and a[:_STEM] == b[:_STEM]
                      and (a.startswith(b) or b.startswith(a)))


def said(value: str, texts: Iterable[str], *, loose: bool = False) -> bool:
    """True when ``value`` is the user's own words in one of ``texts``.

    Strict: the value's tokens appear contiguously in one text. Loose (reason
    codes): every content word (4+ letters) of the value appears in one text,
    possibly inflected.
    """
    want = tokens(value)
    if not want:
        return False
    for text in texts:
        have = tokens(text)
        if _contains(have, want):
            return True
        if loose:
            content = [w for w in want if len(w) >= _STEM] or list(want)
            if all(any(_stem_match(w, h) for h in have) for w in content):
                return True
    return False


@dataclass(frozen=True)
class OwnerRecords:
    """Per grounding kind, the authenticated user's own values (as token tuples)."""

    user_id: str | None = None
    values: Mapping[str, frozenset[tuple[str, ...]]] = field(default_factory=dict)
    raw: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def has(self, kind: str, value: str) -> bool:
        """``value`` is one of the owner's values of ``kind``."""
        want = tokens(value)
        return bool(want) and want in self.values.get(kind, frozenset())

    def candidates(self, kind: str) -> tuple[str, ...]:
        """The owner's values of ``kind`` as stored (sorted; what a decoder may offer)."""
        return self.raw.get(kind, ())


def _address_parts(addresses: Iterable[Address]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"address_line": set(), "city": set(), "state": set(), "country": set(), "zip": set()}
    for a in addresses:
        out["address_line"].update(v for v in (a.address1, a.address2) if v)
        out["city"].add(a.city)
        out["state"].add(a.state)
        out["country"].add(a.country)
        out["zip"].add(a.zip)
    return out


def owner_records(world: RetailWorld, user_id: str | None) -> OwnerRecords:
    """The records of ``user_id`` in ``world`` (empty when unknown or ``None``)."""
    user = world.users.get(user_id) if user_id else None
    if user is None:
        return OwnerRecords(user_id=user_id)
    orders = [world.orders[o] for o in user.orders if o in world.orders]
    raw: dict[str, set[str]] = {
        "user_id": {user.user_id},
        "order_id": {o.order_id for o in orders},
        "item_id": {i.item_id for o in orders for i in o.items},
        "payment_method_id": set(user.payment_methods),
        "new_item_id": set(),
        "reason": set(),
    }
    for pid in {i.product_id for o in orders for i in o.items}:
        product = world.products.get(pid)
        if product is not None:
            raw["new_item_id"].update(v.item_id for v in product.variants.values() if v.available)
    raw.update(_address_parts([user.address, *(o.address for o in orders)]))
    return OwnerRecords(
        user_id=user.user_id,
        values={k: frozenset(tokens(v) for v in vs if tokens(v)) for k, vs in raw.items()},
        raw={k: tuple(sorted(vs)) for k, vs in raw.items()},
    )


def _values(arg: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, list | tuple):
        return [(f"{arg}[{i}]", str(v)) for i, v in enumerate(value)]
    return [(arg, "" if value is None else str(value))]


def ungrounded_args(
    args: Mapping[str, Any], user_texts: Sequence[str], records: OwnerRecords,
    kinds: Mapping[str, str] = ARG_KINDS,
) -> list[str]:
    """The arguments of ``args`` that are neither the user's words nor the owner's records.

    Names are ``arg`` or ``arg[i]`` for list elements. An argument without a
    grounding kind is ungrounded (a new argument must be given a kind); an empty
    value is grounded only for ``address2``.
    """
    out: list[str] = []
    for arg, value in args.items():
        kind = kinds.get(arg)
        for name, text in _values(arg, value):
            if kind is None:
                out.append(name)
                continue
            if not text.strip() and arg in _MAY_BE_EMPTY:
                continue
            if records.has(kind, text) or said(text, user_texts, loose=kind in _LOOSE_KINDS):
                continue
            out.append(name)
    return out


def write_arg_kinds() -> dict[str, dict[str, str]]:
    """Tool -> argument -> grounding kind, for every write tool (checked complete at import)."""
    out: dict[str, dict[str, str]] = {}
    for spec in TOOL_SPECS:
        if spec.kind != "write":
            continue
        fields = list(spec.args_model.model_fields)
        missing = [f for f in fields if f not in ARG_KINDS]
        if missing:
            raise ValueError(f"write tool {spec.name}: arguments {missing} have no grounding kind")
        out[spec.name] = {f: ARG_KINDS[f] for f in fields}
    return out


WRITE_ARG_KINDS: dict[str, dict[str, str]] = write_arg_kinds()
