"""``tandem whatif`` on the real model: sessions logged through the embedded app (SmolLM2-135M on vLLM in Ray
Serve), re-decided under one changed Φ row and one changed Ψ eligibility rule, under a no-op candidate, and
under a model swap on a small logged eval run (the orchestrator re-run on another deployment of the model).

The expected turns are written by hand from the two rules and the sessions below (each request's cues fix
its labels, so the model cannot move them):

* Φ ``greeting/hello`` with nothing known (``requires_state: []``) answers ``respond``; the candidate asks who
  the user is (``clarify:identity``). It governs the opening greeting of ``wi-greet`` alone: ``wi-verified``'s
  "Hello" comes after its user was verified (the ``user_id`` row), the other greetings carry an email.
* Ψ ``hard_may_apologise`` lets a hard conflict come with an apology; the candidate forbids it. It governs the
  turns with a hard conflict: ``wi-refused`` (a delivered order cannot be cancelled) and ``wi-unknown`` (an
  email that matches no account).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import start_app

pytestmark = pytest.mark.integration

REASON = "because it is no longer needed"
SESSIONS: dict[str, list[str]] = {
    "wi-greet": ["Hi! What can you help me with?",
                 f"My email is alex.rivera@example.com and I want to cancel order #W1000001 {REASON}"],
    "wi-refused": [f"My email is alex.rivera@example.com and I want to cancel order #W1000002 {REASON}"],
    "wi-unknown": [f"My email is nobody.here@example.com and I want to cancel order #W1000003 {REASON}"],
    "wi-verified": ["My email is alex.rivera@example.com, where is my order #W1000003?", "Hello", "Thanks, bye"],
}
PHI_GOVERNED = {("wi-greet", 0)}
PSI_GOVERNED = {("wi-refused", 0), ("wi-unknown", 0)}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whatif-real")
    for running in start_app(tmp, {"pipeline": {"kind": "tandem", "turn_deadline_s": 300},
                                   "domain": {"name": "support", "seed": 7, "world_path": str(tmp / "world.db")}}):
        for sid, texts in SESSIONS.items():
            for text in texts:
                running.turn(sid, text)
        yield running


def _tables() -> dict[str, Any]:
    from pipelines.domains import load_domain

    return load_domain("support").rule_tables()


def _candidate(tmp: Path) -> list[str]:
    raw = _tables()
    phi, psi = copy.deepcopy(raw["phi"]), copy.deepcopy(raw["psi"])
    row = next(r for r in phi["rows"] if (r["intent"], r["sub_intent"], r["requires_state"]) == ("greeting", "hello", []))
    row["then"] = "clarify:identity"
    phi["version"] += "-ask-first"
    rule = next(r for r in psi["rules"] if r["id"] == "hard_may_apologise")
    rule.pop("allow")
    rule["forbid"] = ["apology"]
    psi["version"] += "-no-apology"
    (tmp / "phi.yaml").write_text(yaml.safe_dump(phi, allow_unicode=True))
    (tmp / "psi.yaml").write_text(yaml.safe_dump(psi, allow_unicode=True))
    return ["--table", f"phi={tmp / 'phi.yaml'}", "--table", f"psi={tmp / 'psi.yaml'}"]


def _whatif(app, out: Path, *extra: str, source: str | None = None) -> tuple[int, dict[str, Any]]:
    from serve.whatif import main

    rc = main(["--from", source or str(app.telemetry), "--config", str(app.config_path), "--out", str(out), *extra])
    return rc, json.loads((out / "whatif.json").read_text())


def _logged(app) -> dict[tuple[str, int], list[dict[str, Any]]]:
    import httpx

    out = {}
    for sid in SESSIONS:
        turns = httpx.get(f"{app.http}/v1/sessions/{sid}", timeout=30).json()["turns"]
        for i, t in enumerate(turns):
            out[(sid, i)] = app.events(t["turn_id"])
    return out


def test_the_sessions_read_the_rows_the_expectations_name(app):
    """The hand-checked preconditions, from the log: which Φ row each greeting hit, which turns had a hard
    conflict whose plan apologised."""
    logged = _logged(app)
    assert set(logged) == {(s, i) for s, texts in SESSIONS.items() for i in range(len(texts))}
    assert all(any(e["kind"] == "model.call" for e in evs) for evs in logged.values() if
               any(e["kind"] == "tandem.w1" for e in evs))  # every perceiving turn logged its model calls
    bare = {k for k, evs in logged.items() for e in evs if e["kind"] == "tandem.phi"
            and (e["intent"], e["sub_intent"]) == ("greeting", "hello")
            and not {"user_id", "email", "first_name"} & set(e.get("snapshot") or {})}
    assert bare == PHI_GOVERNED
    hard = {k for k, evs in logged.items() for e in evs if e["kind"] == "tandem.w2" and e.get("ok")
            and any(c["tier"] == "hard" for c in e["conflicts"]) and any(p["kind"] == "apology" for p in e["plan"])}
    assert hard == PSI_GOVERNED


def test_a_no_op_candidate_reports_nothing_changed_and_reproduces_the_log(app, tmp_path):
    raw = _tables()
    (tmp_path / "phi.yaml").write_text(yaml.safe_dump(raw["phi"], allow_unicode=True))
    rc, data = _whatif(app, tmp_path / "out", "--table", f"phi={tmp_path / 'phi.yaml'}", "--fail-on", "any")
    assert rc == 0 and data["changed"] == 0
    assert data["replayed"] == data["turns"] == 7 and data["skipped"] == []
    assert data["not_reproduced"] == []  # the playback decides every logged turn as it was served
    assert data["model_calls"]["missing"] == 0 and data["model_calls"]["estimated"] == 0


def test_a_phi_row_and_a_psi_rule_change_exactly_the_turns_they_govern(app, tmp_path):
    rc, data = _whatif(app, tmp_path / "out", *_candidate(tmp_path), "--fail-on", "clarify,card")
    got = {(c["session_id"], c["turn"]): c for c in data["changes"]}
    assert set(got) == PHI_GOVERNED | PSI_GOVERNED  # and nothing else
    assert data["changed"] == 3 and data["not_reproduced"] == []
    greet = got[("wi-greet", 0)]
    assert {"phi", "clarify", "path"} <= set(greet["kinds"]) and "paragraphs" not in greet["kinds"]
    assert greet["after"]["clarify"]["question"] and any("then clarify:identity" in r for r in greet["rules"])
    for key in PSI_GOVERNED:
        assert got[key]["kinds"] == ["paragraphs"]
        assert "apology" in got[key]["before"]["paragraphs"]["plan"]
        assert "apology" not in got[key]["after"]["paragraphs"]["plan"]
        assert any("hard_may_apologise" in r for r in got[key]["rules"])
    assert rc == 1  # the clarify gate is crossed (no card changed)
    assert "alex.rivera@example.com" not in json.dumps(data)  # placeholders only
    assert (tmp_path / "out" / "whatif.html").read_text().count("class=turn") == 3


def test_the_throughput_benchmark_runs_on_the_real_log(app, tmp_path):
    """The smoke run of ``scripts/bench_whatif.py`` on these real logged turns (its figure: docs/benchmarks.md)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_whatif", Path(__file__).resolve().parents[2] / "scripts" /
                                                  "bench_whatif.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    doc = bench.run(str(app.telemetry), str(app.config_path), turns=14, work=tmp_path)
    assert doc["distinct_turns"] == 7 and doc["turns"] == 14
    noop = doc["candidates"]["noop"]
    assert noop["changed"] == 0 and noop["turns_per_min_cpu"] > 0
    assert noop["baseline_sessions"] == 0  # the candidate decides every logged turn as served: one run each


