"""The two registries: pipeline kinds (typed settings, domains, deployments) and domain packs (a toy third one)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import TypeAdapter, ValidationError

from pipelines import domains
from pipelines.core.kernels import LocalRuleKernels
from pipelines.events import TurnRequest
from pipelines.guardrails import LocalGuardrails
from pipelines.registry import KINDS, Parts, PipelineSettings, build_pipeline, kind_record
from pipelines.turn import TurnRunner
from tests.doubles import InMemorySessionStore, ListEventSink, ScriptModels, w1

SETTINGS = TypeAdapter(PipelineSettings)


def test_every_kind_has_settings_of_its_own_and_refuses_the_others_keys():
    for kind in KINDS:
        assert SETTINGS.validate_python({"kind": kind}).kind == kind
    with pytest.raises(ValidationError, match="max_steps"):
        SETTINGS.validate_python({"kind": "prompting", "max_steps": 3})
    with pytest.raises(ValidationError, match="tool_timeout_s"):
        SETTINGS.validate_python({"kind": "monolithic", "tool_timeout_s": 3})
    assert SETTINGS.validate_python({"kind": "sgc_full", "tool_timeout_s": 3}).tool_timeout_s == 3
    with pytest.raises(ValidationError):
        SETTINGS.validate_python({"kind": "nonsense"})


def test_records_declare_domains_and_deployments():
    assert kind_record("tandem").domains is None and kind_record("dr").domains == ("support",)
    assert set(kind_record("tandem").deployments) == {"tools", "guardrails", "rule_kernels"}
    assert kind_record("prompting").deployments == ()
    with pytest.raises(ValueError, match="unknown pipeline kind"):
        kind_record("nope")


@pytest.mark.parametrize("kind", ["prompting", "dr", "monolithic", "tandem"])
def test_builders_make_the_named_pipeline(kind):
    p = build_pipeline(SETTINGS.validate_python({"kind": kind}), Parts(models=ScriptModels(), domain="support"))
    assert p.name == kind


def test_the_config_refuses_a_kind_on_a_domain_it_does_not_serve():
    import yaml

    from serve.config import AppConfig

    args = yaml.safe_load(open("configs/embedded.yaml"))["applications"][0]["args"]
    args["pipeline"] = {"kind": "sgc_full"}
    with pytest.raises(ValidationError, match="coach"):
        AppConfig.model_validate(args)
    args["domain"] = {"name": "coach"}
    assert AppConfig.model_validate(args).pipeline.kind == "sgc_full"
    args["domain"] = {"name": "atlantis"}
    with pytest.raises(ValidationError, match="unknown domain"):
        AppConfig.model_validate(args)


@pytest.fixture
def toy():
    from tests.unit import toy_domain

    domains.register("toy", toy_domain.DomainPack)  # a pack registered in process (no distribution installed)
    yield toy_domain
    domains.unregister("toy")


def _toy_turns(toy, script: list[tuple[str, list[str]]]):
    pack = domains.load_domain("toy")
    kernels = LocalRuleKernels(domains.rule_tables_holder("toy"), labels=pack.labels, tools=pack.registry.names(),
                               branch_of_intent=pack.branch_of_intent)
    assert kernels.holder.version == LocalRuleKernels.of(pack).holder.version
    models, store, sink = ScriptModels(), InMemorySessionStore(), ListEventSink()
    tools = toy.make_tools()
    pipeline = build_pipeline(SETTINGS.validate_python({"kind": "tandem"}),
                              Parts(models=models, domain="toy", tools=tools, guardrails=LocalGuardrails(),
                                    kernels=kernels))
    runner = TurnRunner(pipeline, store, sink=sink, max_history_turns=20)
    out = []
    for text, orch, *gen in script:
        models.push("orchestrator", *orch)
        models.push("generator", *gen)

        async def go(text=text):
            return [e async for e in runner.run("t1", TurnRequest(text=text), trace_id="x")]

        out.append(asyncio.run(go()))
    return out, tools


def _w1(i, s, n="One moment."):
    return w1(i, s, n)


def test_a_third_domain_runs_the_tandem_turn_through_the_registries_alone(toy):
    import json

    turns, tools = _toy_turns(toy, [
        ("hello", [_w1("chat", "hello")]),
        ("What will the sky be like in Oslo?", [_w1("ask", "forecast")], "Snow is expected in Oslo."),
        ("What about tomorrow?", [_w1("ask", "forecast")]),
        ("Alert me about Lima", [_w1("alert", "set"),
                                 json.dumps({"decision": "action", "card_id": "card.set_alert",
                                             "params": {"city": "Lima"}})]),
        ("yes", []),
    ])
    text = ["".join(e.text for e in t if e.type == "reply.delta") for t in turns]
    assert text[0] == "Hello! Ask me about tomorrow's weather."
    assert text[1] == "Snow is expected in Oslo. Keep an umbrella handy."  # + the W3 guidance
    assert text[2] == "Which city?"
    assert [e.card_id for e in turns[3] if e.type == "action_card"] == ["card.set_alert"]
    assert tools.world["alerts"] == {"Lima"} and text[4] == "Done."
    assert all(t[-1].status == "ok" for t in turns)


def test_a_third_domain_is_accepted_by_the_config_and_hosted_without_serve_changes(toy):
    import yaml

    from serve.config import AppConfig
    from serve.deployments.tools import ToolsServer

    args = yaml.safe_load(open("configs/embedded.yaml"))["applications"][0]["args"]
    args["domain"] = {"name": "toy"}
    assert AppConfig.model_validate(args).domain.name == "toy"
    server = ToolsServer({"name": "toy", "seed": 0})
    assert server.store is None and server.pack.name == "toy"
