"""What a pre-guard layer reports when it fires: one hit per rule (or model label)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ClassifierHit"]


class ClassifierHit(BaseModel):
    """One rule (or model label) that fired on the text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule_id: str
    kind: Literal["injection", "jailbreak"]
    action: Literal["block", "flag"]
    score: float = Field(1.0, ge=0.0, le=1.0)
    view: str = Field("text", description="The view it fired on: text, base64, hex, tags, rot13, leet, spaced.")
    layer: Literal["rules", "classifier"] = Field("rules", description="Which layer of the pre-guard fired.")
    sure: bool = Field(False, description="A rule marked sure: its hit refuses on its own, wherever it is.")
    quoted: bool = Field(False, description="It fired only on material the customer quotes, not on their own words.")
