"""pipelines.annex.prompting: the one-call baseline pipeline."""

from __future__ import annotations

import asyncio

import pytest

from pipelines.annex.prompting import PromptingPipeline, PromptingSettings, history_messages
from pipelines.errors import ModelUnavailable
from pipelines.events import ReplyDelta, TurnRequest
from pipelines.protocols import ChatMessage, ModelClient, TurnRecord
from pipelines.turn import TurnContext
from tests.doubles import ListEventSink, ScriptedModelClient, collect

SETTINGS = PromptingSettings(system_prompt="You are terse.", max_reply_tokens=64, temperature=0.3, seed=11)

HISTORY = [
    TurnRecord(turn_id="t0", index=0, user_text="hi", reply_text="hello", status="ok"),
    TurnRecord(turn_id="t1", index=1, user_text="order?", reply_text="It ships to", status="failed"),
    TurnRecord(turn_id="t2", index=2, user_text="again", reply_text="", status="ok"),
    TurnRecord(turn_id="t3", index=3, user_text="thanks", reply_text="Sorry, I can only", status="fallback"),
]


def _ctx(text: str = "Where is it?", locale: str = "de-DE", history=None) -> TurnContext:
    return TurnContext(
        session_id="s1", turn_id="t_9", trace_id="tr", request=TurnRequest(text=text, locale=locale),
        history=list(HISTORY if history is None else history), sink=ListEventSink(),
    )


def test_double_is_a_model_client() -> None:
    assert isinstance(ScriptedModelClient([]), ModelClient)


def test_history_messages_drop_failed_replies_but_keep_user_turns() -> None:
    assert history_messages(HISTORY) == [
        ChatMessage(role="user", content="hi"),
        ChatMessage(role="assistant", content="hello"),
        ChatMessage(role="user", content="order?"),
        ChatMessage(role="user", content="again"),
        ChatMessage(role="user", content="thanks"),
        ChatMessage(role="assistant", content="Sorry, I can only"),
    ]
    assert history_messages([]) == []


def test_build_call_is_system_history_user() -> None:
    pipe = PromptingPipeline(ScriptedModelClient([]), SETTINGS)
    call = pipe.build_call(_ctx())
    roles = [m.role for m in call.messages]
    assert roles == ["system", "user", "assistant", "user", "user", "user", "assistant", "user"]
    system = call.messages[0].content
    assert system.startswith("You are terse.") and "de-DE" in system
    assert call.messages[-1] == ChatMessage(role="user", content="Where is it?")
    assert "It ships to" not in [m.content for m in call.messages]
    assert (call.max_tokens, call.temperature, call.seed) == (64, 0.3, 11)
    assert call.structured_output is None and call.stop == []


def test_build_call_without_history() -> None:
    call = PromptingPipeline(ScriptedModelClient([]), SETTINGS).build_call(_ctx(history=[]))
    assert [m.role for m in call.messages] == ["system", "user"]


def test_run_streams_reply_deltas_and_skips_empty_ones() -> None:
    models = ScriptedModelClient(["", "Es ", "", "ist ", "unterwegs.", ""])
    pipe = PromptingPipeline(models, SETTINGS)
    ctx = _ctx()
    out = asyncio.run(collect(pipe.run(ctx)))
    assert out == [ReplyDelta(text="Es "), ReplyDelta(text="ist "), ReplyDelta(text="unterwegs.")]
    [(role, call)] = models.calls
    assert role == "generator" and call == pipe.build_call(ctx)
    assert set(ctx.stage_ms) == {"generate"} and ctx.stage_ms["generate"] >= 0
    [fields] = ctx.sink.of("stage.generate")
    assert fields["deltas"] == 3 and fields["role"] == "generator" and fields["turn_id"] == "t_9"
    # system + 6 history messages (the failed reply left out) + the user turn; 4 prior turns
    assert (fields["messages"], fields["history_turns"]) == (8, 4)


def test_model_errors_propagate_to_the_runner() -> None:
    models = ScriptedModelClient(["a", ModelUnavailable("down")])
    ctx = _ctx()

    async def main() -> list:
        got = []
        with pytest.raises(ModelUnavailable):
            async for ev in PromptingPipeline(models, SETTINGS).run(ctx):
                got.append(ev)
        return got

    assert asyncio.run(main()) == [ReplyDelta(text="a")]
