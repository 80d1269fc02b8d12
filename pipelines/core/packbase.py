"""Defaults for a domain pack: a pack subclasses :class:`PackBase`, declares its data, and overrides the hooks
its domain needs (``tandem domain new`` writes one).

What a subclass must give: ``name``, ``labels``, ``cards``, ``texts``, ``orchestrator_policy``,
``generator_persona``, ``registry`` (its tools), ``tables_dir`` (its Φ / Ψ / tiers / W3 YAML files) and
``arg_kind_table`` (tool → argument → grounding kind). Everything else has a default that is safe for a
domain without it: no slot call, no live state, no W3 candidates of its own, a card offered only for the
intents ``card_intents`` lists, every read tool open, the request's ``user_id`` as the session's user.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from pipelines.errors import ConfigError
from pipelines.gate import SentenceJudge
from pipelines.tools import ToolRegistry

from .contract import EligibleAction, ForwardContract
from .domain import CardSpec, DomainTexts, TurnFacts
from .ports import ToolRunner

__all__ = ["PackBase", "read_tables", "read_state"]

TABLES = ("phi", "psi", "tiers", "w3")


def read_tables(directory: Path, name: str) -> dict[str, Any]:
    """A rule bundle from ``phi.yaml``, ``psi.yaml``, ``tiers.yaml`` and ``w3.yaml`` (each versioned) in
    ``directory``: ``{version, phi, psi, tiers, w3}``, the bundle version joining the tables' own."""
    data: dict[str, Any] = {}
    for key in TABLES:
        path = directory / f"{key}.yaml"
        try:
            data[key] = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read rule table {path}: {exc}", details={"path": str(path)}) from exc
    parts = [data["phi"]["version"], data["psi"]["version"], data["tiers"]["version"]]
    parts += [data["w3"][b]["version"] for b in sorted(data["w3"])]
    data["version"] = f"{name}:" + "+".join(parts)
    return data


M = TypeVar("M", bound=BaseModel)


def read_state(model: type[M], state: Mapping[str, Any] | None) -> M:
    """A session's stored pack state as this version's ``model``. Keys a newer version of the pack added are
    dropped: during a rolling upgrade old and new replicas serve turns of the same session, and a state an
    upgraded replica wrote must not fail the next turn on one not upgraded yet (it is read without them and
    written back without them). A known key with a bad value still fails."""
    if not state:
        return model()
    return model.model_validate({k: v for k, v in state.items() if k in model.model_fields})


