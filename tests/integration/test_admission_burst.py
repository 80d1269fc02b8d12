"""A burst through the real proxy with auth on, into an ingress that admits by measured capacity: only 200s and
503s with Retry-After come back (``scripts/overload.py``'s burst, a small one), the refused turns stored nothing,
and a later burst admits more once turns have completed (the limit learned the box's rate)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from .conftest import start_app

pytestmark = pytest.mark.integration

KEY = "burst-key-0123456789"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("burst")
    yield from start_app(tmp, {
        "pipeline": {"kind": "prompting"},
        "auth": {"enabled": True, "keys": [{"id": "burst", "sha256": hashlib.sha256(KEY.encode()).hexdigest()}]},
        "ingress": {"max_ongoing_requests": 64, "max_queued_requests": 64,
                    "admission": {"mode": "adaptive", "target": 0.5, "initial_limit": 2}},
    })


def _burst(app, n: int):
    from scripts.overload import Clients, audit, burst

    async def go():
        clients = Clients(app.http, app.grpc, KEY, timeout_s=90)
        try:
            return await burst(clients, n, 60.0)
        finally:
            await clients.aclose()

    phase = asyncio.run(go())
    audit(Path(app.store_path), phase)
    return phase


def test_a_cold_burst_gets_only_answers_and_clean_refusals_then_the_limit_follows_the_box(app) -> None:
    first = _burst(app, 8)
    assert first.requests == 8 and first.other_errors == 0, first.other_error_kinds
    assert first.completed == 2 and first.clean_refusals == 6  # cold: the initial limit
    assert first.refusals_without_retry_after == 0 and first.lost_stored_turns == 0
    second = _burst(app, 8)  # two turns completed: the measured rate admits more
    assert second.other_errors == 0 and second.lost_stored_turns == 0, second.other_error_kinds
    assert second.completed > 2 and second.completed + second.clean_refusals == 8
