"""The forward contract (orchestrator -> generator), the return contract, and reference closure.

The forward contract is everything the generator may use, built by code from
validated decisions and tool observations only. Its membership sets (ids,
money amounts, dates) come from the structured parts — never from the user's
own request text, so an id the user typed but no tool confirmed cannot be
repeated back as if it were known. :func:`check_closure` checks a return
contract against it: every id, action, amount and user-state key in the reply
must be a member. The contract is emitted as the ``contract.forward`` event:
with the logged observations it reconstructs why a reply was allowed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipelines.guardrails.ids import (
    all_ids,
    amount_cents,
    extract_amounts,
    extract_ids,
    extract_time_promises,
    walk_strings,
)
from pipelines.guardrails.post import PostGuardView, Violation
from pipelines.sgc.psi import Paragraph

from .fallback import Fallback

__all__ = [
    "Path",
    "C1",
    "ConflictView",
    "C2",
    "C3",
    "SourceRef",
    "ObservationRecord",
    "PendingCard",
    "EligibleAction",
    "ForwardContract",
    "Rendering",
    "ReturnContract",
    "TaskState",
    "compact",
    "task_state",
    "build_return",
    "check_closure",
]

Path = Literal["answer", "clarify", "action_card", "escalate", "fallback"]
TaskState = Literal["unauthenticated", "authenticated", "awaiting_confirmation", "action_executed", "escalated",
                    "blocked"]
_MONEY_KEYS = frozenset({"amount", "price", "balance", "total", "refund", "value", "exchange_price_difference"})


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class C1(_Frozen):
    intent: str
    sub_intent: str


class ConflictView(_Frozen):
    constraint_id: str
    kind: str
    tier: str
    entity: str | None = None
    detail: str = ""


class C2(_Frozen):
    """W2: the conflicts with the live facts and the paragraph plan to write, in order."""

    conflicts: list[ConflictView] = Field(default_factory=list)
    plan: list[Paragraph] = Field(default_factory=list)
    repairs: list[str] = Field(default_factory=list)


class C3(_Frozen):
    """W3: the guidance to weave in (``subject_id`` None: no guidance this turn)."""

    guidance_type: str
    subject_id: str | None = None


class SourceRef(_Contract):
    id: str
    title: str
    snippet: str


class ObservationRecord(_Contract):
    """One tool call as the contract and the event log keep it (redacted)."""

    step: int
    tool: str
    args: dict[str, Any]
    ok: bool
    reason: str | None = None
    summary: str = ""
    result: dict[str, Any] | None = None


class PendingCard(_Contract):
    """An action card shown to the user, awaiting an explicit yes: the write exactly as shown."""

    card_id: str
    title: str
    tool: str
    args: dict[str, Any] = Field(..., description="Redacted arguments (PII as placeholders).")
    digests: dict[str, str] = Field(default_factory=dict, description="Placeholder -> hash of its value.")
    turn_id: str = Field("", description="The turn that showed the card (part of the write's idempotency key).")
    digest: str = Field("", description="The call as the tool port gets it (ports.call_digest of the tool and the "
                                        "resolved arguments): the port runs the write only as this call.")
    labels: list[str] = Field(default_factory=list, description="The intent and sub-intent the card was offered "
                              "for: a no carries that request on to the user's correction.")


class EligibleAction(_Contract):
    card_id: str
    title: str
    tool: str
    params: dict[str, Any]
    status: Literal["awaiting_confirmation", "executed"]


class ForwardContract(_Contract):
    """What the generator may say, and why (see module docstring)."""

    version: Literal["dr.forward.v1"] = "dr.forward.v1"
    turn_id: str
    locale: str = "en"
    task_state: TaskState
    selected_path: Path
    user_request: str = ""
    eligible_actions: list[EligibleAction] = Field(default_factory=list)
    sources: list[SourceRef] = Field(default_factory=list)
    user_state: dict[str, Any] = Field(default_factory=dict)
    policy_constraints: list[str] = Field(default_factory=list)
    prior_observations: list[ObservationRecord] = Field(default_factory=list)
    selected_entity: str | None = None
    clarify_question: str | None = None
    clarify_options: list[str] = Field(default_factory=list)
    escalation_reason: str | None = None
    fallback: Fallback | None = None
    placeholders: list[str] = Field(default_factory=list)
    narration: str = Field("", description="W1's narration: what the user was told first (it passed its own gate).")
    c1: dict[str, Any] | None = Field(None, description="W1: the perceived intent and sub-intent.")
    c2: dict[str, Any] | None = Field(None, description="W2: graded conflicts and the paragraph plan.")
    c3: dict[str, Any] | None = Field(None, description="W3: the guidance pick (id, type, text).")

    def _grounded(self) -> dict[str, Any]:
        return self.model_dump(
            mode="json",
            exclude={"user_request", "clarify_question", "turn_id", "version", "locale", "fallback", "c1", "c3",
                     "narration"},
        )

    def allowed_ids(self) -> set[str]:
        """Every entity id present in the contract's structured parts (not the user's request)."""
        ids = all_ids(" ".join(walk_strings(self._grounded())))
        return {i for i in ids if not i.startswith("card.")}

    def action_ids(self) -> set[str]:
        return {a.card_id for a in self.eligible_actions}

    def allowed_amounts(self) -> set[int]:
        """Money amounts (cents) present in observations, user state, sources and constraints."""
        out: set[int] = set()
        stack: list[Any] = [o.result for o in self.prior_observations if o.ok] + [self.user_state]
        while stack:
            cur = stack.pop()
            if isinstance(cur, dict):
                for k, v in cur.items():
                    if isinstance(v, int | float) and not isinstance(v, bool) and any(m in k for m in _MONEY_KEYS):
                        cents = amount_cents(v)
                        if cents is not None:
                            out.add(cents)
                    else:
                        stack.append(v)
            elif isinstance(cur, list):
                stack.extend(cur)
        for text in [s.snippet for s in self.sources] + self.policy_constraints:
            out |= extract_amounts(text)
        return out

    def allowed_times(self) -> set[str]:
        """Dates and delays stated in sources, constraints and observations."""
        texts = [s.snippet for s in self.sources] + self.policy_constraints
        texts += [" ".join(walk_strings(o.result)) for o in self.prior_observations if o.ok and o.result]
        return set().union(*(extract_time_promises(t) for t in texts)) if texts else set()

    def write_executed(self) -> bool:
        return any(a.status == "executed" for a in self.eligible_actions)

    def guard_view(self) -> PostGuardView:
        """The post-guard's view of this contract."""
        selected = [a.card_id for a in self.eligible_actions if self.selected_path == "action_card"]
        return PostGuardView(
            path=self.selected_path,
            allowed_ids=sorted(self.allowed_ids()),
            selected_card_id=selected[0] if selected else None,
            allowed_amounts=sorted(self.allowed_amounts()),
            allowed_times=sorted(self.allowed_times()),
            write_executed=self.write_executed(),
            placeholders=list(self.placeholders),
        )


