"""The backend's grounding check of write arguments: the user's words or the owner's records, nothing else.

The same kinds and candidate semantics as the decode-time enums
(:mod:`pipelines.grounding`, :data:`.candidates.ARG_KINDS`), computed where the
world lives — the tools deployment — so the check holds whatever the pipeline
offered. A value of a write argument is grounded when

* it is a candidate of its kind in the authenticated user's own records, read
  from the world store (:func:`owner_candidates`): their user id, orders, the
  items and products of those orders, their payment methods, the addresses on
  file (profile and orders, field by field), the available variants of the
  products they ordered (``new_item_id``), and the domain's fixed vocabularies
  (cancellation reasons); or
* it is the user's own words: it appears, as whole words after normalisation
  (NFKC, casefold, whitespace, edge punctuation), in one of the session's user
  texts (:func:`pipelines.grounding.appears_in`), or as the user says it (a state's
  code by its name: :func:`.candidates.said_as`).

Product names, help articles and tool text are never candidates: a value that
only appears there is refused. :func:`ungrounded_args` is pure; the tool runner
calls it before a card is shown (precheck) and again before the write runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipelines.grounding import CandidateSet, appears_in, ungrounded

from .candidates import ARG_KINDS, FIXED_CANDIDATES, OPTIONAL_EMPTY, said_as
from .tools import TOOL_SPECS
from .world import Address, RetailWorld

__all__ = ["WRITE_ARG_KINDS", "owner_candidates", "ungrounded_args"]


def _write_arg_kinds() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for spec in TOOL_SPECS:
        if spec.kind != "write":
            continue
        kinds = ARG_KINDS.get(spec.name, {})
        missing = [f for f in spec.args_model.model_fields if f not in kinds]
        if missing:
            raise ValueError(f"write tool {spec.name}: arguments {missing} have no grounding kind")
        out[spec.name] = dict(kinds)
    return out


WRITE_ARG_KINDS: dict[str, dict[str, str]] = _write_arg_kinds()  # every write argument has a kind


_ADDRESS_KINDS = {f: k for f, k in ARG_KINDS["modify_user_address"].items() if f != "user_id"}


def _addresses(c: CandidateSet, addresses: Sequence[Address]) -> None:
    for a in addresses:
        for field, kind in _ADDRESS_KINDS.items():
            c.add(kind, getattr(a, field), "record")


def owner_candidates(world: RetailWorld, user_id: str | None) -> CandidateSet:
    """The record candidates of ``user_id`` in ``world``, plus the fixed vocabularies (empty user: fixed only)."""
    c = CandidateSet()
    for kind, values in FIXED_CANDIDATES.items():
        for v in values:
            c.add(kind, v, "record")
    user = world.users.get(user_id) if user_id else None
    if user is None:
        return c
    orders = [world.orders[o] for o in user.orders if o in world.orders]
    c.add("user_id", user.user_id, "record")
    for order in orders:
        c.add("order_id", order.order_id, "record")
        for item in order.items:
            c.add("item_id", item.item_id, "record")
            c.add("product_id", item.product_id, "record")
    for pm in user.payment_methods:
        c.add("payment_method_id", pm, "record")
    _addresses(c, [user.address, *(o.address for o in orders)])
    for pid in sorted({i.product_id for o in orders for i in o.items}):
        product = world.products.get(pid)
        if product is not None:
            for vid, variant in product.variants.items():
                if variant.available:
                    c.add("new_item_id", vid, "record")
    return c


def ungrounded_args(
    tool: str, args: Mapping[str, Any], user_texts: Sequence[str], candidates: CandidateSet,
) -> list[str]:
    """Names of the arguments of a write ``tool`` that are neither the owner's records nor the user's words.

    An argument of a write tool without a grounding kind is ungrounded; an
    empty value is grounded only where the pack allows it (``address2``).
    """
    kinds = WRITE_ARG_KINDS.get(tool, ARG_KINDS.get(tool, {}))
    bad = [name for name in args if name not in kinds]
    for name, value in ungrounded(args, kinds, candidates, optional_empty=OPTIONAL_EMPTY.get(tool, ())):
        said = [value, *said_as(kinds.get(name, ""), value)]
        if not any(appears_in(v, user_texts) for v in said) and name not in bad:
            bad.append(name)
    return bad
