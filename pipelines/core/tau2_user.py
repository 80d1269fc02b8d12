"""The instructed tau2 user: a scripted, deterministic user that says only what its instructions say.

tau2's own user simulator sees ``user_scenario.instructions`` alone (the reason for the call, what it
knows, what it does not know). This user keeps to that: every fact it states is a sentence of its
instructions (turned into the first person) or the identity its ``known_info`` gives. It never reads the
task's expected actions to *say* anything; it reads them only to *judge* a card, as a person knows what they
asked for when a change is read back to them.

What it can say (:class:`Instructions`):

* **sayable sentences** — the sentences of ``reason_for_call`` in the first person, without the ones that
  direct the conversation rather than state a wish ("If the agent asks…", "Mention…", "Make sure…",
  "do not reveal…") and without asides that hide a fact ("(… but do not reveal it to the agent)");
* **identity** — from ``known_info``: the email(s), a first and last name with a zip code, or a user id
  (with the zip code when it has one), in the order the pack's vocabulary prefers;
* **how it behaves** — ``task_instructions``, which tau2's user reads too: its conditional instructions ("If asked
  for the reason, say …") and, as an answer on a topic they state, its sayable sentences (never volunteered: most
  of them describe a persona);
* **what it does not know** — a fixed line per topic ("I don't know the order number.", "I'd rather not say."
  for a reason the instructions do not give: a reason is a fact, so the user never makes one up).

Rules, tried in this order on each assistant turn:

1. **escalation** → the session ends (``escalated``); past ``max_turns`` user turns → ``turn_cap``.
2. **a card** → ``Yes, please go ahead.`` when its tool and arguments equal an expected write not done yet
   (that write is then done), else ``No, that's not what I want.`` (``cards_refused``; a card equal to one
   refused before also counts in ``reoffered_after_no``); with the no, what a conditional instruction the card's
   words meet says to say ("But when the agent asks for confirmation, you decide to keep it after all"), once.
3. **asked who they are** → the identity (a second ask gives the next identity the instructions hold, e.g.
   another email).
4. **asked what a conditional instruction names** ("If the agent asks for which vacuum cleaner, mention the
   robotic one": every word of its condition in the question, by its first five letters, or every topic its
   condition names among the question's topics — "the cancellation reason" is asked by "why …?") → what it says
   to say (each clause of it up to one that directs the conversation: "it is 15-inch, and it is two laptops" is
   said whole; "…, then ask the agent to …" is not), once.
   **told that something cannot be done** (the turn says it can't, can only, or that something is not possible,
   available or eligible) when an instruction says what to do then ("If a refund to the credit card is not
   possible, return it to a gift card": a content word of its condition in the turn's words, by their first five
   letters; the one sharing most) → what it says to do, once (``otherwise``).
5. **asked what to change, right after a refusal** → what differs between the refused card and the write the
   user wants, in words: an item the card should leave alone ("Not the Water Bottle."), one it misses
   ("Also the Desk Lamp."), and for a wrong option, payment, address, order or reason the sentence of the
   instructions about it.
6. **asked to choose** (a question that lists choices) → the sentence of the instructions whose words only some
   choices have ("I prefer black" for "purple / XL or black / XL?"); none: the one choice that is, word for word, a
   value of the write the user pursues, said in words (never an identifier: an order number, an item id) — "no
   longer needed" from "no longer needed or ordered by mistake?" when that is why they cancel: the judgement a
   card's yes makes, nothing volunteered;
   **asked about an order, item, option, address, payment method or reason** (the pack's topics) → the
   sentences of the instructions that state it (an order by the id they hold; none: "I don't know the order
   number." and the sentence that describes the order's items; nothing on the topic: the pack's line for it —
   so an open "why?" gets "I'd rather not say." where the choices would get a pick).
7. **anything else** while writes remain → the next sentence of the instructions not said yet; once all are
   said, the request restated; after two restatements in a row with no progress the user gives up (``stuck``).
8. **anything else** when no write remains → ``done``.

A question asked again, word for word, after the user answered it is a **repeated ask**. Everything is a pure
function of the task, the database the pack reads item names from, and the assistant's turns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .evaluation import AssistantTurn, first_person, opening

__all__ = ["UserReply", "InstructedVocabulary", "Instructions", "TaskUser", "InstructedUser", "asking", "same_arguments",
           "card_signature", "identity_lines", "conditionals", "outcomes", "SPLIT_SEED", "split_half"]

_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
_ASKS = re.compile(r"\?|\b(please (provide|tell|confirm|share|give|specify|let me know)|could you|can you|which|"
                   r"what)\b", re.I)
#: A sentence that directs the conversation instead of stating the user's wish.
_DIRECTIVE = re.compile(r"\b(the|an|a|any|this) (agent|representative|assistant)s?\b|\bagent'?s\b", re.I)
_HIDDEN = re.compile(r"\b(do not|don't|never|not to) (reveal|share|tell|mention|say|disclose)\b", re.I)
_COACHING = re.compile(r"^\s*(mention|make sure|ask|tell|say|be|do not|don't|never|remember|try|insist|explicitly|"
                       r"once|when|after|before you)\b", re.I)
_ASIDE = re.compile(r"\s*\(([^()]*)\)")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NAME = re.compile(r"\b(?:You are|You're|Your name is|You name is|called|name is)\s+(?:an? [a-z ]+? called\s+)?"
                   r"([A-Z][a-z]+)\s+([A-Z][a-z]+)\b")
_USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{3,}\b")
_ZIP = re.compile(r"(?<![\w#$.])\d{5}(?![\w.]\d|\w)")
_WORDS = re.compile(r"[a-z0-9]+")


def asking(text: str) -> str:
    """The sentences of an assistant text that ask the user something (a question, or a request to provide,
    tell, share…): what the user answers. A statement that merely mentions an email asks nothing."""
    return " ".join(s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s and _ASKS.search(s))


def _same(value: Any, want: Any) -> bool:
    if isinstance(want, list):  # the same records in any order: the tools store a sorted list or pair them
        return isinstance(value, list | tuple) and sorted(str(v) for v in value) == sorted(str(w) for w in want)
    return str(value).strip() == str(want).strip()


def same_arguments(params: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """A card's arguments equal an expected action's, as a customer reads a card back: each value the same, a
    list the same records in any order, and lists of one length read as pairs (the item and what it becomes:
    ``item_ids[i]`` ↔ ``new_item_ids[i]``), the same pairs in any order."""
    if not all(_same(params.get(k), v) for k, v in want.items()):
        return False
    lists = [k for k, v in want.items() if isinstance(v, list)]
    if len(lists) > 1 and len({len(want[k]) for k in lists}) == 1:
        pairs = sorted(zip(*(map(str, params[k]) for k in lists), strict=False))
        return pairs == sorted(zip(*(map(str, want[k]) for k in lists), strict=False))
    return True


def card_signature(card_id: str, params: Mapping[str, Any]) -> str:
    """One card as shown: its id and its arguments (lists as sorted records), to tell a card offered again."""
    norm = {k: sorted(map(str, v)) if isinstance(v, list | tuple) else str(v) for k, v in sorted(params.items())}
    return f"{card_id}:{norm}"


SPLIT_SEED = 20261206
"""The seed of the one split of a task file into the half studied and the half only measured."""


def split_half(task_ids: Sequence[str], seed: int = SPLIT_SEED) -> dict[str, str]:
    """Task id → ``studied`` or ``measured``: the ids in file order, shuffled once with ``seed``; the first half
    (rounded up) is studied. The same ids and seed give the same split on every machine."""
    import random

    ids = list(dict.fromkeys(str(t) for t in task_ids))
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    cut = (len(order) + 1) // 2
    return {t: ("studied" if i < cut else "measured") for i, t in enumerate(order)}


@dataclass(frozen=True)
class UserReply:
    """The user's next message (``text`` ``None``: the session ends) and the rule that made it."""

    text: str | None
    rule: str
    repeated_ask: bool = False


