"""The coach's reply judge: sentence-level checks of the delivered reply against the live facts and c2.

Each sentence the generator completes is judged before it is released:

* **ownership** — a creature or skill the user does not own is never
  *recommended* (``unowned_recommendation``), and is only *mentioned* when the
  forward contract references it (``unreferenced_entity``: the opponent's team,
  the species asked about, a conflict…);
* **judgements** — a keyword judge labels the sentence praise / apology /
  constraint_account about the constraints it names (c2's constraint ids, or
  the turn when none); praise of a conflicted constraint is ``forbidden_praise``
  and two incompatible judgements about one constraint across the released
  sentences (:func:`~pipelines.sgc.psi.check_paragraph_contradictions`) are a
  ``contradiction``.

:class:`CoachJudge` plugs the judge into the one sentence gate
(:class:`pipelines.gate.SentenceGate`): the tandem turn through the pack's ``reply_judges``,
the SGC rungs through their own gate (enforced, or observed as an audit).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.contract import C2
from pipelines.gate import Judgement
from pipelines.guardrails.post import Violation
from pipelines.sgc.psi import DEFAULT_INCOMPATIBLE, Paragraph, check_paragraph_contradictions

from .runner import CoachFacts

__all__ = ["GUARD_KINDS", "SentenceCheck", "ReplyJudge", "CoachJudge", "judge_kinds"]

GUARD_KINDS = ("unowned_recommendation", "unreferenced_entity", "forbidden_praise", "contradiction")
_PRAISE = re.compile(r"\b(great|excellent|perfect|awesome|well done|nice|good (?:choice|pick|call)|"
                     r"strong (?:choice|pick)|love|fantastic|brilliant|superb|spot on)\b", re.I)
_APOLOGY = re.compile(r"\b(sorry|unfortunately|apologi[sz]e|afraid|regret(?:tably)?)\b", re.I)
_ACCOUNT = re.compile(r"\b(don't own|do not own|not owned|isn't unlocked|not unlocked|locked|"
                      r"doesn't (?:have|know)|don't have|can't|cannot|not available|too (?:low|few))\b", re.I)
_RECOMMEND = re.compile(r"\b(bring|use|pick|choose|recommend|suggest|try|lead with|go with|send|field|"
                        r"swap in|put|train|evolve|level up|teach|equip|should)\b", re.I)
_NEGATION = re.compile(r"\b(not|don't|do not|can't|cannot|isn't|won't|never|no longer)\b", re.I)


def judge_kinds(sentence: str) -> list[str]:
    """The paragraph kinds a sentence expresses (keyword judge)."""
    kinds = []
    if _PRAISE.search(sentence):
        kinds.append("praise")
    if _APOLOGY.search(sentence):
        kinds.append("apology")
    if _ACCOUNT.search(sentence):
        kinds.append("constraint_account")
    return kinds


def _names_re(names: Iterable[str]) -> re.Pattern[str] | None:
    ordered = sorted({n for n in names if n}, key=lambda n: (-len(n), n))
    if not ordered:
        return None
    return re.compile(r"(?<![A-Za-z])(" + "|".join(re.escape(n) for n in ordered) + r")(?![A-Za-z])")


class SentenceCheck(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    entities: list[str] = Field(default_factory=list)
    unowned: list[str] = Field(default_factory=list)
    judgements: list[Paragraph] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)


class ReplyJudge:
    """Pure per-sentence judge over the facts and the forward contract; remembers released judgements."""

    def __init__(self, facts: CoachFacts, referenced: str, c2: C2 | None = None,
                 incompatible: Iterable[tuple[str, str]] = DEFAULT_INCOMPATIBLE) -> None:
        """``referenced``: the forward contract as text (a creature it names may be mentioned)."""
        self.owned = facts.owned_species() | facts.owned_skills()
        self._names = _names_re(set(facts.facts.known_entities) | set(facts.known_skills) | self.owned)
        self.incompatible = tuple(tuple(p) for p in incompatible)
        self.referenced = set(self._names.findall(referenced)) if self._names else set()
        self.conflicted = {c.constraint_id for c in c2.conflicts} if c2 else set()
        cids = self.conflicted | ({p.constraint_id for p in c2.plan if p.constraint_id} if c2 else set())
        self._cid_res = {cid: _names_re(p for p in cid.split(":")[1:] if p != "*") for cid in sorted(cids)}
        self.released: list[Paragraph] = []

    def _constraints(self, sentence: str) -> list[str | None]:
        hits = [cid for cid, rx in self._cid_res.items() if rx is not None and rx.search(sentence)]
        return list(hits) or [None]

    def check(self, sentence: str) -> SentenceCheck:
        entities = list(dict.fromkeys(self._names.findall(sentence))) if self._names else []
        unowned = [e for e in entities if e not in self.owned]
        violations: list[str] = []
        recommends = bool(_RECOMMEND.search(sentence)) and not _NEGATION.search(sentence)
        if unowned and recommends:
            violations.append("unowned_recommendation")
        elif any(e not in self.referenced for e in unowned):
            violations.append("unreferenced_entity")
        kinds = judge_kinds(sentence)
        judgements = [Paragraph(kind=k, constraint_id=c) for k in kinds for c in self._constraints(sentence)]
        if any(j.kind == "praise" and j.constraint_id in self.conflicted for j in judgements):
            violations.append("forbidden_praise")
        before = len(check_paragraph_contradictions(self.released, self.incompatible))
        if len(check_paragraph_contradictions(self.released + judgements, self.incompatible)) > before:
            violations.append("contradiction")
        return SentenceCheck(text=sentence, entities=entities, unowned=unowned, judgements=judgements,
                             violations=violations)

    def accept(self, check: SentenceCheck) -> None:
        self.released.extend(check.judgements)


class CoachJudge:
    """The coach's :class:`ReplyJudge` as a judge of the one sentence gate (:class:`pipelines.gate.SentenceGate`).

    A violation carries its safe wording: the ownership one for an unowned or
    unreferenced creature, the consistency one otherwise. Released sentences
    (passed, or observed by an audit) are remembered for the contradiction check.
    """

    def __init__(self, judge: ReplyJudge, *, safe_unowned: str, safe_contradiction: str) -> None:
        self.reply_judge = judge
        self.safe_unowned = safe_unowned
        self.safe_contradiction = safe_contradiction
        self._last: SentenceCheck | None = None

    async def judge(self, sentence: str, released: Sequence[str]) -> Judgement:
        check = self._last = self.reply_judge.check(sentence)
        if not check.violations:
            return Judgement(text=sentence)
        unowned = {"unowned_recommendation", "unreferenced_entity"} & set(check.violations)
        return Judgement(text=sentence, violations=[Violation(kind=k, detail=",".join(check.unowned))
                                                    for k in check.violations],
                         replacement=self.safe_unowned if unowned else self.safe_contradiction)

    def accept(self, verdict: Judgement) -> None:
        if self._last is not None:
            self.reply_judge.accept(self._last)
            self._last = None
