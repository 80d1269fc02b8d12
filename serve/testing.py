"""The official fakes for unit-testing ``serve/`` without Ray (as httpx ships a mock transport).

* :class:`FakeHandle` — a ``DeploymentHandle`` whose calls go to a Python function:
  ``handle.options(stream=True).chat.remote(req)`` / ``await handle.pre.remote(...)``
  call ``handler(method, args, kwargs)``. The handler returns a value, an
  iterable (a streamed response), or raises — a :class:`~pipelines.errors.TandemError`
  as the remote replica would (wrapped like Ray wraps it: :class:`RemoteError`),
  or a foreign Ray error as the handle itself would.
* :func:`llm_chunks` — the SSE items an ``LLMServer`` streams for some text.
* :class:`FakeGrpcContext` — the ``grpc_context`` Ray Serve's gRPC proxy passes
  (metadata in; code, details and trailing metadata out).
* :class:`IngressHarness` — a real :class:`~serve.ingress.TandemIngress` on fake
  handles, its real FastAPI app (middleware, routes, OpenAI routes) reachable through
  ``httpx.ASGITransport``, and its gRPC methods callable with a fake context.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import Callable, Iterable, Iterator
from types import SimpleNamespace
from typing import Any

__all__ = ["FakeHandle", "RemoteError", "llm_chunks", "FakeGrpcContext", "IngressHarness", "Call"]

Handler = Callable[[str, tuple[Any, ...], dict[str, Any]], Any]


class RemoteError(Exception):
    """How Ray hands back an exception a replica raised: wrapped, the original in ``.cause``."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"remote replica raised {type(cause).__name__}")
        self.cause = cause


class Call:
    """One pending call: awaitable (unary), async-iterable (streaming), cancellable."""

    def __init__(self, handler: Handler, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._run = lambda: handler(method, args, kwargs)
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __await__(self) -> Any:
        return self._result().__await__()

    async def _result(self) -> Any:
        await asyncio.sleep(0)
        out = self._run()
        if inspect.isawaitable(out):
            out = await out
        return out

    def __aiter__(self) -> Any:
        return self._stream()

    async def _stream(self) -> Any:
        out = self._run()
        if inspect.isawaitable(out):
            out = await out
        if hasattr(out, "__aiter__"):
            async for item in out:
                yield item
            return
        for item in out:
            if isinstance(item, BaseException):
                raise item
            await asyncio.sleep(0)
            yield item


class _Method:
    def __init__(self, handle: FakeHandle, name: str) -> None:
        self._handle = handle
        self._name = name

    def remote(self, *args: Any, **kwargs: Any) -> Call:
        self._handle.calls.append((self._name, args, kwargs))
        return Call(self._handle.handler, self._name, args, kwargs)


class FakeHandle:
    """A deployment handle backed by ``handler(method, args, kwargs)`` (see module docstring)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def options(self, **_: Any) -> FakeHandle:
        return self

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Method(self, name)


def llm_chunks(*texts: str, prompt_tokens: int | None = None, cached_tokens: int = 0,
               engine_ms: float | None = None) -> list[list[str]]:
    """The streamed items of an ``LLMServer.chat`` call answering ``texts`` (one delta each).

    With ``prompt_tokens``, as vLLM streams them with ``stream_options`` (``include_usage``,
    ``continuous_usage_stats``): a running usage on every chunk (one token per delta), then the final
    usage chunk with ``cached_tokens`` and, with ``engine_ms``, the per-request metrics (all of it as
    time to first token)."""
    def chunk(i: int, t: str) -> dict[str, Any]:
        c: dict[str, Any] = {"choices": [{"delta": {"content": t}}]}
        if prompt_tokens is not None:
            c["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": i + 1,
                          "total_tokens": prompt_tokens + i + 1}
        return c

    items = [[f"data: {json.dumps(chunk(i, t))}\n\n"] for i, t in enumerate(texts)]
    if prompt_tokens is not None:
        final: dict[str, Any] = {"choices": [], "usage": {
            "prompt_tokens": prompt_tokens, "completion_tokens": len(texts), "total_tokens": prompt_tokens + len(texts),
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}}
        if engine_ms is not None:
            final["metrics"] = {"time_to_first_token_ms": engine_ms, "generation_time_ms": 0.0, "queue_time_ms": 0.0}
        items.append([f"data: {json.dumps(final)}\n\n"])
    return [*items, ["data: [DONE]\n\n"]]


class FakeGrpcContext:
    """The ``grpc_context`` of one call: metadata in; code, details, trailing metadata out."""

    def __init__(self, metadata: dict[str, str] | None = None) -> None:
        self._metadata = tuple((metadata or {}).items())
        self.code: Any = None
        self.details: str | None = None
        self.trailing: list[tuple[str, str]] | tuple[()] = ()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def set_code(self, code: Any) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def set_trailing_metadata(self, md: Iterable[tuple[str, str]]) -> None:
        # as Ray Serve's context does (``request-id metadata + md``): a list, or a TypeError
        self.trailing = [] + md  # type: ignore[operator]


class IngressHarness:
    """A real ingress on fake handles (see module docstring). Use as a context manager."""

    def __init__(self, app_config: dict[str, Any], *, llm: FakeHandle, tools: FakeHandle | None = None,
                 guardrails: FakeHandle | None = None, rule_kernels: FakeHandle | None = None) -> None:
        from serve.config import parse_app_config
        from serve.ingress import ENDPOINTS, TandemIngress, http_app

        cfg = parse_app_config(app_config)
        self.model_ids = sorted({m.model_id for m in cfg.models.values()})
        self.ingress = TandemIngress(
            {mid: llm for mid in self.model_ids}, {mid: _card(mid) for mid in self.model_ids},
            app_config=cfg.model_dump(mode="json"), tools=tools, guardrails=guardrails,
            rule_kernels=rule_kernels,
        )
        self.app = http_app()
        self.app.state.ingress = self.ingress
        for name, route in ENDPOINTS.items():
            route(self.app)(getattr(TandemIngress, name))
        from ray.serve._private.http_util import make_fastapi_class_based_view

        make_fastapi_class_based_view(self.app, TandemIngress)
        self._patch: contextlib.ExitStack | None = None

    def __enter__(self) -> IngressHarness:
        from ray import serve

        stack = contextlib.ExitStack()
        original = serve.get_replica_context
        serve.get_replica_context = lambda: SimpleNamespace(servable_object=self.ingress)  # type: ignore[assignment]
        stack.callback(setattr, serve, "get_replica_context", original)
        self._patch = stack
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._patch is not None:
            self._patch.close()

    def client(self, **kwargs: Any) -> Any:
        """An ``httpx.AsyncClient`` on the app (use inside a running event loop)."""
        import httpx

        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://tandem", **kwargs)

    @contextlib.contextmanager
    def grpc(self, metadata: dict[str, str] | None = None) -> Iterator[FakeGrpcContext]:
        yield FakeGrpcContext(metadata)


def _card(model_id: str) -> Any:
    from ray.llm._internal.serve.core.configs.openai_api_models import ModelCard

    return ModelCard(id=model_id, object="model", owned_by="tandem", permission=[],
                     metadata={"model_id": model_id, "engine_config": {"model_type": "fake"}})
