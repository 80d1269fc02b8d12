"""A pack written from ``docs/domains.md`` alone (library lending: loans, renewals, holds, in
``tests/fixtures/library_pack``): it passes the conformance suite, its own tests, and runs the tandem turn in
process (scripted models, the real tool port): a renewal is offered as a card and runs once on the yes. The
same pack on the real model: ``tests/integration/test_library_pack.py``."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import domains
from pipelines.domain import LocalToolRunner
from pipelines.domains.conformance import check_pack

from .. import doubles
from .harnesses import TandemHarness

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "tests" / "fixtures" / "library_pack"


@pytest.fixture
def library():
    """The pack importable from its folder and registered in this process (no install)."""
    sys.path.insert(0, str(PACK))
    try:
        module = importlib.import_module("tandem_library.pack")
        domains.register("library", module.DomainPack)
        yield module.DomainPack
    finally:
        domains.unregister("library")
        sys.path.remove(str(PACK))
        for mod in [m for m in sys.modules if m == "tandem_library" or m.startswith("tandem_library.")]:
            del sys.modules[mod]


def test_the_pack_passes_every_check(library) -> None:
    assert [r for r in check_pack(library()) if not r.ok] == []


def test_the_packs_own_tests_pass() -> None:
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=PACK,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout


def test_a_renewal_is_offered_as_a_card_and_runs_once_on_the_yes(library) -> None:
    pack = library()
    tools = LocalToolRunner(pack, pack.new_world(7))
    h = TandemHarness("library", tools=tools, user_id="m001")
    r = h.turn("Please renew my loan L0001.", orch=[doubles.w1("loans", "renew", "Let me look at your loans."),
                                                   doubles.j(decision="action", card_id="card.renew_loan",
                                                             params={"loan_id": "L0001"})])
    cards = r.of("action_card")
    assert [(c.card_id, c.params) for c in cards] == [("card.renew_loan", {"loan_id": "L0001"})], h.meta
    assert tools.world.loans["L0001"].renewals == 0
    r = h.turn("yes")
    said = "".join(e.text for e in r.events if e.type == "reply.delta")
    assert tools.world.loans["L0001"].renewals == 1 and "renewed" in said, said
