"""The conformance suite every domain pack must pass (``tandem domain check NAME``; and, in a pack's own
tests, :class:`pipelines.domains.testing.PackConformance`). It reads the pack's tables and **exercises** it:
its reads on its own world, every write tried unconfirmed, with someone else's values, and confirmed on a
copy of the world. Each problem says where to fix it: the file, the hook or table, what is missing.

=============  ==============================================================================================
check          what holds
=============  ==============================================================================================
protocol       the pack has every hook of the :class:`~pipelines.core.domain.Domain` protocol
labels         every intent has sub-intents; W3 branches and ``card_intents`` name known intents and cards
catalogue      every card names a registered write tool, with parameters that are its arguments; every write
               tool has a card; ``write_tools`` are the registry's writes
grounding      every card parameter and every required argument of a tool the model may be offered has a
               grounding kind (a list of objects: one per field); every kind has a clarify question of its
               own and a source (an extractor finds it in words, an owner read returns it, or a fixed
               vocabulary holds it)
texts          the safe texts and the ``details`` question are set; ``action_card`` offers ``{phrase}``; a
               read-back fills from its card's parameters; every refusal reason the tools raise (found in
               their code), the pack declares, or the suite meets has a refusal text
tables         the rule bundle loads against labels, tools, conflict kinds and branches (and hot-reloads; a
               broken one is refused); a Φ ``propose`` names an intent that offers a card, a ``clarify:<kind>``
               a question; every W3 tip has a sentence
cards          every card is offered by some intent (``cards_for``) to a signed-in user
session facts  what ``observe`` stores survives JSON, and the pack reads back facts that hold a pending card
determinism    Φ over the pack's snapshot and a seeded W3 pick come out the same twice; so does the world
writes         on a fresh world: reads change nothing; the world survives its stored rows; every write has a
               sample call (``sample_writes``); unconfirmed it is refused at the port and by the pack
               (``not_confirmed``, nothing changed); its precheck changes nothing; a value that is neither the
               user's words nor their records is refused (``ungrounded``); confirmed on a copy it runs,
               changes only what ``write_scope`` allows, and everything it changes reaches the store
confirmed      the core's guarantee, shown with a planted mistake: every write tool (the registry's
writes         ``kind="write"`` and ``write_tools``) made to write whatever ``ctx.confirmed`` says is never
               reached — through the core's runner, and through the pack's own tool port as the tools
               deployment serves it — unconfirmed, confirmed for another call (arguments or tool), or without
               an idempotency key: each is refused typed (``UnconfirmedWrite``) before the pack runs; the
               confirmed call runs once and its key replays
=============  ==============================================================================================

:func:`check_pack` returns one :class:`CheckResult` per check; :func:`run_checks` loads a pack by name.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import string
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.core.domain import Domain, SampleWrite, TurnFacts, protocol_members
from pipelines.core.kernels import decide_w3, load_bundle, tables_holder
from pipelines.core.packbase import PackBase
from pipelines.core.ports import UNGROUNDED, MemoryLedger, ToolCallResult, ToolSession
from pipelines.core.refusal import NOT_CONFIRMED, REASON_CODE
from pipelines.core.runner import (
    CallOutcome,
    LocalToolRunner,
    ToolBackend,
    WriteGate,
    WriteScope,
    write_tools_of,
)
from pipelines.core.world import RecordWorld
from pipelines.errors import ConfigError, TandemError, UnconfirmedWrite
from pipelines.grounding import appears_in, split_path
from pipelines.guardrails.pii import Vault
from pipelines.sgc.canonical import canonical_json
from pipelines.sgc.phi import phi_lookup
from pipelines.sgc.snapshot import Snapshot
from pipelines.tools import ToolContext, ToolObservation

from . import load_domain

__all__ = ["CheckResult", "CHECKS", "check_pack", "run_checks", "where", "code_reasons"]

#: Error codes a failed observation carries: never a refusal reason of their own.
ERROR_CODES = frozenset({"ineligible_action", "tool_error", "tool_timeout", "invalid_input", "internal"})
#: A value no user typed and no record holds.
FOREIGN = "zz-no-such-value-9"
SEED = 7


class CheckResult(BaseModel):
    """One conformance check: passed, or the problems found (``notes``: what it could not exercise)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    ok: bool
    problems: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    shown: str = Field("", description="The guarantee a passed check showed, in words (``tandem domain check`` "
                                       "prints it).")


# -- where a problem is fixed ------------------------------------------------------------------------------


def where(pack: Any, hook: str) -> str:
    """``"pack.py DomainPack.hook"``: the file and class that give ``hook`` (``PackBase``'s default says so)."""
    if hook in getattr(pack, "__dict__", {}):
        return f"{type(pack).__name__}.{hook} (set on the instance)"
    for klass in type(pack).__mro__:
        if hook in vars(klass):
            if klass is PackBase:
                return f"{type(pack).__name__}.{hook} (the PackBase default)"
            try:
                file = Path(inspect.getsourcefile(klass) or "?").name
            except TypeError:
                file = "?"
            return f"{file} {klass.__name__}.{hook}"
    return f"{type(pack).__name__}.{hook}"


def _tables_file(pack: Any, table: str) -> str:
    tables_dir = pack.__dict__.get("tables_dir") or getattr(type(pack), "tables_dir", None)
    return f"{Path(tables_dir).name}/{table}.yaml" if isinstance(tables_dir, str | Path) else f"rule_tables()['{table}']"


# -- protocol, labels, catalogue -------------------------------------------------------------------------


def _protocol(pack: Domain) -> list[str]:
    out = []
    for m in protocol_members(Domain):
        if not hasattr(pack, m):
            out.append(f"{type(pack).__name__} ({Path(inspect.getfile(type(pack))).name}): missing hook {m!r} of the "
                       "Domain protocol (subclass PackBase for its default)")
        elif m in _METHODS and not callable(getattr(pack, m)):
            out.append(f"{where(pack, m)}: {m!r} must be a method")
    return out