class PackBase:
    """The defaults of the :class:`~pipelines.core.domain.Domain` protocol (see module docstring)."""

    name: str = ""
    labels: Mapping[str, Sequence[str]] = {}
    cards: Sequence[CardSpec] = ()
    texts: DomainTexts
    orchestrator_policy: str = ""
    generator_persona: str = ""
    conflict_kinds: Sequence[str] = ()
    branch_of_intent: Mapping[str, str] = {}
    entity_kind: str | None = None
    transfer_tool: str | None = None
    transfer_reasons: Mapping[str, str] = {}
    binds_user: bool = False
    tables_dir: Path
    arg_kind_table: Mapping[str, Mapping[str, str]] = {}
    card_intents: Mapping[str, Sequence[str]] = {}  # card id → the intents that may offer it
    # true when intent_prior reads change requests: a card is then offered only once a user text asks for one
    change_cues: bool = False
    # clarify kinds of Φ (``then: clarify:<kind>``) after which the interrupted question goes on (an identity check)
    carried_clarifies: frozenset[str] = frozenset()
    _registry: ToolRegistry[Any]

    @property
    def registry(self) -> ToolRegistry[Any]:
        return self._registry

    # -- catalogue and gating ----------------------------------------------------------------
    def arg_kinds(self, tool: str) -> Mapping[str, str]:
        return self.arg_kind_table.get(tool, {})

    def optional_empty(self, tool: str) -> frozenset[str]:
        return frozenset()

    def clarify_key(self, kind: str) -> str | None:
        return kind if kind in self.texts.clarify else "details"

    def rule_tables(self) -> dict[str, Any]:
        return read_tables(self.tables_dir, self.name)

    def read_tools(self, facts: TurnFacts) -> list[str]:
        return [n for n in self.registry.names() if self.registry.get(n).kind == "read" and n != self.transfer_tool]

    def cards_for(self, intent: str, sub_intent: str, facts: TurnFacts) -> list[CardSpec]:
        return [c for c in self.cards if c.kind == "write" and intent in self.card_intents.get(c.id, ())]

    def change_intents(self) -> set[str]:
        return {i for c in self.cards if c.kind == "write" for i in self.card_intents.get(c.id, ())}

    # -- perception and grounding ------------------------------------------------------------
    def intent_prior(self, text: str) -> list[str] | None:
        return None

    def sub_intent_prior(self, text: str, intent: str) -> list[str] | None:
        return None

    def extract_candidates(self, text: str) -> dict[str, list[str]]:
        return {}

    def fixed_candidates(self) -> dict[str, list[str]]:
        return {}

    def slot_schema(self) -> dict[str, Any] | None:
        return None

    def absorb_slots(self, slots: Mapping[str, Any], facts: TurnFacts) -> dict[str, list[str]]:
        return {}

    def needs_slots(self, facts: TurnFacts) -> bool:
        return False

    async def prepare(self, facts: TurnFacts, tools: ToolRunner) -> None:
        return None

    def restore(self, facts: TurnFacts) -> None:
        return None

    def constraints(self, facts: TurnFacts) -> list[str]:
        return []

    def session_fields(self, facts: TurnFacts) -> dict[str, Any]:
        return {"authenticated_user_id": facts.user_id, "observed_ids": []}

    # -- observations ------------------------------------------------------------------------
    def summarize(self, tool: str, result: Mapping[str, Any] | None, limit: int = 300) -> str:
        text = json.dumps(result or {}, separators=(",", ":"), ensure_ascii=False, default=str)
        return text if len(text) <= limit else text[:limit] + "..."

    def user_state(self, tool: str, result: Mapping[str, Any] | None) -> dict[str, Any]:
        return {f"{tool}.{k}": v for k, v in (result or {}).items() if isinstance(v, str | int | float | bool)}

    def observe(self, tool: str, result: Mapping[str, Any] | None, ok: bool, facts: TurnFacts) -> None:
        return None

    # -- texts and the reply -----------------------------------------------------------------
    def answer_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        return []

    def lead_lines(self, facts: TurnFacts, contract: ForwardContract) -> list[str]:
        return []

    def reply_judges(self, facts: TurnFacts, contract: ForwardContract) -> list[SentenceJudge]:
        return []

    def refusal_line(self, refusal: Mapping[str, Any], title: str, contract: ForwardContract) -> str:
        why = self.texts.refusals.get(str(refusal.get("reason")), "") or "it is not allowed here"
        return f"I can't {title.lower()}: {why}."

    def executed_lines(self, action: EligibleAction, contract: ForwardContract) -> list[str]:
        return [self.texts.templates.get("executed") or "Done."]

    def policy_lines(self, tool: str | None) -> Sequence[str]:
        return ()

    def entity_names(self, facts: TurnFacts) -> list[str]:
        return []

    # -- serving -----------------------------------------------------------------------------
    persistent: bool = False

    def new_world(self, seed: int, dataset: str | None = None) -> Any:
        raise NotImplementedError(f"the {self.name} pack builds no world")

    def world_from_entities(self, rows: Iterable[tuple[str, str, str]]) -> Any:
        raise NotImplementedError(f"the {self.name} pack stores no world")

    def tool_runner(self, world: Any, ledger: Any) -> ToolRunner:
        raise NotImplementedError(f"the {self.name} pack hosts no tools")

    def task_replay(self, data_dir: Any = None) -> Any:
        """The pack's :class:`~pipelines.core.taskreplay.TaskReplayHook` (``None``: it has no benchmark tasks)."""
        return None

    # -- kernels -----------------------------------------------------------------------------
    def snapshot_values(self, facts: TurnFacts) -> dict[str, Any]:
        return {"user_id": facts.user_id} if facts.user_id else {}

    def conflicts(self, facts: TurnFacts) -> list[dict[str, Any]]:
        return []

    def w3_candidates(self, facts: TurnFacts) -> list[dict[str, Any]]:
        return []
