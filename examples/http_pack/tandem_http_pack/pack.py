"""The http_pack pack behind Tandem's ``Domain`` protocol (``pipelines.domain``).

The session's user is the request's ``user_id`` (a real pack verifies who the user is first: see
Tandem's support pack and its identity rules). Record ids the user types (``R0001``) and the records
read from the user's own list are the only values a card may carry. The pack is also its tools' backend:
Tandem's ``LocalToolRunner`` runs them over the world, writes exactly once through the world store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pipelines.domain import CallOutcome, DomainTexts, LocalToolRunner, PackBase, ToolContext, TurnFacts

from .tools import build_registry
from .world import World, generate_world

__all__ = ["DomainPack"]

RECORD_ID = re.compile(r"\bR\d{4}\b")


class Card(BaseModel):
    id: str
    title: str
    tool: str
    kind: str = "write"
    required_params: tuple[str, ...]


TEXTS = DomainTexts(
    safe_ack="Let me look into that.",
    fallback="Sorry, I can't do that right now. Could you try again in a moment?",
    handoff="I'm passing you to a person who can help.",
    declined="All right, I've left it as it is.",
    clarify={"record_id": "Which record do you mean? Its id starts with R.",
              "choose": "Which record do you mean: {options}?",
              "user_id": "Who am I helping today?",
              "details": "Could you tell me a little more about what you need?"},
    templates={"chat/hello": "Hello! I can list your records and archive one for you.",
                "action_card": "I can {phrase}. Reply yes to confirm.",
                "card:card.archive_record": "archive record {record_id}",
                "executed": "Done: the record is archived."},
    refusals={"not_owned": "that record is not yours", "not_active": "it is not active any more",
               "record_not_found": "I couldn't find that record", "not_confirmed": "I need your yes first"},
)


class DomainPack(PackBase):
    """The http_pack domain (see module docstring)."""

    name = "http_pack"
    labels = {"ask": ("records",), "change": ("archive",), "chat": ("hello",)}
    cards = (Card(id="card.archive_record", title="Archive a record", tool="archive_record",
                  required_params=("record_id",)),)
    card_intents = {"card.archive_record": ("change",)}
    branch_of_intent = {"ask": "ask"}  # the W3 guidance branch that serves each intent
    texts = TEXTS
    orchestrator_policy = ("You help a user with their records. Read the user's records before you act. A change "
                           "happens only through an action card and the user's explicit yes.")
    generator_persona = "You are a concise, friendly assistant for the user's records."
    entity_kind = "record_id"
    reasons = ("not_owned", "not_active", "record_not_found", "not_confirmed")
    tables_dir = Path(__file__).with_name("tables")
    arg_kind_table = {"list_records": {"user_id": "user_id"}, "archive_record": {"record_id": "record_id"}}
    write_tools = frozenset({"archive_record"})
    persistent = True

    def __init__(self) -> None:
        self._registry = build_registry()

    # -- perception and grounding ------------------------------------------------------------

    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        return {"record_id": RECORD_ID.findall(text)}

    async def prepare(self, facts: TurnFacts, tools: Any) -> None:
        if facts.user_id:  # the user's own id is a record of theirs
            facts.candidates.add("user_id", facts.user_id, "record")

    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        if ok and tool == "list_records" and result:
            facts.candidates.add_all({"record_id": [r["record_id"] for r in result.get("records", [])]}, "record")

    def answer_lines(self, facts: TurnFacts, contract: Any) -> list[str]:
        for o in facts.observations:
            if o.get("ok") and o.get("tool") == "list_records":
                records = (o.get("result") or {}).get("records", [])
                listed = ", ".join(f"{r['record_id']} ({r['title']}, {r['status']})" for r in records)
                return [f"Your records: {listed}." if records else "You have no records."]
        return []

    # -- serving: the world, its store and the tools ------------------------------------------

    def new_world(self, seed: int, dataset: str | None = None) -> World:
        return generate_world(seed)

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> World:
        return World.from_entities(rows)

    def tool_runner(self, world: Any, ledger: Any) -> LocalToolRunner:
        return LocalToolRunner(self, world, ledger=ledger)

    # -- the tool backend the runner drives ----------------------------------------------------

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: World) -> CallOutcome:
        obs = self.registry.call(name, dict(args), ctx, world)
        changed = {"record": [args["record_id"]]} if obs.ok and name in self.write_tools else {}
        return CallOutcome(observation=obs, reason=obs.error_code, changed=changed)

    def precheck(self, name: str, args: dict[str, Any], ctx: ToolContext, world: World) -> str | None:
        trial = world.model_copy(deep=True)  # eligibility as if confirmed, on a copy
        obs = self.registry.call(name, dict(args), ctx.model_copy(update={"confirmed": True}), trial)
        return None if obs.ok else (obs.error_code or "refused")

    def ungrounded(self, name: str, args: dict[str, Any], user_texts: Sequence[str], world: World,
                   user_id: str) -> list[str]:
        owned = set(world.users[user_id].records) if user_id in world.users else set()
        return [k for k, v in args.items() if k == "record_id" and v not in owned]