_METHODS = frozenset(n for n in protocol_members(Domain) if inspect.isfunction(getattr(Domain, n, None)))


def _labels(pack: Domain) -> list[str]:
    out = [f"{where(pack, 'labels')}: intent {i!r} has no sub-intents" for i, subs in pack.labels.items() if not subs]
    out += [f"{where(pack, 'branch_of_intent')}: names unknown intent {i!r}" for i in pack.branch_of_intent
            if i not in pack.labels]
    if isinstance(pack, PackBase):
        ids = {c.id for c in pack.cards}
        for card_id, intents in pack.card_intents.items():
            if card_id not in ids:
                out.append(f"{where(pack, 'card_intents')}: names unknown card {card_id!r}")
            out += [f"{where(pack, 'card_intents')}: card {card_id!r} is offered for intent {i!r}, which the labels "
                    f"do not have ({where(pack, 'labels')})" for i in intents if i not in pack.labels]
    return out


def _catalogue(pack: Domain) -> list[str]:
    out: list[str] = []
    reg = pack.registry
    seen: set[str] = set()
    for card in pack.cards:
        if card.id in seen:
            out.append(f"{where(pack, 'cards')}: card id {card.id!r} is used twice")
        seen.add(card.id)
        if card.tool not in reg.tools:
            out.append(f"{where(pack, 'cards')}: card {card.id!r}: tool {card.tool!r} is not registered")
            continue
        spec = reg.get(card.tool)
        if card.kind == "write" and spec.kind != "write":
            out.append(f"{where(pack, 'cards')}: card {card.id!r}: tool {card.tool!r} is not a write tool")
        args = set(spec.args_schema().get("properties", {}))
        out += [f"{where(pack, 'cards')}: card {card.id!r}: parameter {p!r} is not an argument of {card.tool!r}"
                for p in card.required_params if p not in args]
    writes = {c.tool for c in pack.cards if c.kind == "write"}
    registered = {n for n in reg.names() if reg.get(n).kind == "write"}
    out += [f"{where(pack, 'cards')}: write tool {n!r} has no card (a write reaches the user only through a card)"
            for n in sorted(registered - writes)]
    declared = set(pack.write_tools)
    if declared != registered:
        out.append(f"{where(pack, 'write_tools')}: {sorted(declared)} differ from the registry's write tools "
                   f"{sorted(registered)} (declare each tool's kind in its ToolSpec)")
    return out


# -- grounding ---------------------------------------------------------------------------------------------


def _grounded_args(pack: Domain) -> list[tuple[str, str, list[str]]]:
    """``(tool, argument, kinds)`` of every argument that needs a kind (see module docstring)."""
    reg = pack.registry
    params = {c.tool: set(c.required_params) for c in pack.cards}
    out = []
    for name in reg.names():
        if name == pack.transfer_tool:
            continue
        kinds = pack.arg_kinds(name)
        for arg in sorted(set(reg.get(name).args_schema().get("required", [])) | params.get(name, set())):
            found = [kinds[arg]] if kinds.get(arg) else [k for key, k in kinds.items() if key.startswith(f"{arg}[].")]
            out.append((name, arg, found))
    return out