@dataclass(frozen=True)
class InstructedVocabulary:
    """What a pack tells the instructed user about its domain (words only; no tool, no id of the world).

    ``asks``: topic → how an assistant question about it reads; ``facts``: topic → how a sentence of the
    instructions that states it reads; ``ids``: topic → the pattern of a record's id said alone (an order
    number), with ``id_line`` the sentence that gives one; ``unknown``: topic → what the user says when its
    instructions hold nothing on it; ``identity``: how a question about who they are reads; ``identity_order``:
    the identities the user prefers to give (``email``, ``name_zip``, ``user_id``); ``records``: record ids of
    a write's arguments → the names a person calls those records by (for the diff after a refusal);
    ``change``: how "what should I change?" reads.
    """

    write_tools: frozenset[str]
    asks: Mapping[str, re.Pattern[str]]
    facts: Mapping[str, re.Pattern[str]]
    ids: Mapping[str, re.Pattern[str]] = field(default_factory=dict)
    id_line: Mapping[str, str] = field(default_factory=dict)
    unknown: Mapping[str, str] = field(default_factory=dict)
    identity: re.Pattern[str] = re.compile(r"e-?mail|\b(your|full|first|last) name\b|\bzip\b|postal|verif|"
                                           r"identif|authenticat|who you are|user id", re.I)
    identity_order: tuple[str, ...] = ("email", "name_zip", "user_id")
    change: re.Pattern[str] = re.compile(
        r"\bwhat (?:would you like|should i|do you want|did you want|needs?|is wrong|was wrong)\b.{0,40}"
        r"\b(?:change|different|instead|wrong|fix)\b|\bwhat (?:is|was) (?:wrong|not right)\b|"
        r"\bwhat would you like (?:me )?to (?:do|change) instead\b", re.I)
    names: Callable[[Mapping[str, Any]], dict[str, list[str]]] = field(default=lambda args: {})
    """A write's arguments → per argument, the names a person calls its records by (item ids → product
    names, ...); used to say what a refused card gets wrong."""


