"""The conformance suite as test methods, for a pack's own tests (the model: fsspec's shared abstract tests).

::

    from pipelines.domains.testing import PackConformance

    class TestAirlineConformance(PackConformance):
        pack_name = "airline"          # an installed pack; or override make_pack()

Every check of :mod:`pipelines.domains.conformance` becomes one test method; a failure names its problems.
This module imports no test framework: plain ``assert`` and ``test_*`` methods, collected by pytest.
"""

from __future__ import annotations

from typing import Any

from . import load_domain
from .conformance import CHECKS

__all__ = ["PackConformance"]


class PackConformance:
    """Mix into a test class (named ``Test...``) and set :attr:`pack_name` (see module docstring)."""

    pack_name: str = ""
    pack_options: dict[str, Any] = {}

    def make_pack(self) -> Any:
        """The pack under test (default: the installed pack :attr:`pack_name`)."""
        return load_domain(self.pack_name, **self.pack_options)

    def _check(self, name: str) -> None:
        problems = CHECKS[name](self.make_pack())
        assert not problems, f"{name}: " + "; ".join(problems)

    def test_protocol(self) -> None:
        self._check("protocol")

    def test_labels(self) -> None:
        self._check("labels")

    def test_catalogue(self) -> None:
        self._check("catalogue")

    def test_grounding(self) -> None:
        self._check("grounding")

    def test_texts(self) -> None:
        self._check("texts")

    def test_tables(self) -> None:
        self._check("tables")

    def test_cards(self) -> None:
        self._check("cards")

    def test_session_facts(self) -> None:
        self._check("session facts")

    def test_determinism(self) -> None:
        self._check("determinism")

    def test_writes(self) -> None:
        self._check("writes")

    def test_confirmed_writes(self) -> None:
        self._check("confirmed writes")