def _values_by_kind(value: Any, kinds: set[str], out: dict[str, list[str]], key: str | None = None) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _values_by_kind(v, kinds, out, str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            _values_by_kind(v, kinds, out, key)
    elif key in kinds and isinstance(value, str | int | float) and not isinstance(value, bool):
        if len(out.setdefault(key, [])) < 5:
            out[key].append(str(value))


def _joined(value: Any, out: list[str]) -> None:
    """One text per object of a JSON value: its scalar fields joined (an address as the user would type it)."""
    if isinstance(value, Mapping):
        scalars = [str(v) for v in value.values() if isinstance(v, str | int | float) and not isinstance(v, bool)]
        if len(scalars) > 1:
            out.append(", ".join(scalars))
        for v in value.values():
            _joined(v, out)
    elif isinstance(value, list | tuple):
        for v in value[:3]:
            _joined(v, out)


def _sourced_kinds(pack: Domain, world: Any, samples: list[SampleWrite]) -> set[str]:
    """The kinds some source gives: a fixed vocabulary, the slot model, an owner read, an extractor over words
    that hold values of the world's records and the samples (redacted as the turn redacts them), or the pack's
    ``sample_texts``."""
    found = {k for k, v in pack.fixed_candidates().items() if v}
    schema = pack.slot_schema() or {}
    found |= set(schema.get("properties", {}))
    texts: list[str] = [t for s in samples for t in s.user_texts] + list(_sample_texts(pack))
    values: list[str] = []
    said = {s.user_id: list(s.user_texts) for s in samples}
    try:  # what a turn of a signed-in user holds before anything is read (the request's user as a candidate)
        fresh = TurnFacts(session_id="conformance", user_text="hello", user_id="conformance-user")
        _run(pack.prepare(fresh, None))
        found |= set(fresh.candidates.kinds())
    except Exception:  # noqa: BLE001 - a pack whose prepare reads its tools: its owner facts below say more
        pass
    for uid in _users(pack, world, samples):
        facts = pack.owner_facts(world, uid, said.get(uid, []))
        found |= set(facts.candidates.kinds())
        texts += [f"It is {v}." for kind in facts.candidates.kinds() for v in facts.candidates.of(kind)[:3]]
    for s in samples[:10]:
        found |= set(pack.owner_facts(world, s.user_id, list(s.user_texts)).candidates.kinds())
    for s in samples[:5]:
        _joined(s.args, values)
        texts += [f"It is {v}." for v in _scalar_values(s.args)]
    if isinstance(world, RecordWorld):
        by_kind: dict[str, int] = {}
        for kind, _, body in world.entities():
            if by_kind.get(kind, 0) < 5:
                by_kind[kind] = by_kind.get(kind, 0) + 1
                record = json.loads(body)
                _joined(record, values)
                texts += [f"It is {v}." for v in _scalar_values(record)]
    texts += [f"It is {v}." for v in values]
    vault = Vault()
    for text in texts:
        found |= {k for k, v in pack.extract_candidates(vault.redact(text)).items() if v}
    return found


def _scalar_values(value: Any) -> list[str]:
    out: dict[str, list[str]] = {}
    _values_by_kind(value, _AnyKey(), out)
    return [v for vs in out.values() for v in vs]


class _AnyKey(set):  # type: ignore[type-arg]
    """Every key is a kind (for :func:`_values_by_kind`)."""

    def __contains__(self, key: object) -> bool:
        return key is not None


def _users(pack: Any, world: Any, samples: list[SampleWrite]) -> list[str]:
    """The users the suite signs in: the samples', else the world's first."""
    users = list(dict.fromkeys(s.user_id for s in samples)) or _all_users(pack, world)[:1]
    return users[:3]


def _sample_texts(pack: Any) -> tuple[str, ...]:
    return tuple(pack.sample_texts) if isinstance(pack, PackBase) else ()


def _offered_tools(pack: Domain, world: Any, samples: list[SampleWrite]) -> set[str]:
    """The tools the model may be offered: the reads open to a new session or a signed-in user, the cards' tools."""
    facts = [TurnFacts(session_id="conformance", user_text="hello")]
    facts += [pack.owner_facts(world, u) for u in _users(pack, world, samples)]
    return {t for f in facts for t in pack.read_tools(f)} | {c.tool for c in pack.cards}


def _grounding(pack: Domain) -> list[str]:
    out: list[str] = []
    asked: dict[str, str] = {}
    carded: set[str] = set()
    card_tools = {c.tool for c in pack.cards}
    for name, arg, found in _grounded_args(pack):
        if not found:
            out.append(f"{where(pack, 'arg_kinds')}: argument {arg!r} of tool {name!r} has no grounding kind "
                       "(add it to arg_kind_table)")
        for kind in found:
            asked.setdefault(kind, f"argument {arg!r} of tool {name!r}")
            if name in card_tools:
                carded.add(kind)
    for kind, used in sorted(asked.items()):
        key = pack.clarify_key(kind)
        if not key or key not in pack.texts.clarify:
            out.append(f"{where(pack, 'clarify_key')}: no clarify question asks for kind {kind!r} ({used}): add "
                       f"texts.clarify[{kind!r}]")
        elif key == "details" and kind != "details" and kind in carded:
            out.append(f"{where(pack, 'texts')}: kind {kind!r} ({used}) has no clarify question of its own (a card "
                       f"asks for it with the 'details' question): add texts.clarify[{kind!r}]")
    world, _ = _world(pack)
    samples = _samples(pack, world)
    sourced = _sourced_kinds(pack, world, samples)
    offered = _offered_tools(pack, world, samples)
    needed = {k: u for name, arg, found in _grounded_args(pack) if name in offered for k in found
              for u in [f"argument {arg!r} of tool {name!r}"]}
    for kind, used in sorted(needed.items()):
        if kind not in sourced:
            out.append(f"{where(pack, 'extract_candidates')}: kind {kind!r} ({used}) has no source: no extractor finds "
                       "it in the user's words, no owner read returns a field of that name, no fixed vocabulary "
                       "holds it (extract_candidates / owner_reads / fixed_candidates)")
    return out


# -- texts and refusal reasons -----------------------------------------------------------------------------


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def _package_modules(pack: Any) -> list[Any]:
    """The modules of the pack's tools: every module its tool handlers live in, and the modules of the same
    package those import (the rules a handler calls)."""
    roots = {inspect.getmodule(f) for n in pack.registry.names() for f in
             (pack.registry.get(n).handler, pack.registry.get(n).eligibility) if f is not None}
    roots = {m for m in roots if m is not None}
    seen: dict[str, Any] = {m.__name__: m for m in roots}
    todo = list(roots)
    while todo:
        mod = todo.pop()
        package = mod.__name__.rpartition(".")[0]
        for value in list(vars(mod).values()):
            other = value if inspect.ismodule(value) else inspect.getmodule(value) if callable(value) else None
            if other is not None and package and other.__name__.startswith(package + ".") \
                    and other.__name__ not in seen:
                seen[other.__name__] = other
                todo.append(other)
    return [m for m in seen.values() if getattr(m, "__file__", None)]


def code_reasons(pack: Any) -> dict[str, str]:
    """Reason codes the pack's tool code raises, each with where (``"tools.py:42"``): the first argument of a
    ``refuse`` / ``fail`` call, a ``"reason"`` in a dict literal, a message ending in ``[reason]``."""
    out: dict[str, str] = {}
    for mod in _package_modules(pack):
        path = Path(mod.__file__)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            found: list[str] = []
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                    "refuse", "fail") and node.args and isinstance(node.args[0], ast.Constant):
                found.append(str(node.args[0].value))
            elif isinstance(node, ast.Dict):
                found += [str(v.value) for k, v in zip(node.keys, node.values, strict=True)
                          if isinstance(k, ast.Constant) and k.value == "reason" and isinstance(v, ast.Constant)]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith("]") \
                    and "[" in node.value:
                found.append(node.value[node.value.rindex("[") + 1:-1])
            for reason in found:
                if REASON_CODE.match(reason):
                    out.setdefault(reason, f"{path.name}:{node.lineno}")
    return out


