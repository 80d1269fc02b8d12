"""What a pack gives ``tandem eval`` and the load generator: its own suites, judges and session scripts.

The harness (``serve/eval``, ``serve/loadtest``) names no pack. It plays two kinds of suites:

* **tau2-format tasks** (``tau2-openings``, ``tau2-tasks``): any pack whose task replay hook
  (``pack.task_replay()``, :mod:`pipelines.core.taskreplay`) has a data folder with
  ``tasks_train.json`` and ``db.json``. Whole tasks also need the pack's scripted user
  (:meth:`PackEvaluation.scripted_user`); the database check replays the task's expected actions
  through the same hook.
* **a pack's own suites** (:meth:`PackEvaluation.suites`): sessions the pack builds itself, each
  :class:`Case` a session of :class:`EvalTurn`.

A pack opts in with a method ``evaluation()`` returning a :class:`PackEvaluation` (a pack without one
gets the empty default: tau2 suites only, where its replay hook has data). Per-turn measures of a pack's
own suites come from :meth:`PackEvaluation.turn_judge`: a verdict (``bool``) is summarised as a rate, a
list of findings as a count (lower is better), ``None`` as not judged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["EvalTurn", "Case", "AssistantTurn", "first_person", "opening", "SuiteOptions", "TurnView", "TurnJudge", "EntityLookup", "ScriptedUserLike",
           "PackEvaluation", "evaluation_of"]


@dataclass(frozen=True)
class EvalTurn:
    """One user turn: the text sent, what it is scored against, and the request's ``user_id``.

    ``expect`` is a decision expectation the harness scores (``{"kind": "authenticate" | "action_card" |
    "executed" | "clarify" | "escalate" | "no_write" | "identify", ...}``); ``label`` is what a pack's
    own judge reads (opaque to the harness).
    """

    text: str
    expect: dict[str, Any] | None = None
    label: dict[str, Any] | None = None
    user_id: str | None = None


@dataclass(frozen=True)
class Case:
    """One session of a suite (``info``: what the judges need: the session's bound ids, the task's id)."""

    suite: str
    case_id: str
    turns: tuple[EvalTurn, ...]
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SuiteOptions:
    """What a pack's suite builder may use: the app's world seed and the suite's own seed and size."""

    world_seed: int = 7
    seed: int = 0
    sessions: int = 4
    turns: int = 5


@dataclass(frozen=True)
class TurnView:
    """One played turn, as a pack's judge sees it."""

    case: Case
    turn: EvalTurn
    delivered: str
    """The text the user saw (reply, narration and questions)."""
    reply: str
    """The reply deltas alone."""
    meta: Mapping[str, Any]
    """The stored turn's meta (the pipeline's own record under its kind's key)."""
    own: Mapping[str, Any]
    """The pipeline's own record of the turn (``meta[<kind's key>]``)."""
    perceives: bool
    """Whether the pipeline records a perceived intent (its ``c1``)."""


