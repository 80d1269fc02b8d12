"""The tools deployment's class over the coach pack, in process (no Ray): the tool port the tandem turn calls."""

from __future__ import annotations

import asyncio

from pipelines.core.ports import ToolSession
from serve.deployments.tools import ToolsServer


def test_a_bound_session_reads_its_players_inventory_through_the_port():
    server = ToolsServer({"name": "coach", "seed": 7})

    async def go():
        uid = await server.bind_user("s1", "u001")
        res = await server.call("get_inventory", {"user_id": uid}, ToolSession(session_id="s1"))
        return uid, res

    uid, res = asyncio.run(go())
    assert uid == "u001"
    assert res.observation.ok and res.reason is None
    owned = {c.species for c in server.runner.world.users["u001"].creatures}
    assert owned and all(s in str(res.observation.result) for s in owned)
    assert server.runner.calls[-1] == ("get_inventory", {"user_id": "u001"}, "s1")


def test_precheck_allows_everything_the_coach_has_no_writes():
    server = ToolsServer({"name": "coach", "seed": 7})
    assert asyncio.run(server.precheck("get_inventory", {}, ToolSession(session_id="s1"))) is None


def test_a_pack_without_live_state_refuses_a_live_state_call_with_a_typed_error(tmp_path):
    import pytest

    from pipelines.errors import ToolError

    server = ToolsServer({"name": "support", "seed": 7, "world_path": str(tmp_path / "w.db")})
    with pytest.raises(ToolError):
        asyncio.run(server.load_state("s1", ["user_id"]))
    assert asyncio.run(server.entity("order", "#W0000000")) is None


def test_a_resettable_world_goes_back_to_its_seed_and_any_other_refuses(tmp_path):
    import pytest

    from pipelines.errors import ToolError

    path = str(tmp_path / "w.db")
    server = ToolsServer({"name": "support", "seed": 7, "world_path": path, "resettable": True})
    oid = next(o for o, order in server.runner.world.orders.items() if order.status == "pending")
    server.runner.world.orders[oid].status = "cancelled"  # a write since the seed, in memory and stored
    server.store.save(server.runner.world)
    assert asyncio.run(server.entity("order", oid))["status"] == "cancelled"
    assert asyncio.run(server.reset_world()) == "generated:7"
    assert asyncio.run(server.entity("order", oid))["status"] == "pending"
    again = ToolsServer({"name": "support", "seed": 7, "world_path": path})  # the store holds the seed too
    assert asyncio.run(again.entity("order", oid))["status"] == "pending"
    with pytest.raises(ToolError) as err:
        asyncio.run(again.reset_world())
    assert err.value.details == {"reason": "not_resettable"}
