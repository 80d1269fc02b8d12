"""``tandem domain new NAME``: a new domain pack, as its own installable distribution, that passes the
conformance suite and serves a streamed turn as generated.

The pack it writes (``DIR/NAME/``) is small but whole: a seeded world of users and their records, a read
tool and a write tool (with its action card), W1 labels and the cards each intent may offer, grounding
kinds and an extractor for record ids the user types, Φ / Ψ / tiers / W3 tables, texts, a Serve config,
and its own tests (the conformance suite and the tools). It registers itself under the ``tandem.domains``
entry point group, so ``pip install -e DIR/NAME`` is all it takes for ``domain.name: NAME`` to resolve.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["scaffold", "FILES", "valid_name"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{1,30}$")


def valid_name(name: str) -> bool:
    """A pack name: lowercase letters, digits and underscores, starting with a letter (2–31 characters)."""
    return bool(_NAME.match(name))


PYPROJECT = '''[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "tandem-{name}"
version = "0.1.0"
description = "The {name} domain pack for Tandem"
requires-python = ">=3.11,<3.13"
dependencies = ["tandem-serve"]

[project.entry-points."tandem.domains"]
{name} = "tandem_{name}.pack:DomainPack"

[tool.setuptools.packages.find]
include = ["tandem_{name}*"]

[tool.setuptools.package-data]
"*" = ["*.yaml"]
'''

INIT = '''"""The {name} domain pack (see ``pack.py``)."""
'''

WORLD = '''"""The {name} world: users and their records, seeded (the same seed gives the same world).

It is a Tandem ``World``: stored as ``(kind, id, json)`` rows, forked for one write (the entities the
write may change: the user and their records), the changed entities adopted after the commit.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipelines.domain import WriteScope

