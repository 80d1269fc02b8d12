"""How the tandem turn asks: a record found by its contents, a question never repeated unchanged, a refused card
never offered again, every card read back in full. Pack-neutral: the pack's optional hooks supply the words.

::

    find_record      a change that names none of the user's several records (Φ's ``choose``): read what each
                     holds (``record_reads``, at most eight), keep the ones that fit what the user described and
                     what the intent can change (``pick_records``); one → it is the record in question
                     (``select_record``) and Φ goes on with it; several the user asked for all of
                     (``asks_for_all``: "all my pending orders") → the first, the others after its write;
                     several → the user chooses among them, each described in words (``describe_records``)
    named choices    a clarify whose words name every one of the user's options on its topic ("is it no longer
                     needed, or was it ordered by mistake?") carries them as its options too: a client shows
                     them as choices, and a user picks one instead of being asked again with a list
    vary_question    a clarify whose question the session asked before, word for word (and the user answered):
                     asked with the user's own options instead (``choices``, after ``choice_reads``); that
                     question asked before too, or no options to offer → handed over (``no_progress``)
    declined         a card the user said no to is remembered by its arguments; the same card is never shown
                     again (the turn asks what should change instead)
    readback         a card's arguments in words (``readback``, after ``readback_reads``), every argument:
                     those the pack leaves out are read back by their value

Every change of approach is one ``tandem.ask`` event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from pipelines.core.decisions import owned_records
from pipelines.core.domain import Domain
from pipelines.sgc.phi import phi_lookup
from pipelines.sgc.snapshot import Snapshot

from .cards import norm as _norm
from .state import META_KEY, TandemState

__all__ = ["MAX_RECORD_READS", "find_record", "phi_again", "vary_question", "run_reads", "asked_of", "declined_of"]

MAX_RECORD_READS = 8
"""At most this many reads to find a record by its contents (a user's orders)."""

async def run_reads(st: TandemState, calls: Sequence[tuple[str, dict[str, Any]]], *, limit: int) -> int:
    """Run the reads of ``calls`` not run yet this turn (at most ``limit``), folded as observations; how many ran."""
    assert st.caller is not None
    done = {(r.tool, json.dumps(r.args, sort_keys=True)) for r in st.caller.records}
    todo = [(t, dict(a)) for t, a in calls
            if (t, json.dumps(st.vault.redact_obj(dict(a)), sort_keys=True)) not in done][:limit]
    if not todo:
        return 0
    results = await asyncio.gather(*(st.caller.raw(t, a, step=0) for t, a in todo))
    for (t, a), r in zip(todo, results, strict=True):
        st.caller.fold(t, a, r, step=0)
    return len(todo)


async def phi_again(st: TandemState, domain: Domain) -> Any:
    """Φ on the snapshot as it is now, its reads not run yet run; the outcome (hit or not)."""
    assert st.facts is not None and st.tables is not None
    outcome = phi_lookup((await st.tables).phi, st.intent, st.sub_intent, Snapshot.of(domain.snapshot_values(st.facts)))
    if outcome.hit and outcome.tools:
        await run_reads(st, [(c.tool, dict(c.args)) for c in outcome.tools], limit=len(outcome.tools))
    return outcome


async def find_record(st: TandemState, domain: Domain) -> tuple[str | None, list[str]]:
    """Φ's ``choose``: the record the user means, found by what it holds (see module docstring).

    Returns Φ's next ``then`` and the records still to choose among (empty: one was found, or none to ask)."""
    assert st.facts is not None
    facts = st.facts
    options = owned_records(facts, domain.entity_kind)
    if len(options) < 2:
        return "choose", options
    ran = await run_reads(st, domain.record_reads(facts), limit=MAX_RECORD_READS)
    picked = domain.pick_records(str(st.intent), options, facts)
    st.emit("tandem.ask", step="find_record", options=len(options), reads=ran, picked=list(picked))
    every = len(picked) > 1 and domain.asks_for_all(facts)  # "all my pending orders": one card each, in turn
    if len(picked) == 1 or every:
        domain.select_record(picked[0], facts, then=picked[1:] if every else ())
        st.counters.dispatch("record_found")
        outcome = await phi_again(st, domain)
        then = outcome.then if outcome.hit else None
        return (None if then == "choose" else then), []
    return "choose", list(picked) or options


def declined_of(history: Sequence[Any], key: str = "declined") -> list[str]:
    """The cards the user said no to so far (the last recorded turn's ``meta.tandem.declined``; ``key="done"``:
    the writes done)."""
    for turn in reversed(history):
        m = turn.meta.get(META_KEY) if isinstance(turn.meta, dict) else None
        if isinstance(m, dict) and isinstance(m.get(key), list):
            return [str(x) for x in m[key]]
    return []


def asked_of(history: Sequence[Any]) -> list[str]:
    """Every question the session asked so far, normalised (the last recorded turn's ``meta.tandem.asked``)."""
    for turn in reversed(history):
        m = turn.meta.get(META_KEY) if isinstance(turn.meta, dict) else None
        if isinstance(m, dict) and isinstance(m.get("asked"), list):
            return [str(x) for x in m["asked"]]
    return []


async def vary_question(st: TandemState, domain: Domain) -> None:
    """A question the user was asked (and answered) earlier in the session is never asked again unchanged (see
    module docstring); records every question asked."""
    assert st.facts is not None and st.orch is not None
    asked: list[str] = st.meta.setdefault("asked", [])
    o = st.outcome
    if o is not None and o.path == "answer" and st.facts.refusals:  # the same refusal again: no way forward here
        key = "refusal " + " ".join(_norm(f"{r.get('card_id')} {r.get('reason')} {r.get('entity')}")
                                    for r in st.facts.refusals)
        if key in asked:
            st.emit("tandem.ask", step="hand_over", about="refusal", repeated=key[:120])
            st.counters.dispatch("no_progress")
            st.outcome = await st.orch.escalate("no_progress")
            return
        asked.append(key)
        return
    if o is None or o.path != "clarify":
        return
    about = o.clarify_about or "details"
    if not o.clarify_options:  # a question that names the user's choices in its words offers them as choices too
        named = [x for x in domain.choices(about, st.facts) if x]
        said = f" {_norm(o.clarify_question)} "
        if len(named) > 1 and all(f" {_norm(x)} " in said for x in named):
            o.clarify_options = named
    if _norm(o.clarify_question) in asked:
        await run_reads(st, domain.choice_reads(about, st.facts), limit=MAX_RECORD_READS)
        options = [x for x in domain.choices(about, st.facts) if x]
        key = f"{about}_choices" if f"{about}_choices" in domain.texts.clarify else "choices"
        key = key if len(options) > 1 else "choice"  # the one option there is: "Do you mean …?"
        question = domain.texts.question(key, options=", ".join(options)) if options else ""
        if options and _norm(question) not in asked:
            o.clarify_question, o.clarify_options = question, options
            st.counters.dispatch("ask_with_choices")
            st.emit("tandem.ask", step="choices", about=about, options=len(options))
        else:
            st.emit("tandem.ask", step="hand_over", about=about, repeated=_norm(o.clarify_question)[:120])
            st.counters.dispatch("no_progress")
            st.outcome = await st.orch.escalate("no_progress")
            return
    asked.append(_norm(o.clarify_question))
    del asked[:-40]