#: ``(measures, fields)`` of one turn: measures are verdicts (bool), findings (list) or ``None``.
TurnJudge = Callable[[TurnView], tuple[dict[str, bool | list[Any] | None], dict[str, Any]]]
#: ``(entity kind, key)`` → the entity's JSON in a world (``None``: absent).
EntityLookup = Callable[[str, str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class AssistantTurn:
    """What the user read of one assistant turn."""

    text: str = ""
    question: str | None = None
    cards: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    escalated: bool = False
    options: tuple[str, ...] = ()
    """The choices a clarify question lists."""

    @classmethod
    def from_sse(cls, events: Sequence[Mapping[str, Any]]) -> AssistantTurn:
        parts: list[str] = []
        told: list[str] = []  # what the question and hand-over events say (the stream may say it too, before or after)
        kind = ""  # the stream the last delta came on
        question = None
        cards: list[tuple[str, Mapping[str, Any]]] = []
        escalated = False
        options: list[str] = []
        for e in events:
            t = e.get("type")
            if t in ("narration.delta", "reply.delta"):
                text = str(e.get("text") or "")
                if t == "reply.delta" and kind == "narration.delta" and parts and text[:1] != " " \
                        and parts[-1][-1:] != " ":
                    text = " " + text  # the reply after the narration: two channels a client shows apart
                parts.append(text)
                kind = str(t)
            elif t == "clarify":
                question = str(e.get("question") or "")
                options = [str(o) for o in e.get("options") or []]
                told += [question, *options]
            elif t == "action_card":
                cards.append((str(e.get("card_id")), dict(e.get("params") or {})))
            elif t == "escalation":
                escalated = True
                told.append(str(e.get("message") or ""))
        said = "".join(parts)
        return cls((said + _unsaid(said, *told)).strip(), question, tuple(cards), escalated, tuple(options))


def _unsaid(said: str, *texts: str) -> str:
    """What an event adds to the text the turn streamed (a question or message it streamed already is not
    repeated), with a space before each."""
    return "".join(" " + t for t in texts if t and t not in said)


_SWAPS = [
    (r"\byou're\b", "I'm"), (r"\byou've\b", "I've"), (r"\byou'd\b", "I'd"), (r"\byou'll\b", "I'll"),
    (r"\byou are\b", "I am"), (r"\byou were\b", "I was"), (r"\byourself\b", "myself"),
    (r"\byours\b", "mine"), (r"\byour\b", "my"),
    (r"\b(to|for|with|asks|ask|tell|tells|give|gives|help|helps|let|lets) you\b", r"\1 me"),
    (r"\byou\b", "I"),
]


def first_person(text: str) -> str:
    """A fixed second-to-first-person pronoun swap (keeps a capital at the start of the text)."""
    out = text
    for pat, rep in _SWAPS:
        out = re.sub(pat, rep, out, flags=re.I)
    out = re.sub(r"\bi\b", "I", out)
    return out[:1].upper() + out[1:] if out else out


def opening(reason: str, verbatim: bool) -> str:
    """The user's opening message built from a tau2 task's ``reason_for_call`` (its first sentence, in the
    first person; ``verbatim``: the whole reason unchanged)."""
    text = reason.strip().lstrip(".").strip()
    if verbatim:
        return text
    first = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0]
    return first_person(first)


class ScriptedUserLike(Protocol):
    """A deterministic user for one tau2-format task (see the support pack's ``tau2_user``)."""

    writes: Sequence[Any]
    done: set[int]
    turns: int
    cards_refused: int
    repeated_asks: int
    reoffered_after_no: int
    ended: str | None
    kind: str

    def opening(self) -> str: ...

    def respond(self, turn: AssistantTurn) -> Any: ...

    def pursuing(self) -> str | None:
        """The write tool of the request the user pursues now (``None``: none left)."""
        ...


class PackEvaluation:
    """The default: no suites, judges or scripts of its own. Packs subclass and override what they have."""

    def suites(self) -> Mapping[str, Callable[[SuiteOptions], list[Case]]]:
        """Suite name → builder (same options ⇒ same cases)."""
        return {}

    @property
    def plays_tasks(self) -> bool:
        """Whether the pack has a scripted user for whole tau2-format tasks."""
        return type(self).scripted_user is not PackEvaluation.scripted_user

    def card_rules(self) -> Mapping[str, tuple[str, re.Pattern[str]]]:
        """The judge of a requested card, held out of the pipeline's own cues: card id → (family, the lexical
        rule one of the user's texts of the open request must match). A card with no rule counts as
        unrequested."""
        return {}

    def turn_judge(self, case: Case, world_seed: int) -> TurnJudge | None:
        """A judge for the turns of one session of the pack's own suites (it may keep state across turns)."""
        return None

    def entity_status(self, lookup: EntityLookup, entity: str) -> str | None:
        """The status of a record an expectation names (``expect["entity"]``), read through ``lookup``."""
        return None

    def scripted_user(self, task: Mapping[str, Any], db: Mapping[str, Any], card_tools: Mapping[str, str],
                      max_turns: int, kind: str = "instructed") -> ScriptedUserLike | None:
        """The user that plays one tau2-format task (``None``: the pack cannot play whole tasks). ``kind``:
        ``instructed`` (says only what its instructions say: :mod:`pipelines.core.tau2_user`) or ``informed``
        (answers from the task's expected actions, where the pack keeps one)."""
        return None

    def oracle_labels(self, tool: str | None) -> tuple[str, str] | None:
        """The (intent, sub-intent) of the request whose write runs ``tool`` (``None``: no write left — a
        question), for ``--perception oracle``; ``None`` when the pack cannot say."""
        return None

    def said_as(self, value: str) -> list[str]:
        """Other ways a user says ``value`` than as it is stored (a state's name for its code): the invented-argument
        judge takes a value as the user's when one of them is in their words. Default: none."""
        return []

    def readback_terms(self, card_id: str, params: Mapping[str, Any], db: Mapping[str, Any]) -> dict[str, list[str]]:
        """Per argument a card changes, the words its read-back must carry (every one of them), read from the
        task's database: a card whose reply misses one is counted in ``readback_missing``. Empty: not judged."""
        return {}

    def intent_label(self, actions: Sequence[Mapping[str, Any]]) -> str | None:
        """A task's intent label, from its expected actions (``None``: no label)."""
        return None

    def label_tools(self, label: str) -> set[str]:
        """The write tools whose request an intent label names."""
        return set()

    def load_sessions(self, seed: int, n_sessions: int, turns: int) -> list[tuple[str, ...]]:
        """Multi-turn session scripts for the load generator (empty: none)."""
        return []


class EvaluatedPack(Protocol):
    """What the harness reads of a pack here: its ``evaluation`` hook (the ``Domain`` protocol's)."""

    def evaluation(self) -> PackEvaluation: ...


def evaluation_of(pack: EvaluatedPack) -> PackEvaluation:
    """The pack's evaluation hooks (``PackBase``'s default: none of its own)."""
    kit = pack.evaluation()
    return kit if isinstance(kit, PackEvaluation) else PackEvaluation()
