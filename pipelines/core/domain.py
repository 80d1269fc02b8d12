"""The ``Domain`` protocol: every hook the core calls on a domain pack, in one typed place.

A pack implements it (the built-in ``support`` and ``coach``, or an installed distribution); the ``tandem``
turn, the rungs and ``serve/`` only ever talk to this protocol, and call every hook directly (no probing
for optional ones). Pack authors import it, and everything else they need, from :mod:`pipelines.domain`,
and subclass :class:`~pipelines.core.packbase.PackBase`, which gives every **optional** hook its default
(:data:`OPTIONAL` lists them); a pack must give the **required** ones (:data:`REQUIRED`).
``docs/domains.md`` is the reference, hook by hook, and a test keeps it in step with this module.

The hooks, by what they serve:

* **catalogue** — the typed tool registry, the action cards (:class:`Card`), the grounding kind of each
  argument (:mod:`pipelines.grounding`), the reads that sign the user in;
* **gating** — which cards a perceived intent may offer, which reads the session may use now, which
  intents may change anything at all;
* **perception** — the W1 labels, an intent prior from explicit cues, the Φ snapshot values;
* **grounding** — deterministic extractors over the user's words, the slot model's schema and the filter
  of its proposals, candidates read off the owner's records (``observe``), a card's arguments completed
  and ordered (``arrange``), a choice the words leave open (``undecided``);
* **the reply** — texts, template lines of each path, the pack's own sentence judges;
* **kernels** — the rule-table bundle (Φ, Ψ, tiers, W3), its conflict kinds and branches, the W2
  conflicts of a turn, the W3 candidates;
* **serving** — the world (made, stored, forked) and the tool port over it;
* **evaluation and conformance** — the pack's own suites, its benchmark replay, sample writes that
  ``tandem domain check`` exercises.

Session facts (who is verified, what was observed, a pending action) are the pack's own state in
:attr:`TurnFacts.state`, stored in each turn's meta and read back next turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipelines.gate import SentenceJudge
from pipelines.grounding import CandidateSet
from pipelines.tools import ToolRegistry

from .contract import EligibleAction, ForwardContract
from .evaluation import PackEvaluation
from .ports import ToolRunner
from .taskreplay import TaskReplayHook

__all__ = ["DomainTexts", "Card", "CardSpec", "Domain", "TurnFacts", "SampleWrite", "REQUIRED", "OPTIONAL",
           "protocol_members"]


class DomainTexts(BaseModel):
    """Locale data of a pack (``en``): every text a pipeline may deliver without the generator.

    ``clarify`` and ``templates`` are keyed as the turn looks them up: ``clarify[<grounding kind>]`` (or the key
    ``clarify_key`` maps it to), ``clarify["choose"]`` (``{options}``), ``clarify["details"]``;
    ``templates["card:<card id>"]`` (the card's read-back, from its parameters), ``templates["action_card"]``
    (``{phrase}``: the sentence that offers a card), ``templates["<intent>/<sub-intent>"]`` (a fixed answer),
    ``templates["executed"]``, ``templates["conflict:<kind>"]``, ``templates["write_unknown"]``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    safe_ack: str = Field("Let me look into that.",
                          description="Delivered instead of a narration sentence the guard refuses.")
    narration_completion: str = Field(
        "look into that.", min_length=1,
        description="Ends a narration sentence whose opening words (\"I'll\", \"we will\") already went out "
                    "when the rest was refused: \"I'll\" + this.")
    fallback: str = Field("Sorry, I can't do that right now. Could you try again in a moment?",
                          description="The conservative reply of a turn that fell back.")
    handoff: str = Field("I'm passing you to a person who can help.",
                         description="The reply of an escalation to a person.")
    declined: str = Field("All right, I've left it as it is.",
                          description="The reply when the user declines a pending action.")
    clarify: dict[str, str] = Field(..., description="Clarify question per missing kind; 'choose' and 'details'.")
    templates: dict[str, str] = Field(default_factory=dict, description="Path templates (str.format fields).")
    guidance: dict[str, str] = Field(default_factory=dict, description="W3 guidance id -> sentence.")
    refusals: dict[str, str] = Field(default_factory=dict, description="Why a change was refused, per reason code.")

    @field_validator("templates")
    @classmethod
    def _offer_sentence(cls, templates: dict[str, str]) -> dict[str, str]:
        """A pack without its own ``action_card`` sentence offers a card in the platform's words."""
        return {"action_card": "I can {phrase}. Reply yes to confirm.", **templates}

    def question(self, kind: str, **fields: Any) -> str:
        """The clarify question for ``kind`` (falls back to ``details``; ``choices``, the question that lists the
        user's own options, and ``choice``, the one that names the only one, to a plain one of the core's when
        the pack has none)."""
        text = (self.clarify.get(kind) or _CORE_CHOICES.get(kind) or self.clarify.get("details") or self.fallback)
        try:
            return text.format(**fields)
        except (KeyError, IndexError):
            return self.clarify.get("details") or self.fallback


_CHOICES = "Which of these do you mean: {options}?"
#: The core's questions with the user's own options, for a pack without its own: several, or the one there is.
_CORE_CHOICES = {"choices": _CHOICES, "choice": "Do you mean {options}?"}


@runtime_checkable
class CardSpec(Protocol):
    """What the core reads of an action card (:class:`Card` is the platform's own)."""

    id: str
    title: str
    tool: str
    kind: str
    required_params: tuple[str, ...]


class Card(BaseModel):
    """An action card: the only way a write reaches the user. Shown with its read-back
    (``texts.templates["card:<id>"]``, filled from its parameters) and run only after the user's yes.

    ``Card(id="card.renew_loan", title="Renew a loan", tool="renew_loan", required_params=("loan_id",))``
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(..., description="Unique, conventionally ``card.<tool>``; the read-back key is ``card:<id>``.")
    title: str = Field(..., description="What the card does, as a title (\"Renew a loan\"); refusals quote it.")
    tool: str = Field(..., description="The write tool the card runs.")
    kind: str = Field("write", description="``write`` (the only kind the turn offers).")
    required_params: tuple[str, ...] = Field(
        ..., description="The tool's arguments the card carries (each grounded, each shown in the read-back).")


class TurnFacts(BaseModel):
    """What a pack's hooks see of the turn so far (plain data; the pipeline fills it)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(..., description="The session's id.")
    user_text: str = Field(..., description="This turn's redacted text.")
    user_texts: list[str] = Field(default_factory=list, description="Every redacted user text of the session.")
    user_id: str | None = Field(None, description="The request's user (coach) or the verified user (support).")
    intent: str | None = Field(None, description="The perceived intent (W1), once perceived.")
    sub_intent: str | None = Field(None, description="The perceived sub-intent, once perceived.")
    observations: list[dict[str, Any]] = Field(default_factory=list, description="ObservationRecord dicts.")
    refusals: list[dict[str, Any]] = Field(default_factory=list, description="Refused cards: {card_id, reason}.")
    candidates: CandidateSet = Field(default_factory=CandidateSet, description=(
        "Grounded candidates per kind, each with its source: the user's words (extractors, the slot model) or "
        "their own records (observe)."))
    state: dict[str, Any] = Field(default_factory=dict, description="The pack's own session facts.")


@dataclass(frozen=True)
class SampleWrite:
    """One write ``tandem domain check`` exercises: a call of ``tool`` with ``args`` that ``user_id`` may make
    on the pack's fresh world (``new_world(7)``): eligible once confirmed, every argument grounded."""

    tool: str
    args: dict[str, Any]
    user_id: str
    user_texts: tuple[str, ...] = field(default=())


@runtime_checkable
class Domain(Protocol):
    """One domain pack, as the core sees it (see module docstring). Optional hooks say so, with their default
    in :class:`~pipelines.core.packbase.PackBase`."""

    # -- identity and catalogue -------------------------------------------------------------------
    name: str
    """The pack's name: the entry point's name, ``domain.name`` in a config."""
    labels: Mapping[str, Sequence[str]]
    """W1's labels: intent → its sub-intents (short words: ``{"loan": ("renew", "return")}``)."""
    cards: Sequence[CardSpec]
    """The action cards (:class:`Card`): one for every write tool."""
    texts: DomainTexts
    """Every text the turn may deliver without the generator (clarify questions, read-backs, refusals…)."""
    orchestrator_policy: str
    """The policy the orchestrator model is prompted with (a few sentences)."""
    generator_persona: str
    """Who the generator model speaks as (one sentence)."""
    conflict_kinds: Sequence[str]
    """The kinds of W2 conflicts :meth:`conflicts` may report (the tiers table grades each). Optional: ``()``."""
    branch_of_intent: Mapping[str, str]
    """Intent → the W3 guidance branch that serves it (a key of ``w3.yaml``). Optional: ``{}``."""
    entity_kind: str | None
    """The grounding kind of the user's own records a change names (``loan_id``; ``None``: none). A change
    that names none of the user's several such records is asked back ("which one?"). Optional: ``None``."""
    transfer_tool: str | None
    """The tool that hands a session to a person (run on escalation; its failure never blocks it). Its
    arguments are ``summary`` and, where its schema has one, ``reason_code``. Optional: ``None``."""
    transfer_reasons: Mapping[str, str]
    """Escalation reason code → the transfer tool's own reason code. Optional: ``{}``."""
    binds_user: bool
    """A session plays as the request's ``user_id``: the tools bind it before the turn (``bind_user``).
    Optional: ``False`` (the user is whoever the session's reads verify)."""
    change_cues: bool
    """True when :meth:`intent_prior` reads change requests: a card is then offered only once a user text of
    the session cues an intent that offers one. Optional: ``False`` (the perceived intent decides)."""
    carried_clarifies: frozenset[str]
    """Clarify kinds of Φ (``then: clarify:<kind>``) after which the interrupted question goes on (an
    identity check: the question is answered once the user is verified). Optional: empty."""
    reasons: Sequence[str]
    """Refusal reasons the tools may meet beyond those raised in the pack's own code (a service's reason
    codes, :data:`~pipelines.core.http_backend.BACKEND_REASONS`); each needs ``texts.refusals``. Optional."""
    lookup_tools: frozenset[str]
    """Reads whose result names the session's user (``result["user_id"]``): observing one signs the user
    in (an identity lookup). The harness reads a first lookup as an identity step. Optional: empty."""
    write_tools: frozenset[str]
    """The registry's write tools (what the tool port serializes and runs only after a yes). Optional:
    derived from the registry."""
    persistent: bool
    """Whether the pack's world lives in a world store (it has writes to keep): ``serve/`` opens the
    configured store, seeds it once from :meth:`new_world` and builds the world from its rows. Optional:
    ``False``."""

    @property
    def registry(self) -> ToolRegistry[Any]:
        """The typed tool registry (:class:`~pipelines.tools.ToolSpec` per tool: arguments, result, kind)."""
        ...

    def arg_kinds(self, tool: str) -> Mapping[str, str]:
        """Argument name → grounding kind for ``tool`` (a list of objects: one per field,
        ``"items[].book_id"``; empty: no grounded argument). PackBase reads ``arg_kind_table``."""
        ...

    def optional_empty(self, tool: str) -> frozenset[str]:
        """Arguments of ``tool`` that may be the empty string (an optional address line). Optional: none."""
        ...

    def clarify_key(self, kind: str) -> str | None:
        """Which clarify question asks for a missing grounding ``kind`` (a key of ``texts.clarify``).
        Optional: the kind itself when ``texts.clarify`` has it, else ``details``."""
        ...

    def rule_tables(self) -> dict[str, Any]:
        """The pack's default rule bundle (``{version, phi, psi, tiers, w3}``, the user_config shape).
        PackBase reads the YAML files of ``tables_dir``."""
        ...

    # -- gating -----------------------------------------------------------------------------------
    def read_tools(self, facts: TurnFacts) -> list[str]:
        """The read tools the session may call now (e.g. private reads only once verified). Optional: every
        read but the transfer tool."""
        ...

    def cards_for(self, intent: str, sub_intent: str, facts: TurnFacts) -> list[CardSpec]:
        """The write cards this perceived intent may offer now (empty when it asks for no change).
        Optional: the cards whose ``card_intents`` entry lists ``intent``."""
        ...

    def change_intents(self) -> set[str]:
        """The intents that may offer a write card at all, whoever the user is (a clarify of one carries the
        request into the next turn). Optional: from ``card_intents``."""
        ...

    # -- perception -------------------------------------------------------------------------------
    def intent_prior(self, text: str) -> list[str] | None:
        """The intents the text's explicit cues allow (``None``: any). Optional: ``None``."""
        ...

    def sub_intent_prior(self, text: str, intent: str) -> list[str] | None:
        """The sub-intents of ``intent`` the text's cues allow (``None``: any). Optional: ``None``."""
        ...

    def snapshot_values(self, facts: TurnFacts) -> dict[str, Any]:
        """The Φ snapshot of this turn: the keys Φ rows read (``requires_state``, ``args_from``). Optional:
        ``{"user_id": ...}`` once there is a user."""
        ...

    # -- grounding --------------------------------------------------------------------------------
    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        """Deterministic extractors over one redacted user text: kind → values the user typed. Optional: none."""
        ...

    def fixed_candidates(self) -> dict[str, list[str]]:
        """The pack's own vocabularies (reason codes, cabins…), always candidates. Optional: none."""
        ...

    def slot_schema(self) -> dict[str, Any] | None:
        """The W2 slot model's JSON schema (``None``: no slot call). Optional: ``None``."""
        ...

    def absorb_slots(self, slots: Mapping[str, Any], facts: TurnFacts) -> dict[str, list[str]]:
        """Keep what the pack needs of the slot model's output; return its proposals that are grounded in the
        user's own words (candidates by kind). Optional: none."""
        ...

    def needs_slots(self, facts: TurnFacts) -> bool:
        """Whether this turn's W2 slot call can add a candidate the extractors missed. Optional: ``False``."""
        ...

    async def prepare(self, facts: TurnFacts, tools: ToolRunner) -> None:
        """Read what the turn needs from live state before W1. Optional: the request's ``user_id`` becomes a
        ``user_id`` candidate of the user's own (``binds_user`` packs); nothing else."""
        ...

    def restore(self, facts: TurnFacts) -> None:
        """Put the candidates the session recorded on earlier turns (owner records) back into ``facts``.
        Optional: nothing."""
        ...

    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        """Fold one observation into ``facts.state`` and ``facts.candidates`` (the owner's records only: a
        record of someone else never becomes a candidate). Optional: nothing."""
        ...

    def refused(self, tool: str, args: Mapping[str, Any], reason: str, facts: TurnFacts) -> None:
        """A change the policy refused (its precheck before the card, or its write on the yes): the pack may move
        its request on — to the next of several records the user asked for — instead of meeting the refusal
        again. Optional: nothing."""
        ...

    def session_fields(self, facts: TurnFacts) -> dict[str, Any]:
        """What a tool call may rely on besides the session id (:class:`~pipelines.core.ports.ToolSession`
        fields: the verified user, the observed ids). Optional: ``facts.user_id`` as the user."""
        ...

    def constraints(self, facts: TurnFacts) -> list[str]:
        """Every constraint id the user expressed this turn (Ψ may praise the satisfied ones). Optional: none."""
        ...

    def arrange(self, tool: str, args: dict[str, Any], facts: TurnFacts) -> dict[str, Any]:
        """A proposed card's arguments completed and put in the order the tool reads them (every item the
        user named on one card; pairs of lists aligned). Optional: unchanged."""
        ...

    def undecided(self, tool: str, args: dict[str, Any], facts: TurnFacts) -> tuple[str, list[str]] | None:
        """``(clarify key, options in words)`` when the user's words leave a choice of the card open (two
        variants tie on what they described): the turn asks instead of letting the model pick. Optional:
        ``None``."""
        ...

    def settle_intent(self, intent: str, sub_intent: str, facts: TurnFacts) -> tuple[str, str]:
        """The perceived request as the user's records settle it, once read (a change of an item of a pending order
        is a modification, of a delivered one an exchange); the turn takes it only where the user's words allowed
        both. Optional: unchanged."""
        ...

    def first_question(self, facts: TurnFacts) -> str | None:
        """The question the session needs answered before any other (a key of ``texts.clarify``: who the user is,
        before anything of their account), or ``None``. Optional: ``None``."""
        ...

    # -- finding the user's records, questions with choices, read-backs ----------------------------
    def record_reads(self, facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        """Reads that show what each of the user's own records (``entity_kind``) holds, so a record the user
        describes by its contents ("the order with the desk lamp") can be found (the turn runs at most eight).
        Optional: none."""
        ...

    def pick_records(self, intent: str, options: Sequence[str], facts: TurnFacts) -> list[str]:
        """The user's records among ``options`` that fit what the user described and what ``intent`` can change
        (one: it is the record in question; several: the user chooses among them). Optional: ``options``."""
        ...

    def select_record(self, record: str, facts: TurnFacts, then: Sequence[str] = ()) -> None:
        """Make ``record`` the record in question of the session (found by its contents); ``then``: the records
        the same request covers after it, taken up one by one as each write is done. Optional: no-op."""
        ...

    def asks_for_all(self, facts: TurnFacts) -> bool:
        """Whether the user's words ask for every record that fits ("all my pending orders", "both orders"):
        the request is then one card per record, in turn. Optional: ``False``."""
        ...

    def describe_records(self, records: Sequence[str], facts: TurnFacts) -> list[str]:
        """Each record in words a person recognises ("#W1 (Desk Lamp, Water Bottle; delivered)"), for a
        question that asks which. Optional: the ids."""
        ...

    def choices(self, about: str, facts: TurnFacts) -> list[str]:
        """The user's own options for a question ``about`` a kind, in words ("your Visa ending in 4242"), offered
        when the plain question was answered and asked again. Optional: none."""
        ...

    def choice_reads(self, about: str, facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        """Reads that the :meth:`choices` of ``about`` need first (the user's payment methods). Optional: none."""
        ...

    def readback(self, tool: str, args: Mapping[str, Any], facts: TurnFacts) -> dict[str, str]:
        """A card's arguments in words, per argument (``item_ids`` → "the Desk Lamp (black, battery)"); the core
        reads every argument back and words the ones left out by their value. Optional: none."""
        ...

    def readback_reads(self, tool: str, args: Mapping[str, Any], facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        """Reads a card's read-back needs before it is shown (the payment methods, to name one by its last
        digits). Optional: none."""
        ...

    # -- observations and the reply ---------------------------------------------------------------
    def summarize(self, tool: str, result: Mapping[str, Any] | None) -> str:
        """A short, whole-token summary of an observation for prompts. Optional: compact JSON, cut at 300."""
        ...

    def user_state(self, tool: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
        """User-state keys and values read off one successful observation (the contract's state; a reply may
        cite only these). Optional: ``"<tool>.<field>"`` for every scalar field."""
        ...

    def answer_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        """The answer path's template sentences, from the forward contract alone (empty: the generator writes
        the answer). Optional: none."""
        ...

    def lead_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        """Sentences a generated answer opens with, from the observations alone (the fact that answers the
        question); the generator continues after them. Optional: none."""
        ...

    def reply_judges(self, facts: TurnFacts, contract: ForwardContract) -> list[SentenceJudge]:
        """The pack's own sentence judges for the reply (e.g. ownership), beside the post-guard. Optional: none."""
        ...

    def refusal_line(self, refusal: Mapping[str, Any], title: str, contract: ForwardContract) -> str:
        """Why a change was refused, in one sentence (``refusal``: ``{card_id, reason, entity}``). Optional:
        ``"I can't <title>: <texts.refusals[reason]>."``."""
        ...

    def executed_lines(self, action: EligibleAction, contract: ForwardContract) -> list[str]:
        """The reply of a confirmed change that ran (from the contract alone). Optional:
        ``texts.templates["executed"]``."""
        ...

    def policy_lines(self, tool: str | None) -> Sequence[str]:
        """The policy lines the contract states about a write tool on offer or executed. Optional: none."""
        ...

    def entity_names(self, facts: TurnFacts) -> list[str]:
        """Names the narration may not mention (titles, people, products…). Optional: none."""
        ...

    # -- kernels ----------------------------------------------------------------------------------
    def conflicts(self, facts: TurnFacts) -> list[dict[str, Any]]:
        """W2 conflicts of the turn: ``{constraint_id, kind, entity?, detail?}`` (``kind`` one of
        :attr:`conflict_kinds`, graded by the tiers table). Optional: none."""
        ...

    def w3_candidates(self, facts: TurnFacts) -> list[dict[str, Any]]:
        """State-derived W3 candidates (``{id, weight}``), besides the branch pool. Optional: none."""
        ...

    # -- serving: what the tools deployment hosts --------------------------------------------------
    def new_world(self, seed: int, dataset: str | None = None) -> Any:
        """A fresh world: generated from ``seed``, or imported from a dataset file (``domain.dataset``)."""
        ...

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> Any:
        """The world made of stored ``(kind, id, json)`` rows (a persistent pack). Optional: the pack's
        ``world_type.from_entities`` (a :class:`~pipelines.core.world.RecordWorld`)."""
        ...

    def tool_runner(self, world: Any, ledger: Any) -> ToolRunner:
        """The pack's tool port in process over ``world`` (``ledger``: the world store, ``None`` when the pack
        is not persistent); it may also keep live session state (``load_state`` / ``live_facts`` /
        ``bind_user``: :class:`~pipelines.core.ports.LiveStateTools`). Optional: the core's
        :class:`~pipelines.core.runner.LocalToolRunner` over the pack as its backend."""
        ...

    # -- evaluation and conformance -----------------------------------------------------------------
    def evaluation(self) -> PackEvaluation:
        """The pack's own suites, judges, scripted user and load scripts for ``tandem eval`` / ``tandem load``.
        Optional: none (tau2 suites only, where :meth:`task_replay` has data)."""
        ...

    def task_replay(self, data_dir: str | Path | None = None) -> TaskReplayHook | None:
        """The hook that replays a benchmark's expected actions through the pack's tools (``None``: no
        benchmark). Optional: ``None``."""
        ...

    def owner_facts(self, world: Any, user_id: str, texts: Sequence[str] = ()) -> TurnFacts:
        """The facts of a session whose user ``user_id`` signed in, said ``texts`` and read their own records
        (what the backend's grounding re-check and ``tandem domain check`` start from). Optional: the
        ``lookup_tools`` observed as naming the user, the words' candidates, then the owner's reads
        (``owner_reads``, chained) folded through :meth:`observe`."""
        ...

    def sample_writes(self, world: Any) -> list[SampleWrite]:
        """Writes ``tandem domain check`` exercises on ``world`` (each tried unconfirmed, refused, grounded,
        scoped, stored). Optional: one per write tool, its arguments filled from the first user's records."""
        ...


def protocol_members(protocol: type = Domain) -> list[str]:
    """The names a protocol declares (attributes and methods), in declaration order."""
    names: list[str] = []
    for klass in reversed(protocol.__mro__):
        if klass is Protocol or not getattr(klass, "_is_protocol", False):
            continue
        for name in list(getattr(klass, "__annotations__", {})) + list(vars(klass)):
            if not name.startswith("_") and name not in names:
                names.append(name)
    return names


#: Hooks a pack must give (PackBase has no default for them).
REQUIRED: frozenset[str] = frozenset({
    "name", "labels", "cards", "texts", "orchestrator_policy", "generator_persona", "registry", "arg_kinds",
    "rule_tables", "new_world"})
#: Hooks with a default in PackBase (a pack overrides what its domain needs).
OPTIONAL: frozenset[str] = frozenset(protocol_members(Domain)) - REQUIRED
