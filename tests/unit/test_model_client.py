"""serve.model_client, pure parts: SSE parsing, request mapping, foreign-error table.

``to_chat_request`` imports ``ray.serve.llm.openai_api_models`` (which pulls in vLLM,
a few seconds); it is the only unit test module that does.
"""

from __future__ import annotations

import inspect
import json
from types import SimpleNamespace

import pytest

from pipelines.errors import InvalidModelOutput, Overloaded, TandemError, UpstreamError
from pipelines.protocols import ChatMessage, ModelCall, StructuredOutput
from serve.model_client import FOREIGN_ERRORS, parse_sse_item, to_chat_request


def _sse(obj) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def _chunk(content=None, *, role=None, finish=None) -> dict:
    delta = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}


USAGE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
         "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}


# -- parse_sse_item ------------------------------------------------------------------


def test_a_realistic_stream() -> None:
    items = [
        [_sse(_chunk("", role="assistant"))],
        [_sse(_chunk("Hel")), _sse(_chunk("lo"))],
        [_sse(_chunk(", world"))],
        [_sse(_chunk(None, finish="stop")), _sse(USAGE), "data: [DONE]\n\n"],
    ]
    out = [t for item in items for t in parse_sse_item(item)]
    assert out == ["Hel", "lo", ", world"]


def test_a_single_string_item_and_several_events_in_one_string() -> None:
    assert parse_sse_item(_sse(_chunk("a"))) == ["a"]
    assert parse_sse_item(_sse(_chunk("a")) + _sse(_chunk("b"))) == ["a", "b"]


def test_non_data_lines_and_blank_payloads_are_ignored() -> None:
    item = [": keep-alive\n\n", "event: message\n" + _sse(_chunk("x")), "data:\n\n", "data: [DONE]\n\n"]
    assert parse_sse_item(item) == ["x"]
    assert parse_sse_item([]) == []


def test_multiple_choices_and_null_content() -> None:
    chunk = _chunk("a")
    chunk["choices"].append({"index": 1, "delta": {"content": "b"}, "finish_reason": None})
    chunk["choices"].append({"index": 2, "delta": {"content": None}, "finish_reason": None})
    chunk["choices"].append({"index": 3, "delta": None, "finish_reason": "stop"})
    assert parse_sse_item([_sse(chunk)]) == ["a", "b"]


def test_error_response_object() -> None:
    err = SimpleNamespace(error=SimpleNamespace(message="prompt too long", code=400, type="BadRequestError"))
    with pytest.raises(InvalidModelOutput) as ei:
        parse_sse_item(err)
    assert "prompt too long" in ei.value.message
    assert ei.value.details == {"upstream_code": 400}
    with pytest.raises(InvalidModelOutput):
        parse_sse_item([_sse(_chunk("a")), err])


def test_the_real_error_response_class() -> None:
    from ray.serve.llm.openai_api_models import ErrorResponse

    resp = ErrorResponse(error={"message": "bad grammar", "type": "BadRequestError", "code": 400})
    with pytest.raises(InvalidModelOutput) as ei:
        parse_sse_item(resp)
    assert "bad grammar" in ei.value.message and ei.value.details["upstream_code"] == 400


@pytest.mark.parametrize("payload,text", [
    ({"error": {"message": "engine dead", "code": 500}}, "engine dead"),
    ({"error": "plain string"}, "plain string"),
])
def test_data_error_chunk(payload, text) -> None:
    with pytest.raises(InvalidModelOutput) as ei:
        parse_sse_item([_sse(_chunk("a")), _sse(payload)])
    assert text in ei.value.message


@pytest.mark.parametrize("item", [42, None, b"data: {}", {"choices": []}])
def test_unexpected_items(item) -> None:
    with pytest.raises(InvalidModelOutput, match="unexpected item"):
        parse_sse_item(item)


def test_unparseable_chunk() -> None:
    with pytest.raises(InvalidModelOutput, match="unparseable") as ei:
        parse_sse_item(["data: {not json\n\n"])
    assert isinstance(ei.value.__cause__, ValueError)


# -- to_chat_request ------------------------------------------------------------------------

MESSAGES = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="hi")]