__all__ = ["Record", "User", "World", "generate_world"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    record_id: str
    title: str
    status: str = "active"


class User(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str
    records: list[str] = Field(default_factory=list)


_MODELS: dict[str, type[BaseModel]] = {{"user": User, "record": Record}}


class World(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: dict[str, User] = Field(default_factory=dict)
    records: dict[str, Record] = Field(default_factory=dict)

    def _table(self, kind: str) -> dict[str, Any]:
        return self.users if kind == "user" else self.records

    def entities(self) -> list[tuple[str, str, str]]:
        return [(kind, key, self.entity_json(kind, key)) for kind in _MODELS for key in self._table(kind)]

    def entity_json(self, kind: str, key: str) -> str:
        return self._table(kind)[key].model_dump_json()

    @classmethod
    def from_entities(cls, rows: Iterable[tuple[str, str, str]]) -> World:
        world = cls()
        for kind, key, body in rows:
            world._table(kind)[key] = _MODELS[kind].model_validate_json(body)
        return world

    def write_scope(self, tool: str, args: Mapping[str, Any], user_id: str | None) -> WriteScope:
        user = self.users.get(user_id or "")
        return WriteScope(existing={{"user": {{user.user_id}}, "record": set(user.records)}}) if user else WriteScope()

    def fork(self, scope: WriteScope) -> World:
        users, records = dict(self.users), dict(self.records)
        for key in scope.existing.get("user", ()):
            users[key] = users[key].model_copy(deep=True)
        for key in scope.existing.get("record", ()):
            records[key] = records[key].model_copy(deep=True)
        return World.model_construct(users=users, records=records)

    def has(self, kind: str, key: str) -> bool:
        return key in self._table(kind)

    def adopt(self, other: World, changed: Mapping[str, Sequence[str]]) -> None:
        for kind, keys in changed.items():
            for key in keys:
                self._table(kind)[key] = other._table(kind)[key]


TITLES = ("spring plan", "garden plot", "reading list", "weekly box", "tool loan", "room booking")


def generate_world(seed: int = 7, users: int = 4) -> World:
    """A small world: each user owns two or three records."""
    rng = random.Random(seed)
    world = World()
    n = 0
    for u in range(1, users + 1):
        user = User(user_id=f"u{{u:03d}}")
        for _ in range(rng.randint(2, 3)):
            n += 1
            rid = f"R{{n:04d}}"
            world.records[rid] = Record(record_id=rid, title=rng.choice(TITLES))
            user.records.append(rid)
        world.users[user.user_id] = user
    return world
'''

TOOLS = '''"""The {name} tools: typed arguments and results, a read and a write, run against the world."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pipelines.domain import ToolContext, ToolRegistry, ToolSpec
from pipelines.errors import IneligibleAction, ToolError

from .world import World

__all__ = ["build_registry"]


class UserArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str


class RecordArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    record_id: str


class Records(BaseModel):
    records: list[dict[str, str]]


class RecordResult(BaseModel):
    record_id: str
    title: str
    status: str


def _owned(args: RecordArgs, ctx: ToolContext, world: World):
    record = world.records.get(args.record_id)
    user = world.users.get(ctx.authenticated_user_id or "")
    if record is None:
        raise ToolError(f"no record {{args.record_id}} [record_not_found]", details={{"reason": "record_not_found"}})
    if user is None or args.record_id not in user.records:
        raise IneligibleAction("that record is not yours [not_owned]", details={{"reason": "not_owned"}})
    return record


def list_records(args: UserArgs, ctx: ToolContext, world: World) -> Records:
    user = world.users.get(args.user_id)
    if user is None or args.user_id != ctx.authenticated_user_id:
        raise IneligibleAction("only your own records [not_owned]", details={{"reason": "not_owned"}})
    return Records(records=[{{"record_id": r, "title": world.records[r].title, "status": world.records[r].status}}
                            for r in user.records])


def archive_record(args: RecordArgs, ctx: ToolContext, world: World) -> RecordResult:
    record = _owned(args, ctx, world)
    if record.status != "active":
        raise IneligibleAction(f"the record is {{record.status}} [not_active]", details={{"reason": "not_active"}})
    if not ctx.confirmed:
        raise IneligibleAction("a change needs the user's yes [not_confirmed]", details={{"reason": "not_confirmed"}})
    record.status = "archived"
    return RecordResult(**record.model_dump())


def build_registry() -> ToolRegistry[World]:
    reg: ToolRegistry[World] = ToolRegistry()
    reg.register(ToolSpec("list_records", "The user's records and their status.", UserArgs, Records, list_records))
    reg.register(ToolSpec("archive_record", "Archive one of the user's active records.", RecordArgs, RecordResult,
                          archive_record, "write"))
    return reg
'''

PACK = '''"""The {name} pack behind Tandem's ``Domain`` protocol (``pipelines.domain``).

The session's user is the request's ``user_id`` (a real pack verifies who the user is first: see
Tandem's support pack and its identity rules). Record ids the user types (``R0001``) and the records
read from the user's own list are the only values a card may carry. The pack is also its tools' backend:
Tandem's ``LocalToolRunner`` runs them over the world, writes exactly once through the world store.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pipelines.domain import CallOutcome, DomainTexts, LocalToolRunner, PackBase, ToolContext, TurnFacts

from .tools import build_registry
from .world import World, generate_world

__all__ = ["DomainPack"]

RECORD_ID = re.compile(r"\\bR\\d{{4}}\\b")


class Card(BaseModel):
    id: str
    title: str
    tool: str
    kind: str = "write"
    required_params: tuple[str, ...]


TEXTS = DomainTexts(
    safe_ack="Let me look into that.",
    fallback="Sorry, I can't do that right now. Could you try again in a moment?",
    handoff="I'm passing you to a person who can help.",
    declined="All right, I've left it as it is.",
    clarify={{"record_id": "Which record do you mean? Its id starts with R.",
              "choose": "Which record do you mean: {{options}}?",
              "user_id": "Who am I helping today?",
              "details": "Could you tell me a little more about what you need?"}},
    templates={{"chat/hello": "Hello! I can list your records and archive one for you.",
                "action_card": "I can {{phrase}}. Reply yes to confirm.",
                "card:card.archive_record": "archive record {{record_id}}",
                "executed": "Done: the record is archived."}},
    refusals={{"not_owned": "that record is not yours", "not_active": "it is not active any more",
               "record_not_found": "I couldn't find that record", "not_confirmed": "I need your yes first"}},
)


class DomainPack(PackBase):
    """The {name} domain (see module docstring)."""

    name = "{name}"
    labels = {{"ask": ("records",), "change": ("archive",), "chat": ("hello",)}}
    cards = (Card(id="card.archive_record", title="Archive a record", tool="archive_record",
                  required_params=("record_id",)),)
    card_intents = {{"card.archive_record": ("change",)}}
    branch_of_intent = {{"ask": "ask"}}  # the W3 guidance branch that serves each intent
    texts = TEXTS
    orchestrator_policy = ("You help a user with their records. Read the user's records before you act. A change "
                           "happens only through an action card and the user's explicit yes.")
    generator_persona = "You are a concise, friendly assistant for the user's records."
    entity_kind = "record_id"
    reasons = ("not_owned", "not_active", "record_not_found", "not_confirmed")
    tables_dir = Path(__file__).with_name("tables")
    arg_kind_table = {{"list_records": {{"user_id": "user_id"}}, "archive_record": {{"record_id": "record_id"}}}}
    write_tools = frozenset({{"archive_record"}})
    persistent = True

    def __init__(self) -> None:
        self._registry = build_registry()

    # -- perception and grounding ------------------------------------------------------------

    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        return {{"record_id": RECORD_ID.findall(text)}}

    async def prepare(self, facts: TurnFacts, tools: Any) -> None:
        if facts.user_id:  # the user's own id is a record of theirs
            facts.candidates.add("user_id", facts.user_id, "record")

    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        if ok and tool == "list_records" and result:
            facts.candidates.add_all({{"record_id": [r["record_id"] for r in result.get("records", [])]}}, "record")

    def answer_lines(self, facts: TurnFacts, contract: Any) -> list[str]:
        for o in facts.observations:
            if o.get("ok") and o.get("tool") == "list_records":
                records = (o.get("result") or {{}}).get("records", [])
                listed = ", ".join(f"{{r['record_id']}} ({{r['title']}}, {{r['status']}})" for r in records)
                return [f"Your records: {{listed}}." if records else "You have no records."]
        return []

    # -- serving: the world, its store and the tools ------------------------------------------

    def new_world(self, seed: int, dataset: str | None = None) -> World:
        return generate_world(seed)

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> World:
        return World.from_entities(rows)

    def tool_runner(self, world: Any, ledger: Any) -> LocalToolRunner:
        return LocalToolRunner(self, world, ledger=ledger)

    # -- the tool backend the runner drives ----------------------------------------------------

    def invoke(self, name: str, args: dict[str, Any], ctx: ToolContext, world: World) -> CallOutcome:
        obs = self.registry.call(name, dict(args), ctx, world)
        changed = {{"record": [args["record_id"]]}} if obs.ok and name in self.write_tools else {{}}
        return CallOutcome(observation=obs, reason=obs.error_code, changed=changed)

    def precheck(self, name: str, args: dict[str, Any], ctx: ToolContext, world: World) -> str | None:
        trial = world.model_copy(deep=True)  # eligibility as if confirmed, on a copy
        obs = self.registry.call(name, dict(args), ctx.model_copy(update={{"confirmed": True}}), trial)
        return None if obs.ok else (obs.error_code or "refused")

    def ungrounded(self, name: str, args: dict[str, Any], user_texts: Sequence[str], world: World,
                   user_id: str) -> list[str]:
        owned = set(world.users[user_id].records) if user_id in world.users else set()
        return [k for k, v in args.items() if k == "record_id" and v not in owned]
'''

PHI = '''version: {name}-phi-1
rows:
  - {{"intent": "ask", "sub_intent": "records", "requires_state": ["user_id"], "tools": [{{"tool": "list_records", "args_from": {{"user_id": "user_id"}}}}], "then": "respond"}}
  - {{"intent": "ask", "sub_intent": "records", "requires_state": [], "tools": [], "then": "clarify:user_id"}}
  - {{"intent": "change", "sub_intent": "archive", "requires_state": ["user_id"], "tools": [{{"tool": "list_records", "args_from": {{"user_id": "user_id"}}}}], "then": "propose"}}
  - {{"intent": "chat", "sub_intent": "hello", "requires_state": [], "tools": [], "then": "respond"}}
'''

PSI = '''version: {name}-psi-1
incompatible:
  - [praise, apology]
rules:
  - id: refused_is_explained
    description: A refused change is explained.
    scope: per_conflict
    tiers: [hard]
    require: [constraint_account]
    forbid: [praise]
  - id: turn_guidance
    description: A turn may carry one next step.
    scope: turn
    allow: [guidance]
'''

TIERS = '''version: {name}-tiers-1
tiers: {{}}
'''

W3 = '''ask:
  version: {name}-w3-ask-1
  branch: ask
  default_cooldown: 3
  max_per_window: 3
  pool:
    - {{id: "tip:archive", p: 0.3, w: 1.0}}
'''

CONFIG = '''# The {name} pack on the embedded profile: tandem run configs/{name}.yaml (after pip install -e .).
applications:
  - name: tandem
    route_prefix: /
    import_path: serve.app:build_app
    args:
      profile: embedded
      domain: {{name: {name}}}
      pipeline: {{kind: tandem}}
'''

TEST_CONFORMANCE = '''"""The {name} pack passes Tandem's conformance suite."""

from pipelines.domains.testing import PackConformance


class TestConformance(PackConformance):
    pack_name = "{name}"
'''

TEST_TOOLS = '''"""The {name} tools: a user lists their records and archives one, once, after their yes."""

import asyncio

from pipelines.domain import ToolSession
from tandem_{name}.pack import DomainPack


def _tools():
    pack = DomainPack()
    return pack.tool_runner(pack.new_world(7), None)


def test_a_record_is_archived_once_after_the_yes():
    tools = _tools()
    user = next(iter(tools.world.users.values()))
    record = user.records[0]
    session = ToolSession(session_id="s", authenticated_user_id=user.user_id, user_texts=[record])
    listed = asyncio.run(tools.call("list_records", {{"user_id": user.user_id}}, session))
    assert listed.observation.ok and record in str(listed.observation.result)
    assert asyncio.run(tools.precheck("archive_record", {{"record_id": record}}, session)) is None
    confirmed = session.confirm("archive_record", {{"record_id": record}}, "k1")  # the user's yes to this card
    first = asyncio.run(tools.call("archive_record", {{"record_id": record}}, confirmed))
    again = asyncio.run(tools.call("archive_record", {{"record_id": record}}, confirmed))
    assert first.observation.ok and again.replayed and tools.world.records[record].status == "archived"


def test_someone_elses_record_is_refused():
    tools = _tools()
    a, b = list(tools.world.users.values())[:2]
    session = ToolSession(session_id="s", authenticated_user_id=a.user_id, user_texts=[b.records[0]])
    assert asyncio.run(tools.precheck("archive_record", {{"record_id": b.records[0]}}, session)) is not None
'''

README = '''# The {name} domain pack

A Tandem domain pack, as written by `tandem domain new {name}`. Install it beside Tandem and serve it:

```bash
pip install -e .                       # registers `{name}` under the tandem.domains entry points
tandem domain check {name}             # the conformance suite
pytest -q tests                        # the pack's own tests
tandem run configs/{name}.yaml         # serves it (a streamed turn on start)
```

Edit `tandem_{name}/world.py` (your records), `tools.py` (typed tools: reads and writes), `pack.py`
(labels, cards, grounding kinds, texts, hooks) and `tables/` (Φ, Ψ, tiers, W3). See Tandem's
`docs/domains.md` for the protocol, method by method.
'''

FILES: dict[str, str] = {
    "pyproject.toml": PYPROJECT,
    "README.md": README,
    "tandem_{name}/__init__.py": INIT,
    "tandem_{name}/world.py": WORLD,
    "tandem_{name}/tools.py": TOOLS,
    "tandem_{name}/pack.py": PACK,
    "tandem_{name}/tables/phi.yaml": PHI,
    "tandem_{name}/tables/psi.yaml": PSI,
    "tandem_{name}/tables/tiers.yaml": TIERS,
    "tandem_{name}/tables/w3.yaml": W3,
    "configs/{name}.yaml": CONFIG,
    "tests/test_conformance.py": TEST_CONFORMANCE,
    "tests/test_tools.py": TEST_TOOLS,
}


def scaffold(name: str, directory: Path) -> Path:
    """Write the pack ``name`` into ``directory/name`` (refused when it exists); returns that folder."""
    if not valid_name(name):
        raise ValueError(f"invalid pack name {name!r}: lowercase letters, digits and '_', starting with a letter")
    root = directory / name
    if root.exists():
        raise FileExistsError(f"{root} exists already")
    for rel, template in FILES.items():
        path = root / rel.format(name=name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(name=name), encoding="utf-8")
    return root
