"""What a turn accepts: session ids, the request body, and the text hygiene both edges share.

Text rules (HTTP and gRPC alike, before anything is stored or seen by a model):

* a lone surrogate or a noncharacter (U+FDD0–U+FDEF, U+xxFFFE/F) is refused
  (400 ``invalid_input``): no valid text holds one, and a surrogate cannot even
  be encoded for the store;
* NUL and the other C0 / C1 control characters except tab, newline and
  carriage return are refused (400 ``invalid_input``): a chat message has no
  use for them, and they hide text from people and tools;
* the bidi *embedding, override and isolate* controls (U+202A–U+202E,
  U+2066–U+2069) are removed (they can make text read differently from what is
  stored — "Trojan Source"); the plain direction marks LRM / RLM / ALM stay,
  right-to-left text needs them. A text left empty is a 422.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from pydantic import ValidationError

from pipelines.errors import InvalidInput, InvalidSessionId, PayloadTooLarge, ValidationFailed
from pipelines.events import TurnRequest

__all__ = [
    "SESSION_ID_RE",
    "BIDI_CONTROLS",
    "validate_session_id",
    "parse_turn_request",
    "clean_text",
    "check_idempotency_key",
]

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
IDEMPOTENCY_KEY_RE = re.compile(r"^[\x21-\x7e]{1,128}$")
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BIDI_RE = re.compile("[" + "".join(sorted(BIDI_CONTROLS)) + "]")
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def validate_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not SESSION_ID_RE.fullmatch(session_id):
        raise InvalidSessionId(
            "session id must be 1-128 characters of letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit",
            details={"session_id": _printable(str(session_id)[:64])},
        )
    return session_id


def _printable(s: str) -> str:
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _noncharacter(cp: int) -> bool:
    return 0xFDD0 <= cp <= 0xFDEF or (cp & 0xFFFE) == 0xFFFE


def clean_text(text: str, *, field: str = "text") -> str:
    """``text`` with the bidi controls removed; :class:`InvalidInput` for the refused characters."""
    for i, ch in enumerate(text):
        cp = ord(ch)
        if 0xD800 <= cp <= 0xDFFF:
            raise InvalidInput(f"{field} holds a lone surrogate (not valid Unicode)",
                               details={"field": field, "position": i})
        if _noncharacter(cp):
            raise InvalidInput(f"{field} holds a Unicode noncharacter U+{cp:04X}",
                               details={"field": field, "position": i})
        if ch not in _ALLOWED_CONTROLS and unicodedata.category(ch) == "Cc":
            raise InvalidInput(f"{field} holds a control character U+{cp:04X}",
                               details={"field": field, "position": i})
    return _BIDI_RE.sub("", text)


def parse_turn_request(raw: Any, *, max_text_chars: int, accepts_perception: bool = False) -> TurnRequest:
    """Validate a decoded JSON body (or a :class:`TurnRequest`) against the wire contract and limits.

    ``perception`` (evaluation only) is refused unless ``accepts_perception`` (the pipeline's
    ``oracle_perception`` setting): no client of a serving profile can steer what a turn perceives."""
    if isinstance(raw, TurnRequest):
        req = raw
    else:
        if not isinstance(raw, dict):
            raise InvalidInput("request body must be a JSON object")
        try:
            req = TurnRequest.model_validate(raw)
        except ValidationError as exc:
            problems = [
                {"field": ".".join(str(p) for p in e["loc"]) or "body", "problem": e["msg"]}
                for e in exc.errors(include_url=False)
            ]
            raise ValidationFailed(
                _printable("; ".join(f"{p['field']}: {p['problem']}" for p in problems)),
                details={"fields": [{k: _printable(v) for k, v in p.items()} for p in problems]},
            ) from exc
    if len(req.text) > max_text_chars:
        raise PayloadTooLarge(
            f"text is {len(req.text)} characters; the limit is {max_text_chars}",
            details={"limit": max_text_chars, "length": len(req.text)},
        )
    if req.perception is not None and not accepts_perception:
        raise ValidationFailed("perception: this app perceives every turn itself (pipeline.oracle_perception is off)",
                               details={"fields": [{"field": "perception", "problem": "not accepted by this app"}]})
    text = clean_text(req.text)
    user_id = None if req.user_id is None else clean_text(req.user_id, field="user_id")
    if text != req.text or user_id != req.user_id:
        try:
            req = TurnRequest(text=text, locale=req.locale, user_id=user_id, perception=req.perception)
        except ValidationError as exc:
            raise ValidationFailed("text: text must not be empty",
                                   details={"fields": [{"field": "text", "problem": "empty after "
                                                        "removing bidi controls"}]}) from exc
    return req


def check_idempotency_key(key: str | None) -> str | None:
    """A client's ``Idempotency-Key``: 1-128 printable ASCII characters, or None when absent."""
    if key is None or key == "":
        return None
    if not IDEMPOTENCY_KEY_RE.fullmatch(key):
        raise InvalidInput("Idempotency-Key must be 1-128 printable ASCII characters without spaces")
    return key