def _clean(reason: str) -> str:
    """``reason`` without asides that hide a fact or direct the conversation."""
    def keep(m: re.Match[str]) -> str:
        inner = m.group(1)
        return "" if _HIDDEN.search(inner) or _DIRECTIVE.search(inner) else m.group(0)

    return re.sub(r"\.\.+", ".", " ".join(_ASIDE.sub(keep, reason).split()))


def sayable(text: str) -> list[str]:
    """The sentences of an instruction text the user may say, in the first person (see module docstring)."""
    out = []
    for s in _SENTENCES.split(_clean(text).strip().lstrip(".").strip()):
        s = s.strip()
        if len(_WORDS.findall(s.lower())) < 2 or _DIRECTIVE.search(s) or _HIDDEN.search(s) or _COACHING.match(s):
            continue
        out.append(first_person(s))
    return out


#: A conditional instruction keyed by what the assistant asks: "If the agent asks (you) for which vacuum cleaner,
#: mention the robotic one", "When asked for the order ID, provide 9502126 first".
_CONDITIONAL = re.compile(
    r"^\s*(?:(?:but|and|then|also)\s+)?(?:if|when|once)\s+(?:(?:the|an?)\s+(?:agent|representative|assistant)\s+asks?|(?:you\s+are\s+)?asked)"
    r"(?:\s+you)?(?:\s+(?:for|about|to|whether|if|which))?\s+(?P<cond>[^,]{3,80}),\s*(?P<then>.+?)\s*$", re.I)
#: The verb that opens an instructed answer ("mention the robotic one"): what to say follows it.
_SAY = re.compile(r"^(?:then\s+)?(?:(?:you\s+)?(?:mention|provide|say|tell\s+(?:the\s+agent|them|it)|give|answer|reply)"
                  r"(?:\s+(?:that|with))?\s+)", re.I)
_STOP = frozenset("the a an you your to for of and or if it its is are be with that this which what about any "
                  "agent asks ask asked first then".split())
_CHOICE_STOP = _STOP | frozenset("no not by was were in on at my i me do does did so but as from would like".split())


_THEN_PARTS = re.compile(r",\s*(?:but|and|then)\s+|;\s*")


def _sayable_then(then: str) -> str:
    """What a conditional instruction says to say: its clauses up to the first that directs the conversation ("…,
    and it is actually two laptops" is said; "…, then ask the agent to …" and what follows are not)."""
    then = then.strip()
    cuts = [0, *(m.start() for m in _THEN_PARTS.finditer(then)), len(then)]
    end = 0
    for a, b in zip(cuts, cuts[1:], strict=False):
        part = _THEN_PARTS.sub("", then[a:b], count=1) if a else then[a:b]
        if _DIRECTIVE.search(part) or _HIDDEN.search(part) or (a and _COACHING.search(re.sub(r"^\s*you\s+", "", part))):
            break
        end = b
    return then[:end]


