"""The defaults of a domain pack: a pack subclasses :class:`PackBase`, declares its data, and overrides the hooks
its domain needs (``tandem domain new`` writes one).

What a subclass must give (:data:`~pipelines.core.domain.REQUIRED`): ``name``, ``labels``, ``cards``,
``texts``, ``orchestrator_policy``, ``generator_persona``, its tools (``tools``, a sequence of
:class:`~pipelines.tools.ToolSpec`, or a ``registry``), ``tables_dir`` (its Φ / Ψ / tiers / W3 YAML files),
``arg_kind_table`` (tool → argument → grounding kind) and ``new_world``. Everything else has a default that
is safe for a domain without it, and the platform owns what every pack with records needs:

* **the tool backend** the core's :class:`~pipelines.core.runner.LocalToolRunner` drives —
  :meth:`PackBase.invoke` (one call; the refusal's reason read off ``"… [reason]"``), :meth:`PackBase.precheck`
  (the write as if confirmed, on a fork of its scope, or the tool's ``eligibility`` alone over a remote
  world), :meth:`PackBase.ungrounded` (the write's arguments that are neither the user's words, nor their
  records, nor the pack's vocabularies — derived from the declared kinds, the extractors and the owner's
  reads); which entities a write changed is found by the world itself (``RecordWorld.diff``);
* **the owner's records** — ``owner_reads`` names the reads that return the user's own records;
  :meth:`PackBase.observe` folds their fields named after a grounding kind into candidates, and
  :meth:`PackBase.owner_facts` chains them (the user's list, then each record's details);
* **a world of records** — with ``world_type`` (a :class:`~pipelines.core.world.RecordWorld`) the stored
  world is rebuilt from its rows, and a dataset file is read as its JSON;
* **conformance samples** — :meth:`PackBase.sample_writes` fills each write tool's arguments from the first
  users' records, so ``tandem domain check`` can try every write.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from pipelines.errors import ConfigError, InvalidInput, TandemError
from pipelines.gate import SentenceJudge
from pipelines.grounding import split_path
from pipelines.grounding import ungrounded as ungrounded_args
from pipelines.tools import ToolContext, ToolRegistry, ToolSpec

from .contract import EligibleAction, ForwardContract
from .domain import CardSpec, DomainTexts, SampleWrite, TurnFacts
from .evaluation import PackEvaluation
from .ports import ToolRunner
from .refusal import reason_from, reason_of
from .runner import CallOutcome, LocalToolRunner
from .taskreplay import TaskReplayHook
from .world import RecordWorld

__all__ = ["PackBase", "read_tables", "read_state"]

TABLES = ("phi", "psi", "tiers", "w3")
#: How far :meth:`PackBase.owner_facts` follows the owner's reads (the user → their records → details).
OWNER_READ_ROUNDS = 3
#: At most this many calls of one owner read (one per record id of the user).
OWNER_READ_LIMIT = 50


def read_tables(directory: Path, name: str) -> dict[str, Any]:
    """A rule bundle from ``phi.yaml``, ``psi.yaml``, ``tiers.yaml`` and ``w3.yaml`` (each versioned) in
    ``directory``: ``{version, phi, psi, tiers, w3}``, the bundle version joining the tables' own."""
    data: dict[str, Any] = {}
    for key in TABLES:
        path = directory / f"{key}.yaml"
        try:
            data[key] = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read rule table {path}: {exc}", details={"path": str(path)}) from exc
    parts = [data["phi"]["version"], data["psi"]["version"], data["tiers"]["version"]]
    parts += [data["w3"][b]["version"] for b in sorted(data["w3"])]
    data["version"] = f"{name}:" + "+".join(parts)
    return data


M = TypeVar("M", bound=BaseModel)


def read_state(model: type[M], state: Mapping[str, Any] | None) -> M:
    """A session's stored pack state as this version's ``model``. Keys a newer version of the pack added are
    dropped: during a rolling upgrade old and new replicas serve turns of the same session, and a state an
    upgraded replica wrote must not fail the next turn on one not upgraded yet (it is read without them and
    written back without them). A known key with a bad value still fails."""
    if not state:
        return model()
    return model.model_validate({k: v for k, v in state.items() if k in model.model_fields})


