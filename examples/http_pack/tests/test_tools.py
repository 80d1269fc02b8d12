"""The http_pack tools against its records service on a local port: reads, a write sent exactly once,
and every failure a refusal with its reason (the turn goes on)."""

import asyncio
import socket

import pytest
from tandem_http_pack.pack import DomainPack

from pipelines.domain import MemoryLedger, ToolSession, UnconfirmedWrite


def _tools(url: str, **options):
    pack = DomainPack(base_url=url, **options)
    return pack, pack.tool_runner(pack.new_world(7), MemoryLedger())


def _call(tools, name, args, session):
    return asyncio.run(tools.call(name, args, session))


def test_a_user_lists_their_records(records_service) -> None:
    url, state = records_service
    _, tools = _tools(url)
    listed = _call(tools, "list_records", {"user_id": "u001"}, ToolSession(authenticated_user_id="u001"))
    assert listed.observation.ok
    assert [r["record_id"] for r in listed.observation.result["records"]] == state.owners["u001"]
    assert all(r["status"] == "active" for r in listed.observation.result["records"])


def test_a_record_is_archived_once_after_the_yes(records_service) -> None:
    url, state = records_service
    _, tools = _tools(url)
    record = state.owners["u001"][0]
    session = ToolSession(session_id="s", authenticated_user_id="u001", user_texts=[record])
    assert asyncio.run(tools.precheck("archive_record", {"record_id": record}, session)) is None
    assert state.applied == 0  # a precheck reads, it never writes
    with pytest.raises(UnconfirmedWrite):  # Tandem's tool port: never sent before the user's yes to its card
        _call(tools, "archive_record", {"record_id": record}, session.model_copy(update={"idempotency_key": "k0"}))
    assert state.applied == 0 and not state.answered
    confirmed = session.confirm("archive_record", {"record_id": record}, "k1")  # the user's yes to this card
    first = _call(tools, "archive_record", {"record_id": record}, confirmed)
    again = _call(tools, "archive_record", {"record_id": record}, confirmed)
    assert first.observation.ok and first.observation.result["status"] == "archived"
    assert again.replayed and again.observation == first.observation
    assert state.applied == 1 and state.records[record]["status"] == "archived"
    assert list(state.answered) == ["k1"]  # the write reached the service once, with its key


def test_the_service_deduplicates_a_key_it_has_seen(records_service) -> None:
    """The same key sent again (a restart that lost its ledger): the service applies the change once and
    answers the same again."""
    url, state = records_service
    record = state.owners["u002"][0]
    with DomainPack(base_url=url).backend() as one, DomainPack(base_url=url).backend() as two:
        first = one.write(f"/records/{record}/archive", json={"user_id": "u002"}, idempotency_key="same-key")
        second = two.write(f"/records/{record}/archive", json={"user_id": "u002"}, idempotency_key="same-key")
    assert first == second == {"record_id": record, "title": state.records[record]["title"], "status": "archived"}
    assert state.applied == 1


def test_what_the_service_refuses_is_a_refusal_with_its_reason(records_service) -> None:
    url, state = records_service
    _, tools = _tools(url)
    mine, theirs = state.owners["u001"][0], state.owners["u002"][0]
    session = ToolSession(session_id="s", authenticated_user_id="u001", user_texts=[mine, theirs])
    assert asyncio.run(tools.precheck("archive_record", {"record_id": theirs}, session)) == "not_owned"
    state.records[mine]["status"] = "archived"
    assert asyncio.run(tools.precheck("archive_record", {"record_id": mine}, session)) == "not_active"
    missing = _call(tools, "list_records", {"user_id": "u001"}, ToolSession(authenticated_user_id="u001"))
    assert missing.observation.ok
    nobody = _call(tools, "list_records", {"user_id": "u999"}, ToolSession(authenticated_user_id="u999"))
    assert not nobody.observation.ok and nobody.reason == "user_not_found"
    assert nobody.observation.error_code == "tool_error"


def test_a_service_that_is_down_is_a_failed_observation_not_a_crash() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pack, tools = _tools(f"http://127.0.0.1:{port}", backoff_s=0.0)
    listed = _call(tools, "list_records", {"user_id": "u001"}, ToolSession(authenticated_user_id="u001"))
    assert not listed.observation.ok and listed.reason == "backend_unreachable"
    assert listed.observation.error_code == "tool_error"
    assert pack.texts.refusals["backend_unreachable"]
    session = ToolSession(session_id="s", authenticated_user_id="u001", user_texts=["R0001"])
    assert asyncio.run(tools.precheck("archive_record", {"record_id": "R0001"}, session)) == "backend_unreachable"
