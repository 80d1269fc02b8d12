"""The http_pack tools: a user lists their records and archives one, once, after their yes."""

import asyncio

from pipelines.domain import ToolSession
from tandem_http_pack.pack import DomainPack


def _tools():
    pack = DomainPack()
    return pack.tool_runner(pack.new_world(7), None)


def test_a_record_is_archived_once_after_the_yes():
    tools = _tools()
    user = next(iter(tools.world.users.values()))
    record = user.records[0]
    session = ToolSession(session_id="s", authenticated_user_id=user.user_id, user_texts=[record])
    listed = asyncio.run(tools.call("list_records", {"user_id": user.user_id}, session))
    assert listed.observation.ok and record in str(listed.observation.result)
    assert asyncio.run(tools.precheck("archive_record", {"record_id": record}, session)) is None
    confirmed = session.model_copy(update={"confirmed": True, "idempotency_key": "k1"})
    first = asyncio.run(tools.call("archive_record", {"record_id": record}, confirmed))
    again = asyncio.run(tools.call("archive_record", {"record_id": record}, confirmed))
    assert first.observation.ok and again.replayed and tools.world.records[record].status == "archived"


def test_someone_elses_record_is_refused():
    tools = _tools()
    a, b = list(tools.world.users.values())[:2]
    session = ToolSession(session_id="s", authenticated_user_id=a.user_id, user_texts=[b.records[0]])
    assert asyncio.run(tools.precheck("archive_record", {"record_id": b.records[0]}, session)) is not None
