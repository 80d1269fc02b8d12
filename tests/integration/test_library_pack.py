"""A pack written from ``docs/domains.md`` alone (library lending, ``tests/fixtures/library_pack``), installed
outside the environment and served on the real embedded model: a member asks to renew a loan, the turn
streams its narration and reply and offers the renewal as a card, and the member's "yes" runs the write once.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import start_app

pytestmark = pytest.mark.integration

PACK = Path(__file__).resolve().parents[1] / "fixtures" / "library_pack"
SESSION = "library-m001"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("library-src") / "library_pack"
    shutil.copytree(PACK, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    site = tmp_path_factory.mktemp("library-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(src)], check=True, capture_output=True, timeout=600)
    assert (site / "tandem_library" / "pack.py").is_file()
    return site


@pytest.fixture(scope="module")
def app(installed: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("library-serve")
    overrides = {"pipeline": {"kind": "tandem", "turn_deadline_s": 300},
                 "domain": {"name": "library", "seed": 7, "paths": [str(installed)],
                            "world_path": str(tmp / "world.db")}}
    for running in start_app(tmp, overrides):
        running.turn("library-warm-up", "hello", user_id="m002")  # compiles the W1 grammar and decision schemas
        yield running


def _loan(app, loan_id: str) -> dict:
    from ray import serve

    return serve.get_deployment_handle("ToolsServer", app_name=app.app_name).entity.remote("loan", loan_id).result()


def _why(app, events: list[dict]) -> str:
    """What the turn decided (its stored meta) and said, for a failed assertion."""
    import httpx

    meta = httpx.get(f"{app.http}/v1/sessions/{SESSION}", timeout=30).json()["turns"][-1]["meta"].get("tandem", {})
    said = "".join(e.get("text", "") for e in events if e["type"] in ("narration.delta", "reply.delta"))
    return f"c1={meta.get('c1')} phi={meta.get('phi')} path={meta.get('path')} said={said!r}"


def test_a_member_renews_a_loan_through_a_card_and_a_yes(app) -> None:
    assert _loan(app, "L0001")["renewals"] == 0
    events = app.turn(SESSION, "Please renew my loan L0001.", user_id="m001")
    kinds = [e["type"] for e in events]
    assert events[-1]["status"] == "ok" and "error" not in kinds, events
    assert "narration.delta" in kinds and "reply.delta" in kinds
    assert kinds.index("narration.delta") < kinds.index("reply.delta")  # streamed: the narration first
    cards = [e for e in events if e["type"] == "action_card"]
    assert len(cards) == 1 and cards[0]["card_id"] == "card.renew_loan", _why(app, events)
    assert cards[0]["params"] == {"loan_id": "L0001"}
    assert _loan(app, "L0001")["renewals"] == 0  # a card changes nothing before the yes

    events = app.turn(SESSION, "yes", user_id="m001")
    assert events[-1]["status"] == "ok", events
    loan = _loan(app, "L0001")
    assert loan["renewals"] == 1 and loan["due"] > "2026-03-02"
    assert "renewed" in "".join(e["text"] for e in events if e["type"] == "reply.delta")
