"""The overload script's audit: completed turns must be in the store, refused ones must not."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from scripts.overload import Phase, audit


def _store(path: Path, rows: list[tuple[str, int, str]]) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE turns (session_id TEXT, idx INTEGER, turn_id TEXT, body TEXT)")
    conn.executemany("INSERT INTO turns VALUES (?, ?, ?, '{}')", rows)
    conn.commit()
    conn.close()
    return path


def test_each_outcome_is_checked_against_the_store_file(tmp_path: Path) -> None:
    db = _store(tmp_path / "s.db", [("a", 0, "ta"), ("c", 0, "tc"), ("d", 0, "other")])
    phase = Phase("x", "http", None)
    phase.outcomes = [
        ("a", "completed", "ta"),              # stored: fine
        ("b", "completed", "tb"),              # answered but never stored: lost
        ("c", "refused", None),                # refused yet stored: lost
        ("d", "completed", "td"),              # a different turn stored: lost
        ("e", "refused_no_retry_after", None), # refused, nothing stored: fine
        ("f", "other", None),                  # an error is counted elsewhere
    ]
    audit(db, phase)
    assert phase.lost_stored_turns == 3


def test_a_variant_sets_every_models_engine_and_the_ingress() -> None:
    from scripts.overload import apply_variant

    args = {"models": {"a": {"engine_kwargs": {"max_num_seqs": 16, "dtype": "bfloat16"}, "env": {"X": "1"}},
                       "b": {}},
            "ingress": {"num_cpus": 0.1, "admission": {"mode": "adaptive"}}}
    apply_variant(args, "fixed-slow")
    assert args["models"]["a"]["engine_kwargs"] == {"max_num_seqs": 1, "dtype": "bfloat16"}
    assert args["models"]["a"]["env"] == {"X": "1"}  # the engine's environment as configured
    assert args["models"]["b"]["engine_kwargs"] == {"max_num_seqs": 1}
    assert args["ingress"] == {"num_cpus": 0.1, "max_ongoing_requests": 6, "max_queued_requests": 2,
                               "admission": {"mode": "off"}}
    same = {"models": {"a": {"engine_kwargs": {"max_num_seqs": 16}}}}
    apply_variant(same, "normal")
    assert same["models"]["a"]["engine_kwargs"] == {"max_num_seqs": 16} and "ingress" not in same


def test_the_variants_run_passes_every_other_argument_on() -> None:
    from scripts.overload import _without

    argv = ["--variants", "normal,slow", "--levels", "5", "--out=x.json", "--burst", "64", "--variant", "slow"]
    assert _without(_without(_without(argv, "--variants"), "--out"), "--variant") == ["--levels", "5", "--burst", "64"]


def test_a_burst_lasts_until_its_last_answer_and_counts_each_kind() -> None:
    import asyncio

    from scripts.overload import burst, finish

    class Clients:
        async def turn(self, protocol: str, sid: str, text: str):
            i = int(sid.rsplit("-", 1)[1])
            if i < 2:
                await asyncio.sleep(0.05)
                return "completed", f"t{i}", "ok"
            if i == 2:
                return "other", None, "http 504"
            return "refused", None, "503"

    phase = asyncio.run(burst(Clients(), 6, 60.0))  # type: ignore[arg-type]
    finish(phase, capacity=10.0)
    assert (phase.requests, phase.completed, phase.clean_refusals, phase.other_errors) == (6, 2, 3, 1)
    assert phase.other_error_kinds == {"http 504": 1}
    assert phase.duration_s == round(max(phase.latencies) / 1000, 2) and phase.goodput_rps > 0
