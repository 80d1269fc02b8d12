"""A third, tiny domain pack (weather alerts), written only in tests: it plugs into the tandem turn,
the config and the serve builder through the registries alone (no pipelines/annex/dr, pipelines/sgc* or
serve/ change)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipelines.core.ports import ToolCallResult, ToolSession
from pipelines.domain import DomainTexts, PackBase, SampleWrite, TurnFacts
from pipelines.tools import ToolContext, ToolRegistry, ToolSpec

CITIES = ("Oslo", "Lima", "Cairo")


class CityArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str


class Forecast(BaseModel):
    city: str
    sky: str


class Alert(BaseModel):
    city: str
    alert: bool


def _forecast(args: CityArgs, ctx: ToolContext, world: dict) -> Forecast:
    return Forecast(city=args.city, sky=world["sky"].get(args.city, "unknown"))


def _alert(args: CityArgs, ctx: ToolContext, world: dict) -> Alert:
    world["alerts"].add(args.city)
    return Alert(city=args.city, alert=True)


def registry() -> ToolRegistry[Any]:
    reg: ToolRegistry[Any] = ToolRegistry()
    reg.register(ToolSpec("get_forecast", "Tomorrow's sky in a city.", CityArgs, Forecast, _forecast))
    reg.register(ToolSpec("set_alert", "Alert the user about a city's weather.", CityArgs, Alert, _alert, "write"))
    return reg


class _Card(BaseModel):
    id: str = "card.set_alert"
    title: str = "Set a weather alert"
    tool: str = "set_alert"
    kind: str = "write"
    required_params: tuple[str, ...] = ("city",)


LABELS = {"ask": ("forecast",), "alert": ("set",), "chat": ("hello",)}
TABLES = {
    "version": "toy-1",
    "phi": {"version": "toy-phi-1", "rows": [
        {"intent": "ask", "sub_intent": "forecast", "requires_state": ["city"],
         "tools": [{"tool": "get_forecast", "args_from": {"city": "city"}}], "then": "respond"},
        {"intent": "ask", "sub_intent": "forecast", "requires_state": [], "tools": [], "then": "clarify:city"},
        {"intent": "alert", "sub_intent": "set", "requires_state": [], "tools": [], "then": "propose"},
        {"intent": "chat", "sub_intent": "hello", "requires_state": [], "tools": [], "then": "respond"},
    ]},
    "psi": {"version": "toy-psi-1", "rules": [{"id": "clean", "scope": "turn", "allow": ["guidance"]}]},
    "tiers": {"version": "toy-tiers-1", "tiers": {"unknown_city": "hard"}},
    "w3": {"weather": {"version": "toy-w3-1", "branch": "weather", "pool": [{"id": "tip:umbrella", "p": 1.0, "w": 1.0}]}},
}


class DomainPack(PackBase):
    name = "toy"
    labels: Mapping[str, Sequence[str]] = LABELS
    cards = (_Card(),)
    texts = DomainTexts(safe_ack="One moment.", fallback="Sorry, not now.", handoff="Passing you on.",
                        clarify={"city": "Which city?", "details": "Could you say more?"},
                        templates={"chat/hello": "Hello! Ask me about tomorrow's weather.",
                                   "action_card": "I can {phrase}. Reply yes to confirm.",
                                   "card:card.set_alert": "set an alert for {city}", "executed_account": "Done."},
                        guidance={"tip:umbrella": "Keep an umbrella handy."},
                        refusals={"not_confirmed": "I need your yes first"})
    orchestrator_policy = "You run a weather assistant."
    generator_persona = "You are a weather assistant."
    conflict_kinds = ("unknown_city",)
    branch_of_intent = {"ask": "weather"}
    entity_kind = None
    transfer_tool = None
    binds_user = False
    transfer_reasons: Mapping[str, str] = {}

    sample_texts = ("Will it snow in Oslo tomorrow?",)

    def __init__(self) -> None:
        self._registry = registry()

    def sample_writes(self, world): return [SampleWrite(tool="set_alert", args={"city": "Oslo"}, user_id="u1",
                                                         user_texts=("Alert me about Oslo.",))]

    def arg_kinds(self, tool): return {"city": "city"} if tool in ("get_forecast", "set_alert") else {}
    def optional_empty(self, tool): return frozenset()
    def clarify_key(self, kind): return "city" if kind == "city" else "details"
    def rule_tables(self): return TABLES
    def read_tools(self, facts): return ["get_forecast"]
    def cards_for(self, intent, sub_intent, facts): return list(self.cards) if intent == "alert" else []
    def change_intents(self): return {"alert"}
    def intent_prior(self, text): return None
    def sub_intent_prior(self, text, intent): return None
    def extract_candidates(self, text):
        return {"city": [c for c in CITIES if re.search(rf"\b{c}\b", text, re.I)]}
    def fixed_candidates(self): return {}
    def slot_schema(self): return None
    def needs_slots(self, facts): return False
    def absorb_slots(self, slots, facts): return {}
    async def prepare(self, facts, tools): return None
    def constraints(self, facts): return []
    def restore(self, facts): return None
    def session_fields(self, facts): return {}
    def summarize(self, tool, result): return str(result)
    def user_state(self, tool, result): return {f"{tool}.{k}": v for k, v in (result or {}).items()}
    def observe(self, tool, result, ok, facts): return None
    def policy_lines(self, tool): return ()
    def entity_names(self, facts): return list(CITIES)
    def snapshot_values(self, facts: TurnFacts) -> dict[str, Any]:
        found = self.extract_candidates(facts.user_text)["city"]
        return {"city": found[-1]} if found else {}
    def conflicts(self, facts): return []
    def w3_candidates(self, facts): return []
    def answer_lines(self, facts, contract):
        state = contract.user_state
        if "get_forecast.city" in state:
            return [f"Tomorrow in {state['get_forecast.city']}: {state['get_forecast.sky']}."]
        return []
    def lead_lines(self, facts, contract): return []
    persistent = False
    def new_world(self, seed, dataset=None): return {"sky": {"Oslo": "snow", "Lima": "sun"}, "alerts": set()}
    def world_from_entities(self, rows): raise NotImplementedError
    def tool_runner(self, world, ledger): return ToyTools(world)
    def reply_judges(self, facts, contract): return []
    def refusal_line(self, refusal, title, contract): return f"I can't {title.lower()}."
    def executed_lines(self, action, contract): return [self.texts.templates["executed_account"]]


class ToyTools:
    def __init__(self, world: dict) -> None:
        self.world = world
        self.reg = registry()

    async def call(self, name: str, args: dict, session: ToolSession) -> ToolCallResult:
        obs = self.reg.call(name, args, ToolContext(session_id=session.session_id, confirmed=session.confirmed), self.world)
        return ToolCallResult(observation=obs)

    async def precheck(self, name: str, args: dict, session: ToolSession) -> str | None:
        return None


def make_tools(seed: int = 0) -> ToyTools:
    return DomainPack().tool_runner(DomainPack().new_world(seed), None)
