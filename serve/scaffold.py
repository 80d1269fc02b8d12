"""``tandem domain new NAME``: a new domain pack, as its own installable distribution, that passes the
conformance suite and serves a streamed turn as generated.

The pack it writes is small but whole: users and their records, a read tool and a write tool (with its
action card), W1 labels and the card each intent may offer, grounding kinds and an extractor for record ids
the user types, Φ / Ψ / tiers / W3 tables, texts, a Serve config, and its own tests (the conformance suite
and the tools). It registers itself under the ``tandem.domains`` entry point group, so ``pip install -e``
of its folder is all it takes for ``domain.name: NAME`` to resolve. It imports :mod:`pipelines.domain` only.

Two backends, one source (the files the two share are the same templates):

* ``records`` (default) — the pack owns its records: a :class:`~pipelines.core.world.RecordWorld` kept in
  Tandem's world store (``world.py``);
* ``http`` — the records live in a service the tools call through an
  :class:`~pipelines.core.http_backend.HttpBackend` (``service.py`` is a small one to start from).
  ``examples/http_pack`` is exactly what ``tandem domain new http_pack --backend http`` writes (a test
  keeps it so).

``docs/domains.md`` walks the files it writes, hook by hook.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

__all__ = ["scaffold", "files", "FILES", "BACKENDS", "valid_name"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{1,30}$")
BACKENDS = ("records", "http")


def valid_name(name: str) -> bool:
    """A pack name: lowercase letters, digits and underscores, starting with a letter (2–31 characters)."""
    return bool(_NAME.match(name))


# -- what both backends write ------------------------------------------------------------------------

PYPROJECT = '''[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "tandem-$name"
version = "0.1.0"
description = "The $name domain pack for Tandem"
requires-python = ">=3.11,<3.13"
dependencies = ["tandem-serve"]

[project.entry-points."tandem.domains"]
$name = "tandem_$name.pack:DomainPack"

[tool.setuptools.packages.find]
include = ["tandem_$name*"]

[tool.setuptools.package-data]
"*" = ["*.yaml"]
'''

INIT = '''"""The $name domain pack (see ``pack.py``)."""
'''

PHI = '''version: $name-phi-1
rows:
  - {"intent": "ask", "sub_intent": "records", "requires_state": ["user_id"], "tools": [{"tool": "list_records", "args_from": {"user_id": "user_id"}}], "then": "respond"}
  - {"intent": "ask", "sub_intent": "records", "requires_state": [], "tools": [], "then": "clarify:user_id"}
  - {"intent": "change", "sub_intent": "archive", "requires_state": ["user_id"], "tools": [{"tool": "list_records", "args_from": {"user_id": "user_id"}}], "then": "propose"}
  - {"intent": "chat", "sub_intent": "hello", "requires_state": [], "tools": [], "then": "respond"}
'''

PSI = '''version: $name-psi-1
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

TIERS = '''version: $name-tiers-1
tiers: {}
'''

W3 = '''ask:
  version: $name-w3-ask-1
  branch: ask
  default_cooldown: 3
  max_per_window: 3
  pool:
    - {id: "tip:archive", p: 0.3, w: 1.0}
'''

PACK = '''"""The $name pack behind Tandem's ``Domain`` protocol (``pipelines.domain``).
$about
The session's user is the request's ``user_id`` (a real pack verifies who the user is first). A card may
carry only record ids the user typed (``extract_candidates``) or read in their own list (``owner_reads``);
``PackBase`` does the rest (the tool port's backend, the grounding re-check, every other hook's default).
"""

from __future__ import annotations

$std_imports
from pipelines.domain import $imports

from .tools import TOOLS
$local_imports
__all__ = [$all]
$constants
RECORD_ID = re.compile(r"\\bR\\d{4}\\b")

TEXTS = DomainTexts(  # safe_ack, fallback, handoff, declined: the platform's words unless given here
    clarify={"record_id": "Which record do you mean? Its id starts with R.",
             "choose": "Which record do you mean: {options}?",
             "user_id": "Who am I helping today?",
             "details": "Could you tell me a little more about what you need?"},
    templates={"chat/hello": "Hello! I can list your records and archive one for you.",
               "card:card.archive_record": "archive record {record_id}",
               "executed": "Done: the record is archived."},
    guidance={"tip:archive": "An archived record stays listed; you can ask for it any time."},
    refusals={"not_owned": "that record is not yours", "not_active": "it is not active any more",
              "record_not_found": "I couldn't find that record", "not_confirmed": "I need your yes first"$refusals},
)


class DomainPack(PackBase):
    """The $name domain (see module docstring)."""

    name = "$name"
    labels = {"ask": ("records",), "change": ("archive",), "chat": ("hello",)}
    cards = (Card(id="card.archive_record", title="Archive a record", tool="archive_record",
                  required_params=("record_id",)),)
    card_intents = {"card.archive_record": ("change",)}  # the intents that may offer each card
    branch_of_intent = {"ask": "ask"}  # the W3 guidance branch that serves each intent
    texts = TEXTS
    orchestrator_policy = ("You help a user with their records. Read the user's records before you act. A change "
                           "happens only through an action card and the user's explicit yes.")
    generator_persona = "You are a concise, friendly assistant for the user's records."
    entity_kind = "record_id"  # a change names one of the user's records: "which one?" when it names none
    tools = TOOLS
    tables_dir = Path(__file__).with_name("tables")
    arg_kind_table = {"list_records": {"user_id": "user_id"}, "archive_record": {"record_id": "record_id"}}
    owner_reads = frozenset({"list_records"})  # its result is the user's own records: they become candidates
    persistent = True  # $persistent
$serving
    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        return {"record_id": RECORD_ID.findall(text)}

    def answer_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        for o in contract.prior_observations:
            if o.ok and o.tool == "list_records":
                listed = ", ".join(f"{r['record_id']} ({r['title']}, {r['status']})"
                                   for r in (o.result or {}).get("records", []))
                return [f"Your records: {listed}." if listed else "You have no records."]
        return []
'''

CONFIG = '''# The $name pack on the embedded profile: tandem run configs/$name.yaml (after pip install -e .).
$config_note
applications:
  - name: tandem
    route_prefix: /
    import_path: serve.app:build_app
$runtime_env    args:
      profile: embedded
      domain: {name: $name}
      pipeline: {kind: tandem}
'''

TEST_CONFORMANCE = '''"""The $name pack passes Tandem's conformance suite."""

