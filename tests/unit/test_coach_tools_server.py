"""The coach tools deployment's class in process (no Ray): the tool port the tandem turn calls."""

from __future__ import annotations

import asyncio

from pipelines.core.ports import ToolSession
from serve.deployments.coach import CoachToolsServer


def test_a_bound_session_reads_its_players_inventory_through_the_port():
    server = CoachToolsServer({"name": "coach", "seed": 7})

    async def go():
        uid = await server.ensure_bound("s1", "u001")
        res = await server.call("get_inventory", {"user_id": uid}, ToolSession(session_id="s1"))
        return uid, res

    uid, res = asyncio.run(go())
    assert uid == "u001"
    assert res.observation.ok and res.reason is None
    owned = {c.species for c in server.world.users["u001"].creatures}
    assert owned and all(s in str(res.observation.result) for s in owned)
    assert server.local.calls[-1] == ("get_inventory", {"user_id": "u001"}, "s1")


def test_precheck_allows_everything_the_coach_has_no_writes():
    server = CoachToolsServer({"name": "coach", "seed": 7})
    assert asyncio.run(server.precheck("get_inventory", {}, ToolSession(session_id="s1"))) is None
