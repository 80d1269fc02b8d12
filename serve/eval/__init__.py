"""``tandem eval``: the seeds' tables, reproducible on one box.

Runs chosen pipeline kinds over chosen suites through the public API (HTTP/SSE) and
judges every turn from what the client saw, the turn's stored meta and its structured
events — never from inside a pipeline.

::

    cli        arguments, suites built, summary written            (serve/eval/cli.py)
    run        one app per kind and domain, or --http               (serve/eval/run.py)
    runner     Ray/Serve lifecycle, one SSE turn, event log, metas  (serve/eval/runner.py)
    evaluate   one session played; one judged row per turn          (serve/eval/evaluate.py)
    suites     tau2 openings and tasks, a pack's own suites, which pack runs which  (serve/eval/suites.py)
    scoring    first decision, terminal, correct (as bench_dr)      (serve/eval/scoring.py)
    measures   invented arguments, unrequested cards, unselected    (serve/eval/measures.py)
    tau2_db    tau2's database check, through the pack's task replay (serve/eval/tau2_db.py)
    report     summary.json, markdown, first-token CDF, ratios, goals

What differs per pack (its own suites and their judges, the scripted user of whole tau2 tasks, the
status of a record an expectation names, load scripts) comes from the pack's ``evaluation()`` hook
(:mod:`pipelines.core.evaluation`); nothing here names a pack.
"""

from __future__ import annotations

from .cli import main

__all__ = ["main"]
