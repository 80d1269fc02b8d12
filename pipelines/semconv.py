"""OpenInference semantic-convention names used by Tandem's spans, in one place.

These are the attribute names and span kinds that trace UIs for model
applications (Arize Phoenix, Langfuse, LangSmith, ...) read. They mirror the
constants of the ``openinference-semantic-conventions`` package, so
``pipelines/`` keeps its dependency rule (stdlib, pydantic, opentelemetry-api);
``tests/unit/test_semconv.py`` checks every name here against that package.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["OI", "SpanKind", "MimeType", "PROJECT_NAME"]

#: Resource attribute naming the project a trace belongs to in Phoenix.
PROJECT_NAME = "openinference.project.name"


class SpanKind(StrEnum):
    """The OpenInference span kinds Tandem emits."""

    CHAIN = "CHAIN"  # the turn and its stages
    LLM = "LLM"  # one model call
    TOOL = "TOOL"  # one tool call
    GUARDRAIL = "GUARDRAIL"  # one guard decision (pre, mid, post, narration)
    RETRIEVER = "RETRIEVER"  # retrieved help articles


class MimeType(StrEnum):
    TEXT = "text/plain"
    JSON = "application/json"


class OI:
    """OpenInference span attribute names (flattened, as OTel attributes)."""

    SPAN_KIND = "openinference.span.kind"
    INPUT_VALUE = "input.value"
    INPUT_MIME_TYPE = "input.mime_type"
    OUTPUT_VALUE = "output.value"
    OUTPUT_MIME_TYPE = "output.mime_type"
    SESSION_ID = "session.id"
    USER_ID = "user.id"
    METADATA = "metadata"
    LLM_MODEL_NAME = "llm.model_name"
    LLM_INVOCATION_PARAMETERS = "llm.invocation_parameters"
    LLM_INPUT_MESSAGES = "llm.input_messages"
    LLM_OUTPUT_MESSAGES = "llm.output_messages"
    LLM_TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
    LLM_TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
    LLM_TOKEN_COUNT_TOTAL = "llm.token_count.total"
    LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_READ = "llm.token_count.prompt_details.cache_read"
    MESSAGE_ROLE = "message.role"
    MESSAGE_CONTENT = "message.content"
    TOOL_NAME = "tool.name"
    RETRIEVAL_DOCUMENTS = "retrieval.documents"
    DOCUMENT_ID = "document.id"
    DOCUMENT_CONTENT = "document.content"
    DOCUMENT_SCORE = "document.score"
    DOCUMENT_METADATA = "document.metadata"

    @staticmethod
    def message(prefix: str, i: int, field: str) -> str:
        """``llm.input_messages.<i>.message.role`` and friends."""
        return f"{prefix}.{i}.{field}"

    @staticmethod
    def document(i: int, field: str) -> str:
        """``retrieval.documents.<i>.document.id`` and friends."""
        return f"{OI.RETRIEVAL_DOCUMENTS}.{i}.{field}"
