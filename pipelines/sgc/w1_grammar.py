"""The Lark grammar that constrains the W1 perception stream (vLLM ``grammar`` structured output).

The grammar is plain Lark (``start:`` rule, string literals, regex terminals),
accepted by the ``guidance`` backend (llguidance) and by the ``lark`` package
itself, so tests can parse sample streams with it. It pins intent and
sub-intent to the registered labels (pairwise when a mapping is given), keeps
the narration free of ``<``, and makes the plan a JSON list of
``{"tool": <registered name>, "args": {...}}`` objects.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping

from pipelines.errors import ConfigError

__all__ = ["grammar", "NARRATION_MAX_CHARS"]

NARRATION_MAX_CHARS = 400

_JSON_RULES = r"""
object: "{" ws (member (ws "," ws member)*)? ws "}"
member: STRING ws ":" ws value
array: "[" ws (value (ws "," ws value)*)? ws "]"
value: object | array | STRING | NUMBER | "true" | "false" | "null"
STRING: /"([^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/
ws: WS?
WS: /[ \t\r\n]+/
"""


def _lit(text: str) -> str:
    """A Lark string literal for ``text`` (JSON escaping is a subset Lark accepts)."""
    return json.dumps(text)


def _alts(values: Iterable[str]) -> str:
    return " | ".join(_lit(v) for v in sorted(set(values)))


def _check_labels(kind: str, values: Iterable[str]) -> list[str]:
    out = sorted(set(values))
    if not out:
        raise ConfigError(f"grammar needs at least one {kind}")
    for v in out:
        if not v or any(c in v for c in "<> \t\r\n"):
            raise ConfigError(f"{kind} label {v!r} cannot appear in the perception grammar")
    return out


def grammar(
    intents: Collection[str],
    sub_intents: Mapping[str, Collection[str]] | Collection[str],
    tools: Collection[str],
    *,
    narration_max_chars: int = NARRATION_MAX_CHARS,
) -> str:
    """The Lark grammar of the 4-in-1 stream for these labels and tools.

    ``sub_intents`` is either a mapping intent → sub-intents (then only
    registered pairs are allowed) or a flat collection (any intent with any
    sub-intent). Raises :class:`ConfigError` for an empty or unusable label.
    """
    intent_list = _check_labels("intent", intents)
    tool_list = _check_labels("tool", tools)
    lines = ["start: ws head ws narration ws plan ws"]
    if isinstance(sub_intents, Mapping):
        heads = []
        for i, intent in enumerate(intent_list):
            subs = _check_labels(f"sub-intent of {intent!r}", sub_intents.get(intent, ()))
            lines.append(
                f'head_{i}: "<INTENT>" {_lit(intent)} "</INTENT>" ws "<SUB_INTENT>" sub_{i} "</SUB_INTENT>"'
            )
            lines.append(f"sub_{i}: {_alts(subs)}")
            heads.append(f"head_{i}")
        lines.append(f"head: {' | '.join(heads)}")
    else:
        subs = _check_labels("sub-intent", sub_intents)
        lines.append('head: "<INTENT>" intent "</INTENT>" ws "<SUB_INTENT>" sub_intent "</SUB_INTENT>"')
        lines.append(f"intent: {_alts(intent_list)}")
        lines.append(f"sub_intent: {_alts(subs)}")
    lines += [
        'narration: "<NARRATION>" NARRATION_TEXT? "</NARRATION>"',
        f"NARRATION_TEXT: /[^<]{{1,{int(narration_max_chars)}}}/",
        'plan: "<PLAN>" ws "[" ws (call (ws "," ws call)*)? ws "]" ws "</PLAN>"',
        'call: "{" ws "\\"tool\\"" ws ":" ws tool_name ws "," ws "\\"args\\"" ws ":" ws object ws "}"',
        f"tool_name: {' | '.join(_lit(_lit(t)) for t in tool_list)}",
    ]
    return "\n".join(lines) + "\n" + _JSON_RULES.lstrip("\n")
