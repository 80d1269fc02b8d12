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
