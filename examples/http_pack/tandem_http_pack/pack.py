"""The http_pack pack behind Tandem's ``Domain`` protocol (``pipelines.domain``).

The records live in the records service (``service.py``, or any service with the same API). The pack
reaches it through Tandem's ``HttpBackend`` (per-call deadline, reads retried with backoff, writes sent once
with the write key as ``Idempotency-Key``, failures mapped into Tandem's error table) and keeps no records
itself: its world is a ``RemoteWorld``. The service's address is the pack option ``base_url`` or the
environment variable ``HTTP_PACK_URL`` (on Serve: the app's ``runtime_env.env_vars``). The world store still
holds the write ledger: a confirmed write's outcome is recorded under its key, and the same key never
reaches the service twice.

The session's user is the request's ``user_id`` (a real pack verifies who the user is first). A card may
carry only record ids the user typed (``extract_candidates``) or read in their own list (``owner_reads``);
``PackBase`` does the rest (the tool port's backend, the grounding re-check, every other hook's default).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from pipelines.domain import (
    BACKEND_REASONS,
    Card,
    ConfigError,
    DomainTexts,
    ForwardContract,
    HttpBackend,
    PackBase,
    RemoteWorld,
    TurnFacts,
)

from .tools import TOOLS

__all__ = ["DomainPack", "URL_ENV"]

#: Where the records service is, unless the pack is built with ``base_url``.
URL_ENV = "HTTP_PACK_URL"

RECORD_ID = re.compile(r"\bR\d{4}\b")

TEXTS = DomainTexts(  # safe_ack, fallback, handoff, declined: the platform's words unless given here
    clarify={"record_id": "Which record do you mean? Its id starts with R.",
             "choose": "Which record do you mean: {options}?",
             "user_id": "Who am I helping today?",
             "details": "Could you tell me a little more about what you need?"},
    templates={"chat/hello": "Hello! I can list your records and archive one for you.",
               "card:card.archive_record": "archive record {record_id}",
               "executed": "Done: the record is archived."},
    guidance={"tip:archive": "An archived record stays listed; you can ask for it any time."},
    refusals={"not_owned": "that record is not yours", "not_active": "it is not active any more",
              "record_not_found": "I couldn't find that record", "not_confirmed": "I need your yes first",
              "user_not_found": "I couldn't find your account",
              "backend_timeout": "the records system did not answer in time",
              "backend_unreachable": "the records system can't be reached right now",
              "backend_error": "the records system had a problem",
              "backend_busy": "the records system is busy right now",
              "backend_rejected_arguments": "the records system did not accept that request",
              "backend_auth": "the records system refused our credentials",
              "backend_refused": "the records system refused that request",
              "malformed_response": "the records system gave an answer I can't read",
              "not_found": "the records system has no such record",
              "conflict": "the records system refused the change"},
)


class DomainPack(PackBase):
    """The http_pack domain (see module docstring)."""

    name = "http_pack"
    labels = {"ask": ("records",), "change": ("archive",), "chat": ("hello",)}
    cards = (Card(id="card.archive_record", title="Archive a record", tool="archive_record",
                  required_params=("record_id",)),)
    card_intents = {"card.archive_record": ("change",)}  # the intents that may offer each card
    branch_of_intent = {"ask": "ask"}  # the W3 guidance branch that serves each intent
    texts = TEXTS
    orchestrator_policy = ("You help a user with their records. Read the user's records before you act. A change "
                           "happens only through an action card and the user's explicit yes.")
    generator_persona = "You are a concise, friendly assistant for the user's records."
    entity_kind = "record_id"  # a change names one of the user's records: "which one?" when it names none
    tools = TOOLS
    tables_dir = Path(__file__).with_name("tables")
    arg_kind_table = {"list_records": {"user_id": "user_id"}, "archive_record": {"record_id": "record_id"}}
    owner_reads = frozenset({"list_records"})  # its result is the user's own records: they become candidates
    persistent = True  # the world store keeps the write ledger (the records are the service's)
    # the service's own reasons and the backend's: each needs a refusal text (``tandem domain check`` asks)
    reasons = ("record_not_found", "user_not_found", *BACKEND_REASONS)
    sample_users = ("u001",)  # a user of the seeded service: whom ``tandem domain check`` signs in
    sample_texts = ("Please archive R0001.",)  # words the extractor reads a record id off (the suite checks)

    def __init__(self, base_url: str | None = None, timeout_s: float = 2.0, read_retries: int = 2,
                 backoff_s: float = 0.1) -> None:
        self._base_url, self._timeout_s = base_url, timeout_s
        self._read_retries, self._backoff_s = read_retries, backoff_s

    def backend(self) -> HttpBackend:
        """A client of the records service (``base_url``, else ``$HTTP_PACK_URL``)."""
        url = self._base_url or os.environ.get(URL_ENV)
        if not url:
            raise ConfigError(f"the {self.name} pack needs its service: set {URL_ENV} (or the base_url option)")
        return HttpBackend(url, timeout_s=self._timeout_s, read_retries=self._read_retries,
                           backoff_s=self._backoff_s, name="records service")

    def new_world(self, seed: int, dataset: str | None = None) -> RemoteWorld:
        return RemoteWorld(self.backend())  # the service holds the records (its own seed)

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> RemoteWorld:
        return RemoteWorld(self.backend())

    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        return {"record_id": RECORD_ID.findall(text)}

    def answer_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        for o in contract.prior_observations:
            if o.ok and o.tool == "list_records":
                listed = ", ".join(f"{r['record_id']} ({r['title']}, {r['status']})"
                                   for r in (o.result or {}).get("records", []))
                return [f"Your records: {listed}." if listed else "You have no records."]
        return []
