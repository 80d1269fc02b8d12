"""The ``Domain`` protocol: everything a turn needs to know about one domain pack.

A pack implements it (the built-in ``support`` and ``coach``, or an installed distribution); the
``tandem`` turn, the rungs and ``serve/`` only ever talk to this protocol. Pack authors import it
(and the types they need) from :mod:`pipelines.domain`.

What a pack provides:

* **catalogue** — the typed tool registry, the action cards, and per tool the
  grounding kind of each argument (:mod:`pipelines.grounding`);
* **gating** — which cards a perceived intent may offer, which read tools the
  session may use now (e.g. private reads only once the user is verified);
* **perception** — the W1 labels, an intent prior from explicit cues, the Φ
  snapshot values;
* **grounding** — deterministic extractors over the user's words, the slot
  model's schema and the filter of its proposals, candidates read off the owner's
  records;
* **kernels** — the rule-table bundle (Φ, Ψ, tiers, W3) with its conflict kinds
  and branches, the W2 conflicts of a turn, the W3 candidates;
* **texts** — prompts, safe wordings, clarify questions and path templates.

Session facts (who is verified, what was observed, a pending action) are the
pack's :class:`SessionView`, stored in each turn's meta and read back next turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from pipelines.gate import SentenceJudge
from pipelines.grounding import CandidateSet
from pipelines.tools import ToolRegistry

from .contract import EligibleAction, ForwardContract
from .ports import ToolRunner

__all__ = ["DomainTexts", "CardSpec", "Domain", "TurnFacts"]


class DomainTexts(BaseModel):
    """Locale data of a pack (``en``): every text a pipeline may deliver without the generator."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    safe_ack: str = Field(..., description="Delivered instead of a narration sentence the guard refuses.")
    narration_completion: str = Field(
        "look into that.", min_length=1,
        description="Ends a narration sentence whose opening words (\"I'll\", \"we will\") already went out "
                    "when the rest was refused: \"I'll\" + this.")
    fallback: str = Field(..., description="The conservative reply of a turn that fell back.")
    handoff: str = Field(..., description="The reply of an escalation to a person.")
    declined: str = Field("", description="The reply when the user declines a pending action.")
    clarify: dict[str, str] = Field(..., description="Clarify question per missing kind; 'choose' and 'details'.")
    templates: dict[str, str] = Field(default_factory=dict, description="Path templates (str.format fields).")
    guidance: dict[str, str] = Field(default_factory=dict, description="W3 guidance id -> sentence.")
    refusals: dict[str, str] = Field(default_factory=dict, description="Why a change was refused, per reason code.")

    def question(self, kind: str, **fields: Any) -> str:
        """The clarify question for ``kind`` (falls back to ``details``)."""
        text = self.clarify.get(kind) or self.clarify.get("details") or self.fallback
        try:
            return text.format(**fields)
        except (KeyError, IndexError):
            return self.clarify.get("details") or self.fallback


@runtime_checkable
class CardSpec(Protocol):
    """An action card of a pack's catalogue."""

    id: str
    title: str
    tool: str
    kind: str
    required_params: tuple[str, ...]


