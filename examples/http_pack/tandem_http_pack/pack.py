"""The http_pack pack behind Tandem's ``Domain`` protocol (``pipelines.domain``): its tools call a service.

The records live in the records service (``service.py``, or any service with the same API). The pack
reaches it through Tandem's :class:`~pipelines.domain.HttpBackend` (per-call deadline, reads retried with
backoff, writes sent once with the write key as ``Idempotency-Key``, failures mapped into Tandem's error
table) and keeps no records itself: its world is a :class:`~pipelines.domain.RemoteWorld`. The service's
address is the pack option ``base_url`` or the environment variable ``HTTP_PACK_URL`` (on Serve: the app's
``runtime_env.env_vars``). The world store still holds the write ledger: a confirmed write's outcome is
recorded under its key, and the same key never reaches the service twice.

The session's user is the request's ``user_id`` (a real pack verifies who the user is first: see
Tandem's support pack and its identity rules). Record ids the user types (``R0001``) and the records
read from the user's own list are the only values a card may carry.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pipelines.domain import (
    CallOutcome,
    DomainTexts,
    HttpBackend,
    LocalToolRunner,
    PackBase,
    RemoteWorld,
    ToolContext,
    TurnFacts,
    reason_of,
)
from pipelines.errors import ConfigError, TandemError

from .tools import build_registry, owned_records

__all__ = ["DomainPack", "URL_ENV"]

#: Where the records service is, unless the pack is built with ``base_url``.
URL_ENV = "HTTP_PACK_URL"

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
               "record_not_found": "I couldn't find that record", "not_confirmed": "I need your yes first",
               "user_not_found": "I couldn't find your account",
               "backend_timeout": "the records system did not answer in time",
               "backend_unreachable": "the records system can't be reached right now",
               "backend_error": "the records system had a problem",
               "backend_busy": "the records system is busy right now",
               "malformed_response": "the records system gave an answer I can't read"},
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
    reasons = ("not_owned", "not_active", "record_not_found", "not_confirmed", "user_not_found", "backend_timeout",
               "backend_unreachable", "backend_error", "backend_busy", "malformed_response")
    tables_dir = Path(__file__).with_name("tables")
    arg_kind_table = {"list_records": {"user_id": "user_id"}, "archive_record": {"record_id": "record_id"}}
    write_tools = frozenset({"archive_record"})
    persistent = True

    def __init__(self, base_url: str | None = None, timeout_s: float = 2.0, read_retries: int = 2,
                 backoff_s: float = 0.1) -> None:
        self._registry = build_registry()
        self._base_url, self._timeout_s = base_url, timeout_s
        self._read_retries, self._backoff_s = read_retries, backoff_s

    def backend(self) -> HttpBackend:
        """A client of the records service (``base_url``, else ``$HTTP_PACK_URL``)."""
        url = self._base_url or os.environ.get(URL_ENV)
        if not url:
            raise ConfigError(f"the {self.name} pack needs its service: set {URL_ENV} (or the base_url option)")
        return HttpBackend(url, timeout_s=self._timeout_s, read_retries=self._read_retries,
                           backoff_s=self._backoff_s, name="records service")

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

    def new_world(self, seed: int, dataset: str | None = None) -> RemoteWorld:
        return RemoteWorld(self.backend())  # the service holds the records (its own seed)

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> RemoteWorld:
        return RemoteWorld(self.backend())

    def tool_runner(self, world: Any, ledger: Any) -> LocalToolRunner:
        return LocalToolRunner(self, world, ledger=ledger)

    # -- the tool backend the runner drives ----------------------------------------------------

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: RemoteWorld) -> CallOutcome:
        obs = self.registry.call(name, dict(args), ctx, world)
        # the service holds the records: nothing local changes (the ledger still records a keyed write)
        return CallOutcome(observation=obs, reason=None if obs.ok else reason_of(obs.error_message) or obs.error_code)

    def precheck(self, name: str, args: dict[str, Any], ctx: ToolContext, world: RemoteWorld) -> str | None:
        """The write's eligibility as if confirmed: reads only, the write itself is never sent."""
        spec = self.registry.get(name)
        if spec.eligibility is None:
            return None
        try:
            spec.eligibility(self.registry.parse_args(name, dict(args)), ctx.model_copy(update={"confirmed": True}),
                             world)
        except TandemError as exc:
            return reason_of(exc.message) or exc.code
        return None

    def ungrounded(self, name: str, args: dict[str, Any], user_texts: Sequence[str], world: RemoteWorld,
                   user_id: str) -> list[str]:
        try:
            owned = {r.record_id for r in owned_records(world, user_id)}
        except TandemError:
            owned = set()  # the service can't tell: nothing is grounded in the user's records
        return [k for k, v in args.items() if k == "record_id" and v not in owned]
