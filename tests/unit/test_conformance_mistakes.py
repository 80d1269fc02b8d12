"""Planted mistakes: a pack as ``tandem domain new`` writes it, with one mistake a pack author can make planted
in its files; ``tandem domain check`` must fail the check that is about it, with a message that says where to
fix it (the file or hook) and what is missing. The unchanged pack passes every check (the control).

Each row: the mistake, the edits that plant it (file, text, replacement), the check that must fail and the
words its message must hold. ``python -m tests.unit.test_conformance_mistakes`` prints which check caught what.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.domains.conformance import CheckResult, check_pack
from serve.scaffold import scaffold


@dataclass(frozen=True)
class Mistake:
    id: str
    what: str
    edits: tuple[tuple[str, str, str], ...]  # (file under the pack's package, old text, new text)
    check: str
    says: tuple[str, ...]


PACK, TOOLS, WORLD = "pack.py", "tools.py", "world.py"
PHI, W3 = "tables/phi.yaml", "tables/w3.yaml"
RENAME_TOOL = '''

class RenameArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    record_id: str
    title: str


def rename_record(args: RenameArgs, ctx: ToolContext, world: World) -> Record:
    record = world.records[args.record_id]
    if not ctx.confirmed:
        refuse("not_confirmed", "a change needs the user's yes")
    record.title = args.title
    return record


TOOLS = (*TOOLS, ToolSpec("rename_record", "Rename a record.", RenameArgs, Record, rename_record, "write"))
'''

MISTAKES: tuple[Mistake, ...] = (
    # -- the fourteen the issue lists ----------------------------------------------------------------------
    Mistake("kind_without_source", "a grounding kind with no source (no extractor, no owner read, no vocabulary)",
            ((PACK, '"list_records": {"user_id": "user_id"}', '"list_records": {"user_id": "member"}'),
             (PACK, '"user_id": "Who am I helping today?",', '"user_id": "Who am I helping today?", "member": "Who?",')),
            "grounding", ("extract_candidates", "kind 'member'", "has no source")),
    Mistake("reason_without_text", "a tool raising a reason with no refusal text",
            ((TOOLS, 'refuse("not_active"', 'refuse("archived_already"'),),
            "texts", ("no refusal text for reason 'archived_already'", "which the tools raise (tools.py:")),
    Mistake("write_ignores_yes", "a write ignoring the user's yes",
            ((TOOLS, '    if not ctx.confirmed:\n        refuse("not_confirmed", "a change needs the user\'s yes")\n', ''),),
            "writes", ("tools.py archive_record", "ran without the user's yes")),
    Mistake("ungrounded_empty", "ungrounded() returning nothing",
            ((PACK, "    def extract_candidates(self, text: str)",
              "    def ungrounded(self, name, args, user_texts, world, user_id):\n        return []\n\n"
              "    def extract_candidates(self, text: str)"),),
            "writes", ("pack.py DomainPack.ungrounded", "accepted archive_record(record_id=",
                       "neither in the user's words nor in their records")),
    Mistake("no_changed_entities", "invoke reporting no changed entities (and a world that cannot find them)",
            ((WORLD, "TITLES = (", "def _blind(self, other, scope):\n    return {}\n\n\nWorld.diff = _blind\n\nTITLES = ("),),
            "writes", ("DomainPack.invoke", "neither invoke's changed nor World.diff names it",
                       "would never reach the world store")),
    Mistake("scope_leaves_out", "a write scope that leaves out what the write changes",
            ((WORLD, 'WriteScope(existing={"user": {user.user_id}, "record": set(user.records)})',
              'WriteScope(existing={"user": {user.user_id}})'),),
            "writes", ("world.py World.write_scope", "which its write scope leaves out")),
    Mistake("card_unknown_intent", "a card mapped to an intent the labels do not have",
            ((PACK, 'card_intents = {"card.archive_record": ("change",)}',
              'card_intents = {"card.archive_record": ("change", "tidy")}'),),
            "labels", ("card_intents", "intent 'tidy', which the labels do not have")),
    Mistake("card_unreached", "a card no intent reaches",
            ((PACK, 'card_intents = {"card.archive_record": ("change",)}', 'card_intents = {}'),),
            "cards", ("cards_for", "card 'card.archive_record' is offered for no intent")),
    Mistake("propose_without_card", "a Φ propose for an intent with no card",
            ((PHI, '"tools": [{"tool": "list_records", "args_from": {"user_id": "user_id"}}], "then": "respond"}',
              '"tools": [{"tool": "list_records", "args_from": {"user_id": "user_id"}}], "then": "propose"}'),),
            "tables", ("phi.yaml", "row ask/records says then: propose", "no card is offered for intent 'ask'")),
    Mistake("kind_without_question", "a kind without a clarify question",
            ((PACK, '    clarify={"record_id": "Which record do you mean? Its id starts with R.",\n             ',
              '    clarify={'),),
            "grounding", ("kind 'record_id'", "has no clarify question of its own")),
    Mistake("tip_without_sentence", "a W3 tip with no sentence",
            ((W3, '    - {id: "tip:archive", p: 0.3, w: 1.0}', '    - {id: "tip:archive", p: 0.3, w: 1.0}\n'
              '    - {id: "tip:renew", p: 0.3, w: 1.0}'),),
            "tables", ("w3.yaml", "tip 'tip:renew'", "has no sentence")),
    Mistake("write_without_card", "a write tool without a card",
            ((PACK, "    cards = (Card(", "    cards = ()\n    _unused = (Card("),),
            "catalogue", ("write tool 'archive_record' has no card",)),
    Mistake("arg_without_kind", "an argument missing from the kind table",
            ((PACK, '"archive_record": {"record_id": "record_id"}', '"archive_record": {}'),),
            "grounding", ("argument 'record_id' of tool 'archive_record' has no grounding kind",)),
    Mistake("readback_unknown_field", "an unknown field in a read-back template",
            ((PACK, '"card:card.archive_record": "archive record {record_id}"',
              '"card:card.archive_record": "archive {title} ({record_id})"'),),
            "texts", ("template card:card.archive_record uses ['title']",)),
    # -- others an author can make against the protocol ----------------------------------------------------
    Mistake("error_code_as_reason", "invoke returning the error code as the refusal's reason",
            ((PACK, "    def extract_candidates(self, text: str)",
              "    def invoke(self, name, args, ctx, world):\n"
              "        obs = self.registry.call(name, dict(args), ctx, world)\n"
              "        return CallOutcome(observation=obs, reason=obs.error_code)\n\n"
              "    def extract_candidates(self, text: str)"),
             (PACK, "from pipelines.domain import ", "from pipelines.domain import CallOutcome, ")),
            "writes", ("carries the error code 'ineligible_action' as its reason",)),
    Mistake("hook_not_a_method", "a hook of the protocol that is not a method",
            ((PACK, "    tools = TOOLS\n", "    tools = TOOLS\n    undecided = None\n"),),
            "protocol", ("DomainPack.undecided", "'undecided' must be a method")),
    Mistake("intent_without_subs", "an intent with no sub-intents",
            ((PACK, '"chat": ("hello",)}', '"chat": ("hello",), "bye": ()}'),),
            "labels", ("intent 'bye' has no sub-intents",)),
    Mistake("branch_unknown_intent", "a W3 branch for an intent the labels do not have",
            ((PACK, 'branch_of_intent = {"ask": "ask"}', 'branch_of_intent = {"asks": "ask"}'),),
            "labels", ("branch_of_intent", "names unknown intent 'asks'")),
    Mistake("card_param_not_arg", "a card parameter that is not an argument of its tool",
            ((PACK, 'required_params=("record_id",)', 'required_params=("record_id", "reason")'),),
            "catalogue", ("parameter 'reason' is not an argument of 'archive_record'",)),
    Mistake("card_unknown_tool", "a card naming a tool that is not registered",
            ((PACK, 'tool="archive_record",', 'tool="archive",'),),
            "catalogue", ("card 'card.archive_record': tool 'archive' is not registered",)),
    Mistake("phi_unknown_tool", "a Φ row naming a tool that is not registered",
            ((PHI, '"sub_intent": "archive", "requires_state": ["user_id"], "tools": [{"tool": "list_records"',
              '"sub_intent": "archive", "requires_state": ["user_id"], "tools": [{"tool": "list_recs"'),),
            "tables", ("rule_tables", "the packaged rule bundle is refused")),
    Mistake("clarify_without_question", "a Φ clarify:<kind> with no question of that kind",
            ((PHI, '"then": "clarify:user_id"', '"then": "clarify:member"'),),
            "tables", ("row ask/records asks clarify:member", "texts.clarify has no 'member' question")),
    Mistake("facts_not_json", "session facts that do not survive JSON",
            ((PACK, "    def extract_candidates(self, text: str)",
              "    def observe(self, tool, result, ok, facts):\n        super().observe(tool, result, ok, facts)\n"
              "        facts.state['seen'] = {tool}\n\n    def extract_candidates(self, text: str)"),),
            "session facts", ("DomainPack.observe", "do not survive JSON")),
    Mistake("no_details_question", "no 'details' question",
            ((PACK, '             "details": "Could you tell me a little more about what you need?"}',
              '             }'),),
            "texts", ("texts.clarify has no 'details' question",)),
    Mistake("offer_without_phrase", "an action_card sentence that does not offer the read-back",
            ((PACK, '    templates={"chat/hello"', '    templates={"action_card": "Reply yes to confirm.", "chat/hello"'),),
            "texts", ("texts.templates['action_card'] must offer the card's read-back as {phrase}",)),
    Mistake("write_without_sample", "a write the suite cannot try (no sample call, none can be filled)",
            ((TOOLS, '             "write"),\n)\n', '             "write"),\n)\n' + RENAME_TOOL),
             (PACK, "    cards = (Card(", '    cards = (Card(id="card.rename_record", title="Rename a record", '
              'tool="rename_record", required_params=("record_id", "title")), Card('),
             (PACK, 'card_intents = {"card.archive_record": ("change",)}',
              'card_intents = {"card.archive_record": ("change",), "card.rename_record": ("change",)}'),
             (PACK, '"archive_record": {"record_id": "record_id"}',
              '"archive_record": {"record_id": "record_id"}, "rename_record": {"record_id": "record_id", '
              '"title": "new_title"}'),
             (PACK, '"user_id": "Who am I helping today?",', '"user_id": "Who am I helping today?", '
              '"new_title": "What should it be called?",')),
            "writes", ("sample_writes", "write tool 'rename_record' has no sample call")),
    Mistake("precheck_writes", "a precheck that runs the write on the live world",
            ((PACK, "    def extract_candidates(self, text: str)",
              "    def precheck(self, name, args, ctx, world):\n"
              "        obs = self.registry.call(name, dict(args), ctx.model_copy(update={'confirmed': True}), world)\n"
              "        return None if obs.ok else obs.error_code\n\n    def extract_candidates(self, text: str)"),),
            "writes", ("DomainPack.precheck", "changed the world", "on a fork")),
    Mistake("read_writes", "a read tool that changes the world",
            ((TOOLS, "    return Records(records=[world.records[r] for r in user.records])",
              "    user.records.reverse()\n    return Records(records=[world.records[r] for r in user.records])"),),
            "writes", ("a read tool (list_records) changed the world", "declare it kind='write'")),
    Mistake("world_not_seeded", "a world that differs for the same seed",
            ((WORLD, "    rng = random.Random(seed)", "    rng = random.Random()"),),
            "determinism", ("new_world(7) differs between two calls",)),
    Mistake("rows_lose_records", "a world that does not survive its stored rows",
            ((WORLD, "TITLES = (", "def _forget(cls, rows):\n    return cls()\n\n\n"
              "World.from_entities = classmethod(_forget)\n\nTITLES = ("),),
            "writes", ("world_from_entities", "the world rebuilt from its stored rows differs")),
    Mistake("write_tools_wrong", "write_tools that leave out a write of the registry",
            ((PACK, "    tools = TOOLS\n", "    tools = TOOLS\n    write_tools = frozenset()\n"),),
            "catalogue", ("write_tools", "differ from the registry's write tools ['archive_record']")),
)


def _load(root: Path, name: str):
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(f"tandem_{name}.pack")
        return module.DomainPack()
    finally:
        sys.path.remove(str(root))


def _forget(name: str) -> None:
    for mod in [m for m in sys.modules if m == f"tandem_{name}" or m.startswith(f"tandem_{name}.")]:
        del sys.modules[mod]


def planted(tmp: Path, mistake: Mistake | None, index: int) -> list[CheckResult]:
    """Scaffold a pack, plant ``mistake`` in its files, run the suite on it."""
    name = f"mk{index:02d}"
    root = scaffold(name, tmp)
    package = root / f"tandem_{name}"
    for file, old, new in (mistake.edits if mistake else ()):
        path = package / file
        text = path.read_text()
        assert old in text, f"{mistake.id}: {old!r} is not in {file}"
        path.write_text(text.replace(old, new, 1))
    try:
        return check_pack(_load(root, name))
    finally:
        _forget(name)


def test_the_pack_as_written_passes_every_check(tmp_path: Path) -> None:
    assert [r for r in planted(tmp_path, None, 99) if not r.ok] == []


def test_there_are_at_least_twenty_planted_mistakes() -> None:
    assert len(MISTAKES) >= 20 and len({m.id for m in MISTAKES}) == len(MISTAKES)


@pytest.mark.parametrize("index,mistake", list(enumerate(MISTAKES)), ids=[m.id for m in MISTAKES])
def test_the_check_catches_the_planted_mistake_and_says_where(tmp_path: Path, index: int, mistake: Mistake) -> None:
    results = {r.name: r for r in planted(tmp_path, mistake, index)}
    caught = results[mistake.check]
    assert not caught.ok, f"{mistake.check} passed with {mistake.what}"
    message = " | ".join(caught.problems)
    assert all(words in message for words in mistake.says), message


def matrix(tmp: Path) -> list[tuple[str, str, list[str]]]:
    """``(mistake, the check meant to catch it, every check that failed)`` for each planted mistake."""
    rows = []
    for i, m in enumerate(MISTAKES):
        failed = [r.name for r in planted(tmp / m.id, m, i) if not r.ok]
        rows.append((m.what, m.check, failed))
    return rows


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        print("| planted mistake | caught by | checks that failed |\n|---|---|---|")
        for what, check, failed in matrix(Path(d)):
            print(f"| {what} | {check} | {', '.join(failed)} |")