def _texts(pack: Domain) -> list[str]:
    t = pack.texts
    here = where(pack, "texts")
    out = [f"{here}: texts.{f} is empty" for f in ("safe_ack", "fallback", "handoff") if not getattr(t, f).strip()]
    if "details" not in t.clarify:
        out.append(f"{here}: texts.clarify has no 'details' question (asked when nothing more specific is missing)")
    if "{phrase}" not in t.templates.get("action_card", ""):
        out.append(f"{here}: texts.templates['action_card'] must offer the card's read-back as {{phrase}}")
    for card in pack.cards:
        template = t.templates.get(f"card:{card.id}")
        if template is not None and not _fields(template) <= set(card.required_params):
            out.append(f"{here}: template card:{card.id} uses {sorted(_fields(template) - set(card.required_params))}, "
                       "which are not its parameters")
    for reason in pack.reasons:
        if reason not in t.refusals:
            out.append(f"{here}: no refusal text for reason {reason!r} (declared in {where(pack, 'reasons')}): add "
                       f"texts.refusals[{reason!r}]")
    declared = set(pack.reasons)
    for reason, at in sorted(code_reasons(pack).items()):
        if reason not in t.refusals and reason not in declared:
            out.append(f"{here}: no refusal text for reason {reason!r}, which the tools raise ({at}): add "
                       f"texts.refusals[{reason!r}]")
    if pack.write_tools and NOT_CONFIRMED not in t.refusals:
        out.append(f"{here}: no refusal text for {NOT_CONFIRMED!r} (a write the user has not confirmed): add "
                   f"texts.refusals[{NOT_CONFIRMED!r}]")
    return out


# -- tables and cards --------------------------------------------------------------------------------------


def _tables(pack: Domain) -> list[str]:
    try:
        bundle = pack.rule_tables()
        load_bundle(pack, bundle)
        holder = tables_holder(pack)
    except ConfigError as exc:
        return [f"{where(pack, 'rule_tables')}: the packaged rule bundle is refused: {exc.message}"]
    out: list[str] = []
    if not holder.reload(json.loads(json.dumps(bundle))).applied:
        out.append(f"{where(pack, 'rule_tables')}: a hot reload of the packaged bundle (as JSON) is refused")
    broken = dict(bundle, phi={"version": "broken", "rows": [{"intent": "no-such-intent", "sub_intent": "x"}]})
    outcome = holder.reload(broken)
    if outcome.applied or holder.version != bundle["version"]:
        out.append(f"{where(pack, 'rule_tables')}: a broken bundle was applied instead of refused (the active one "
                   "must be kept)")
    tables = holder.active
    changes = pack.change_intents()
    for row in tables.phi.rows:
        then = row.then or ""
        if then == "propose" and row.intent not in changes:
            out.append(f"{_tables_file(pack, 'phi')}: row {row.intent}/{row.sub_intent} says then: propose, but no card "
                       f"is offered for intent {row.intent!r} ({where(pack, 'card_intents')} / cards_for)")
        if then.startswith("clarify:"):
            kind = then.split(":", 1)[1]
            key = pack.clarify_key(kind) if kind not in pack.texts.clarify else kind
            if kind not in pack.texts.clarify and (not key or key == "details" or key not in pack.texts.clarify):
                out.append(f"{_tables_file(pack, 'phi')}: row {row.intent}/{row.sub_intent} asks clarify:{kind}, but "
                           f"texts.clarify has no {kind!r} question ({where(pack, 'texts')})")
    for branch, table in sorted(tables.w3.items()):
        for entry in table.pool:  # a pack with no sentences at all leaves its tips to the generator (c3)
            if pack.texts.guidance and entry.id not in pack.texts.guidance:
                out.append(f"{_tables_file(pack, 'w3')}: tip {entry.id!r} of branch {branch!r} has no sentence: add "
                           f"texts.guidance[{entry.id!r}] ({where(pack, 'texts')})")
    return out


def _cards(pack: Domain) -> list[str]:
    writes = [c for c in pack.cards if c.kind == "write"]
    if not writes:
        return []
    world, _ = _world(pack)
    facts = [pack.owner_facts(world, u) for u in _users(pack, world, _samples(pack, world))]
    facts.append(TurnFacts(session_id="conformance", user_text="hello"))
    offered: set[str] = set()
    for f in facts:
        for intent, subs in pack.labels.items():
            for sub in subs:
                offered |= {c.id for c in pack.cards_for(intent, sub, f)}
    return [f"{where(pack, 'cards_for')}: card {c.id!r} is offered for no intent (no label reaches it for a signed-in "
            f"user: {where(pack, 'card_intents')})" for c in writes if c.id not in offered]


# -- session facts and determinism -------------------------------------------------------------------------


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
    world, _ = _world(pack)
    for s in _samples(pack, world)[:1]:
        owner = pack.owner_facts(world, s.user_id)
        facts.state = {**owner.state, **facts.state}
    try:
        again = json.loads(json.dumps(facts.state))
    except (TypeError, ValueError) as exc:
        return [f"{where(pack, 'observe')}: the session facts do not survive JSON: {exc}"]
    return [] if again == facts.state else [f"{where(pack, 'observe')}: the session facts change in a JSON round trip"]