from pipelines.domains.testing import PackConformance


class TestConformance(PackConformance):
    pack_name = "$name"
$conformance_pack'''

README = '''# The $name domain pack

A Tandem domain pack, as written by `tandem domain new $name$backend_flag`.$readme_about Install it beside Tandem and
serve it:

```bash
pip install -e .                       # registers `$name` under the tandem.domains entry points
$readme_lines```

Edit `tandem_$name/tools.py` (typed tools: reads and writes), `pack.py` (labels, cards, grounding kinds,
texts, hooks)$readme_world and `tables/` (Φ, Ψ, tiers, W3). Tandem's `docs/domains.md` is the reference,
hook by hook.
'''

# -- the records backend: the pack owns its world --------------------------------------------------------

RECORDS_WORLD = '''"""The $name world: users and their records, seeded (the same seed gives the same world).

A Tandem ``RecordWorld``: its tables are stored as rows, forked for one write (``write_scope``: the user and
their records), and the entities the write changed are adopted after the commit.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from pipelines.domain import RecordWorld, WriteScope

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


class World(RecordWorld):
    KINDS: ClassVar[dict[str, str]] = {"user": "users", "record": "records"}  # entity kind -> its table

    users: dict[str, User] = Field(default_factory=dict)
    records: dict[str, Record] = Field(default_factory=dict)

    def write_scope(self, tool: str, args: Mapping[str, Any], user_id: str | None) -> WriteScope:
        """A write may change its user and their records, nothing else."""
        user = self.users.get(user_id or "")
        return WriteScope(existing={"user": {user.user_id}, "record": set(user.records)}) if user else WriteScope()


TITLES = ("spring plan", "garden plot", "reading list", "weekly box", "tool loan", "room booking")


def generate_world(seed: int = 7, users: int = 4) -> World:
    """A small world: each user owns two or three records."""
    rng = random.Random(seed)
    world = World()
    for u in range(1, users + 1):
        user = world.users.setdefault(f"u{u:03d}", User(user_id=f"u{u:03d}"))
        for _ in range(rng.randint(2, 3)):
            rid = f"R{len(world.records) + 1:04d}"
            world.records[rid] = Record(record_id=rid, title=rng.choice(TITLES))
            user.records.append(rid)
    return world
'''

RECORDS_TOOLS = '''"""The $name tools: typed arguments and results, a read and a write, run against the world.

