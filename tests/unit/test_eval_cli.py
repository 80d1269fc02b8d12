"""``tandem eval`` end to end without Ray: argument checks, derived configs, and a run against a fake app.

The fake app (a test double) answers the public routes a real app serves — the SSE
turn, ``GET /v1/sessions/{id}`` with stored metas, ``/readyz`` — and writes the
structured events of each turn into a telemetry folder, scripted per user text for
the support ``cancel`` flow of the tandem pipeline.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from serve.eval.cli import build_parser, main
from serve.eval.runner import app_overrides
from serve.eval.suites import resolve_suites, suite_packs

ROOT = Path(__file__).resolve().parents[2]
ALEX = "alex_rivera_1001"

# user text -> (SSE events before done, structured events, the tandem meta)
SCRIPT: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]] = {
    "Hi, my email is alex.rivera@example.com.": (
        [{"type": "narration.delta", "text": "Let me look into that for you."},
         {"type": "reply.delta", "text": "Thanks, I found your account."}],
        [{"kind": "tandem.phi", "intent": "greeting", "sub_intent": "hello", "outcome": "hit",
          "tools": ["find_user_id_by_email"], "then": "respond"},
         {"kind": "tandem.tool", "step": 0, "tool": "find_user_id_by_email", "args": {"email": "[EMAIL_1]"},
          "ok": True, "confirmed": False, "result": {"user_id": ALEX}}],
        {"path": "answer", "card_id": None, "executed": None, "state": {"authenticated_user_id": ALEX},
         "c1": {"intent": "greeting", "sub_intent": "hello"}}),
    "Please cancel order #W1000001, I no longer need it.": (
        [{"type": "narration.delta", "text": "Let me check."},
         {"type": "action_card", "card_id": "card.cancel_order", "title": "Cancel order",
          "params": {"order_id": "#W1000001", "reason": "no longer needed"}},
         {"type": "reply.delta", "text": "I can cancel order #W1000001."}],
        [{"kind": "tandem.phi", "intent": "cancel", "sub_intent": "order", "outcome": "hit",
          "tools": ["get_order_details"], "then": "propose"},
         {"kind": "tandem.tool", "step": 0, "tool": "get_order_details", "args": {"order_id": "#W1000001"},
          "ok": True, "confirmed": False, "result": {"order_id": "#W1000001", "user_id": ALEX, "status": "pending"}},
         {"kind": "tandem.step", "step": 1, "raw": "{}", "decision": {
             "decision": "action", "card_id": "card.cancel_order",
             "params": {"order_id": "#W1000001", "reason": "no longer needed"}}}],
        {"path": "action_card", "card_id": "card.cancel_order", "executed": None,
         "state": {"authenticated_user_id": ALEX}, "c1": {"intent": "cancel", "sub_intent": "order"}}),
    "yes": (
        [{"type": "reply.delta", "text": "Done."}],
        [{"kind": "tandem.route", "route": "execute_pending", "reason_code": "confirmed", "rule": "card.cancel_order"},
         {"kind": "tandem.tool", "step": 0, "tool": "cancel_pending_order", "confirmed": True, "ok": True,
          "args": {"order_id": "#W1000001", "reason": "no longer needed"},
          "result": {"order_id": "#W1000001", "status": "cancelled"}}],
        {"path": "answer", "card_id": None, "executed": "card.cancel_order",
         "state": {"authenticated_user_id": ALEX}}),
    "I want to talk to a human agent please.": (  # a malformed event: judging this turn fails
        [{"type": "reply.delta", "text": "One moment."}], [{"kind": "tandem.step", "decision": None}], {}),
}


class FakeApp(BaseHTTPRequestHandler):
    telemetry: Path
    sessions: dict[str, list[dict[str, Any]]]
    pipeline = "tandem"

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, body: Any, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/readyz":
            return self._json({"status": "ready", "pipeline": self.pipeline})
        sid = self.path.rsplit("/", 1)[-1]
        return self._json({"session_id": sid, "turns": self.sessions.get(sid, [])})

    def do_POST(self) -> None:
        sid = self.path.split("/")[3]
        text = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["text"]
        sse, log, meta = SCRIPT.get(text, ([{"type": "reply.delta", "text": "Okay."}], [], {"path": "answer"}))
        turns = self.sessions.setdefault(sid, [])
        tid = f"{sid}-t{len(turns)}"
        turns.append({"turn_id": tid, "index": len(turns), "user_text": text, "meta": {"tandem": meta}})
        with (self.telemetry / "events-1.jsonl").open("a") as f:
            for i, e in enumerate([*log, {"kind": "turn.end"}]):
                f.write(json.dumps({"ts": 1000.0 + len(turns) + i / 100, "turn_id": tid, **e}) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for ev in [*sse, {"type": "done", "turn_id": tid, "status": "ok", "timings": {}}]:
            self.wfile.write(f"event: {ev['type']}\ndata: {json.dumps(ev)}\n\n".encode())
            self.wfile.flush()


@pytest.fixture
def fake_app(tmp_path: Path):
    tele = tmp_path / "telemetry"
    tele.mkdir()
    handler = type("Handler", (FakeApp,), {"telemetry": tele, "sessions": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", tele
    server.shutdown()
    server.server_close()


def test_a_run_against_a_running_app_judges_every_turn(fake_app, tmp_path):
    url, tele = fake_app
    out = tmp_path / "out"
    rc = main(["--http", url, "--telemetry", str(tele), "--pipelines", "tandem", "--suites", "flows",
               "--out", str(out)])
    assert rc == 0
    rows = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert len(rows) == 7
    cancel = [r for r in rows if r["case"] == "cancel"]
    assert [r["correct"] for r in cancel] == [True, True, True]
    assert cancel[2]["entity_status"] == "cancelled"
    assert all(r["invented"] == [] and r["unrequested"] == [] and r["unselected"] == [] for r in cancel)
    assert cancel[0]["first_token_ms"] is not None and cancel[0]["first_token_ms"] <= cancel[0]["e2e_ms"]
    noauth = next(r for r in rows if r["case"] == "noauth")
    assert noauth["correct"] is True and noauth["entity_status"] == "delivered"  # the seeded world's status
    human = next(r for r in rows if r["case"] == "human")
    assert human["eval_error"].startswith("KeyError") and "correct" not in human  # reported, the run went on
    doc = json.loads((out / "summary.json").read_text())
    flows = doc["pipelines"]["tandem"]["suites"]["flows"]
    assert flows["correct"] == {"n": 6, "ok": 4, "pct": 66.7}  # cancel x3 + noauth; ambiguous fails twice
    assert flows["eval_errors"] == 1
    assert (out / "summary.md").is_file() and (out / "first_token_cdf.png").is_file()


def test_without_an_event_log_decisions_are_not_judged(fake_app, tmp_path):
    url, _ = fake_app
    out = tmp_path / "out"
    assert main(["--http", url, "--pipelines", "tandem", "--suites", "flows", "--out", str(out)]) == 0
    rows = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert all(r["correct"] is None and r["invented"] is None for r in rows)
    assert all(r["unrequested"] == [] for r in rows)  # judged from the SSE events alone


def test_http_refuses_another_pipeline_and_remote_targets(fake_app, tmp_path, capsys):
    url, tele = fake_app
    assert main(["--http", url, "--pipelines", "dr", "--suites", "flows", "--out", str(tmp_path)]) == 2
    assert "serves pipeline 'tandem'" in capsys.readouterr().err
    assert main(["--http", "http://10.1.2.3:8000", "--pipelines", "tandem", "--suites", "flows"]) == 2
    assert main(["--http", url, "--pipelines", "tandem,dr", "--suites", "flows"]) == 2


@pytest.mark.parametrize("argv", [["--suites", "nope"], ["--pipelines", "nokind"], ["--limit", "-1"],
                                  ["--pack-sessions", "100", "--pack-turns", "5"], ["--suites", "coach,tau2-openings", "--domain", "nopack"]])
def test_bad_arguments_are_refused(argv, capsys):
    assert main(argv) == 2
    assert "error:" in capsys.readouterr().err


def test_suites_group_by_the_pack_that_has_them_in_order():
    known = suite_packs()
    assert known["tau2-openings"] == ["airline", "support"] and known["coach"] == ["coach"]
    assert resolve_suites(["coach", "flows", "tau2-openings"], "support", known) == [
        ("coach", ["coach"]), ("support", ["flows", "tau2-openings"])]
    assert resolve_suites(["tau2-openings", "flows"], "airline", known) == [("airline", ["tau2-openings"]),
                                                                            ("support", ["flows"])]
    with pytest.raises(ValueError, match="runs on airline, support: name one with --domain"):
        resolve_suites(["tau2-openings"], None, known)
    with pytest.raises(ValueError, match="unknown suite 'nope'"):
        resolve_suites(["nope"], "support", known)


def test_a_third_packs_own_suite_is_found_and_built():
    from pipelines.core.evaluation import Case, EvalTurn, PackEvaluation, SuiteOptions
    from pipelines.domain import PackBase

    class Kit(PackEvaluation):
        def suites(self):
            return {"greetings": lambda o: [Case("greetings", f"s{i}", (EvalTurn("hi"),)) for i in range(o.sessions)]}

    class Pack(PackBase):
        def evaluation(self):
            return Kit()

    class Bare(PackBase):  # PackBase's defaults: no suites of its own, no task replay: nothing to play
        pass

    known = suite_packs({"shop": Pack(), "bare": Bare()})
    assert known == {"greetings": ["shop"]}
    assert [c.case_id for c in Kit().suites()["greetings"](SuiteOptions(sessions=2))] == ["s0", "s1"]
    assert Kit().plays_tasks is False


@pytest.mark.parametrize("kind,domain", [("tandem", "support"), ("dr", "support"), ("prompting", "support"),
                                          ("sgc_full", "coach"), ("tandem", "coach")])
def test_each_derived_app_config_passes_the_strict_loader(kind, domain, tmp_path):
    from serve.config import load_serve_file, merge_args

    raw = yaml.safe_load((ROOT / "configs" / "embedded.yaml").read_text())
    base = raw["applications"][0]["args"]
    over = app_overrides(kind, domain, base["pipeline"], tmp_path, f"{kind}-{domain}", world_seed=7)
    raw["applications"][0]["args"] = merge_args(base, over)
    path = tmp_path / "app.yaml"
    path.write_text(yaml.safe_dump(raw))
    args = load_serve_file(path).applications[0].args
    assert args.pipeline.kind == kind and args.domain.name == domain
    assert args.pipeline.max_reply_tokens == base["pipeline"]["max_reply_tokens"]
    assert str(tmp_path) in args.store.path and str(tmp_path) in str(args.domain.world_path)
    assert args.domain.resettable is True  # every whole task starts from the seeded world
    assert load_serve_file(ROOT / "configs" / "embedded.yaml").applications[0].args.domain.resettable is False


def test_resummarise_recomputes_from_saved_turns(fake_app, tmp_path):
    url, tele = fake_app
    out = tmp_path / "out"
    assert main(["--http", url, "--telemetry", str(tele), "--pipelines", "tandem", "--suites", "flows",
                 "--out", str(out)]) == 0
    before = json.loads((out / "summary.json").read_text())["pipelines"]
    (out / "summary.json").unlink()
    assert main(["--resummarise", str(out / "turns.jsonl"), "--out", str(out)]) == 0
    assert json.loads((out / "summary.json").read_text())["pipelines"] == before


def test_the_parser_defaults_match_the_documented_run():
    ns = build_parser().parse_args([])
    assert (ns.pipelines, ns.suites, ns.limit) == ("tandem,dr,prompting", "tau2-openings,flows", 20)


def test_two_suites_never_share_a_session():
    from serve.eval.evaluate import session_id
    from serve.eval.suites import Case, EvalTurn

    one, two = Case("tau2-tasks", "task-0", (EvalTurn("hi"),)), Case("tau2-openings", "task-0", (EvalTurn("hi"),))
    assert session_id("tandem", one, "120000") != session_id("tandem", two, "120000")
    assert session_id("tandem", one, "120000") == session_id("tandem", one, "120000")
    assert session_id("dr", one, "120000") != session_id("tandem", one, "120000")


def test_an_interrupted_run_keeps_and_summarises_the_turns_played(fake_app, tmp_path, monkeypatch, capsys):
    from serve.eval import run as run_mod

    url, tele = fake_app
    out = tmp_path / "out"
    real = run_mod.run_all
    seen: list[dict] = []

    def interrupted_after_three(ns, kinds, suites, cases, base_args, world_seed, on_row=None):
        def count(row):
            on_row(row)
            seen.append(row)
            if len(seen) == 3:
                raise KeyboardInterrupt

        return real(ns, kinds, suites, cases, base_args, world_seed, on_row=count)

    monkeypatch.setattr(run_mod, "run_all", interrupted_after_three)
    rc = main(["--http", url, "--telemetry", str(tele), "--pipelines", "tandem", "--suites", "flows",
               "--out", str(out)])
    assert rc == 130 and "interrupted after 3 turns" in capsys.readouterr().err
    rows = [json.loads(x) for x in (out / "turns.jsonl").read_text().splitlines()]
    assert len(rows) == 3  # of the 7 a whole run plays
    doc = json.loads((out / "summary.json").read_text())
    assert doc["run"]["interrupted"] is True and doc["run"]["partial"] is True
    assert doc["pipelines"]["tandem"]["turns"] == 3 and (out / "summary.md").is_file()


def test_an_interrupt_before_any_turn_writes_no_summary(tmp_path, monkeypatch):
    from serve.eval import run as run_mod

    def at_once(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "run_all", at_once)
    out = tmp_path / "out"
    assert main(["--http", "http://127.0.0.1:9", "--pipelines", "tandem", "--suites", "flows", "--out", str(out)]) == 130
    assert not (out / "summary.json").exists()