def _determinism(pack: Domain) -> list[str]:
    tables = tables_holder(pack).active
    facts = TurnFacts(session_id="conformance", user_text="hello")
    snap = Snapshot.of(pack.snapshot_values(facts))
    out: list[str] = []
    for row in tables.phi.rows[:20]:
        a = phi_lookup(tables.phi, row.intent, row.sub_intent, snap)
        b = phi_lookup(tables.phi, row.intent, row.sub_intent, snap)
        if a != b:
            out.append(f"{_tables_file(pack, 'phi')}: Φ {row.intent}/{row.sub_intent} differs between two lookups")
    for intent in list(pack.branch_of_intent)[:5]:
        c1 = {"intent": intent, "sub_intent": next(iter(pack.labels[intent]), ""), "excluded_subjects": []}
        runs = [canonical_json(decide_w3(tables, pack.branch_of_intent, "conformance", [], c1, [], 0, seed=7).meta)
                for _ in range(2)]
        if runs[0] != runs[1]:
            out.append(f"{_tables_file(pack, 'w3')}: W3 for {intent!r} differs between two runs with the same seed")
    first, _ = _world(pack, fresh=True)
    second, _ = _world(pack, fresh=True)
    if isinstance(first, RecordWorld) and isinstance(second, RecordWorld) and first.entities() != second.entities():
        out.append(f"{where(pack, 'new_world')}: new_world({SEED}) differs between two calls (the same seed must "
                   "give the same world)")
    return out


# -- exercising the tools ------------------------------------------------------------------------------------

#: Per pack under check: its world and its sample writes (made once, dropped with the pack).
_MADE: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _made(pack: Any) -> dict[str, Any]:
    try:
        return _MADE.setdefault(pack, {})
    except TypeError:  # a pack that cannot be weakly referenced: nothing is kept between checks
        return {}


def _world(pack: Any, *, fresh: bool = False) -> tuple[Any, str | None]:
    """The pack's world from ``new_world(7)`` (one per pack), or why there is none."""
    made = _made(pack)
    if not fresh and "world" in made:
        return made["world"]  # type: ignore[no-any-return]
    try:
        world: tuple[Any, str | None] = (pack.new_world(SEED), None)
    except ConfigError as exc:
        world = (None, f"new_world({SEED}) needs configuration ({exc.message}): the writes were not exercised")
    except NotImplementedError as exc:
        world = (None, f"the pack builds no world ({exc}): the writes were not exercised")
    if not fresh:
        made["world"] = world
    return world


def _samples(pack: Any, world: Any) -> list[SampleWrite]:
    """The pack's sample writes, found on a copy of its world; whether the owner's reads or the search for
    samples (its prechecks) changed that copy is kept for the ``writes`` check."""
    if world is None or not pack.write_tools:
        return []
    made = _made(pack)
    if "samples" not in made:
        probe = world.clone() if isinstance(world, RecordWorld) else world
        before = _state(probe)
        for uid in _all_users(pack, probe)[:3]:
            pack.owner_facts(probe, uid)
        made["read_changed"] = _changed(before, _state(probe))
        probe = world.clone() if isinstance(world, RecordWorld) else world
        made["samples"] = list(pack.sample_writes(probe))
        made["sample_changed"] = {} if made["read_changed"] else _changed(before, _state(probe))
    return made["samples"]  # type: ignore[no-any-return]


def _state(world: Any) -> dict[tuple[str, str], str]:
    return {(k, i): body for k, i, body in world.entities()} if isinstance(world, RecordWorld) else {}


def _scoped(world: Any, sample: SampleWrite) -> dict[tuple[str, str], str]:
    """The entities a sample's write may change (its scope), and how many entities each table holds."""
    if not isinstance(world, RecordWorld):
        return {}
    scope = world.write_scope(sample.tool, dict(sample.args), sample.user_id)
    out = {(k, i): world.entity_json(k, i) for k, ids in scope.existing.items() for i in ids if world.has(k, i)}
    out |= {("#", k): str(len(world.table(k))) for k in world.KINDS}
    return out


