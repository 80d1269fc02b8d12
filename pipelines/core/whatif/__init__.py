"""What-if: re-decide logged sessions under a candidate change and report which typed decisions change.

::

    log         LoggedTurn / LoggedSession: a turn's input and its events (decisions, observations,
                model calls), grouped from the event log
    decisions   a turn's typed decisions read from its events (guard, intent, Φ, offer, action, card,
                clarify, escalation, path, paragraphs, guidance, gate) and how two readings differ
    playback    the ports a re-decided turn runs on: logged model outputs by fingerprint, logged tool
                observations and prechecks, the candidate's guard
    run         Setup (one side), rerun_session, what_if: baseline and candidate over every session
    report      WhatIfReport (``whatif.json``), the rule or row responsible, the CI gate (``--fail-on``)

Pure: no Ray, no engine (a live model client for a swapped role is passed in). ``tandem whatif``
(``serve/whatif.py``) reads the log, builds both sides from a Serve config and a candidate, and writes
the report.
"""

from .decisions import KINDS, changed_kinds, decisions_of
from .log import LoggedSession, LoggedTurn, group_events, sessions_of_events, turn_pipeline
from .playback import PlaybackGuardrails, PlaybackModels, PlaybackTools, SessionPlay
from .report import (
           Change,
           Gate,
           KindCount,
           WhatIfReport,
           parse_gates,
           phi_row,
           responsible,
           tripped,
)
from .run import Setup, TurnRun, replayable, rerun_session, what_if

__all__ = ["KINDS", "changed_kinds", "decisions_of", "LoggedSession", "LoggedTurn", "group_events",
           "sessions_of_events", "turn_pipeline", "PlaybackGuardrails", "PlaybackModels", "PlaybackTools",
           "SessionPlay", "Change", "Gate", "KindCount", "WhatIfReport", "parse_gates", "phi_row", "responsible",
           "tripped", "Setup", "TurnRun", "replayable", "rerun_session", "what_if"]