class Rendering(_Contract):
    locale: str = "en"
    format: Literal["plain"] = "plain"
    sentences: int = 0


class ReturnContract(_Contract):
    """What the reply (as delivered) refers to."""

    text: str
    source_refs: list[str] = Field(default_factory=list)
    entity_refs: list[str] = Field(default_factory=list)
    amounts: list[int] = Field(default_factory=list)
    action_card_ref: str | None = None
    state_refs: list[str] = Field(default_factory=list)
    rendering: Rendering = Rendering()


def compact(value: Any, max_items: int, max_chars: int = 200) -> Any:
    """Lists cut to ``max_items``, strings to ``max_chars``, recursively."""
    if isinstance(value, dict):
        return {k: compact(v, max_items, max_chars) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [compact(v, max_items, max_chars) for v in list(value)[:max_items]]
    if isinstance(value, str) and len(value) > max_chars:
        return value[:max_chars]
    return value


def task_state(path: Path, *, executed: bool, verified: bool, blocked: bool = False) -> TaskState:
    """Where the task stands after a turn that ended on ``path`` (``blocked``: refused by the pre-guard)."""
    if blocked and path == "fallback":
        return "blocked"
    if path == "escalate":
        return "escalated"
    if executed:
        return "action_executed"
    if path == "action_card":
        return "awaiting_confirmation"
    return "authenticated" if verified else "unauthenticated"


def build_return(text: str, forward: ForwardContract, *, card_id: str | None, sentences: int = 0) -> ReturnContract:
    """The return contract of a delivered text (``card_id``: the action card event sent, if any)."""
    ids = extract_ids(text)
    entity = sorted(set().union(*ids.values())) if ids else []
    keys = [k for k, v in forward.user_state.items() if isinstance(v, str) and v and v in text]
    return ReturnContract(
        text=text,
        source_refs=sorted(ids.get("article", set())),
        entity_refs=entity,
        amounts=sorted(extract_amounts(text)),
        action_card_ref=card_id,
        state_refs=sorted(keys),
        rendering=Rendering(locale=forward.locale, sentences=sentences),
    )


def check_closure(ret: ReturnContract, forward: ForwardContract) -> list[Violation]:
    """Every id, action, amount and state key of ``ret`` must be a member of ``forward``."""
    out: list[Violation] = []
    allowed = forward.allowed_ids()
    actions = forward.action_ids()
    sources = {s.id for s in forward.sources} | {i for i in allowed if i.startswith("KB-")}
    for ref in ret.source_refs:
        if ref not in sources:
            out.append(Violation(kind="unknown_article_id", detail=ref))
    for ref in ret.entity_refs:
        if ref.startswith("card."):
            if ref not in actions:
                out.append(Violation(kind="action_id", detail=ref))
        elif ref not in allowed and not ref.startswith("KB-"):
            out.append(Violation(kind="unknown_entity", detail=ref))
    if ret.action_card_ref is not None and ret.action_card_ref not in actions:
        out.append(Violation(kind="action_id", detail=ret.action_card_ref))
    for cents in set(ret.amounts) - forward.allowed_amounts():
        out.append(Violation(kind="unsupported_amount", detail=f"{cents / 100:.2f}"))
    for key in ret.state_refs:
        if key not in forward.user_state:
            out.append(Violation(kind="unknown_state_key", detail=key))
    return out
