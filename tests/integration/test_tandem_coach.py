"""A coach session through the tandem turn on the embedded app with the real model.

The same pipeline as the support world, the coach pack behind the Domain protocol: narration
streams before the reply; the delivered text never names a creature the user does not own;
W3 never issues the same guidance subject in consecutive turns; every logged decision (Φ
lookups, orchestrator steps, W3 picks) replays identically.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.integration.conftest import start_app

pytestmark = pytest.mark.integration

USER = "u001"
TEXTS = [
    "Who should I use against my next opponent?",
    "Can you teach me about type matchups?",
    "Thanks, that helps!",
    "Any other advice for this battle?",
]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    overrides = {"pipeline": {"kind": "tandem", "max_reply_tokens": 64, "turn_deadline_s": 300},
                 "domain": {"name": "coach", "seed": 7}}
    yield from start_app(tmp_path_factory.mktemp("tandem-coach"), overrides)


@pytest.fixture(scope="module")
def session(app) -> list[list[dict]]:
    return [app.turn("tandem-coach-1", text, user_id=USER) for text in TEXTS]


def _reply(events: list[dict]) -> str:
    return "".join(e["text"] for e in events if e["type"] == "reply.delta")


def test_narration_comes_first_and_every_turn_answers(session):
    for events in session:
        kinds = [e["type"] for e in events]
        assert events[-1]["status"] in ("ok", "fallback") and events[-1]["pipeline"] == "tandem"
        assert "narration.delta" in kinds and "reply.delta" in kinds
        assert kinds.index("narration.delta") < kinds.index("reply.delta")


def test_no_unowned_creature_is_delivered(session):
    from pipelines.domains.coach import generate_coach_world

    world = generate_coach_world(7)
    owned = {c.species for c in world.users[USER].creatures}
    unowned = set(world.species) - owned
    opponents = {m.species for o in world.opponents.values() for m in o.team}  # may be named as the rival's team
    for events in session:
        named = {s for s in unowned if re.search(rf"(?<![A-Za-z]){re.escape(s)}(?![A-Za-z])", _reply(events))}
        assert not (named - opponents), (named, _reply(events))


def test_w3_never_repeats_a_subject_in_consecutive_turns_and_decisions_replay(app, session):
    import httpx

    from serve.replay import replay_session
    from serve.stores.sqlite import SQLiteSessionStore

    turns = httpx.get(f"{app.http}/v1/sessions/tandem-coach-1", timeout=30).json()["turns"]
    picks = [t["meta"]["w3"].get("subject_id") for t in turns if t["meta"].get("w3")]
    assert picks
    for a, b in zip(picks, picks[1:], strict=False):
        assert a is None or a != b
    rows = asyncio.run(replay_session("tandem-coach-1", SQLiteSessionStore(app.store_path), app.telemetry,
                                     domain="coach"))
    assert rows and all(r["identical"] for r in rows), rows
    assert {r["kind"] for r in rows} >= {"tandem", "w3"}
