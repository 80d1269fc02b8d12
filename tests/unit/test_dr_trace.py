"""A DR session's trace: the span tree (kinds, stage names, Tandem attributes) and no PII anywhere in it.

The real DR pipeline, turn runner, guardrails and tools run with the real
:class:`serve.model_client.ServeModelClient` over a scripted stand-in for the
model deployment's handle (SSE items as ``LLMServer.chat`` streams them), so the
LLM spans are the ones the app records. Building the chat request imports
``ray.serve.llm`` (and vLLM): seconds, done once before the turns run.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pipelines.annex.dr import DRPipeline
from pipelines.core.runner import LocalToolRunner
from pipelines.domains.support import FIXTURES, build_support_domain, generate_world
from pipelines.events import TurnRequest
from pipelines.guardrails import LocalGuardrails
from pipelines.turn import TurnRunner
from serve.model_client import ServeModelClient
from tests.doubles import InMemorySessionStore, ListEventSink, chunks, j

ALEX = FIXTURES["alex"]
MODEL = "smollm2-135m-instruct"
SECRETS = [ALEX.email, "+1 415-555-0134", "4111 1111 1111 1111", "12 Ocean Drive"]


def _sse(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj)}\n\n"


class _Stream:
    def __init__(self, items: list[list[str]]) -> None:
        self.items = items
        self.cancelled = False

    def __aiter__(self) -> Any:
        return self._gen()

    async def _gen(self) -> Any:
        for item in self.items:
            await asyncio.sleep(0)
            yield item

    def cancel(self) -> None:
        self.cancelled = True


class ScriptedHandle:
    """Stands in for the ``LLMServer`` handle: each ``chat.remote`` streams the next scripted text."""

    def __init__(self) -> None:
        self.script: list[str] = []
        self.requests: list[Any] = []

    def options(self, **_: Any) -> ScriptedHandle:
        return self

    @property
    def chat(self) -> ScriptedHandle:
        return self

    def remote(self, request: Any) -> _Stream:
        self.requests.append(request)
        text = self.script.pop(0)
        items = [[_sse({"choices": [{"index": 0, "delta": {"content": c}}]})] for c in chunks(text)]
        items.append([_sse({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": len(items)}}),
                      "data: [DONE]\n\n"])
        return _Stream(items)


@pytest.fixture(scope="module", autouse=True)
def _request_model_imported() -> None:
    import ray.serve.llm.openai_api_models  # noqa: F401  (the orchestrator's step timeout must not pay for it)


@pytest.fixture()
def exporter(spans: InMemorySpanExporter) -> InMemorySpanExporter:
    return spans


def _session(orch: ScriptedHandle, gen: ScriptedHandle) -> TurnRunner:
    domain = build_support_domain()
    models = ServeModelClient({"orchestrator": (orch, MODEL), "generator": (gen, MODEL)})  # type: ignore[dict-item]
    pipeline = DRPipeline(domain, models, LocalToolRunner(domain, generate_world(7)), LocalGuardrails())
    return TurnRunner(pipeline, InMemorySessionStore(), sink=ListEventSink())


def _turn(runner: TurnRunner, text: str, n: int) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in runner.run("s1", TurnRequest(text=text), trace_id="tr", turn_id=f"t{n}")]

    return asyncio.run(go())


def test_a_dr_session_trace_has_the_stage_tree_and_no_pii(exporter: InMemorySpanExporter) -> None:
    orch, gen = ScriptedHandle(), ScriptedHandle()
    runner = _session(orch, gen)
    orch.script += [j(decision="find_user_id_by_email", args={"email": "[EMAIL_1]"}), j(decision="respond")]
    gen.script += ["Thanks, I found your account for [EMAIL_1]. Your order #W9999999 ships today."]
    _turn(runner, f"Hi, I'm {ALEX.email}, call me at +1 415-555-0134", 1)
    orch.script += [j(decision="respond")]
    gen.script += ["Returns are accepted within 30 days."]
    _turn(runner, "How do returns work? My card is 4111 1111 1111 1111 and I live at 12 Ocean Drive", 2)

    spans = exporter.get_finished_spans()
    dump = json.dumps([{"name": s.name, "attributes": dict(s.attributes)} for s in spans], default=str)
    for secret in SECRETS:
        assert secret not in dump, secret
    assert "[EMAIL_1]" in dump  # the spans read like the event log

    first = [s for s in spans if s.attributes.get("tandem.turn_id") == "t1" and s.name == "tandem.turn"]
    [turn] = first
    tree = [s for s in spans if s.context.trace_id == turn.context.trace_id]
    names = [s.name for s in tree]
    kinds = {s.name: s.attributes.get("openinference.span.kind") for s in tree}
    for name, kind in [("tandem.turn", "CHAIN"), ("tandem.guard.pre", "GUARDRAIL"), ("tandem.orchestrate", "CHAIN"),
                       ("tandem.step", "CHAIN"), ("tandem.llm.orchestrator", "LLM"),
                       ("tandem.guard.mid", "GUARDRAIL"), ("tandem.tool.find_user_id_by_email", "TOOL"),
                       ("tandem.generate", "CHAIN"), ("tandem.llm.generator", "LLM"),
                       ("tandem.guard.post", "GUARDRAIL")]:
        assert kinds.get(name) == kind, (name, names)
    assert names.count("tandem.step") == 2 and names.count("tandem.llm.orchestrator") == 2
    by_id = {s.context.span_id: s for s in tree}

    def parent(s: Any) -> str:
        return by_id[s.parent.span_id].name if s.parent and s.parent.span_id in by_id else ""

    for s in tree:
        if s.name in ("tandem.llm.orchestrator", "tandem.tool.find_user_id_by_email", "tandem.guard.mid"):
            assert parent(s) == "tandem.step", s.name
        if s.name in ("tandem.llm.generator", "tandem.guard.post"):
            assert parent(s) == "tandem.generate", s.name
        if s.name in ("tandem.guard.pre", "tandem.orchestrate", "tandem.generate"):
            assert parent(s) == "tandem.turn", s.name

    steps = [s for s in tree if s.name == "tandem.step"]
    assert [(s.attributes["tandem.step"], s.attributes["tandem.decision"]) for s in steps] == [
        (1, "find_user_id_by_email"), (2, "respond")]
    llm = next(s for s in tree if s.name == "tandem.llm.generator")
    assert llm.attributes["llm.model_name"] == MODEL and llm.attributes["llm.token_count.prompt"] == 40
    tool = next(s for s in tree if s.name == "tandem.tool.find_user_id_by_email")
    assert tool.attributes["input.value"] == '{"email": "[EMAIL_1]"}' and tool.attributes["tandem.tool.ok"] is True
    posts = [s.attributes["tandem.guard.decision"] for s in tree if s.name == "tandem.guard.post"]
    assert posts == ["pass", "block"]  # the unobserved order id is withheld
    assert turn.attributes["input.value"] == "Hi, I'm [EMAIL_1], call me at [PHONE_1]"
    assert turn.attributes["tandem.path"] == "answer" and turn.attributes["tandem.status"] == "ok"
    assert turn.attributes["tandem.rules_version"]
    orchestrate = next(s for s in tree if s.name == "tandem.orchestrate")
    assert orchestrate.attributes["tandem.path"] == "answer" and orchestrate.attributes["tandem.steps"] == 2

    second = next(s for s in spans if s.name == "tandem.turn" and s.attributes.get("tandem.turn_id") == "t2")
    retrieved = [s for s in spans if s.name == "tandem.retrieve" and s.context.trace_id == second.context.trace_id]
    assert retrieved and retrieved[0].attributes["openinference.span.kind"] == "RETRIEVER"
    assert any(k.endswith("document.id") for k in retrieved[0].attributes)