class TurnFacts(BaseModel):
    """What a pack's hooks see of the turn so far (plain data; the pipeline fills it)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    user_text: str = Field(..., description="This turn's redacted text.")
    user_texts: list[str] = Field(default_factory=list, description="Every redacted user text of the session.")
    user_id: str | None = Field(None, description="The request's user (coach) or the verified user (support).")
    intent: str | None = None
    sub_intent: str | None = None
    observations: list[dict[str, Any]] = Field(default_factory=list, description="ObservationRecord dicts.")
    refusals: list[dict[str, Any]] = Field(default_factory=list, description="Refused cards: {card_id, reason}.")
    candidates: CandidateSet = Field(default_factory=CandidateSet)
    state: dict[str, Any] = Field(default_factory=dict, description="The pack's own session facts.")


@runtime_checkable
class Domain(Protocol):
    """One domain pack, as the pipelines see it (see module docstring)."""

    name: str
    labels: Mapping[str, Sequence[str]]
    cards: Sequence[CardSpec]
    texts: DomainTexts
    orchestrator_policy: str
    generator_persona: str
    conflict_kinds: Sequence[str]
    branch_of_intent: Mapping[str, str]
    entity_kind: str | None
    """The grounding kind of the user's own records a change names (``order_id``; ``None``: none). A change
    that names none of the user's several such records is asked back ("which one?")."""
    transfer_tool: str | None
    """The tool that hands a session to a person (run on escalation; its failure never blocks it)."""
    transfer_reasons: Mapping[str, str]
    """Escalation reason code → the transfer tool's own reason code."""
    binds_user: bool
    """A session plays as the request's ``user_id``: the tools bind it before the turn (``bind_user``)."""

    @property
    def registry(self) -> ToolRegistry[Any]:
        """The typed tool registry."""
        ...

    def arg_kinds(self, tool: str) -> Mapping[str, str]:
        """Argument name → grounding kind for ``tool`` (empty: no grounded argument)."""
        ...

    def optional_empty(self, tool: str) -> frozenset[str]:
        """Arguments of ``tool`` that may be the empty string (an optional address line)."""
        ...

    def clarify_key(self, kind: str) -> str | None:
        """Which clarify question asks for a missing grounding ``kind`` (a key of ``texts.clarify``)."""
        ...

    def rule_tables(self) -> dict[str, Any]:
        """The pack's default rule bundle (``{version, phi, psi, tiers, w3}``, the user_config shape)."""
        ...

    def read_tools(self, facts: TurnFacts) -> list[str]:
        """The read tools the session may call now (e.g. private reads only once verified)."""
        ...

    def cards_for(self, intent: str, sub_intent: str, facts: TurnFacts) -> list[CardSpec]:
        """The write cards this perceived intent may offer now (empty when it asks for no change)."""
        ...

    def change_intents(self) -> set[str]:
        """The intents that may offer a write card at all, whoever the user is (a change request: a
        clarify of one carries the request into the next turn)."""
        ...

    def intent_prior(self, text: str) -> list[str] | None:
        """The intents the text's explicit cues allow (``None``: any). A pack whose cues read change
        requests says so with a true ``change_cues`` attribute: a card is then offered only once a
        user text of the session cues an intent that offers one."""
        ...

    def sub_intent_prior(self, text: str, intent: str) -> list[str] | None:
        """The sub-intents of ``intent`` the text's cues allow (``None``: any)."""
        ...

    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        """Deterministic extractors over one redacted user text: kind → values."""
        ...

    def fixed_candidates(self) -> dict[str, list[str]]:
        """The pack's own vocabularies (reason codes…), always candidates."""
        ...

    def slot_schema(self) -> dict[str, Any] | None:
        """The W2 slot model's JSON schema (``None``: no slot call)."""
        ...

    def absorb_slots(self, slots: Mapping[str, Any], facts: TurnFacts) -> dict[str, list[str]]:
        """Keep what the pack needs of the slot model's output; return its proposals that are grounded
        in the user's own words (candidates by kind)."""
        ...

    async def prepare(self, facts: TurnFacts, tools: ToolRunner) -> None:
        """Read what the turn needs from live state before W1 (no-op for a pack whose state is in the history)."""
        ...

    def constraints(self, facts: TurnFacts) -> list[str]:
        """Every constraint id the user expressed this turn (Ψ may praise the satisfied ones)."""
        ...

    def session_fields(self, facts: TurnFacts) -> dict[str, Any]:
        """What a tool call may rely on besides the session id (``ToolSession`` fields: the verified
        user, the observed ids)."""
        ...

    def summarize(self, tool: str, result: Mapping[str, Any] | None) -> str:
        """A short, whole-token summary of an observation for prompts."""
        ...

    def user_state(self, tool: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
        """User-state keys and values read off one successful observation (the contract's state)."""
        ...

    def restore(self, facts: TurnFacts) -> None:
        """Put the candidates the session recorded on earlier turns (owner records) back into ``facts``."""
        ...

    def needs_slots(self, facts: TurnFacts) -> bool:
        """Whether this turn's W2 slot call can add a candidate the extractors missed."""
        ...

    def answer_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        """The answer path's template sentences, from the forward contract alone."""
        ...

    def lead_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        """Sentences a generated answer opens with, from the observations alone (the fact that answers
        the question); the generator continues after them. Empty: the generator writes it all."""
        ...

    def reply_judges(self, facts: TurnFacts, contract: ForwardContract) -> list[SentenceJudge]:
        """The pack's own sentence judges for the reply (e.g. ownership), beside the post-guard."""
        ...

    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        """Fold one observation into ``facts.state`` and ``facts.candidates`` (owner records only)."""
        ...

    def refusal_line(self, refusal: Mapping[str, Any], title: str, contract: ForwardContract) -> str:
        """Why a change was refused, in one sentence (``refusal``: ``{card_id, reason, entity}``)."""
        ...

    def executed_lines(self, action: EligibleAction, contract: ForwardContract) -> list[str]:
        """The reply of a confirmed change that ran (from the contract alone)."""
        ...

    def policy_lines(self, tool: str | None) -> Sequence[str]:
        """The policy lines the contract states about a write tool on offer or executed."""
        ...

    def entity_names(self, facts: TurnFacts) -> list[str]:
        """Names the narration may not mention (products, people, creatures…)."""
        ...

    def snapshot_values(self, facts: TurnFacts) -> dict[str, Any]:
        """The Φ snapshot of this turn (keys the pack's Φ rows read)."""
        ...

    def conflicts(self, facts: TurnFacts) -> list[dict[str, Any]]:
        """W2 conflicts of the turn: ``{constraint_id, kind, entity?, detail?}`` (graded by the tiers table)."""
        ...

    # -- serving: what the tools deployment hosts ----------------------------------------------

    persistent: bool
    """Whether the pack's world lives in a world store (it has writes to keep): ``serve/`` opens the
    configured store, seeds it once from :meth:`new_world` and builds the world from its rows."""

    def new_world(self, seed: int, dataset: str | None = None) -> Any:
        """A fresh world: generated from ``seed``, or imported from a dataset file (``domain.dataset``)."""
        ...

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> Any:
        """The world made of stored ``(kind, id, json)`` rows (a persistent pack)."""
        ...

    def tool_runner(self, world: Any, ledger: Any) -> ToolRunner:
        """The pack's tool port in process over ``world`` (``ledger``: the world store, ``None`` when the pack
        is not persistent); it may also keep live session state (``load_state`` / ``live_facts`` /
        ``bind_user``: :class:`~pipelines.core.ports.LiveStateTools`)."""
        ...

    def w3_candidates(self, facts: TurnFacts) -> list[dict[str, Any]]:
        """State-derived W3 candidates (``{id, weight}``), besides the branch pool."""
        ...