def _changed(before: Mapping[tuple[str, str], str], after: Mapping[tuple[str, str], str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key in set(before) | set(after):
        if before.get(key) != after.get(key):
            out.setdefault(key[0], set()).add(key[1])
    return out


def _show(changed: Mapping[str, Iterable[str]]) -> str:
    return ", ".join(f"{k} {i}" for k in sorted(changed) for i in sorted(changed[k]))


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _owner(pack: Any, world: Any, user_id: str, texts: Iterable[str] = ()) -> TurnFacts:
    """``owner_facts``, once per user and words within one check run."""
    cache = _made(pack).setdefault("owner", {})
    key = (user_id, tuple(texts))
    if key not in cache:
        cache[key] = pack.owner_facts(world, user_id, list(texts))
    return cache[key]  # type: ignore[no-any-return]


def _foreign(pack: Any, world: Any, sample: SampleWrite, kind: str) -> str:
    """A value of ``kind`` that is not the sample user's: another user's record, else one nobody has."""
    mine = set(_owner(pack, world, sample.user_id, sample.user_texts).candidates.of(kind))
    for uid in _all_users(pack, world)[:6]:
        if uid != sample.user_id:
            theirs = [v for v in _owner(pack, world, uid).candidates.of(kind)
                      if v not in mine and not appears_in(v, sample.user_texts)]
            if theirs:
                return theirs[0]
    return FOREIGN


def _scope_of(world: Any, sample: SampleWrite) -> WriteScope:
    return world.write_scope(sample.tool, dict(sample.args), sample.user_id) if isinstance(world, RecordWorld) \
        else WriteScope()


def _handler_at(pack: Any, tool: str) -> str:
    """``"tools.py archive_record"``: where the tool's handler is written."""
    handler = pack.registry.get(tool).handler
    try:
        file = Path(inspect.getsourcefile(handler) or "?").name
    except TypeError:
        file = "?"
    return f"{file} {getattr(handler, '__name__', tool)}"


def _all_users(pack: Any, world: Any) -> list[str]:
    return pack.users(world) if isinstance(pack, PackBase) and world is not None else []


def _other_users(pack: Any, world: Any, user_id: str) -> list[str]:
    return [u for u in _all_users(pack, world)[:3] if u != user_id][:1]


def _replaced(args: dict[str, Any], path: str, value: str) -> dict[str, Any] | None:
    base, field = split_path(path)
    if base not in args:
        return None
    out = json.loads(json.dumps(args))
    if field is None:
        out[base] = [value] if isinstance(out[base], list) else value
    elif isinstance(out[base], list) and out[base] and isinstance(out[base][0], dict):
        out[base][0][field] = value
    else:
        return None
    return out


def _writes(pack: Domain) -> tuple[list[str], list[str]]:
    """Problems and notes of the ``writes`` check (see module docstring)."""
    world, why = _world(pack)
    if world is None:
        return [], [why or "no world"]
    out: list[str] = []
    notes: list[str] = []
    local = isinstance(world, RecordWorld)
    before = _state(world)
    if local:
        rebuilt = pack.world_from_entities(world.entities())
        if _state(rebuilt) != before:
            out.append(f"{where(pack, 'world_from_entities')}: the world rebuilt from its stored rows differs from "
                       f"the world (entity_json / from_entities of {type(world).__name__})")
    samples = _samples(pack, world)
    made = _made(pack)
    if made.get("read_changed"):  # the owner's reads, signing the first users in, changed a copy of the world
        reads = ", ".join(sorted(pack.owner_reads)) if isinstance(pack, PackBase) else "the owner's reads"
        out.append(f"{where(pack, 'registry')}: a read tool ({reads}) changed the world "
                   f"({_show(made['read_changed'])}): a read must not change anything (declare it kind='write')")
        return out, notes
    if made.get("sample_changed"):
        changed = made["sample_changed"]
        scoped = {(k, i) for s in samples for k, ids in _scope_of(world, s).existing.items() for i in ids}
        outside = {k: {i for i in v if (k, i) not in scoped} for k, v in changed.items()}
        outside = {k: v for k, v in outside.items() if v}
        if outside and samples:
            out.append(f"{where(world, 'write_scope')}: a write changed {_show(outside)}, which its write scope "
                       "leaves out (found when its precheck ran it on a fork: what the scope leaves out is shared "
                       "with the live world)")
        else:
            out.append(f"{where(pack, 'precheck')}: looking for sample writes changed the world ({_show(changed)}): "
                       "a precheck must run the write on a fork, or its eligibility alone")
    by_tool = {s.tool: s for s in samples}
    for tool in sorted(pack.write_tools):
        if tool not in by_tool:
            out.append(f"{where(pack, 'sample_writes')}: write tool {tool!r} has no sample call (none could be filled "
                       "from the first users' records): give one, an eligible and grounded call of the tool")
    if not isinstance(pack, ToolBackend):
        if samples:
            notes.append("the pack is not a ToolBackend: its writes were tried through its tool runner only")
    runner = WriteGate(pack.tool_runner(world, MemoryLedger()), pack.write_tools)  # the port as served
    met: dict[str, str] = {}
    base: Any = None
    for s in samples:
        label = f"{s.tool}({', '.join(f'{k}={v!r}' for k, v in s.args.items())})"
        session = ToolSession(session_id="conformance", authenticated_user_id=s.user_id,
                              user_texts=list(s.user_texts), idempotency_key="conformance-unconfirmed")
        state = _scoped(world, s)
        try:
            refused = _run(runner.call(s.tool, dict(s.args), session))
            ok, reason = refused.observation.ok, refused.reason
        except TandemError as exc:
            ok, reason = False, (exc.details or {}).get("reason") or exc.code
        if ok or _scoped(world, s) != state:
            out.append(f"{where(pack, 'tool_runner')}: {label} ran without the user's yes through the tool port")
        try:
            pre = _run(runner.precheck(s.tool, dict(s.args), session.model_copy(update={"idempotency_key": None})))
        except TandemError as exc:
            pre = exc.code
        if _scoped(world, s) != state:
            out.append(f"{where(pack, 'precheck')}: the precheck of {label} changed the live world (it must run the "
                       "write on a fork, or its eligibility alone)")
        if pre is not None:
            out.append(f"{where(pack, 'sample_writes')}: the sample {label} is refused by its precheck ({pre}): a sample "
                       "must be eligible and grounded")
            continue
        if not isinstance(pack, ToolBackend):
            continue
        for path, kind in sorted(pack.arg_kinds(s.tool).items()):
            if isinstance(pack, PackBase) and path in pack.unchecked_args:
                continue
            other = _replaced(dict(s.args), path, _foreign(pack, world, s, kind))
            if other is None:
                continue
            if not pack.ungrounded(s.tool, other, list(s.user_texts), world, s.user_id):
                shown = other.get(split_path(path)[0])
                out.append(f"{where(pack, 'ungrounded')}: accepted {s.tool}({split_path(path)[0]}={shown!r}), a {kind!r} "
                           "that is neither in the user's words nor in their records")
        for uid in _other_users(pack, world, s.user_id):
            reason = pack.precheck(s.tool, dict(s.args), ToolContext(session_id="conformance", authenticated_user_id=uid),
                                   world)
            if reason:
                met.setdefault(reason, f"{s.tool} by another user")
        if not local:
            continue
        if base is None:
            base = world.clone()  # one copy for every sample: each write runs on its own fork of it
        snapshot = before
        unconfirmed = ToolContext(session_id="conformance", authenticated_user_id=s.user_id)
        scope = base.write_scope(s.tool, dict(s.args), s.user_id)
        attempt = base.fork(scope)
        res = pack.invoke(s.tool, dict(s.args), unconfirmed, attempt)
        changed = _changed(_scoped(base, s), _scoped(attempt, s))
        if res.observation.ok or changed:
            out.append(f"{_handler_at(pack, s.tool)}: {label} ran without the user's yes (ctx.confirmed false"
                       + (f", changed {_show(changed)}" if changed else "") + "): the write tool must "
                       f"refuse({NOT_CONFIRMED!r}, ...) before it changes anything")
        elif res.reason:
            met.setdefault(res.reason, f"{s.tool} unconfirmed")
        trial = base.fork(scope)
        confirmed = unconfirmed.model_copy(update={"confirmed": True, "idempotency_key": "conformance"})
        done = pack.invoke(s.tool, dict(s.args), confirmed, trial)
        if not done.observation.ok:
            out.append(f"{where(pack, 'sample_writes')}: the sample {label} failed when confirmed ({done.reason}: "
                       f"{done.observation.error_message})")
            continue
        actual = _changed(snapshot, _state(trial))
        shared = _changed(snapshot, _state(base))
        if shared or not WriteScope.admits(scope, {k: sorted(v) for k, v in actual.items()}, base):
            outside = {k: {i for i in v if i not in set(scope.existing.get(k, ())) and
                           not (k in scope.creates and (k, i) not in snapshot)} for k, v in actual.items()}
            outside = {k: v for k, v in outside.items() if v} or shared
            out.append(f"{where(trial, 'write_scope')}: {label} changed {_show(outside)}, which its write scope leaves "
                       "out (a write may change only what write_scope says)")
            base = None  # the copy itself was changed: the next sample starts from a new one
            continue
        stored = {k: set(v) for k, v in done.changed.items()}
        for kind, keys in base.diff(trial, scope).items():
            stored.setdefault(kind, set()).update(keys)
        lost = {k: v - stored.get(k, set()) for k, v in actual.items()}
        lost = {k: v for k, v in lost.items() if v}
        if lost:
            out.append(f"{where(pack, 'invoke')}: {label} changed {_show(lost)}, but neither invoke's changed nor "
                       f"{type(base).__name__}.diff names it: the change would never reach the world store")
        if not actual:
            notes.append(f"{label} changed nothing on the world")
    after = _state(world)
    if local and after != before:
        out.append(f"{where(pack, 'tool_runner')}: trying the writes (unconfirmed, prechecked) changed the live world "
                   f"({_show(_changed(before, after))}): only a confirmed write may change it")
    for reason, at in sorted(met.items()):
        if reason in ERROR_CODES:
            out.append(f"{where(pack, 'invoke')}: the refusal of {at} carries the error code {reason!r} as its reason, "
                       "not the reason code at the end of its message (reason_from / PackBase.invoke)")
        elif reason not in pack.texts.refusals and not reason.startswith(UNGROUNDED):
            out.append(f"{where(pack, 'texts')}: no refusal text for reason {reason!r} ({at}): add "
                       f"texts.refusals[{reason!r}]")
    return out, notes


# -- confirmed writes: the core's guarantee, with a planted mistake --------------------------------------------


class _PlantedWrites:
    """The planted mistake: ``pack`` whose every write runs whatever ``ctx.confirmed`` says (its own check
    removed), counting the write calls that reach it. Everything else is the pack's."""

    def __init__(self, pack: Any, writes: frozenset[str]) -> None:
        self._pack, self._writes = pack, writes
        self.write_tools = writes
        self.reached: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pack, name)

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: Any) -> CallOutcome:
        if name not in self._writes:
            return self._pack.invoke(name, args, ctx, world)
        self.reached.append(name)
        return CallOutcome(observation=ToolObservation(tool=name, args=dict(args), ok=True, result={"written": True}))

    def ungrounded(self, name: str, args: dict[str, Any], user_texts: Sequence[str], world: Any,
                   user_id: str) -> list[str]:
        return []


