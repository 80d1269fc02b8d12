"""The ``prompting`` pipeline: one generator call with a system prompt and the history, no tools.

The first ablation baseline: everything else in Tandem is measured against it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from pipelines.core.generate import reply_deltas
from pipelines.events import ReplyDelta
from pipelines.protocols import ChatMessage, ModelCall, ModelClient, TurnRecord
from pipelines.turn import TurnContext

__all__ = ["PromptingSettings", "PromptingPipeline", "history_messages"]


@dataclass(frozen=True)
class PromptingSettings:
    system_prompt: str
    max_reply_tokens: int = 128
    temperature: float = 0.0
    seed: int = 0


def history_messages(history: list[TurnRecord]) -> list[ChatMessage]:
    """Prior turns as chat messages; failed replies are left out (the user turn stays)."""
    out: list[ChatMessage] = []
    for turn in history:
        out.append(ChatMessage(role="user", content=turn.user_text))
        if turn.status != "failed" and turn.reply_text:
            out.append(ChatMessage(role="assistant", content=turn.reply_text))
    return out


class PromptingPipeline:
    name = "prompting"

    def __init__(self, models: ModelClient, settings: PromptingSettings) -> None:
        self.models = models
        self.settings = settings

    def build_call(self, ctx: TurnContext) -> ModelCall:
        s = self.settings
        system = s.system_prompt + f" Reply in the language of locale '{ctx.request.locale}'."
        messages = [ChatMessage(role="system", content=system)]
        messages += history_messages(ctx.history)
        messages.append(ChatMessage(role="user", content=ctx.request.text))
        return ModelCall(
            messages=messages, max_tokens=s.max_reply_tokens, temperature=s.temperature, seed=s.seed
        )

    async def run(self, ctx: TurnContext) -> AsyncIterator[ReplyDelta]:
        call = self.build_call(ctx)
        # the model input's shape is recorded, so a turn shows that its history reached the model
        async for delta in reply_deltas(ctx, self.models, call, messages=len(call.messages),
                                        history_turns=len(ctx.history)):
            yield delta