A refusal is one call: ``refuse(reason, message)`` (the policy or the session says no) or
``fail(reason, message)`` (there is no such thing); the reason is what the pack's ``texts.refusals`` explain.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pipelines.domain import ToolContext, ToolSpec, fail, refuse

from .world import Record, World

__all__ = ["TOOLS"]


class UserArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str


class RecordArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    record_id: str


class Records(BaseModel):
    records: list[Record]


def list_records(args: UserArgs, ctx: ToolContext, world: World) -> Records:
    user = world.users.get(args.user_id)
    if user is None or args.user_id != ctx.authenticated_user_id:
        refuse("not_owned", "only your own records")
    return Records(records=[world.records[r] for r in user.records])


def archive_record(args: RecordArgs, ctx: ToolContext, world: World) -> Record:
    record = world.records.get(args.record_id)
    if record is None:
        fail("record_not_found", f"no record {args.record_id}")
    user = world.users.get(ctx.authenticated_user_id or "")
    if user is None or args.record_id not in user.records:
        refuse("not_owned", "that record is not yours")
    if record.status != "active":
        refuse("not_active", f"the record is {record.status}")
    if not ctx.confirmed:
        refuse("not_confirmed", "a change needs the user's yes")
    record.status = "archived"
    return record


TOOLS = (
    ToolSpec("list_records", "The user's records and their status.", UserArgs, Records, list_records),
    ToolSpec("archive_record", "Archive one of the user's active records.", RecordArgs, Record, archive_record,
             "write"),
)
'''

RECORDS_SERVING = '''    world_type = World  # stored as rows in Tandem's world store, rebuilt from them

    def new_world(self, seed: int, dataset: str | None = None) -> World:
        return generate_world(seed)
'''

RECORDS_TEST_TOOLS = '''"""The $name tools: a user lists their records and archives one, once, after their yes."""

import asyncio

import pytest
from tandem_$name.pack import DomainPack

from pipelines.domain import ToolSession, UnconfirmedWrite


def _tools():
    pack = DomainPack()
    return pack.tool_runner(pack.new_world(7), None)


def test_a_record_is_archived_once_after_the_yes():
    tools = _tools()
    user = next(iter(tools.world.users.values()))
    record = user.records[0]
    session = ToolSession(session_id="s", authenticated_user_id=user.user_id, user_texts=[record])
    listed = asyncio.run(tools.call("list_records", {"user_id": user.user_id}, session))
    assert listed.observation.ok and record in str(listed.observation.result)
    assert asyncio.run(tools.precheck("archive_record", {"record_id": record}, session)) is None
    with pytest.raises(UnconfirmedWrite):  # Tandem's tool port: no write before the user's yes to its card
        asyncio.run(tools.call("archive_record", {"record_id": record}, session))
    confirmed = session.confirm("archive_record", {"record_id": record}, "k1")  # the user's yes to this card
    first = asyncio.run(tools.call("archive_record", {"record_id": record}, confirmed))
    again = asyncio.run(tools.call("archive_record", {"record_id": record}, confirmed))
    assert first.observation.ok and again.replayed and tools.world.records[record].status == "archived"
    assert first.changed == {"record": [record]}


def test_someone_elses_record_is_refused():
    tools = _tools()
    a, b = list(tools.world.users.values())[:2]
    session = ToolSession(session_id="s", authenticated_user_id=a.user_id, user_texts=[b.records[0]])
    assert asyncio.run(tools.precheck("archive_record", {"record_id": b.records[0]}, session)) == "not_owned"
