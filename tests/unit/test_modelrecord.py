"""Model calls in the event log: the fingerprint, the masked values kept as enum indices, the recording client."""

from __future__ import annotations

import asyncio
import json

from pipelines.core.modelrecord import (
    RecordingModels,
    bind_turn,
    call_key,
    call_slot,
    picks,
    unpick,
)
from pipelines.protocols import ChatMessage, ModelCall, StructuredOutput
from tests.doubles import ScriptModels

SCHEMA = {"anyOf": [
    {"type": "object", "properties": {"decision": {"const": "action"}, "card_id": {"const": "card.modify_address"},
                                      "params": {"type": "object", "properties": {
                                          "city": {"enum": ["Austin", "Springfield"]}, "zip": {"enum": ["94107"]},
                                          "state": {"enum": ["CA"]}}}}},
    {"type": "object", "properties": {"decision": {"const": "respond"}}},
]}
SYSTEM = ChatMessage(role="system", content="You decide one step.")
CALL = ModelCall(messages=[SYSTEM, ChatMessage(role="user", content="move it")], max_tokens=64,
                 structured_output=StructuredOutput(kind="json", spec=SCHEMA))


def test_the_fingerprint_is_what_shapes_the_output_and_nothing_else():
    assert call_key("orchestrator", CALL) == call_key("orchestrator", CALL.model_copy(update={"priority": -1}))
    assert call_key("orchestrator", CALL) != call_key("generator", CALL)
    other = CALL.model_copy(update={"messages": [SYSTEM, ChatMessage(role="user", content="move it now")]})
    assert call_key("orchestrator", CALL) != call_key("orchestrator", other)
    assert call_slot("orchestrator", CALL) == call_slot("orchestrator", other)  # the same kind of call
    assert call_slot("orchestrator", CALL) != call_slot("orchestrator", CALL.model_copy(update={"max_tokens": 8}))


def test_masked_values_are_kept_as_their_enum_index_and_put_back():
    out = json.dumps({"decision": "action", "card_id": "card.modify_address",
                      "params": {"city": "Springfield", "zip": "94107", "state": "CA"}})
    chosen = picks(out, CALL)
    assert chosen == {'["params", "city"]': 1, '["params", "zip"]': 0}  # city and zip are masked in logs; state is not
    logged = out.replace("Springfield", "[REDACTED]").replace("94107", "[REDACTED]")
    assert json.loads(unpick(logged, chosen, CALL)) == json.loads(out)
    assert picks('{"decision": "respond"}', CALL) == {}  # nothing masked
    free = CALL.model_copy(update={"structured_output": None})
    assert picks(out, free) == {'["params", "city"]': -1, '["params", "zip"]': -1}  # no enum: not recoverable
    assert unpick(logged, {'["params", "city"]': -1}, CALL) == json.dumps(json.loads(logged))


def test_every_relayed_call_is_logged_once_when_it_ends_read_whole_or_not():
    logged: list[dict] = []

    async def go() -> None:
        bind_turn(lambda kind, **f: logged.append({"kind": kind, **f}))
        models = RecordingModels(ScriptModels(generator=["Your order shipped. It arrives Friday."]))
        async for _ in models.stream("generator", CALL):
            pass
        stream = models.stream("generator", CALL.model_copy(update={"structured_output": None}))
        ScriptModels.push(models.inner, "generator", "One. Two. Three.")
        first = await anext(stream)
        await stream.aclose()  # the reader stopped early (a sentence cap, the narration closed)
        assert first

    asyncio.run(go())
    assert [e["done"] for e in logged] == [True, False]
    assert logged[0]["text"] == "Your order shipped. It arrives Friday." and logged[0]["key"] == call_key("generator", CALL)
    assert "One." in logged[1]["text"] and logged[1]["text"] != "One. Two. Three."
    assert all(e["kind"] == "model.call" and e["role"] == "generator" and e["error"] is None for e in logged)


def test_outside_a_turn_nothing_is_logged():
    async def go() -> list[str]:
        bind_turn(None)
        return [d async for d in RecordingModels(ScriptModels(["hi"])).stream("generator", CALL)]

    assert asyncio.run(go()) == ["hi"]


def test_a_call_cut_off_by_its_callers_timeout_is_logged_cancelled_and_played_back_as_a_timeout():
    import pytest

    from pipelines.core.whatif import LoggedSession, LoggedTurn, PlaybackModels, SessionPlay
    from pipelines.core.whatif.playback import playing
    from pipelines.errors import ModelTimeout
    from tests.doubles import HANG

    logged: list[dict] = []

    async def cut() -> None:
        bind_turn(lambda kind, **f: logged.append({"kind": kind, **f}))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                async for _ in RecordingModels(ScriptModels([HANG])).stream("orchestrator", CALL):
                    pass

    asyncio.run(cut())
    assert [(e["error"], e["done"], e["text"]) for e in logged] == [("cancelled", False, "")]
    turn = LoggedTurn(turn_id="t1", index=0, text="move it", events=logged)

    async def play() -> None:
        with playing(SessionPlay(LoggedSession(session_id="s", turns=[turn]))) as p:
            p.begin(turn)
            with pytest.raises(ModelTimeout):
                async for _ in PlaybackModels().stream("orchestrator", CALL):
                    pass
            assert p.calls[0]["source"] == "logged"

    asyncio.run(play())
