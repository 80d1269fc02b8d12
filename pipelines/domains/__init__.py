"""Domain packs, found by name among the installed distributions' entry points (group ``tandem.domains``).

A pack is a distribution that declares, in its own ``pyproject.toml``::

    [project.entry-points."tandem.domains"]
    airline = "tandem_airline.pack:DomainPack"

and whose target builds an object behind the :class:`~pipelines.domain.Domain` protocol. The built-in
``support`` and ``coach`` packs register the same way, through this project's entry points; nothing
here names them. ``domain.name`` in a config resolves through :func:`load_domain`, and an unknown name
is refused with the installed names listed. :func:`register` adds a pack in process (tests, notebooks)
without installing a distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pipelines.core.kernels import load_bundle, tables_holder

__all__ = ["GROUP", "pack_names", "pack_factory", "load_domain", "register", "unregister", "rule_tables_holder",
           "load_rule_bundle", "UnknownDomain"]

GROUP = "tandem.domains"
_REGISTERED: dict[str, Callable[..., Any]] = {}


class UnknownDomain(ValueError):
    """No installed or registered pack has that name."""


def _installed() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def pack_names() -> list[str]:
    """The names of every pack this process can load (installed, or registered in process)."""
    return sorted(set(_installed()) | set(_REGISTERED))


def pack_factory(name: str) -> Callable[..., Any]:
    """What builds the pack ``name`` (raises :class:`UnknownDomain`, listing the known names)."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    ep = _installed().get(name)
    if ep is None:
        raise UnknownDomain(f"unknown domain {name!r}; installed packs: {', '.join(pack_names()) or 'none'}")
    return ep.load()  # type: ignore[no-any-return]


def load_domain(name: str, **options: Any) -> Any:
    """A fresh pack for ``name`` (``options``: the pack's own constructor options)."""
    return pack_factory(name)(**options)


def register(name: str, factory: Callable[..., Any]) -> None:
    """Make ``name`` load ``factory`` in this process (before any installed pack of the same name)."""
    _REGISTERED[name] = factory


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def rule_tables_holder(name: str) -> Any:
    """A hot-reload holder primed with the pack's packaged rule tables (checked against its labels)."""
    return tables_holder(load_domain(name))


def load_rule_bundle(name: str, data: Any | None = None) -> Any:
    """Validate a rule bundle (a ``user_config``'s rules; default: the packaged one) against the pack."""
    pack = load_domain(name)
    return load_bundle(pack, pack.rule_tables() if data is None else data)
