"""Request mixes: tau2 openings, a pack's sessions, JSONL files, truncation, seeded cycling."""

from __future__ import annotations

import json
from itertools import islice

import pytest

from serve.loadtest.workload import (
    Workload,
    WorkloadUnavailable,
    default_tau2_dir,
    jsonl_workload,
    load_workload,
    pack_mixes,
    pack_workload,
    tau2_workload,
)


def test_tau2_openings_are_reason_then_known_info():
    if not (default_tau2_dir() / "tasks_train.json").is_file():
        pytest.skip(f"tau2 data absent at {default_tau2_dir()}")
    wl = tau2_workload()
    tasks = json.loads((default_tau2_dir() / "tasks_train.json").read_text())
    ins = tasks[0]["user_scenario"]["instructions"]
    assert wl.name == "tau2" and len(wl.sessions) == len(tasks)
    assert wl.sessions[0] == (ins["reason_for_call"].strip(), ins["known_info"].strip())


def test_tau2_from_a_small_copy_and_env(tmp_path, monkeypatch):
    tasks = [{"user_scenario": {"instructions": {"reason_for_call": "I want a refund.", "known_info": "I am Ann."}}},
             {"user_scenario": {"instructions": {"reason_for_call": "Where is #W1?", "known_info": None}}},
             {"user_scenario": None}]
    (tmp_path / "tasks_train.json").write_text(json.dumps(tasks))
    monkeypatch.setenv("TANDEM_TAU2_DIR", str(tmp_path))
    wl = load_workload("tau2")
    assert wl.sessions == (("I want a refund.", "I am Ann."), ("Where is #W1?",))
    assert load_workload("tau2", max_turns=1).sessions == (("I want a refund.",), ("Where is #W1?",))


def test_missing_tau2_skips_cleanly_and_auto_falls_back_to_coach(tmp_path, monkeypatch):
    monkeypatch.setenv("TANDEM_TAU2_DIR", str(tmp_path / "absent"))
    with pytest.raises(WorkloadUnavailable):
        load_workload("tau2")
    assert load_workload("auto").name == "coach"


def test_a_packs_sessions_are_seeded_multi_turn_texts():
    a = pack_workload("coach", seed=1, n_sessions=3, turns_per_session=4)
    assert a == pack_workload("coach", seed=1, n_sessions=3, turns_per_session=4)
    assert a.name == "coach" and len(a.sessions) == 3 and all(len(s) == 4 for s in a.sessions)
    assert all(isinstance(t, str) and t for s in a.sessions for t in s)
    assert pack_workload("coach", seed=2, n_sessions=3) != a
    assert load_workload("coach", max_turns=2).name == "coach"  # a pack with scripts is a mix by its name


def test_only_packs_with_scripts_are_mixes():
    assert "coach" in pack_mixes() and "support" not in pack_mixes()
    with pytest.raises(WorkloadUnavailable, match="no session scripts"):
        pack_workload("support")


def test_jsonl_sessions_and_single_texts(tmp_path):
    f = tmp_path / "mix.jsonl"
    f.write_text('{"session": ["hi", "where is my order?"]}\n\n# a comment\n{"text": "refund please"}\n')
    wl = jsonl_workload(f)
    assert wl.sessions == (("hi", "where is my order?"), ("refund please",)) and wl.n_turns == 3
    assert load_workload("jsonl", jsonl=str(f)).name == "jsonl:mix.jsonl"


@pytest.mark.parametrize("line", ['{"session": []}', '{"text": ""}', '{"session": ["a", 3]}', "[1, 2]", "{not json"])
def test_jsonl_bad_lines_name_the_line(tmp_path, line):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"text": "ok"}\n' + line + "\n")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        jsonl_workload(f)


def test_jsonl_missing_file_and_missing_flag(tmp_path):
    with pytest.raises(WorkloadUnavailable):
        jsonl_workload(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError):
        load_workload("jsonl")
    with pytest.raises(ValueError):
        load_workload("bogus")


def test_cycle_is_seeded_and_covers_every_session():
    wl = Workload("w", tuple((f"t{i}",) for i in range(5)))
    first = list(islice(wl.cycle(seed=3), 10))
    assert first == list(islice(wl.cycle(seed=3), 10))
    assert sorted(first[:5]) == sorted(wl.sessions) and sorted(first[5:]) == sorted(wl.sessions)
    with pytest.raises(ValueError):
        Workload("empty", ())