def test_to_chat_request_basics() -> None:
    req = to_chat_request("smollm2", ModelCall(messages=MESSAGES, max_tokens=32, temperature=0.5, top_p=0.9))
    assert req.model == "smollm2"
    assert req.stream is True
    assert req.max_tokens == 32 and req.temperature == 0.5 and req.top_p == 0.9
    assert [(m["role"], m["content"]) for m in req.messages] == [("system", "Be brief."), ("user", "hi")]
    assert req.seed is None and not req.stop
    assert req.structured_outputs is None


def test_to_chat_request_seed_and_stop() -> None:
    req = to_chat_request("m", ModelCall(messages=MESSAGES, seed=7, stop=["</PLAN>", "\n\n"]))
    assert req.seed == 7 and list(req.stop) == ["</PLAN>", "\n\n"]
    assert to_chat_request("m", ModelCall(messages=MESSAGES, seed=0)).seed == 0


@pytest.mark.parametrize("kind,spec,field", [
    ("regex", r"<INTENT>[a-z_]+</INTENT>", "regex"),
    ("choice", ["yes", "no"], "choice"),
    ("grammar", 'root ::= "a" | "b"', "grammar"),
    ("json", {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}, "json"),
])
def test_to_chat_request_structured_outputs(kind, spec, field) -> None:
    call = ModelCall(messages=MESSAGES, structured_output=StructuredOutput(kind=kind, spec=spec))
    so = to_chat_request("m", call).structured_outputs
    assert so is not None and getattr(so, field) == spec
    others = {"regex", "choice", "grammar", "json"} - {field}
    assert all(getattr(so, o) is None for o in others)


# -- FOREIGN_ERRORS -------------------------------------------------------------------------


def test_foreign_errors_map_to_upstream_or_overloaded() -> None:
    assert FOREIGN_ERRORS
    for foreign, ours in FOREIGN_ERRORS.items():
        assert inspect.isclass(foreign) and issubclass(foreign, BaseException)
        assert not issubclass(foreign, TandemError)
        assert issubclass(ours, UpstreamError | Overloaded), (foreign, ours)


def test_foreign_errors_cover_ray_serve_unavailability() -> None:
    from ray.exceptions import ActorDiedError, RayActorError
    from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

    assert FOREIGN_ERRORS[BackPressureError] is Overloaded
    for exc in (DeploymentUnavailableError, ActorDiedError, RayActorError):
        assert issubclass(FOREIGN_ERRORS[exc], UpstreamError)


def test_the_most_specific_foreign_entry_wins() -> None:
    # stream() takes the first matching entry in order: a subclass must come before its base.
    keys = list(FOREIGN_ERRORS)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            assert not issubclass(b, a) or b is a, f"{b.__name__} is shadowed by its base {a.__name__}"


# -- usage and the turn's cost -------------------------------------------------------

# vLLM 0.32's last chunk with include_usage, enable_prompt_tokens_details and enable_per_request_metrics (a real one)
FINAL = {"id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1, "model": "smol", "choices": [],
         "usage": {"prompt_tokens": 322, "total_tokens": 334, "completion_tokens": 12,
                   "prompt_tokens_details": {"cached_tokens": 256, "created_cache_tokens": 0}},
         "metrics": {"time_to_first_token_ms": 1570.6, "generation_time_ms": 577.2, "queue_time_ms": 0.03,
                     "mean_itl_ms": 52.5, "tokens_per_second": 5.6}}


def test_read_sse_item_returns_the_last_usage_with_its_metrics() -> None:
    from serve.model_client import read_sse_item

    running = _chunk("a")
    running["usage"] = {"prompt_tokens": 322, "completion_tokens": 1, "total_tokens": 323}
    texts, usage = read_sse_item([_sse(running)])
    assert texts == ["a"] and usage == {"prompt_tokens": 322, "completion_tokens": 1, "total_tokens": 323}
    texts, usage = read_sse_item([_sse(running), _sse(FINAL), "data: [DONE]\n\n"])
    assert texts == ["a"] and usage is not None
    assert usage["completion_tokens"] == 12 and usage["metrics"]["generation_time_ms"] == 577.2
    assert read_sse_item([_sse(_chunk("x"))]) == (["x"], None)


