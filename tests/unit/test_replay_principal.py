"""serve.replay: ``--principal`` makes the operator tool answer like a session route."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pipelines.protocols import TurnRecord
from serve.replay import replay_session
from serve.stores.sqlite import SQLiteSessionStore


def test_replay_for_another_principal_reads_as_unknown(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    rec = TurnRecord(turn_id="t1", index=0, user_text="hi", pipeline="prompting")
    asyncio.run(store.save_turn("s", rec, principal="alice"))
    assert asyncio.run(replay_session("s", store, tmp_path, "alice", domain="support")) == []  # no dr / w3 decisions to replay
    assert asyncio.run(replay_session("s", store, tmp_path, domain="support")) == []  # the operator without a principal
    with pytest.raises(LookupError, match="no stored turns"):
        asyncio.run(replay_session("s", store, tmp_path, "bob", domain="support"))
    with pytest.raises(LookupError):
        asyncio.run(replay_session("nobody", store, tmp_path, "alice", domain="support"))
