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