def conditionals(text: str) -> list[tuple[frozenset[str], str]]:
    """The conditional instructions of a reason for the call: (the words of what the assistant must ask, what the
    user then says, in the first person)."""
    out = []
    for s in _SENTENCES.split(" ".join(str(text or "").split())):
        m = _CONDITIONAL.match(s)
        if not m:
            continue
        words = frozenset(w for w in _WORDS.findall(m.group("cond").lower()) if len(w) > 2 and w not in _STOP)
        then = _SAY.sub("", _sayable_then(m.group("then"))).rstrip(".")
        then = re.sub(r"\s+(?:first|initially|at first)$", "", then)
        if words and then and not _HIDDEN.search(then):
            said = first_person(then)
            out.append((words, said[:1].upper() + said[1:] + "."))
    return out


#: A condition on what cannot be done ("If a refund to the credit card is not possible, …", "If there is no cheaper
#: one, …"): the instruction says what the user does when the assistant says so.
_OUTCOME = re.compile(r"^\s*(?:(?:but|and|then|also)\s+)?(?:if|in case)\s+(?P<cond>[^,]{3,120}?)\s*,\s*"
                      r"(?P<then>.+?)\s*$", re.I)
_CANNOT = re.compile(r"\b(?:not|n't|no\s+longer)\s+(?:be\s+)?(?:possible|available|allowed|able|eligible|in\s+stock)\b|"
                     r"\b(?:cannot|can't|unable|impossible|unavailable|out\s+of\s+stock)\b|\bthere\s+(?:is|are)\s+no\b",
                     re.I)
#: An assistant turn saying something cannot be done.
_SAYS_CANNOT = re.compile(r"\b(?:can't|cannot|can\s+not|unable|can\s+only|only\s+(?:go|be)|not\s+possible|"
                          r"isn't\s+possible|not\s+available|unavailable|no\s+longer\s+available|not\s+eligible|"
                          r"out\s+of\s+stock)\b", re.I)
_CANNOT_WORDS = frozenset("not possible available allowed able eligible cannot can unable impossible unavailable there "
                          "no none longer stock out be is are".split())


def outcomes(text: str) -> list[tuple[frozenset[str], str]]:
    """The instructions of a reason for the call on what cannot be done: (the words of what cannot be, what the
    user then says, in the first person) — "If refund to the credit card is not possible, return it to a gift card"
    → ({refund, credit, card}, "Return it to a gift card."). Asked-for conditions (:func:`conditionals`) are not
    these."""
    out = []
    for s in _SENTENCES.split(" ".join(str(text or "").split())):
        if _CONDITIONAL.match(s):
            continue
        m = _OUTCOME.match(s)
        if not m or not _CANNOT.search(m.group("cond")):
            continue
        words = frozenset(w for w in _WORDS.findall(m.group("cond").lower())
                          if len(w) > 2 and w not in _STOP and w not in _CANNOT_WORDS)
        then = _SAY.sub("", _sayable_then(m.group("then"))).rstrip(".")
        if words and then and not _HIDDEN.search(then):
            said = first_person(then)
            out.append((words, said[:1].upper() + said[1:] + "."))
    return out


def identity_lines(known_info: str, order: Sequence[str] = ("email", "name_zip", "user_id")) -> list[str]:
    """What the user can say about who they are, from ``known_info`` alone, in the order given."""
    info = " ".join(str(known_info or "").split())
    zips = _ZIP.findall(info)
    zip_part = f", zip code {zips[-1]}" if zips else ""
    found: dict[str, list[str]] = {"email": [f"My email is {e}." for e in dict.fromkeys(_EMAIL.findall(info))]}
    name = _NAME.search(info)
    found["name_zip"] = [f"I'm {name.group(1)} {name.group(2)}{zip_part}."] if name and zips else []
    found["user_id"] = [f"My user id is {u}{zip_part}." for u in dict.fromkeys(_USER_ID.findall(info))]
    return [line for kind in order for line in found.get(kind, [])]


@dataclass(frozen=True)
class Instructions:
    """What one task lets its user say (see module docstring)."""

    opening: str
    sentences: tuple[str, ...]
    known: tuple[str, ...]
    identities: tuple[str, ...]
    answers: tuple[tuple[frozenset[str], str], ...] = ()
    """Conditional instructions: (words the assistant's question must hold, what the user says then)."""
    manner: tuple[str, ...] = ()
    """The sayable sentences of ``task_instructions`` (how the user behaves): said only as an answer on a topic
    they state, never volunteered."""
    otherwise: tuple[tuple[frozenset[str], str], ...] = ()
    """What the user does when told something cannot be done: (words of what cannot be, what the user says then)."""

    @classmethod
    def of(cls, task: Mapping[str, Any], vocab: InstructedVocabulary, verbatim: bool = False) -> Instructions:
        ins = task["user_scenario"]["instructions"]
        reason = str(ins.get("reason_for_call") or "")
        known = str(ins.get("known_info") or "")
        manner = str(ins.get("task_instructions") or "")  # tau2's user reads these too
        return cls(opening=opening(reason, verbatim), sentences=tuple(sayable(reason)),
                   known=tuple(sayable(known)), identities=tuple(identity_lines(known, vocab.identity_order)),
                   answers=tuple(conditionals(reason) + conditionals(manner)), manner=tuple(sayable(manner)),
                   otherwise=tuple(outcomes(reason) + outcomes(manner)))