class _NoWorld:
    """A world with nothing in it (the runner's ``World``): the planted write changes nothing, so what reaches it
    is all that is measured."""

    def write_scope(self, tool: str, args: Mapping[str, Any], user_id: str | None) -> WriteScope:
        return WriteScope()

    def fork(self, scope: WriteScope) -> _NoWorld:
        return self

    def has(self, kind: str, key: str) -> bool:
        return False

    def adopt(self, other: Any, changed: Mapping[str, Sequence[str]]) -> None:
        return None

    def diff(self, other: Any, scope: WriteScope) -> dict[str, list[str]]:
        return {}

    def entity_json(self, kind: str, key: str) -> str:
        raise KeyError(f"{kind} {key}")


class _Spy:
    """A pack's own runner (not the core's), noting the write calls that reach it."""

    def __init__(self, runner: Any, writes: frozenset[str]) -> None:
        self.runner, self.writes = runner, writes
        self.reached: list[str] = []

    async def call(self, name: str, args: dict[str, Any], session: ToolSession) -> ToolCallResult:
        if name in self.writes:
            self.reached.append(name)
        return await self.runner.call(name, args, session)

    async def precheck(self, name: str, args: dict[str, Any], session: ToolSession) -> str | None:
        return await self.runner.precheck(name, args, session)


def _refused_calls(tool: str, args: dict[str, Any]) -> dict[str, ToolSession]:
    """The calls of ``tool(args)`` the port must refuse: what is wrong → the session that carries it."""
    base = ToolSession(session_id="conformance")
    yes = base.confirm(tool, args, "conformance-key")
    return {
        "unconfirmed": base.model_copy(update={"idempotency_key": "conformance-key"}),
        "confirmed flag without the card": base.model_copy(update={"confirmed": True,
                                                                    "idempotency_key": "conformance-key"}),
        "the yes to other arguments": base.confirm(tool, {**args, "conformance": "other"}, "conformance-key"),
        "the yes to another tool": base.confirm(f"{tool}_other", args, "conformance-key"),
        "the card without the yes": yes.model_copy(update={"confirmed": False}),
        "no idempotency key": yes.model_copy(update={"idempotency_key": None}),
    }


