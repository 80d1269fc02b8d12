"""``tandem whatif`` end to end without Ray: a logged run on disk (events, turns.jsonl, the session store),
a candidate table file, the three reports, the exit codes of the CI gate and of bad input, and tenancy."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import pytest
import yaml

from pipelines.domains import load_domain
from serve.whatif import main, table_override
from serve.whatif_render import brief
from tests.doubles import j, w1

from .test_whatif import VERIFY, log_session

REPO = Path(__file__).resolve().parents[2]
RAW = load_domain("support").rule_tables()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return logged_run(tmp_path_factory.mktemp("whatif-run"))


def logged_run(root: Path) -> Path:
    """A logged run under ``root``: two sessions' events (JSON lines), their turns.jsonl, a config
    (``app.yaml``) whose session store holds them (owned by team-a, PII sealed in the vault)."""
    from cryptography.fernet import Fernet

    from serve.config import load_serve_file
    from serve.stores import make_store

    tele = root / "telemetry"
    tele.mkdir()
    played = [
        log_session("alex-1", [("Hi! What can you help me with?", {"orch": [w1("greeting", "hello", "Happy to help.")]}),
                               VERIFY]),
        log_session("alex-2", [VERIFY, ("Please cancel order #W1000001, I ordered it by mistake", {"orch": [
            w1("cancel", "order"), j(decision="action", card_id="card.cancel_order",
                                     params={"order_id": "#W1000001", "reason": "ordered by mistake"})]})]),
    ]
    lines, rows, ts = [], [], 1_700_000_000.0
    for session, _ in played:
        for t in session.turns:
            for ev in t.events:
                ts += 0.01
                lines.append(json.dumps({"ts": ts, **ev}, default=str))
            rows.append(json.dumps({"session_id": session.session_id, "turn_id": t.turn_id, "turn": t.index,
                                    "text": t.text, "user_id": None}))
    (tele / "events-1.jsonl").write_text("\n".join(lines) + "\n")
    (root / "turns.jsonl").write_text("\n".join(rows) + "\n")
    (root / "vault.key").write_bytes(Fernet.generate_key())
    raw = yaml.safe_load((REPO / "configs" / "embedded.yaml").read_text())
    args = raw["applications"][0]["args"]
    args["pipeline"] = {"kind": "tandem"}  # the settings the sessions were played with
    args["store"] = {"kind": "sqlite", "path": str(root / "sessions.db"), "vault_key_file": str(root / "vault.key")}
    args["telemetry"] = {"jsonl_dir": str(tele)}
    (root / "app.yaml").write_text(yaml.safe_dump(raw))
    store = make_store(load_serve_file(root / "app.yaml").applications[0].args.store)
    for session, h in played:
        for rec in h.turns:
            rec = rec.model_copy(update={"turn_id": f"{session.session_id}-{rec.turn_id}"})
            asyncio.run(store.save_turn(session.session_id, rec, principal="team-a"))
    return root


def phi_file(tmp: Path, then: str) -> Path:
    phi = copy.deepcopy(RAW["phi"])
    for r in phi["rows"]:
        if (r["intent"], r["sub_intent"], r["requires_state"]) == ("greeting", "hello", []):
            r["then"] = then
    phi["version"] = "support-phi-candidate"
    path = tmp / "phi.yaml"
    path.write_text(yaml.safe_dump(phi))
    return path


def cli(run_dir: Path, out: Path, *extra: str) -> int:
    return main(["--from", str(run_dir), "--config", str(run_dir / "app.yaml"), "--out", str(out), *extra])


def test_a_phi_table_candidate_writes_the_three_reports_and_trips_its_gate(run_dir: Path, tmp_path: Path, capsys):
    table = phi_file(tmp_path, "clarify:identity")
    assert cli(run_dir, tmp_path / "out", "--table", f"phi={table}", "--fail-on", "clarify") == 1
    data = json.loads((tmp_path / "out" / "whatif.json").read_text())
    assert {"turns", "replayed", "changed", "by_kind", "changes"} <= set(data)
    assert (data["turns"], data["replayed"], data["changed"]) == (4, 4, 1)
    assert data["by_kind"]["clarify"] == {"same": 3, "changed": 1}
    assert [(c["session_id"], c["turn"]) for c in data["changes"]] == [("alex-1", 0)]
    assert data["candidate"]["tables"]["phi"] == "support-phi-candidate"
    assert data["candidate"]["baseline_tables"]["phi"] == RAW["phi"]["version"]
    md, page = (tmp_path / "out" / "whatif.md").read_text(), (tmp_path / "out" / "whatif.html").read_text()
    assert "| clarify | 3 | 1 |" in md and "alex-1 · turn 0" in md
    assert "<h1>What-if report</h1>" in page and "clarify:identity" in page
    printed = capsys.readouterr().out
    assert "fail-on: clarify: 1 turn(s) changed, more than 0" in printed
    # the same candidate, gated on what it does not change: it may ship
    assert cli(run_dir, tmp_path / "out2", "--table", f"phi={table}", "--fail-on", "card,escalation") == 0


def test_a_no_op_table_reports_nothing_changed(run_dir: Path, tmp_path: Path):
    table = phi_file(tmp_path, "respond")  # the row as it is
    assert cli(run_dir, tmp_path / "out", "--table", f"phi={table}", "--fail-on", "any") == 0
    data = json.loads((tmp_path / "out" / "whatif.json").read_text())
    assert data["changed"] == 0 and data["not_reproduced"] == [] and data["replayed"] == 4


def test_no_typed_email_reaches_any_report(run_dir: Path, tmp_path: Path):
    phi = copy.deepcopy(RAW["phi"])
    for r in phi["rows"]:
        if (r["intent"], r["sub_intent"], r["requires_state"]) == ("greeting", "hello", ["email"]):
            r["then"] = "clarify:identity"
    (tmp_path / "phi.yaml").write_text(yaml.safe_dump(phi))
    assert cli(run_dir, tmp_path / "out", "--table", f"phi={tmp_path / 'phi.yaml'}") == 0
    for name in ("whatif.json", "whatif.md", "whatif.html"):
        text = (tmp_path / "out" / name).read_text()
        assert "alex.rivera@example.com" not in text and "[EMAIL_1]" in text


@pytest.mark.parametrize("extra, message", [
    (["--table", "bogus=x.yaml"], "--table 'bogus=x.yaml'"),
    (["--fail-on", "card>x"], "--fail-on"),
    (["--model", "orchestrator=nope"], "--model 'orchestrator=nope'"),
    (["--pack", "no-such-pack"], "unknown domain 'no-such-pack'"),
    (["--since", "yesterday"], "--since/--until"),
])
def test_bad_input_is_a_typed_error_and_exit_code_2(run_dir: Path, tmp_path: Path, capsys, extra, message):
    assert cli(run_dir, tmp_path / "out", *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert not (tmp_path / "out" / "whatif.json").exists()


def test_a_table_that_does_not_validate_names_its_path(run_dir: Path, tmp_path: Path, capsys):
    phi = copy.deepcopy(RAW["phi"])
    phi["rows"][0]["tools"][0]["tool"] = "launch_rocket"
    (tmp_path / "phi.yaml").write_text(yaml.safe_dump(phi))
    assert cli(run_dir, tmp_path / "out", "--table", f"phi={tmp_path / 'phi.yaml'}") == 2
    assert "config_error" in capsys.readouterr().err


def test_the_store_and_a_telemetry_folder_act_for_one_principal(run_dir: Path, tmp_path: Path, capsys):
    table = phi_file(tmp_path, "clarify:identity")
    base = ["--config", str(run_dir / "app.yaml"), "--table", f"phi={table}"]
    assert main(["--from", str(run_dir / "telemetry"), *base, "--principal", "team-a", "--out", str(tmp_path / "a")]) == 0
    data = json.loads((tmp_path / "a" / "whatif.json").read_text())
    assert data["turns"] == 4 and [c["session_id"] for c in data["changes"]] == ["alex-1"]
    assert data["not_reproduced"] == []  # the texts the store restores are the ones the turns got
    assert main(["--from", "alex-2", *base, "--principal", "team-a", "--out", str(tmp_path / "c")]) == 0
    assert json.loads((tmp_path / "c" / "whatif.json").read_text())["turns"] == 2
    # another tenant: the session reads as unknown
    assert main(["--from", "alex-1", *base, "--principal", "team-b", "--out", str(tmp_path / "b")]) == 2
    assert "no logged session found" in capsys.readouterr().err


def test_time_range_and_sample_narrow_the_sessions(run_dir: Path, tmp_path: Path):
    assert cli(run_dir, tmp_path / "a", "--sample", "1", "--seed", "3") == 0
    assert json.loads((tmp_path / "a" / "whatif.json").read_text())["turns"] == 2
    assert cli(run_dir, tmp_path / "b", "--since", "2000-01-01", "--until", "2001-01-01") == 2  # nothing then


def test_a_rules_folder_replaces_the_bundle(run_dir: Path, tmp_path: Path):
    folder = tmp_path / "tables"
    folder.mkdir()
    for kind in ("phi", "psi", "tiers", "w3"):
        (folder / f"{kind}.yaml").write_text(yaml.safe_dump(RAW[kind]))
    bundle = table_override(RAW, "rules", folder, "support")
    assert bundle["version"] == RAW["version"]
    assert cli(run_dir, tmp_path / "out", "--table", f"rules={folder}") == 0
    assert json.loads((tmp_path / "out" / "whatif.json").read_text())["changed"] == 0


def test_the_brief_lines_a_person_reads() -> None:
    assert brief("intent", {"intent": "cancel", "sub_intent": "order"}) == "cancel/order"
    assert brief("phi", [{"outcome": "hit", "calls": [{"tool": "get_order_details", "args": {"order_id": "#W1"}}],
                          "then": "propose"}]) == 'hit get_order_details(order_id="#W1") then propose'
    assert brief("card", {"shown": None, "executed": None, "refused": [{"card_id": "card.x", "reason": "r"}]}) == \
        "refused card.x: r"
    assert brief("clarify", None) == "—"


def test_the_pages_escape_what_they_show() -> None:
    from pipelines.core.whatif import Change, WhatIfReport
    from serve.whatif_render import html, markdown

    rep = WhatIfReport(turns=1, replayed=1, changed=1, changes=[Change(
        session_id="s", turn_id="t", turn=0, text="<script>alert(1)</script>", kinds=["clarify"],
        before={"clarify": None}, after={"clarify": {"question": "which one: a | b?", "options": []}})])
    rep.by_kind["clarify"].changed = 1
    page, md = html(rep.model_dump(mode="json")), markdown(rep.model_dump(mode="json"))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "| clarify | — | which one: a \\| b? |" in md


def test_every_decision_kind_reads_in_one_line() -> None:
    assert brief("offer", [{"step": 1, "tools": [], "cards": ["card.x"], "clarify": [], "select": ["#W1", "#W2"],
                            "candidates": {"card.x.order_id": ["#W1"]}}]) == \
        'step 1: tools [] cards [\'card.x\'] clarify [] select [\'#W1\', \'#W2\'] candidates {"card.x.order_id": ["#W1"]}'
    assert brief("action", [{"step": 1, "decision": {"decision": "respond"}, "error": None},
                            {"step": 2, "repeat_read": "get_order_details"}]) == \
        'step 1: {"decision": "respond"}; step 2: repeat get_order_details'
    assert brief("path", {"path": "fallback", "fallback": "model_timeout", "status": "fallback", "error": None}) == \
        "fallback fallback model_timeout fallback"
    assert brief("guard", {"pre": {"blocked": True, "route": None, "hits": ["inj.x:block"]},
                           "routes": [{"route": "fallback", "reason": "guardrail_block"}],
                           "mid": [{"decision": "block", "violation": "unrequested_card"}]}) == \
        "blocked; rules inj.x:block; fallback (guardrail_block); mid block unrequested_card"
    assert brief("gate", [{"stage": "post", "kinds": ["unobserved_id"]}]) == "post: unobserved_id"
    assert brief("guidance", {"pick": "tip:x", "table_version": "w3-1"}) == "tip:x (w3-1)"
    assert brief("paragraphs", {"conflicts": [{"kind": "action_refused", "tier": "hard"}], "plan": ["apology"],
                                "psi_fired": ["a"]}) == "plan apology; conflicts action_refused:hard; Ψ a"
    assert brief("escalation", "user_requested_human") == '"user_requested_human"'


def test_no_role_to_rerun_needs_no_engine() -> None:
    from serve.whatif_models import live_models

    with live_models(None, {}) as live:
        assert live is None
