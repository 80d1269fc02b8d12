"""The conformance suite every domain pack must pass (``tandem domain check NAME``; and, in a pack's own
tests, :class:`pipelines.domains.testing.PackConformance`).

=================  ==========================================================================================
check              what holds
=================  ==========================================================================================
protocol           the pack has every attribute and method of :class:`~pipelines.domain.Domain`
labels             every intent has sub-intents; the W3 branches and the card gating name known labels
catalogue          every card names a registered write tool; its required parameters are the tool's arguments
grounding          every parameter of every card and every required argument of every tool the model may be
                   offered (all but the transfer tool, which code calls) has a grounding kind (a list of
                   objects: a kind per field, ``passengers[].dob``), and a clarify key asks for it
texts              the safe acknowledgement, fallback, handoff and the ``details`` question are set; a card's
                   read-back template fills from its parameters; a refusal text for every reason the pack
                   documents
tables             the packaged rule bundle loads against the labels, tools, conflict kinds and branches;
                   Φ's rows name known labels and tools; a hot reload of the same bundle applies, a broken
                   one is refused and the active one kept
session facts      what ``observe`` writes into the session facts survives a JSON round trip (it is stored),
                   and the pack reads back facts that also hold the turn's ``pending`` card
determinism        Φ over the pack's own snapshot, and a W3 pick with a fixed seed, come out the same twice
                   (byte for byte)
=================  ==========================================================================================

:func:`check_pack` returns one :class:`CheckResult` per check; :func:`run_checks` loads a pack by name.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.domain import Domain, TurnFacts
from pipelines.core.kernels import decide_w3, load_bundle, tables_holder
from pipelines.errors import ConfigError
from pipelines.sgc.canonical import canonical_json
from pipelines.sgc.phi import phi_lookup
from pipelines.sgc.snapshot import Snapshot

from . import load_domain

__all__ = ["CheckResult", "CHECKS", "check_pack", "run_checks"]


class CheckResult(BaseModel):
    """One conformance check: passed, or the problems found."""

    model_config = ConfigDict(extra="forbid")

    name: str
    ok: bool
    problems: list[str] = Field(default_factory=list)


_ATTRS = ("name", "labels", "cards", "texts", "orchestrator_policy", "generator_persona", "conflict_kinds",
          "branch_of_intent", "entity_kind", "transfer_tool", "transfer_reasons", "binds_user", "registry")
_METHODS = ("arg_kinds", "optional_empty", "clarify_key", "rule_tables", "read_tools", "cards_for", "intent_prior",
            "sub_intent_prior", "extract_candidates", "fixed_candidates", "slot_schema", "absorb_slots", "prepare",
            "constraints", "session_fields", "summarize", "user_state", "restore", "needs_slots", "answer_lines",
            "lead_lines", "reply_judges", "refusal_line", "executed_lines", "observe", "policy_lines",
            "entity_names", "snapshot_values", "conflicts", "w3_candidates")


def _protocol(pack: Domain) -> list[str]:
    out = [f"missing attribute {a!r}" for a in _ATTRS if not hasattr(pack, a)]
    out += [f"missing method {m!r}" for m in _METHODS if not callable(getattr(pack, m, None))]
    return out


def _labels(pack: Domain) -> list[str]:
    out = [f"intent {i!r} has no sub-intents" for i, subs in pack.labels.items() if not subs]
    out += [f"branch_of_intent names unknown intent {i!r}" for i in pack.branch_of_intent if i not in pack.labels]
    return out


def _catalogue(pack: Domain) -> list[str]:
    out: list[str] = []
    reg = pack.registry
    for card in pack.cards:
        if card.tool not in reg.tools:
            out.append(f"card {card.id!r}: tool {card.tool!r} is not registered")
            continue
        spec = reg.get(card.tool)
        if card.kind == "write" and spec.kind != "write":
            out.append(f"card {card.id!r}: tool {card.tool!r} is not a write tool")
        args = set(spec.args_schema().get("properties", {}))
        out += [f"card {card.id!r}: parameter {p!r} is not an argument of {card.tool!r}"
                for p in card.required_params if p not in args]
    writes = {c.tool for c in pack.cards if c.kind == "write"}
    out += [f"write tool {n!r} has no card (a write reaches the user only through a card)"
            for n in reg.names() if reg.get(n).kind == "write" and n not in writes]
    return out


def _grounding(pack: Domain) -> list[str]:
    out: list[str] = []
    reg = pack.registry
    params = {c.tool: set(c.required_params) for c in pack.cards}
    for name in reg.names():
        if name == pack.transfer_tool:
            continue
        schema = reg.get(name).args_schema()
        kinds = pack.arg_kinds(name)
        for arg in sorted(set(schema.get("required", [])) | params.get(name, set())):
            # a list of objects is grounded field by field (``passengers[].dob``): every field has a kind
            found = [kinds[arg]] if kinds.get(arg) else \
                [kind for key, kind in kinds.items() if key.startswith(f"{arg}[].")]
            if not found:
                out.append(f"tool {name!r}: argument {arg!r} has no grounding kind")
            for kind in found:
                if not pack.clarify_key(kind) or pack.clarify_key(kind) not in pack.texts.clarify:
                    out.append(f"tool {name!r}: no clarify question asks for kind {kind!r}")
    return out


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def _texts(pack: Domain) -> list[str]:
    t = pack.texts
    out = [f"texts.{f} is empty" for f in ("safe_ack", "fallback", "handoff") if not getattr(t, f).strip()]
    if "details" not in t.clarify:
        out.append("texts.clarify has no 'details' question (asked when nothing more specific is missing)")
    for card in pack.cards:
        template = t.templates.get(f"card:{card.id}")
        if template is not None and not _fields(template) <= set(card.required_params):
            out.append(f"template card:{card.id} uses {sorted(_fields(template) - set(card.required_params))}, "
                       "which are not its parameters")
    for reason in getattr(pack, "reasons", ()):
        if reason not in t.refusals:
            out.append(f"no refusal text for reason {reason!r}")
    return out


def _tables(pack: Domain) -> list[str]:
    try:
        bundle = pack.rule_tables()
        load_bundle(pack, bundle)
        holder = tables_holder(pack)
    except ConfigError as exc:
        return [f"the packaged rule bundle is refused: {exc.message}"]
    out: list[str] = []
    if not holder.reload(json.loads(json.dumps(bundle))).applied:
        out.append("a hot reload of the packaged bundle (as JSON) is refused")
    broken = dict(bundle, phi={"version": "broken", "rows": [{"intent": "no-such-intent", "sub_intent": "x"}]})
    outcome = holder.reload(broken)
    if outcome.applied or holder.version != bundle["version"]:
        out.append("a broken bundle was applied instead of refused (the active one must be kept)")
    return out


def _session_facts(pack: Domain) -> list[str]:
    facts = TurnFacts(session_id="conformance", user_text="hello")
    pack.restore(facts)
    for name in pack.read_tools(facts)[:3]:
        pack.observe(name, {}, False, facts)
    # the turn keeps the card on offer in the same facts (``pending``); the pack must read them back
    facts.state = {**facts.state, "pending": None}
    pack.restore(facts)
    for name in pack.read_tools(facts)[:1]:
        pack.observe(name, {}, False, facts)
    try:
        again = json.loads(json.dumps(facts.state))
    except (TypeError, ValueError) as exc:
        return [f"the session facts do not survive JSON: {exc}"]
    return [] if again == facts.state else ["the session facts change in a JSON round trip"]


def _determinism(pack: Domain) -> list[str]:
    tables = tables_holder(pack).active
    facts = TurnFacts(session_id="conformance", user_text="hello")
    snap = Snapshot.of(pack.snapshot_values(facts))
    out: list[str] = []
    for row in tables.phi.rows[:20]:
        a = phi_lookup(tables.phi, row.intent, row.sub_intent, snap)
        b = phi_lookup(tables.phi, row.intent, row.sub_intent, snap)
        if a != b:
            out.append(f"Φ {row.intent}/{row.sub_intent} differs between two lookups")
    for intent in list(pack.branch_of_intent)[:5]:
        c1 = {"intent": intent, "sub_intent": next(iter(pack.labels[intent]), ""), "excluded_subjects": []}
        runs = [canonical_json(decide_w3(tables, pack.branch_of_intent, "conformance", [], c1, [], 0, seed=7).meta)
                for _ in range(2)]
        if runs[0] != runs[1]:
            out.append(f"W3 for {intent!r} differs between two runs with the same seed")
    return out


CHECKS: dict[str, Callable[[Domain], list[str]]] = {
    "protocol": _protocol, "labels": _labels, "catalogue": _catalogue, "grounding": _grounding, "texts": _texts,
    "tables": _tables, "session facts": _session_facts, "determinism": _determinism,
}


def check_pack(pack: Domain) -> list[CheckResult]:
    """Every check of the suite on ``pack`` (a check that raises reports the error as its problem)."""
    results = []
    for name, check in CHECKS.items():
        try:
            problems = check(pack)
        except Exception as exc:  # a pack that crashes a check fails it, with the reason
            problems = [f"{type(exc).__name__}: {exc}"]
        results.append(CheckResult(name=name, ok=not problems, problems=problems))
    return results


def run_checks(name: str, **options: Any) -> list[CheckResult]:
    """Load the installed (or registered) pack ``name`` and run the suite on it."""
    return check_pack(load_domain(name, **options))