def test_a_model_swap_on_a_logged_eval_run_reruns_the_orchestrator(app, tmp_path):
    """The orchestrator moved to another deployment of the model: the same weights served with a repetition
    penalty by default (vLLM's ``override_generation_config``; the turn sends none for the orchestrator's calls).
    Every orchestrator call is re-run on it; the other roles' calls come from the log."""
    from serve.eval import main as eval_main

    run = tmp_path / "eval"
    suites = "flows,tau2-openings" if _tau2_dir() is not None else "flows"
    assert eval_main(["--http", app.http, "--telemetry", str(app.telemetry), "--pipelines", "tandem", "--suites", suites,
                      "--limit", "5", "--warmup", "0", "--out", str(run)]) == 0
    raw = yaml.safe_load(Path(app.config_path).read_text())
    args = raw["applications"][0]["args"]
    swap = copy.deepcopy(next(a for a in raw["applications"] if a["name"] == "models")["args"]["models"]["smollm2"])
    swap.update(model_id="smollm2-135m-penalised")
    swap["engine_kwargs"]["override_generation_config"] = {"repetition_penalty": 1.3}
    args["models"]["penalised"] = swap
    config = tmp_path / "swap.yaml"
    config.write_text(yaml.safe_dump(raw))
    from serve.whatif import main

    rc = main(["--from", str(run), "--telemetry", str(app.telemetry), "--config", str(config),
               "--model", "orchestrator=penalised", "--out", str(tmp_path / "out")])
    data = json.loads((tmp_path / "out" / "whatif.json").read_text())
    print(f"model swap: {data['changed']} of {data['replayed']} turns changed "
          f"({ {k: v['changed'] for k, v in data['by_kind'].items() if v['changed']} }); calls {data['model_calls']}")
    assert rc == 0 and data["replayed"] == data["turns"] > 0 and data["skipped"] == []
    assert data["model_calls"]["live"] > 0 and data["model_calls"]["estimated"] == data["model_calls"]["missing"] == 0
    assert data["candidate"]["models"] == {"orchestrator": "penalised"}
    assert data["changed"] >= 1  # the deployment decides some turns differently
    for c in data["changes"]:
        assert c["model_calls"]["live"] > 0 and any("re-run live (orchestrator)" in r for r in c["rules"])


def _tau2_dir() -> Path | None:
    """The support pack's tau2 tasks, when this checkout has them (read in place, never copied)."""
    from pipelines.domains import load_domain
    from serve.eval.suites import tau2_dir_of

    base = tau2_dir_of(load_domain("support"))
    return base if base is not None and (base / "tasks_train.json").is_file() else None