def _topic_of(key: str) -> str | None:
    """The topic of a write's argument: what a person calls the thing it sets."""
    named = {"order_id": "order", "payment_method_id": "payment", "reason": "reason"}.get(key)
    if named:
        return named
    if key.startswith(("address", "city", "state", "zip", "country")):
        return "address"
    return "item" if key.endswith(("item_ids", "item_id")) else None


def _norm(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


@dataclass
class TaskUser:
    """What every scripted user of a tau2-format task shares: the task's writes (the pack's ``write_tools``), the
    one it pursues, its turns and its judgement of a card (``yes`` when the card equals an expected write not done
    yet, ``no`` otherwise, a card refused before counted again in ``reoffered_after_no``), the end of a session on
    an escalation or past ``max_turns``. ``card_tools``: card id → the tool it calls."""

    task: Mapping[str, Any]
    card_tools: Mapping[str, str]
    max_turns: int = 30
    verbatim: bool = False
    turns: int = 0
    done: set[int] = field(default_factory=set)
    said: list[str] = field(default_factory=list)
    cards_refused: int = 0
    repeated_asks: int = 0
    reoffered_after_no: int = 0
    restated: int = 0
    ended: str | None = None
    kind: str = "scripted"
    _refused: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    _last_rule: str = ""
    _focus: int | None = None

    @property
    def write_tools(self) -> frozenset[str]:
        """The tools whose calls change the world (the expected writes the user pursues)."""
        raise NotImplementedError

    @property
    def actions(self) -> list[Mapping[str, Any]]:
        return list((self.task.get("evaluation_criteria") or {}).get("actions") or [])

    @property
    def writes(self) -> list[tuple[int, Mapping[str, Any]]]:
        return [(i, a) for i, a in enumerate(self.actions) if a["name"] in self.write_tools]

    def next_write(self) -> Mapping[str, Any] | None:
        """The request the user is pursuing now: its next expected write not done yet."""
        return next((a for i, a in self.writes if i not in self.done), None)

    def pursuing(self) -> str | None:
        """The tool of the request the user is speaking of now (``None``: no write remains; the oracle's status
        only): the write not done yet whose records the user's last message names most (an order by its id, an
        item by its name); none named, the one spoken of before while it is not done; else the next expected
        write. A person who says "for order #1, exchange the kettle" speaks of the exchange, whatever order the
        task's expected writes list it in."""
        pending = [(i, a) for i, a in self.writes if i not in self.done]
        if not pending:
            return None
        last = _norm(self.said[-1]) if self.said else ""
        score, _, best = max((self._mentions(a, last), -k, i) for k, (i, a) in enumerate(pending))
        if score > 0:
            self._focus = best
        elif self._focus not in {i for i, _ in pending}:
            self._focus = pending[0][0]
        return str(self.actions[self._focus]["name"])

    def record_names(self, write: Mapping[str, Any]) -> list[str]:
        """What a person calls the records a write's arguments name (item ids → product names). Default: none."""
        return []

    def _mentions(self, write: Mapping[str, Any], said: str) -> int:
        """How many of a write's records ``said`` (normalised) names: ids of four or more characters said as they
        are stored (not who the user is: a user id or email names no request), and the names a person calls the
        records by."""
        if not said:
            return 0
        values = [str(x) for k, v in write.get("arguments", {}).items()
                  if not isinstance(v, dict) and not k.endswith(("user_id", "email"))  # who they are: no request
                  for x in (v if isinstance(v, list) else [v])]
        ids = {_norm(v) for v in values if re.search(r"\d", v) and len(v.strip("#")) >= 4}
        names = {_norm(n) for n in self.record_names(write) if n.strip()}
        padded = f" {said} "
        return sum(f" {x} " in padded for x in (ids | names) if x)

    def _say(self, text: str | None, rule: str, repeated: bool = False) -> UserReply:
        if text is None:
            self.ended = rule
        else:
            self.turns += 1
            self.said.append(text)
        self._last_rule = rule
        return UserReply(text, rule, repeated)

    def _card_match(self, card_id: str, params: Mapping[str, Any]) -> int | None:
        tool = self.card_tools.get(card_id)
        for i, a in self.writes:
            if i not in self.done and a["name"] == tool and same_arguments(params, a["arguments"]):
                return i
        return None

    def respond(self, turn: AssistantTurn) -> UserReply:
        """The user's reply to one assistant turn: an escalation, the cap or a card first, then what it asks."""
        ended = self._ends_or_judges(turn)
        return ended if ended is not None else self._reply(turn.question or asking(turn.text), turn)

    def _reply(self, asked: str, turn: AssistantTurn) -> UserReply:
        raise NotImplementedError

    def _ends_or_judges(self, turn: AssistantTurn) -> UserReply | None:
        """The reply an escalation, the turn cap or a card gets (``None``: none of them: the turn asks or tells)."""
        if turn.escalated:
            return self._say(None, "escalated")
        if self.turns >= self.max_turns:
            return self._say(None, "turn_cap")
        if not turn.cards:
            return None
        card_id, params = turn.cards[0]
        hit = self._card_match(card_id, params)
        if hit is not None:
            self.done.add(hit)
            self.restated = 0
            return self._say("Yes, please go ahead.", "yes")
        self.cards_refused += 1
        sig = card_signature(card_id, params)
        self.reoffered_after_no += any(card_signature(c, p) == sig for c, p in self._refused)
        self._refused.append((card_id, dict(params)))
        return self._say("No, that's not what I want.", "no")


@dataclass
class InstructedUser(TaskUser):
    """One task's instructed user (see module docstring)."""

    vocab: InstructedVocabulary = field(kw_only=True)
    kind: str = "instructed"
    _answered: set[str] = field(default_factory=set)
    _identity_next: int = 0
    _conditions_used: set[int] = field(default_factory=set)
    _outcomes_used: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.instructions = Instructions.of(self.task, self.vocab, self.verbatim)

    @property
    def write_tools(self) -> frozenset[str]:
        return self.vocab.write_tools

    def _ends_or_judges(self, turn: AssistantTurn) -> UserReply | None:
        """As every scripted user; a card it refuses gets, with the no, what a conditional instruction the card meets
        says to say ("when the agent asks for confirmation, you decide …": rule 2)."""
        reply = super()._ends_or_judges(turn)
        if reply is None or reply.rule != "no":
            return reply
        said = self._conditional(turn.text)
        if said is None:
            return reply
        self.said[-1] = text = f"{reply.text} {said}"
        return UserReply(text, "no", reply.repeated_ask)

    def _conditional(self, asked: str) -> str | None:
        """What the first unused conditional instruction ``asked`` meets says to say (rule 4), once."""
        stems = {w[:5] for w in _WORDS.findall(asked.lower())}
        asked_topics = set(self._topics(asked))
        for i, (cond, then) in enumerate(self.instructions.answers):  # "if asked for X, say Y": in order, once each
            topics = set(self._topics(" ".join(sorted(cond))))  # "the cancellation reason" is asked by "why …?"
            if i not in self._conditions_used and (all(w[:5] in stems for w in cond)
                                                   or (topics and topics <= asked_topics)):
                self._conditions_used.add(i)
                return then
        return None

    def _otherwise(self, text: str) -> str | None:
        """When ``text`` says something cannot be done, what the unused instruction on it says to do then (the one
        sharing most words with ``text``, by their first five letters; at least one), once."""
        if not _SAYS_CANNOT.search(text or ""):
            return None
        stems = {w[:5] for w in _WORDS.findall(text.lower())}
        best, score = None, 0
        for i, (cond, _) in enumerate(self.instructions.otherwise):
            n = sum(w[:5] in stems for w in cond)
            if i not in self._outcomes_used and n > score:
                best, score = i, n
        if best is None:
            return None
        self._outcomes_used.add(best)
        return self.instructions.otherwise[best][1]

    def opening(self) -> str:
        return self._say(self.instructions.opening, "opening").text or ""

    # -- what to say ---------------------------------------------------------------------------------

    def _unsaid(self, lines: Sequence[str]) -> list[str]:
        said = [_norm(s) for s in self.said]
        return [x for x in lines if not any(_norm(x) in s for s in said)]

    def _facts(self, topic: str) -> list[str]:
        rx = self.vocab.facts.get(topic)
        if rx is None:
            return []
        pool = [*self.instructions.sentences, *self.instructions.manner,
                *(self.instructions.known if topic == "address" else ())]
        return [s for s in pool if rx.search(s)]

    def _order_answer(self) -> str:
        rx = self.vocab.ids.get("order")
        ids = [m.group(0) for s in (*self.instructions.sentences, *self.instructions.known)
               for m in (rx.finditer(s) if rx else ())]
        ids = list(dict.fromkeys(ids))
        if ids:
            nxt = self.next_write()
            want = str((nxt or {}).get("arguments", {}).get("order_id", "")) if nxt else ""
            pick = next((i for i in ids if want and i.lstrip("#") == want.lstrip("#")), None)
            pick = pick or next((i for i in ids if not any(i in s for s in self.said)), ids[0])
            return self.vocab.id_line.get("order", "It's {id}.").format(id=pick)
        items = self._facts("item")
        describe = (self._unsaid(items) or items)[:1]
        return " ".join([self.vocab.unknown.get("order", "I don't know the number."), *describe])

    def _topic_answer(self, topics: Sequence[str]) -> str | None:
        parts: list[str] = []
        for topic in topics:
            if topic == "order":
                line = self._order_answer()
                if line not in parts:
                    parts.append(line)
                continue
            found = self._facts(topic)
            lines = (self._unsaid(found) or found)[:2] if found else (
                [self.vocab.unknown[topic]] if topic in self.vocab.unknown else [])
            parts += [x for x in lines if x not in parts and not any(x in p for p in parts)]
        return " ".join(parts) or None

    def _diff(self) -> str | None:
        """What the last refused card gets wrong against the write the user wants (module docstring, rule 4)."""
        if not self._refused:
            return None
        card_id, params = self._refused[-1]
        tool = self.card_tools.get(card_id)
        pending = [a for i, a in self.writes if i not in self.done]
        same_tool = [a for a in pending if a["name"] == tool]  # the one of the card's order first: what it is about
        want = next((a for a in same_tool if _same(params.get("order_id"), a["arguments"].get("order_id"))),
                    same_tool[0] if same_tool else None)
        if want is None:
            nxt = pending[0] if pending else None
            if nxt is None:
                return None
            return " ".join(["That's not what I asked for.", *self._about(nxt)[:1]])
        args = want["arguments"]
        names_have = self.vocab.names(params)
        names_want = self.vocab.names(args)
        out: list[str] = []
        for key, value in args.items():
            got = params.get(key)
            if _same(got, value) if not isinstance(value, list) else (
                    isinstance(got, list | tuple) and sorted(map(str, got)) == sorted(map(str, value))):
                continue
            have, wanted = names_have.get(key) or [], names_want.get(key) or []
            extra = [n for n in have if n not in wanted]
            missing = [n for n in wanted if n not in have]
            if extra:
                out.append("Not the " + " or the ".join(extra) + ".")
            if missing:
                out.append("Also the " + " and the ".join(missing) + ".")
            if not extra and not missing:
                line = self._topic_answer([_topic_of(key) or "item"])
                out.append(line or f"Not that {key.replace('_id', '').replace('_', ' ')}.")
        out = list(dict.fromkeys(out))
        return " ".join(out) if out else None

    def record_names(self, write: Mapping[str, Any]) -> list[str]:
        return [n for vals in self.vocab.names(write["arguments"]).values() for n in vals]

    def _mentions(self, write: Mapping[str, Any], said: str) -> int:
        """Its records named (:meth:`TaskUser._mentions`), and one more for each of its arguments' topics other than
        the order and the items that ``said`` speaks of ("… to my NYC address": an address change)."""
        topics = {_topic_of(k) for k in write.get("arguments", {})} - {"order", "item", None}
        told = sum(1 for t in topics if (rx := self.vocab.facts.get(t)) is not None and said and rx.search(said))
        return super()._mentions(write, said) + told

    def _about(self, write: Mapping[str, Any]) -> list[str]:
        """The sentences of the instructions about one write (its records by name or id), else all of them."""
        names = self.record_names(write)
        oid = str(write["arguments"].get("order_id", "")).lstrip("#")
        hits = [s for s in self.instructions.sentences
                if (oid and oid in s) or any(_norm(n) in _norm(s) for n in names)]
        return hits or list(self.instructions.sentences[:1])

    # -- one reply -----------------------------------------------------------------------------------

    def _reply(self, asked: str, turn: AssistantTurn) -> UserReply:
        """The reply to a turn that asks ``asked`` (its question, or the sentences of its text that ask) or tells."""
        key = _norm(asked)
        repeated = bool(key) and key in self._answered
        self.repeated_asks += repeated
        otherwise = self._otherwise(turn.text)
        if otherwise is not None:  # told it cannot be done: what the instructions say to do then (rule 4)
            if key:
                self._answered.add(key)
            self.restated = 0
            return self._say(otherwise, "otherwise", repeated)
        reply = self._answer(asked, turn.options)
        if reply is None:
            return self._carry_on()
        text, rule = reply
        if key:
            self._answered.add(key)
        self.restated = 0
        return self._say(text, rule, repeated)

    def _answer(self, asked: str, options: Sequence[str] = ()) -> tuple[str, str] | None:
        if not asked:
            return None
        if self.vocab.identity.search(asked) and self.instructions.identities:
            ids = self.instructions.identities
            text = ids[min(self._identity_next, len(ids) - 1)]
            if any(text in s for s in self.said):  # asked again: the next identity it has (another email)
                self._identity_next = min(self._identity_next + 1, len(ids) - 1)
                text = ids[self._identity_next]
            return text, "identity"
        then = self._conditional(asked)
        if then is not None:
            return then, "instructed"
        if self._last_rule == "no" and (self.vocab.change.search(asked) or not self._topics(asked)):
            diff = self._diff()
            if diff:
                return diff, "what_differs"
        topics = self._topics(asked)
        chosen = self._choice(asked, options)
        if chosen:  # a question that lists choices: the sentence of the instructions that picks one
            return chosen, "chooses"
        wanted = self._wanted_choice(options)
        if wanted:  # none tells them apart: the choice that is what the user wants, as with a card
            return wanted, "picks"
        if topics:
            text = self._topic_answer(topics)
            if text:
                return text, "facts"
        return None

    def _choice(self, asked: str, options: Sequence[str]) -> str | None:
        """For a question that lists choices, the sentence of the instructions that names words only some of the
        choices have ("I prefer black" for "purple / XL or black / XL?"), not said yet."""
        if len(options) < 2:
            return None
        words = [set(_WORDS.findall(o.lower())) - _CHOICE_STOP for o in options]  # function words tell none apart
        telling = set().union(*words) - set.intersection(*words)  # what tells the choices apart
        best, score = None, 0
        pool = [*self.instructions.sentences, *self.instructions.known]
        for s in [*self._unsaid(pool), *pool]:  # a sentence not said yet first; one said before if none tells
            n = len(telling & set(_WORDS.findall(s.lower())))
            if n > score:
                best, score = s, n
        return best

    def _wanted_choice(self, options: Sequence[str]) -> str | None:
        """Of the choices a question lists, the one that *is* a value of the write the user pursues — a value
        said in words, not an identifier (an order number, an item id: a person does not know those) — as a
        person picks "no longer needed" from "no longer needed or ordered by mistake?" when that is why they
        cancel (module docstring, rule 6). The same judgement as a card's yes; nothing is volunteered."""
        if len(options) < 2:
            return None
        nxt = self.next_write()
        if nxt is None:
            return None
        values = {_norm(str(v)) for k, v in (nxt.get("arguments") or {}).items()
                  if isinstance(v, str) and not k.endswith(("_id", "_ids", "email")) and not re.search(r"\d", v)}
        values.discard("")
        hits = [o for o in options if _norm(o) in values]
        if len(hits) != 1:
            return None
        return hits[0][:1].upper() + hits[0][1:] + "."

    def _topics(self, asked: str) -> list[str]:
        return [t for t, rx in self.vocab.asks.items() if rx.search(asked)]

    def _carry_on(self) -> UserReply:
        nxt = self.next_write()
        if nxt is None:
            return self._say(None, "done")
        fresh = self._unsaid(self.instructions.sentences)
        if fresh:
            self.restated = 0
            return self._say(fresh[0], "tells")
        if self.restated >= 2:
            return self._say(None, "stuck")
        self.restated += 1
        return self._say(" ".join(self._about(nxt)[:2]), "restate")
