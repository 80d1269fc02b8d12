"""Typed settings of the ``tandem`` turn (the ``pipeline`` section of a config with ``kind: tandem``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipelines.sgc.w1 import LONG_TAGS, SHORT_TAGS, W1Tags

__all__ = ["TandemSettings"]


class TandemSettings(BaseModel):
    """Bounds and decoding defaults of one tandem turn (every field is read; unknown keys are refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tandem"] = "tandem"
    max_steps: int = Field(3, ge=1, le=10, description="The orchestrator's step cap per turn.")
    orchestrator_max_tokens: int = Field(160, ge=16, le=2048)
    perception_max_tokens: int = Field(96, ge=16, le=1024, description="Labels + narration of the W1 stream.")
    narration_max_chars: int = Field(120, ge=20, le=400)
    w1_tags: Literal["short", "long"] = Field(
        "long", description="Section tags of the W1 stream: 'long' (<INTENT>…<NARRATION>, the sgc rungs' format) "
        "or 'short' (<I>…</I><S>…</S><N>…: the narration 10 decoded tokens after the intent instead of 21, "
        "1.38x sooner on the support openings, but the 135M model's coach narration degrades with it).")
    w1_segments: bool = Field(
        False, description="Decode W1 in three calls — the intent label, the sub-intent label, the narration "
        "and plan — each continuing the previous one's text, so the grammar-forced tags between the labels "
        "ride in the reply's prefix (one prefill, a prefix-cache hit) instead of being decoded token by token.")
    w1_parallel_narration: bool = Field(
        False, description="Decode W1's narration in its own call, started with the intent label's and run "
        "beside the label calls (not conditioned on the labels), so the first narration token waits for one "
        "prefill instead of both labels. The labels are the segments' (needs w1_segments).")
    w1_narration_lead_ms: float = Field(
        0.0, ge=0.0, le=2000.0, description="With w1_parallel_narration: the label calls start when the narration's "
        "first word went out, or after this many ms, whichever is first (the narration's prefill and first tokens "
        "run alone; the labels' prefill, batched with them, would stall them); 0 starts them together.")
    w1_skip_forced_labels: bool = Field(
        False, description="With w1_segments: a label with one allowed value (an intent with one sub-intent, a "
        "request narrowed to one intent) is given without a call — its grammar admits nothing else.")
    narration_hold_words: int | None = Field(
        None, ge=0, le=20, description="None: a narration word goes out as soon as no violation can still grow "
        "from it (the narration judge's patterns, matched partially); a number: narration is released that many "
        "words behind the model, so a violation spanning that many words never gets out.")
    slot_max_tokens: int = Field(64, ge=16, le=512)
    max_reply_tokens: int = Field(128, ge=1, le=4096)
    max_sentences: int = Field(3, ge=1, le=12)
    continue_after_lead: bool = Field(
        True, description="When the pack's lead sentences state the answer from the observations (coach: the best "
        "counter, an element's matchups), the generator continues after them (true) or the lead and the pack's "
        "other answer lines are the reply (false: for a generator that invents facts once the facts are said).")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    repetition_penalty: float = Field(1.15, ge=1.0, le=2.0, description="Generator decoding (small models loop).")
    seed: int = 0
    history_turns: int = Field(2, ge=0, le=20, description="Prior turns in the orchestrator's prompt.")
    max_history_turns: int = Field(20, ge=0, le=50, description="Turns loaded from the store (W3 window).")
    model_timeout_s: float = Field(30.0, gt=0)
    tool_timeout_s: float = Field(10.0, gt=0)
    max_text_chars: int = Field(4000, ge=1)
    turn_deadline_s: float = Field(60.0, gt=0)
    first_call_priority: int = Field(
        -1, description="Engine priority of W1, the call that produces the turn's first visible token "
        "(lower runs earlier; needs scheduling_policy 'priority' on the engine).")
    later_call_priority: int = Field(
        0, description="Engine priority of the orchestrator steps (generator and slot calls keep 0).")
    w2: bool = Field(True, description="Slot extraction + Ψ paragraph plan.")
    w3: bool = Field(True, description="Cross-turn guidance with the session-seeded scheduler.")
    oracle_perception: bool = Field(
        False, description="Evaluation only (`tandem eval --perception oracle`): a turn request may carry its intent "
        "and sub-intent (`perception`), which W1's labels then take instead of the model's reading, so the mechanisms "
        "after perception are measured apart. Off in every serving profile (a request that carries labels is refused).")

    @model_validator(mode="after")
    def _parallel_needs_segments(self) -> TandemSettings:
        if self.w1_parallel_narration and not self.w1_segments:
            raise ValueError("w1_parallel_narration needs w1_segments: true (the labels are decoded alone)")
        return self

    @property
    def tags(self) -> W1Tags:
        """The W1 stream's tag set."""
        return SHORT_TAGS if self.w1_tags == "short" else LONG_TAGS