def _own_port(pack: Any, planted: _PlantedWrites,
              writes: frozenset[str]) -> tuple[Any, Callable[[], list[str]], str]:
    """The pack's tool port as the tools deployment serves it (the core's gate over ``pack.tool_runner``), with
    the planted writes when the runner is the core's; ``None`` and why when it cannot be built here."""
    try:
        runner = pack.tool_runner(pack.new_world(SEED), None)
    except Exception as exc:  # noqa: BLE001 - any reason is reported; the core's runner is still checked
        return None, list, f"{type(exc).__name__}: {exc}"
    if isinstance(runner, LocalToolRunner):
        runner.domain = planted  # type: ignore[assignment]  # its writes are the planted ones
        return WriteGate(runner, writes), lambda: planted.reached, ""
    spy = _Spy(runner, writes)
    return WriteGate(spy, writes), lambda: spy.reached, ""


async def _try_refused(port: Any, writes: frozenset[str], reached: Callable[[], list[str]], where_: str) -> list[str]:
    out: list[str] = []
    for tool in sorted(writes):
        for what, session in _refused_calls(tool, {}).items():
            before = len(reached())
            try:
                await port.call(tool, {}, session)
                out.append(f"write {tool!r}, {what}: ran through {where_} (not refused)")
            except UnconfirmedWrite:
                pass
            except Exception as exc:  # refused, but not by the port's typed refusal
                out.append(f"write {tool!r}, {what}: {type(exc).__name__} from {where_}, not UnconfirmedWrite")
            if len(reached()) != before:
                out.append(f"write {tool!r}, {what}: reached the pack's write through {where_}")
    return out


async def _confirmed_writes_async(pack: Domain) -> tuple[list[str], str]:
    writes = write_tools_of(pack)
    if not writes:
        return [], "no write tools: nothing to gate"
    planted = _PlantedWrites(pack, writes)
    core = LocalToolRunner(planted, _NoWorld(), ledger=MemoryLedger())  # type: ignore[arg-type]
    out = await _try_refused(core, writes, lambda: planted.reached, "the core's runner")
    for tool in sorted(writes):  # the control: the yes to this very call runs it, once per key
        yes = ToolSession(session_id="conformance").confirm(tool, {}, f"conformance-{tool}")
        first, again = await core.call(tool, {}, yes), await core.call(tool, {}, yes)
        if planted.reached.count(tool) != 1 or not first.observation.ok or not again.replayed:
            out.append(f"write {tool!r}: the confirmed call did not run exactly once and replay its key")
    paths = ["the core's runner"]
    port, reached, why_not = _own_port(pack, _PlantedWrites(pack, writes), writes)
    if port is not None:
        out += await _try_refused(port, writes, reached, "the pack's tool port")
        paths.append("the pack's tool port as served")
    n = len(_refused_calls("x", {}))
    return out, (f"{n} planted calls of each of {len(writes)} write tool(s) ({', '.join(sorted(writes))}) that "
                 f"ignore confirmation refused before the pack, on {' and '.join(paths)}; the confirmed call ran "
                 "once and its key replayed" + (f" (the pack's own port not built here: {why_not})" if why_not else ""))


def _confirmed_writes(pack: Domain) -> tuple[list[str], str]:
    """Problems and the guarantee shown by the ``confirmed writes`` check (see module docstring)."""
    return _run(_confirmed_writes_async(pack))


CHECKS: dict[str, Callable[[Domain], list[str]]] = {
    "protocol": _protocol, "labels": _labels, "catalogue": _catalogue, "grounding": _grounding, "texts": _texts,
    "tables": _tables, "cards": _cards, "session facts": _session_facts, "determinism": _determinism,
    "writes": lambda pack: _writes(pack)[0], "confirmed writes": lambda pack: _confirmed_writes(pack)[0],
}
#: The checks that need every hook of the protocol (run only once ``protocol`` passes).
_NEEDS_PROTOCOL = frozenset(CHECKS) - {"protocol"}


def check_pack(pack: Domain) -> list[CheckResult]:
    """Every check of the suite on ``pack`` (a check that raises reports the error as its problem)."""
    results = []
    _made(pack).clear()
    protocol_ok = True
    try:
        for name, check in CHECKS.items():
            if name in _NEEDS_PROTOCOL and not protocol_ok:
                results.append(CheckResult(name=name, ok=False, problems=["not run: the pack misses protocol hooks"]))
                continue
            notes: list[str] = []
            shown = ""
            try:
                if name == "writes":
                    problems, notes = _writes(pack)
                elif name == "confirmed writes":
                    problems, shown = _confirmed_writes(pack)
                else:
                    problems = check(pack)
            except Exception as exc:  # a pack that crashes a check fails it, with the reason and where
                at = _pack_frame(exc)
                problems = [f"{type(exc).__name__}: {exc}" + (f" (at {at})" if at else "")]
            results.append(CheckResult(name=name, ok=not problems, problems=problems, notes=notes,
                                       shown="" if problems else shown))
            if name == "protocol":
                protocol_ok = not problems
    finally:
        _made(pack).clear()
    return results


_PLATFORM = Path(__file__).resolve().parents[1]


def _pack_frame(exc: BaseException) -> str | None:
    """The innermost frame of the traceback in the pack's own code (else the innermost one)."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((Path(tb.tb_frame.f_code.co_filename), tb.tb_lineno, tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    own = [f for f in frames if _PLATFORM not in f[0].resolve().parents and "site-packages" not in str(f[0])]
    pick = (own or frames or [None])[-1]
    return None if pick is None else f"{pick[0].name}:{pick[1]} in {pick[2]}"


def run_checks(name: str, **options: Any) -> list[CheckResult]:
    """Load the installed (or registered) pack ``name`` and run the suite on it."""
    return check_pack(load_domain(name, **options))