'''

# -- the http backend: the records live in a service ---------------------------------------------------

HTTP_ABOUT = '''
The records live in the records service (``service.py``, or any service with the same API). The pack
reaches it through Tandem's ``HttpBackend`` (per-call deadline, reads retried with backoff, writes sent once
with the write key as ``Idempotency-Key``, failures mapped into Tandem's error table) and keeps no records
itself: its world is a ``RemoteWorld``. The service's address is the pack option ``base_url`` or the
environment variable ``$url_env`` (on Serve: the app's ``runtime_env.env_vars``). The world store still
holds the write ledger: a confirmed write's outcome is recorded under its key, and the same key never
reaches the service twice.
'''

HTTP_TOOLS = '''"""The $name tools: typed arguments and results, a read and a write, each one call to the service.

The world is a ``RemoteWorld``: nothing but the ``HttpBackend`` of the records service. ``list_records`` is a
read (retried by the backend when the service is busy); ``archive_record`` is a write (sent once, with the
core's write key as ``Idempotency-Key``). Its eligibility reads the user's records first, so a precheck
refuses what the service would refuse, without changing anything; the service checks again when the write
arrives.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pipelines.domain import RemoteWorld, ToolContext, ToolSpec, refuse

__all__ = ["TOOLS", "Records", "RecordResult", "owned_records"]


class UserArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: str


class RecordArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    record_id: str


class RecordResult(BaseModel):
    record_id: str
    title: str
    status: str


class Records(BaseModel):
    records: list[RecordResult]


def owned_records(world: RemoteWorld, user_id: str) -> list[RecordResult]:
    """The user's records, as the service lists them (a read)."""
    return world.backend.read(f"/users/{user_id}/records", result=Records).records


def list_records(args: UserArgs, ctx: ToolContext, world: RemoteWorld) -> Records:
    if args.user_id != ctx.authenticated_user_id:
        refuse("not_owned", "only your own records")
    return Records(records=owned_records(world, args.user_id))


def archive_eligible(args: RecordArgs, ctx: ToolContext, world: RemoteWorld) -> None:
    """The rules of the write, checked on the service's current records (reads only)."""
    if not ctx.authenticated_user_id:
        refuse("not_owned", "who is asking?")
    record = {r.record_id: r for r in owned_records(world, ctx.authenticated_user_id)}.get(args.record_id)
    if record is None:
        refuse("not_owned", "that record is not yours")
    if record.status != "active":
        refuse("not_active", f"the record is {record.status}")
    if not ctx.confirmed:
        refuse("not_confirmed", "a change needs the user's yes")


def archive_record(args: RecordArgs, ctx: ToolContext, world: RemoteWorld) -> RecordResult:
    return world.backend.write(f"/records/{args.record_id}/archive", json={"user_id": ctx.authenticated_user_id},
                               idempotency_key=ctx.idempotency_key, result=RecordResult)


TOOLS = (
    ToolSpec("list_records", "The user's records and their status.", UserArgs, Records, list_records),
    ToolSpec("archive_record", "Archive one of the user's active records.", RecordArgs, RecordResult,
             archive_record, "write", archive_eligible),
)
'''

HTTP_SERVING = '''    # the service's own reasons and the backend's: each needs a refusal text (``tandem domain check`` asks)
    reasons = ("record_not_found", "user_not_found", *BACKEND_REASONS)
    sample_users = ("u001",)  # a user of the seeded service: whom ``tandem domain check`` signs in
    sample_texts = ("Please archive R0001.",)  # words the extractor reads a record id off (the suite checks)

    def __init__(self, base_url: str | None = None, timeout_s: float = 2.0, read_retries: int = 2,
                 backoff_s: float = 0.1) -> None:
        self._base_url, self._timeout_s = base_url, timeout_s
        self._read_retries, self._backoff_s = read_retries, backoff_s

    def backend(self) -> HttpBackend:
        """A client of the records service (``base_url``, else ``$$$url_env``)."""
        url = self._base_url or os.environ.get(URL_ENV)
        if not url:
            raise ConfigError(f"the {self.name} pack needs its service: set {URL_ENV} (or the base_url option)")
        return HttpBackend(url, timeout_s=self._timeout_s, read_retries=self._read_retries,
                           backoff_s=self._backoff_s, name="records service")

    def new_world(self, seed: int, dataset: str | None = None) -> RemoteWorld:
        return RemoteWorld(self.backend())  # the service holds the records (its own seed)

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> RemoteWorld:
        return RemoteWorld(self.backend())
'''

HTTP_REFUSALS = ''',
              "user_not_found": "I couldn't find your account",
              "backend_timeout": "the records system did not answer in time",
              "backend_unreachable": "the records system can't be reached right now",
              "backend_error": "the records system had a problem",
              "backend_busy": "the records system is busy right now",
              "backend_rejected_arguments": "the records system did not accept that request",
              "backend_auth": "the records system refused our credentials",
              "backend_refused": "the records system refused that request",
              "malformed_response": "the records system gave an answer I can't read",
              "not_found": "the records system has no such record",
              "conflict": "the records system refused the change"'''

HTTP_SERVICE = '''"""The records service the $name tools call: a small JSON API over HTTP (stdlib only).

It stands for the system of record a real pack talks to (an orders API, a booking system): it owns the
users and their records, enforces its own rules, and deduplicates writes on the ``Idempotency-Key``
header (the same key answers the same response again, without applying the change twice).

=======================================  ==================================================================
``GET /healthz``                         ``{"ok": true}``
``GET /users/{user_id}/records``         ``{"records": [{"record_id", "title", "status"}, ...]}``; 404
                                         ``{"reason": "user_not_found"}``
``POST /records/{record_id}/archive``    body ``{"user_id"}``: 200 the archived record; 404
                                         ``record_not_found``; 409 ``not_owned`` / ``not_active``; 400 a
                                         body without ``user_id``
=======================================  ==================================================================

Run it on its own with ``python -m tandem_$name.service --port 8765`` (seeded: the same seed gives
the same records), or in a thread with :func:`start` (the pack's tests).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Records", "seeded", "make_server", "start", "main"]

TITLES = ("spring plan", "garden plot", "reading list", "weekly box", "tool loan", "room booking")
_USER_RECORDS = re.compile(r"^/users/([A-Za-z0-9_-]{1,40})/records$$")
_ARCHIVE = re.compile(r"^/records/([A-Za-z0-9_-]{1,40})/archive$$")


@dataclass
class Records:
    """The service's state: users → their record ids, records, and the answers given per idempotency key."""

    owners: dict[str, list[str]] = field(default_factory=dict)
    records: dict[str, dict[str, str]] = field(default_factory=dict)
    answered: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    applied: int = 0  # how many archive changes were applied (tests read it)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def list_records(self, user_id: str) -> tuple[int, dict[str, Any]]:
        if user_id not in self.owners:
            return 404, {"reason": "user_not_found"}
        return 200, {"records": [dict(self.records[r]) for r in self.owners[user_id]]}

    def archive(self, record_id: str, body: Any, key: str | None) -> tuple[int, dict[str, Any]]:
        with self.lock:
            if key is not None and key in self.answered:
                return self.answered[key]
            answer = self._archive(record_id, body)
            if key is not None:
                self.answered[key] = answer
            return answer

    def _archive(self, record_id: str, body: Any) -> tuple[int, dict[str, Any]]:
        user_id = body.get("user_id") if isinstance(body, dict) else None
        if not isinstance(user_id, str) or not user_id:
            return 400, {"reason": "bad_request", "detail": "user_id is required"}
        record = self.records.get(record_id)
        if record is None:
            return 404, {"reason": "record_not_found"}
        if record_id not in self.owners.get(user_id, []):
            return 409, {"reason": "not_owned"}
        if record["status"] != "active":
            return 409, {"reason": "not_active"}
        record["status"] = "archived"
        self.applied += 1
        return 200, dict(record)


def seeded(seed: int = 7, users: int = 4) -> Records:
    """Each user owns two or three records (the same seed gives the same records)."""
    rng = random.Random(seed)
    state = Records()
    for u in range(1, users + 1):
        user_id = f"u{u:03d}"
        state.owners[user_id] = []
        for _ in range(rng.randint(2, 3)):
            rid = f"R{len(state.records) + 1:04d}"
            state.records[rid] = {"record_id": rid, "title": rng.choice(TITLES), "status": "active"}
            state.owners[user_id].append(rid)
    return state


def _handler(state: Records) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/healthz":
                return self._answer(200, {"ok": True})
            m = _USER_RECORDS.match(self.path)
            self._answer(*state.list_records(m.group(1))) if m else self._answer(404, {"reason": "no_route"})

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            m = _ARCHIVE.match(self.path)
            if m is None:
                return self._answer(404, {"reason": "no_route"})
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return self._answer(400, {"reason": "bad_request", "detail": "the body is not JSON"})
            self._answer(*state.archive(m.group(1), body, self.headers.get("Idempotency-Key")))

    return Handler


def make_server(state: Records, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """The service over ``state`` bound to ``host:port`` (0: a free port); call ``serve_forever``."""
    server = ThreadingHTTPServer((host, port), _handler(state))
    server.daemon_threads = True
    return server


def start(state: Records | None = None, host: str = "127.0.0.1", port: int = 0) -> tuple[str, Records,
                                                                                         Callable[[], None]]:
    """Serve in a background thread; returns the base URL, the state and a stop function."""
    state = state if state is not None else seeded()
    server = make_server(state, host, port)
    thread = threading.Thread(target=server.serve_forever, name="$name-service", daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return f"http://{host}:{server.server_address[1]}", state, stop


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The $name pack's records service")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    server = make_server(seeded(args.seed), args.host, args.port)
    print(f"records service on http://{args.host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
'''

HTTP_CONFTEST = '''"""The records service, started on a free local port for each test that asks for it."""

import pytest
from tandem_$name import service


@pytest.fixture
def records_service():
    """``(base_url, state)`` of a freshly seeded service in a background thread; stopped afterwards."""
    url, state, stop = service.start(service.seeded(7))
    try:
        yield url, state
    finally:
        stop()
'''

HTTP_CONFORMANCE_PACK = '''
    def make_pack(self):
        """The pack over its service, started here on a free port (the suite reads through it)."""
        from tandem_$name import service
        from tandem_$name.pack import DomainPack

        url, _, self.stop = service.start(service.seeded(7))
        return DomainPack(base_url=url)

    def teardown_method(self) -> None:
        stop = self.__dict__.pop("stop", None)
        if stop is not None:
            stop()
'''

HTTP_TEST_TOOLS = '''"""The $name tools against its records service on a local port: reads, a write sent exactly once,
and every failure a refusal with its reason (the turn goes on)."""

import asyncio
import socket

import pytest
from tandem_$name.pack import DomainPack

from pipelines.domain import MemoryLedger, ToolSession, UnconfirmedWrite


def _tools(url: str, **options):
    pack = DomainPack(base_url=url, **options)
    return pack, pack.tool_runner(pack.new_world(7), MemoryLedger())


def _call(tools, name, args, session):
    return asyncio.run(tools.call(name, args, session))


def test_a_user_lists_their_records(records_service) -> None:
    url, state = records_service
    _, tools = _tools(url)
    listed = _call(tools, "list_records", {"user_id": "u001"}, ToolSession(authenticated_user_id="u001"))
    assert listed.observation.ok
    assert [r["record_id"] for r in listed.observation.result["records"]] == state.owners["u001"]
    assert all(r["status"] == "active" for r in listed.observation.result["records"])


def test_a_record_is_archived_once_after_the_yes(records_service) -> None:
    url, state = records_service
    _, tools = _tools(url)
    record = state.owners["u001"][0]
    session = ToolSession(session_id="s", authenticated_user_id="u001", user_texts=[record])
    assert asyncio.run(tools.precheck("archive_record", {"record_id": record}, session)) is None
    assert state.applied == 0  # a precheck reads, it never writes
    with pytest.raises(UnconfirmedWrite):  # Tandem's tool port: never sent before the user's yes to its card
        _call(tools, "archive_record", {"record_id": record}, session.model_copy(update={"idempotency_key": "k0"}))
    assert state.applied == 0 and not state.answered
    confirmed = session.confirm("archive_record", {"record_id": record}, "k1")  # the user's yes to this card
    first = _call(tools, "archive_record", {"record_id": record}, confirmed)
    again = _call(tools, "archive_record", {"record_id": record}, confirmed)
    assert first.observation.ok and first.observation.result["status"] == "archived"
    assert again.replayed and again.observation == first.observation
    assert state.applied == 1 and state.records[record]["status"] == "archived"
    assert list(state.answered) == ["k1"]  # the write reached the service once, with its key


def test_the_service_deduplicates_a_key_it_has_seen(records_service) -> None:
    """The same key sent again (a restart that lost its ledger): the service applies the change once and
    answers the same again."""
    url, state = records_service
    record = state.owners["u002"][0]
    with DomainPack(base_url=url).backend() as one, DomainPack(base_url=url).backend() as two:
        first = one.write(f"/records/{record}/archive", json={"user_id": "u002"}, idempotency_key="same-key")
        second = two.write(f"/records/{record}/archive", json={"user_id": "u002"}, idempotency_key="same-key")
    assert first == second == {"record_id": record, "title": state.records[record]["title"], "status": "archived"}
    assert state.applied == 1


def test_what_the_service_refuses_is_a_refusal_with_its_reason(records_service) -> None:
    url, state = records_service
    _, tools = _tools(url)
    mine, theirs = state.owners["u001"][0], state.owners["u002"][0]
    session = ToolSession(session_id="s", authenticated_user_id="u001", user_texts=[mine, theirs])
    assert asyncio.run(tools.precheck("archive_record", {"record_id": theirs}, session)) == "not_owned"
    state.records[mine]["status"] = "archived"
    assert asyncio.run(tools.precheck("archive_record", {"record_id": mine}, session)) == "not_active"
    missing = _call(tools, "list_records", {"user_id": "u001"}, ToolSession(authenticated_user_id="u001"))
    assert missing.observation.ok
    nobody = _call(tools, "list_records", {"user_id": "u999"}, ToolSession(authenticated_user_id="u999"))
    assert not nobody.observation.ok and nobody.reason == "user_not_found"
    assert nobody.observation.error_code == "tool_error"


def test_a_service_that_is_down_is_a_failed_observation_not_a_crash() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pack, tools = _tools(f"http://127.0.0.1:{port}", backoff_s=0.0)
    listed = _call(tools, "list_records", {"user_id": "u001"}, ToolSession(authenticated_user_id="u001"))
    assert not listed.observation.ok and listed.reason == "backend_unreachable"
    assert listed.observation.error_code == "tool_error"
    assert pack.texts.refusals["backend_unreachable"]
    session = ToolSession(session_id="s", authenticated_user_id="u001", user_texts=["R0001"])
    assert asyncio.run(tools.precheck("archive_record", {"record_id": "R0001"}, session)) == "backend_unreachable"
'''

# -- how the two backends fill the shared templates ------------------------------------------------------

_VARIANTS: dict[str, dict[str, str]] = {
    "records": {
        "about": "",
        "std_imports": "import re\nfrom pathlib import Path\n",
        "all": '"DomainPack"',
        "constants": "",
        "imports": "Card, DomainTexts, ForwardContract, PackBase, TurnFacts",
        "local_imports": "from .world import World, generate_world\n",
        "refusals": "",
        "persistent": "its world lives in Tandem's world store (it has writes to keep)",
        "serving": RECORDS_SERVING,
        "config_note": "",
        "runtime_env": "",
        "conformance_pack": "",
        "backend_flag": "",
        "readme_about": "",
        "readme_lines": ("tandem domain check $name             # the conformance suite\n"
                         "pytest -q tests                        # the pack's own tests\n"
                         "tandem run configs/$name.yaml         # serves it (a streamed turn on start)\n"),
        "readme_world": ", `world.py` (your records)",
    },
    "http": {
        "about": HTTP_ABOUT,
        "std_imports": "import os\nimport re\nfrom collections.abc import Iterable\nfrom pathlib import Path\n",
        "all": '"DomainPack", "URL_ENV"',
        "constants": ('\n#: Where the records service is, unless the pack is built with ``base_url``.\n'
                      'URL_ENV = "$url_env"\n'),
        "imports": ("(\n    BACKEND_REASONS,\n    Card,\n    ConfigError,\n    DomainTexts,\n    ForwardContract,\n"
                    "    HttpBackend,\n    PackBase,\n    RemoteWorld,\n    TurnFacts,\n)"),
        "local_imports": "",
        "refusals": HTTP_REFUSALS,
        "persistent": "the world store keeps the write ledger (the records are the service's)",
        "serving": HTTP_SERVING,
        "config_note": ("# Start its records service first, then serve:\n"
                        "#   python -m tandem_$name.service --port 8765 &\n"
                        "#   tandem run configs/$name.yaml            (after pip install -e .)"),
        "runtime_env": ("    runtime_env:\n      env_vars:\n        $url_env: http://127.0.0.1:8765   "
                        "# where the tools (in the ToolsServer replica) find the service\n"),
        "conformance_pack": HTTP_CONFORMANCE_PACK,
        "backend_flag": " --backend http",
        "readme_about": (" Its records live in a service of their own\n(`tandem_$name/service.py`, a small JSON API on "
                         "the standard library's HTTP server); its tools call it through\nTandem's `HttpBackend`. "
                         "Tandem's `docs/domains-http.md` walks through it."),
        "readme_lines": ("python -m tandem_$name.service --port 8765 &   # the service, for serving and checking\n"
                         "$url_env=http://127.0.0.1:8765 tandem domain check $name   # the conformance suite\n"
                         "pytest -q tests                                   # the tools against the service on a "
                         "free local port\n"
                         "tandem run configs/$name.yaml                     # $url_env comes from the app's "
                         "runtime_env\n"),
        "readme_world": ", `service.py` (the records service)",
    },
}

#: Every file a backend writes (paths and contents are templates of ``$name``).
FILES: dict[str, dict[str, str]] = {
    "records": {
        "pyproject.toml": PYPROJECT, "README.md": README, "tandem_$name/__init__.py": INIT,
        "tandem_$name/world.py": RECORDS_WORLD, "tandem_$name/tools.py": RECORDS_TOOLS,
        "tandem_$name/pack.py": PACK, "tandem_$name/tables/phi.yaml": PHI, "tandem_$name/tables/psi.yaml": PSI,
        "tandem_$name/tables/tiers.yaml": TIERS, "tandem_$name/tables/w3.yaml": W3,
        "configs/$name.yaml": CONFIG, "tests/test_conformance.py": TEST_CONFORMANCE,
        "tests/test_tools.py": RECORDS_TEST_TOOLS,
    },
    "http": {
        "pyproject.toml": PYPROJECT, "README.md": README, "tandem_$name/__init__.py": INIT,
        "tandem_$name/service.py": HTTP_SERVICE, "tandem_$name/tools.py": HTTP_TOOLS,
        "tandem_$name/pack.py": PACK, "tandem_$name/tables/phi.yaml": PHI, "tandem_$name/tables/psi.yaml": PSI,
        "tandem_$name/tables/tiers.yaml": TIERS, "tandem_$name/tables/w3.yaml": W3,
        "configs/$name.yaml": CONFIG, "tests/conftest.py": HTTP_CONFTEST,
        "tests/test_conformance.py": TEST_CONFORMANCE, "tests/test_tools.py": HTTP_TEST_TOOLS,
    },
}


def files(name: str, backend: str = "records") -> dict[str, str]:
    """The pack ``name`` as relative path → content (what :func:`scaffold` writes)."""
    if not valid_name(name):
        raise ValueError(f"invalid pack name {name!r}: lowercase letters, digits and '_', starting with a letter")
    if backend not in FILES:
        raise ValueError(f"unknown backend {backend!r}; one of: {', '.join(BACKENDS)}")
    base = {"name": name, "url_env": f"{name.upper()}_URL"}
    values = {**base, **{k: Template(v).substitute(base) for k, v in _VARIANTS[backend].items()}}
    return {Template(rel).substitute(base): Template(text).substitute(values) for rel, text in FILES[backend].items()}


def scaffold(name: str, directory: Path | None = None, *, out: Path | None = None,
             backend: str = "records") -> Path:
    """Write the pack ``name`` into ``out`` (the pack's own folder, new or empty), or into ``directory/name``;
    returns that folder. An existing file is never overwritten."""
    written = files(name, backend)
    root = Path(out) if out is not None else Path(directory if directory is not None else ".") / name
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise FileExistsError(f"{root} exists already and is not an empty folder")
    for rel, text in written.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
