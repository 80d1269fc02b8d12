"""Session facts across turns, and the deterministic confirmation rule.

The facts live in each turn's ``meta["dr"]`` (written by the DR pipeline, read
back from the session history on the next turn): the authenticated user, the
entity ids observed in tool observations, the ids the user typed, the user's
order ids, a pending action awaiting confirmation, and the redaction vault's
placeholder ids (never their values).

Two rules are code, never model output:

* **authentication** — a successful ``find_user_id_by_*`` observation
  authenticates its user id (one user per session; another id is refused);
* **confirmation** — a pending action is executed only when the whole user
  text, normalised, is in the rule table's affirmatives (the pre-guard reports
  it as ``confirmation="affirmative"``), and only on the turn right after the
  card was shown; any other text drops it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.contract import PendingCard
from pipelines.core.ports import ConfirmedCard, ToolCallResult, ToolSession
from pipelines.errors import IneligibleAction, TandemError
from pipelines.guardrails.ids import extract_ids, walk_strings
from pipelines.guardrails.pre import normalize_reply
from pipelines.protocols import TurnRecord
from pipelines.tools import ToolContext

__all__ = [
    "META_KEY",
    "SessionFacts",
    "load_facts",
    "normalize_reply",
    "is_affirmative",
    "is_negative",
]

META_KEY = "dr"


def one_user_per_session(ctx: ToolContext, user_id: str) -> ToolContext:
    """The default verification rule: a second, different user is refused (``other_user``)."""
    if ctx.authenticated_user_id not in (None, user_id):
        raise IneligibleAction("another user is already verified in this session [other_user]",
                               details={"reason": "other_user"})
    ctx.authenticated_user_id = user_id
    return ctx


class SessionFacts(BaseModel):
    """What this session has established, as stored in ``meta["dr"]``."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    authenticated_user_id: str | None = None
    observed_ids: list[str] = Field(default_factory=list)
    mentioned_ids: list[str] = Field(default_factory=list)
    user_order_ids: list[str] = Field(default_factory=list)
    pending_action: PendingCard | None = None
    vault_ids: list[str] = Field(default_factory=list)

    def tool_session(
        self, session_id: str, *, confirmed: bool = False, locale: str = "en",
        idempotency_key: str | None = None, user_texts: list[str] | None = None,
        card: ConfirmedCard | None = None, fence: int | None = None,
    ) -> ToolSession:
        """The facts a tool call may rely on (``user_texts``: the session's user texts, values restored)."""
        return ToolSession(
            session_id=session_id,
            authenticated_user_id=self.authenticated_user_id,
            observed_ids=list(self.observed_ids),
            confirmed=confirmed,
            locale=locale,
            idempotency_key=idempotency_key,
            user_texts=list(user_texts or []),
            card=card,
            fence=fence,
        )

    def add_ids(self, field: str, ids: set[str] | list[str]) -> None:
        current = set(getattr(self, field))
        setattr(self, field, sorted(current | set(ids)))

    def mention(self, redacted_text: str) -> None:
        """Record the entity ids the user typed (they may be read, never acted on unseen)."""
        self.add_ids("mentioned_ids", set().union(*extract_ids(redacted_text).values()) if redacted_text else set())

    def observe(self, tool: str, result: ToolCallResult, lookup_tools: frozenset[str],
                authenticate: Any = None) -> str | None:
        """Fold one tool result into the facts; returns a refusal reason if authentication was refused."""
        obs = result.observation
        if not obs.ok or obs.result is None:
            return None
        found = extract_ids(" ".join(walk_strings(obs.result)))
        ids = set(result.observed_ids).union(*found.values()) if found else set(result.observed_ids)
        reason = None
        if tool in lookup_tools:
            reason = self.authenticate(str(obs.result.get("user_id", "")), authenticate)
            if reason is not None:
                ids.discard(str(obs.result.get("user_id", "")))
        if isinstance(obs.result.get("orders"), list) and obs.result.get("user_id") == self.authenticated_user_id:
            self.add_ids("user_order_ids", [str(o) for o in obs.result["orders"]])
        self.add_ids("observed_ids", ids)
        return reason

    def authenticate(self, user_id: str, rule: Any = None) -> str | None:
        """Authenticate ``user_id`` with the domain's ``rule`` (default: one user per session)."""
        ctx = ToolContext(authenticated_user_id=self.authenticated_user_id)
        try:
            (rule or one_user_per_session)(ctx, user_id)
        except TandemError as exc:
            return str(exc.details.get("reason") or exc.code)
        self.authenticated_user_id = ctx.authenticated_user_id
        self.add_ids("observed_ids", [user_id])
        return None

    def to_meta(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def load_facts(history: list[TurnRecord]) -> SessionFacts:
    """The facts of the latest turn that stored them; a pending action survives one turn only."""
    for i in range(len(history) - 1, -1, -1):
        raw = history[i].meta.get(META_KEY)
        if not isinstance(raw, dict) or "facts" not in raw:
            continue
        try:
            facts = SessionFacts.model_validate(raw["facts"])
        except ValueError:
            return SessionFacts()
        if i != len(history) - 1:
            facts.pending_action = None
        return facts
    return SessionFacts()


def is_affirmative(text: str, table: tuple[str, ...] | list[str]) -> bool:
    """True only when the whole message is one of the table's affirmatives."""
    return normalize_reply(text) in {normalize_reply(a) for a in table}


def is_negative(text: str, table: tuple[str, ...] | list[str]) -> bool:
    """True when the whole message is one of the table's negatives."""
    return normalize_reply(text) in {normalize_reply(a) for a in table}