def test_call_cost_from_the_final_usage() -> None:
    from serve.model_client import call_cost, read_sse_item

    usage = read_sse_item([_sse(FINAL)])[1]
    c = call_cost("orchestrator", "w1.intent", usage, wall_ms=2300.0, final=True)
    assert (c.role, c.purpose, c.prompt_tokens, c.cached_tokens, c.decode_tokens) == (
        "orchestrator", "w1.intent", 322, 256, 12)
    assert c.engine_ms == round(1570.6 + 577.2, 3) and c.queue_ms == 0.03 and c.wall_ms == 2300.0 and c.reported


def test_call_cost_of_a_call_stopped_early_keeps_the_running_counts() -> None:
    from serve.model_client import call_cost

    c = call_cost("generator", "generator.reply", {"prompt_tokens": 90, "completion_tokens": 7}, wall_ms=400.0,
                  final=False)
    assert (c.prompt_tokens, c.cached_tokens, c.decode_tokens, c.engine_ms, c.reported) == (90, 0, 7, None, False)
    assert c.spent_ms == 400.0
    none = call_cost("generator", "generator.reply", None, wall_ms=5.0, final=True)  # an engine without usage
    assert (none.prompt_tokens, none.decode_tokens, none.reported) == (0, 0, False)


def test_a_final_usage_without_details_or_metrics() -> None:
    from serve.model_client import call_cost

    c = call_cost("generator", "g", {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                                     "prompt_tokens_details": None}, wall_ms=10.0, final=True)
    assert (c.cached_tokens, c.engine_ms, c.queue_ms, c.reported) == (0, None, None, True)


def test_every_request_asks_for_running_and_final_usage() -> None:
    req = to_chat_request("m", ModelCall(messages=[ChatMessage(role="user", content="hi")], purpose="w2.slots"))
    assert req.stream_options.include_usage and req.stream_options.continuous_usage_stats
    assert "purpose" not in req.model_dump(exclude_unset=True)  # never sent to the engine


def _client(items):
    from serve.model_client import ServeModelClient
    from serve.testing import FakeHandle

    handle = FakeHandle(lambda method, args, kwargs: items)
    return ServeModelClient({"orchestrator": (handle, "m"), "generator": (handle, "m")}), handle  # type: ignore[dict-item]


def test_a_streamed_call_reaches_the_turns_meter() -> None:
    import asyncio

    from pipelines.cost import TurnCost, metering
    from serve.testing import llm_chunks

    client, _ = _client(llm_chunks("Hel", "lo", prompt_tokens=40, cached_tokens=32, engine_ms=25.0))
    cost = TurnCost()

    async def run() -> list[str]:
        with metering(cost):
            call = ModelCall(messages=[ChatMessage(role="user", content="hi")], purpose="w1.intent")
            return [t async for t in client.stream("orchestrator", call)]

    assert asyncio.run(run()) == ["Hel", "lo"]
    [c] = cost.calls
    assert (c.role, c.purpose, c.prompt_tokens, c.cached_tokens, c.decode_tokens, c.engine_ms, c.reported) == (
        "orchestrator", "w1.intent", 40, 32, 2, 25.0, True)


def test_a_call_the_turn_stops_reading_is_recorded_with_the_engines_running_counts() -> None:
    import asyncio

    from pipelines.cost import TurnCost, metering
    from serve.testing import llm_chunks

    client, handle = _client(llm_chunks("One.", " Two.", " Three.", prompt_tokens=90, engine_ms=50.0))
    cost = TurnCost()

    async def run() -> str:
        with metering(cost):
            stream = client.stream("generator", ModelCall(messages=[ChatMessage(role="user", content="hi")]))
            first = await stream.__anext__()
            await stream.aclose()  # type: ignore[attr-defined]
            return first

    assert asyncio.run(run()) == "One."
    [c] = cost.calls
    assert (c.purpose, c.prompt_tokens, c.decode_tokens, c.cached_tokens, c.engine_ms, c.reported) == (
        "generator.reply", 90, 1, 0, None, False)