def _scalars(value: Any, kinds: set[str], out: dict[str, list[str]], key: str | None = None) -> None:
    """Every scalar under a key that names a grounding kind, at any depth of a JSON value."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _scalars(v, kinds, out, str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            _scalars(v, kinds, out, key)
    elif key in kinds and isinstance(value, str | int | float) and not isinstance(value, bool):
        out.setdefault(key, []).append(str(value))


class PackBase:
    """The defaults of the :class:`~pipelines.core.domain.Domain` protocol (see module docstring)."""

    # -- identity and catalogue ------------------------------------------------------------------
    name: str = ""
    labels: Mapping[str, Sequence[str]] = {}
    cards: Sequence[CardSpec] = ()
    texts: DomainTexts
    orchestrator_policy: str = ""
    generator_persona: str = ""
    conflict_kinds: Sequence[str] = ()
    branch_of_intent: Mapping[str, str] = {}
    entity_kind: str | None = None
    transfer_tool: str | None = None
    transfer_reasons: Mapping[str, str] = {}
    binds_user: bool = False
    change_cues: bool = False
    carried_clarifies: frozenset[str] = frozenset()
    reasons: Sequence[str] = ()
    lookup_tools: frozenset[str] = frozenset()
    persistent: bool = False

    #: The pack's tools (the registry is built from them once per pack).
    tools: Sequence[ToolSpec[Any, Any, Any]] = ()
    #: Where ``phi.yaml``, ``psi.yaml``, ``tiers.yaml`` and ``w3.yaml`` are.
    tables_dir: Path
    #: Tool → argument → grounding kind (``"items[].book_id"`` for a field of a list of objects).
    arg_kind_table: Mapping[str, Mapping[str, str]] = {}
    #: Card id → the W1 intents that may offer it.
    card_intents: Mapping[str, Sequence[str]] = {}
    #: The reads that return the user's own records (their profile, their loans): the fields of their results
    #: named after a grounding kind become candidates of the user's own (``observe``), and the backend's
    #: grounding re-check reads them again (``owner_facts``).
    owner_reads: frozenset[str] = frozenset()
    #: Argument paths the backend's grounding re-check leaves to the tool itself (a value from a search
    #: result, an amount the tool recomputes).
    unchecked_args: frozenset[str] = frozenset()
    #: The world's type, when it is a :class:`~pipelines.core.world.RecordWorld` (stored rows and dataset
    #: files are read through it).
    world_type: type[RecordWorld] | None = None
    #: The entity kind of the world's users (``sample_writes`` tries the first ones).
    user_kind: str = "user"
    #: User messages that name values the extractors find (``tandem domain check`` reads each kind's source
    #: off them, beside the world's own values): ``("Can I renew loan L0001?",)``.
    sample_texts: Sequence[str] = ()
    #: Users the suite signs in when the world cannot list them (a service's test accounts).
    sample_users: Sequence[str] = ()

    @property
    def registry(self) -> ToolRegistry[Any]:
        reg: ToolRegistry[Any] | None = self.__dict__.get("_registry")
        if reg is None:
            reg = ToolRegistry()
            for spec in self.tools:
                reg.register(spec)
            self._registry = reg
        return reg

    @property
    def write_tools(self) -> frozenset[str]:
        return frozenset(n for n in self.registry.names() if self.registry.get(n).kind == "write")

    def arg_kinds(self, tool: str) -> Mapping[str, str]:
        return self.arg_kind_table.get(tool, {})

    def optional_empty(self, tool: str) -> frozenset[str]:
        return frozenset()

    def clarify_key(self, kind: str) -> str | None:
        return kind if kind in self.texts.clarify else "details"

    def rule_tables(self) -> dict[str, Any]:
        return read_tables(self.tables_dir, self.name)

    # -- gating ----------------------------------------------------------------------------------
    def read_tools(self, facts: TurnFacts) -> list[str]:
        return [n for n in self.registry.names() if self.registry.get(n).kind == "read" and n != self.transfer_tool]

    def cards_for(self, intent: str, sub_intent: str, facts: TurnFacts) -> list[CardSpec]:
        return [c for c in self.cards if c.kind == "write" and intent in self.card_intents.get(c.id, ())]

    def change_intents(self) -> set[str]:
        return {i for c in self.cards if c.kind == "write" for i in self.card_intents.get(c.id, ())}

    # -- perception --------------------------------------------------------------------------------
    def intent_prior(self, text: str) -> list[str] | None:
        return None

    def sub_intent_prior(self, text: str, intent: str) -> list[str] | None:
        return None

    def snapshot_values(self, facts: TurnFacts) -> dict[str, Any]:
        return {"user_id": facts.user_id} if facts.user_id else {}

    # -- grounding ---------------------------------------------------------------------------------
    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        return {}

    def fixed_candidates(self) -> dict[str, list[str]]:
        return {}

    def slot_schema(self) -> dict[str, Any] | None:
        return None

    def absorb_slots(self, slots: Mapping[str, Any], facts: TurnFacts) -> dict[str, list[str]]:
        return {}

    def needs_slots(self, facts: TurnFacts) -> bool:
        return False

    async def prepare(self, facts: TurnFacts, tools: ToolRunner) -> None:
        if facts.user_id:  # the session's user is the request's: their own id is a record of theirs
            facts.candidates.add("user_id", facts.user_id, "record")

    def restore(self, facts: TurnFacts) -> None:
        return None

    def refused(self, tool: str, args: Mapping[str, Any], reason: str, facts: TurnFacts) -> None:
        return None

    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        if ok and result and tool in self.owner_reads:
            found: dict[str, list[str]] = {}
            _scalars(result, self.kinds(), found)
            facts.candidates.add_all(found, "record")

    def session_fields(self, facts: TurnFacts) -> dict[str, Any]:
        return {"authenticated_user_id": facts.user_id, "observed_ids": []}

    def constraints(self, facts: TurnFacts) -> list[str]:
        return []

    def arrange(self, tool: str, args: dict[str, Any], facts: TurnFacts) -> dict[str, Any]:
        return args

    def undecided(self, tool: str, args: dict[str, Any], facts: TurnFacts) -> tuple[str, list[str]] | None:
        return None

    def settle_intent(self, intent: str, sub_intent: str, facts: TurnFacts) -> tuple[str, str]:
        return intent, sub_intent

    def first_question(self, facts: TurnFacts) -> str | None:
        return None

    def record_reads(self, facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        return []

    def pick_records(self, intent: str, options: Sequence[str], facts: TurnFacts) -> list[str]:
        return list(options)

    def select_record(self, record: str, facts: TurnFacts, then: Sequence[str] = ()) -> None:
        return None

    def asks_for_all(self, facts: TurnFacts) -> bool:
        return False

    def describe_records(self, records: Sequence[str], facts: TurnFacts) -> list[str]:
        return list(records)

    def choices(self, about: str, facts: TurnFacts) -> list[str]:
        return []

    def choice_reads(self, about: str, facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        return []

    def readback(self, tool: str, args: Mapping[str, Any], facts: TurnFacts) -> dict[str, str]:
        return {}

    def readback_reads(self, tool: str, args: Mapping[str, Any], facts: TurnFacts) -> list[tuple[str, dict[str, Any]]]:
        return []

    def kinds(self) -> set[str]:
        """Every grounding kind the pack declares."""
        return {kind for table in self.arg_kind_table.values() for kind in table.values()}

    # -- observations and the reply ------------------------------------------------------------------
    def summarize(self, tool: str, result: Mapping[str, Any] | None, limit: int = 300) -> str:
        text = json.dumps(result or {}, separators=(",", ":"), ensure_ascii=False, default=str)
        return text if len(text) <= limit else text[:limit] + "..."

    def user_state(self, tool: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
        return {f"{tool}.{k}": v for k, v in (result or {}).items() if isinstance(v, str | int | float | bool)}

    def answer_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        return []

    def lead_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        return []

    def reply_judges(self, facts: TurnFacts, contract: ForwardContract) -> list[SentenceJudge]:
        return []

    def refusal_line(self, refusal: Mapping[str, Any], title: str, contract: ForwardContract) -> str:
        why = self.texts.refusals.get(str(refusal.get("reason")), "") or "it is not allowed here"
        return f"I can't {title[:1].lower() + title[1:]}: {why}."

    def executed_lines(self, action: EligibleAction, contract: ForwardContract) -> list[str]:
        return [self.texts.templates.get("executed") or "Done."]

    def policy_lines(self, tool: str | None) -> Sequence[str]:
        return ()

    def entity_names(self, facts: TurnFacts) -> list[str]:
        return []

    # -- kernels -------------------------------------------------------------------------------------
    def conflicts(self, facts: TurnFacts) -> list[dict[str, Any]]:
        return []

    def w3_candidates(self, facts: TurnFacts) -> list[dict[str, Any]]:
        return []

    # -- serving -------------------------------------------------------------------------------------
    def new_world(self, seed: int, dataset: str | None = None) -> Any:
        if dataset and self.world_type is not None:
            return self.world_type.from_json(json.loads(Path(dataset).expanduser().read_text(encoding="utf-8")))
        raise NotImplementedError(f"the {self.name} pack builds no world: give it a new_world")

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> Any:
        if self.world_type is None:
            raise NotImplementedError(f"the {self.name} pack stores no world: set world_type or give "
                                      "world_from_entities")
        return self.world_type.from_entities(rows)

    def tool_runner(self, world: Any, ledger: Any) -> ToolRunner:
        return LocalToolRunner(self, world, ledger=ledger)

    # -- the tool backend (what LocalToolRunner drives) -----------------------------------------------
    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: Any) -> CallOutcome:
        """One call; a refusal's reason is the code at the end of its message (``"… [reason]"``)."""
        obs = self.registry.call(name, dict(args), ctx, world)
        return CallOutcome(observation=obs, reason=reason_from(obs))

    def precheck(self, name: str, args: dict[str, Any], ctx: ToolContext, world: Any) -> str | None:
        """A write's eligibility as if the user had confirmed: ``None`` or the reason. The tool's
        ``eligibility`` (reads only) runs first; over a world of records the whole write then runs on a fork
        of its scope (the live world untouched); over a remote world nothing is ever sent."""
        try:
            parsed = self.registry.parse_args(name, dict(args))
        except InvalidInput as exc:
            return exc.code
        confirmed = ctx.model_copy(update={"confirmed": True}, deep=True)
        spec = self.registry.get(name)
        if spec.eligibility is not None:
            try:
                spec.eligibility(parsed, confirmed, world)
            except TandemError as exc:
                return reason_of(exc.message) or exc.code
        if not isinstance(world, RecordWorld):
            return None
        trial = world.fork(world.write_scope(name, dict(args), ctx.authenticated_user_id))
        return reason_from(self.registry.call(name, dict(args), confirmed, trial))

    def ungrounded(self, name: str, args: dict[str, Any], user_texts: Sequence[str], world: Any,
                   user_id: str) -> list[str]:
        """The write's arguments that are neither in the user's texts, nor in their own records (the owner's
        reads), nor the pack's vocabularies (``unchecked_args`` aside)."""
        cands = self.owner_facts(world, user_id, list(user_texts)).candidates
        cands.add_all(self.fixed_candidates(), "record")
        kinds = {k: v for k, v in self.arg_kinds(name).items() if k not in self.unchecked_args}
        return sorted({a for a, _ in ungrounded_args(args, kinds, cands, optional_empty=self.optional_empty(name))})

    # -- evaluation and conformance -------------------------------------------------------------------
    def evaluation(self) -> PackEvaluation:
        return PackEvaluation()

    def task_replay(self, data_dir: str | Path | None = None) -> TaskReplayHook | None:
        return None

    def users(self, world: Any) -> list[str]:
        """The world's users, first ones first (who ``tandem domain check`` signs in): the ``user_kind`` table of a
        :class:`~pipelines.core.world.RecordWorld`, else ``sample_users``."""
        if isinstance(world, RecordWorld) and self.user_kind in world.KINDS:
            return list(world.table(self.user_kind))
        return list(self.sample_users)

    def owner_facts(self, world: Any, user_id: str, texts: Sequence[str] = ()) -> TurnFacts:
        """The facts of a session whose ``user_id`` signed in (each lookup tool observed as naming them), said
        ``texts``, and read their own records: the owner's reads, chained (their list, then each record's
        details)."""
        facts = TurnFacts(session_id=f"owner:{user_id}", user_text=texts[-1] if texts else "",
                          user_texts=list(texts), user_id=user_id)
        self.restore(facts)
        for text in texts:
            facts.candidates.add_all(self.extract_candidates(text), "user")
        facts.candidates.add("user_id", user_id, "record")
        for tool in sorted(self.lookup_tools):
            self.observe(tool, {"user_id": user_id}, True, facts)
        done: set[str] = set()
        for _ in range(OWNER_READ_ROUNDS):
            calls = [(t, a) for t in sorted(self.owner_reads) for a in self._owner_calls(t, facts)]
            calls = [(t, a) for t, a in calls if json.dumps([t, a], sort_keys=True) not in done]
            if not calls:
                break
            for tool, args in calls:
                done.add(json.dumps([tool, args], sort_keys=True))
                fields = self.session_fields(facts)
                ctx = ToolContext(session_id=facts.session_id, authenticated_user_id=fields.get("authenticated_user_id")
                                  or user_id, observed_ids=set(fields.get("observed_ids") or ()))
                obs = self.registry.call(tool, args, ctx, world)
                self.observe(tool, obs.result, obs.ok, facts)
        return facts

    def _owner_calls(self, tool: str, facts: TurnFacts) -> list[dict[str, Any]]:
        """Calls of an owner read with its required arguments filled from the session's candidates."""
        if tool not in self.registry.tools:
            return []
        required = self._required(tool)
        kinds = self.arg_kinds(tool)
        # the user's words or their records: the read itself refuses a record of someone else's
        values = [facts.candidates.of(kinds[a]) if a in kinds else [] for a in required]
        if any(not v for v in values):
            return []
        first, rest = values[0] if values else [], [v[0] for v in values[1:]]
        if not required:
            return [{}]
        return [dict(zip(required, [v, *rest], strict=True)) for v in first[:OWNER_READ_LIMIT]]

    def _required(self, tool: str) -> list[str]:
        """The required arguments of ``tool`` (read off its schema once per pack)."""
        cache: dict[str, list[str]] = self.__dict__.setdefault("_required_args", {})
        if tool not in cache:
            cache[tool] = list(self.registry.get(tool).args_schema().get("required", []))
        return cache[tool]

    def sample_writes(self, world: Any) -> list[SampleWrite]:
        """One eligible, grounded call per write tool, its arguments the first users' records (a pack whose
        writes need more — a list of objects, an amount — gives its own)."""
        out: dict[str, SampleWrite] = {}
        for uid in self.users(world)[:10]:
            facts = self.owner_facts(world, uid)
            ctx = ToolContext(session_id="sample", authenticated_user_id=uid)
            for tool in sorted(self.write_tools - set(out)):
                for args in self._fills(tool, facts):
                    if self.precheck(tool, args, ctx, world) is None and not self.ungrounded(tool, args, (), world, uid):
                        out[tool] = SampleWrite(tool=tool, args=args, user_id=uid)
                        break
            if len(out) == len(self.write_tools):
                break
        return [out[t] for t in sorted(out)]

    def _fills(self, tool: str, facts: TurnFacts) -> Iterable[dict[str, Any]]:
        """Argument sets of ``tool`` from the candidates of each argument's kind (at most 30 tried)."""
        schema = self.registry.get(tool).args_schema()
        props = schema.get("properties", {})
        kinds = self.arg_kinds(tool)
        fixed = self.fixed_candidates()
        options: list[list[Any]] = []
        names = [a for a in schema.get("required", []) if split_path(a)[0] == a]
        for arg in names:
            kind = kinds.get(arg)
            vals = (facts.candidates.of(kind) or list(fixed.get(kind, ()))) if kind else []
            if not vals:
                return []
            options.append([[v] for v in vals[:5]] if props.get(arg, {}).get("type") == "array" else vals[:5])
        return (dict(zip(names, combo, strict=True)) for combo in itertools.islice(itertools.product(*options), 30))
