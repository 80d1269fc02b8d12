"""Replay of a session's W3 decisions from its stored turn metas (used by ``tandem replay``).

Each stored turn (its ``ctx.meta``) holds the AnswerMeta in ``meta["w3"]`` and
the decision's inputs in ``meta["tandem"]["w3_inputs"]`` (or ``meta["sgc"]["w3_inputs"]``) (c1 with exclusions,
state-derived candidates, turn index). :func:`replay_w3` re-runs
:func:`~pipelines.core.kernels.decide_w3` turn by turn, with the same
prior metas (the stored ones, last K) and the session seed, and compares the
canonical JSON of the recomputed meta with the stored one byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipelines.core.kernels import decide_w3
from pipelines.domains.coach import BRANCH_OF_INTENT
from pipelines.sgc.canonical import canonical_json, session_seed
from pipelines.sgc.tables import RuleTables
from pipelines.sgc.w3 import HISTORY_WINDOW, AnswerMeta

__all__ = ["ReplayedTurn", "replay_w3", "all_identical"]


class ReplayedTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    position: int
    turn_index: int | None
    identical: bool
    stored: str | None = None
    replayed: str | None = None
    reason: str = ""


def _meta_of(turn: Any) -> Mapping[str, Any]:
    """A stored turn's meta: a TurnRecord, or its ``meta`` dict."""
    meta = getattr(turn, "meta", turn)
    return meta if isinstance(meta, Mapping) else {}


def replay_w3(
    stored_turn_metas: Sequence[Any],
    session_seed_value: int | None = None,
    *,
    tables: RuleTables,
    session_id: str = "",
    branch_of_intent: Mapping[str, str] = BRANCH_OF_INTENT,
    window: int = HISTORY_WINDOW,
) -> list[ReplayedTurn]:
    """Re-run every stored W3 decision; one :class:`ReplayedTurn` per turn that has one.

    ``stored_turn_metas`` are the session's turns, oldest first (``TurnRecord``
    objects or their ``meta`` dicts). The seed is ``session_seed_value`` when
    given, else derived from ``session_id``.
    """
    seed = session_seed(session_id) if session_seed_value is None else session_seed_value
    prior: list[dict[str, Any]] = []
    out: list[ReplayedTurn] = []
    for pos, turn in enumerate(stored_turn_metas):
        meta = _meta_of(turn)
        stored = meta.get("w3")
        if not isinstance(stored, Mapping):
            continue
        inputs = (meta.get("tandem") or meta.get("sgc") or {}).get("w3_inputs")
        stored_json = canonical_json(AnswerMeta.model_validate(stored))
        if not isinstance(inputs, Mapping):
            out.append(ReplayedTurn(position=pos, turn_index=stored.get("turn_index"), identical=False,
                                    stored=stored_json, reason="w3_inputs missing"))
        else:
            res = decide_w3(tables, branch_of_intent, session_id, prior[-window:], inputs["c1"],
                            inputs["candidates"], int(inputs["turn_index"]), seed=seed, window=window)
            replayed = canonical_json(res.meta)
            same = replayed == stored_json
            reason = "" if same else (
                f"rules {res.meta.table_version!r} != stored {stored.get('table_version')!r}"
                if res.meta.table_version != stored.get("table_version") else "decision differs")
            out.append(ReplayedTurn(position=pos, turn_index=int(inputs["turn_index"]), identical=same,
                                    stored=stored_json, replayed=replayed, reason=reason))
        prior.append(dict(stored))
    return out


def all_identical(results: Sequence[ReplayedTurn]) -> bool:
    return bool(results) and all(r.identical for r in results)
