"""The Lark grammar that constrains the W1 perception stream (vLLM ``grammar`` structured output).

The grammar is plain Lark (``start:`` rule, string literals, regex terminals),
accepted by the ``guidance`` backend (llguidance) and by the ``lark`` package
itself, so tests can parse sample streams with it. It pins intent and
sub-intent to the registered labels (pairwise when a mapping is given), keeps
the narration free of ``<``, and makes the plan a JSON list of at most
``MAX_PLAN_CALLS`` ``{"tool": <registered name>, "args": {...}}`` objects with
at most ``MAX_ARGS`` scalar arguments — every repetition bounded.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping

from pipelines.errors import ConfigError
from pipelines.sgc.w1 import LONG_TAGS, W1Tags

__all__ = ["grammar", "label_grammar", "sentence_grammar", "tail_grammar", "NARRATION_MAX_CHARS", "MAX_PLAN_CALLS", "MAX_ARGS"]

NARRATION_MAX_CHARS = 200

# Every repetition is bounded: a greedy small model that loops (whitespace, a long string,
# one more plan call) still closes </PLAN> inside the perception call's token budget.
MAX_PLAN_CALLS = 3
MAX_ARGS = 4
_JSON_RULES = r"""
args: "{" ws "}" | "{" ws member ws "}" | "{" ws member ws "," ws member ws "}"
    | "{" ws member ws "," ws member ws "," ws member ws "}"
    | "{" ws member ws "," ws member ws "," ws member ws "," ws member ws "}"
member: STRING ws ":" ws value
value: scalar | array
array: "[" ws "]" | "[" ws scalar ws "]" | "[" ws scalar ws "," ws scalar ws "]"
    | "[" ws scalar ws "," ws scalar ws "," ws scalar ws "]"
    | "[" ws scalar ws "," ws scalar ws "," ws scalar ws "," ws scalar ws "]"
scalar: STRING | NUMBER | "true" | "false" | "null"
STRING: /"([^"\\\x00-\x1f]|\\["\\\/bfnrt]){0,48}"/
NUMBER: /-?(0|[1-9][0-9]{0,8})(\.[0-9]{1,4})?/
ws: WS?
WS: /[ \t\r\n]{1,3}/
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


def label_grammar(kind: str, values: Iterable[str]) -> str:
    """One section's label alone: the stream decoded in segments (the tags between them are given)."""
    return f"start: {_alts(_check_labels(kind, values))}\n"


def sentence_grammar(max_chars: int = NARRATION_MAX_CHARS) -> str:
    """One sentence of plain text: no leading space, no "<", no line break, one end mark closing it."""
    return f"start: SENTENCE\nSENTENCE: /[^\\s<][^<\\n.!?]{{0,{int(max_chars) - 2}}}[.!?]/\n"


def tail_grammar(
    tools: Collection[str],
    *,
    narration_max_chars: int = NARRATION_MAX_CHARS,
    narration_required: bool = True,
    tags: W1Tags = LONG_TAGS,
) -> str:
    """What follows an opened ``<NARRATION>``: the narration, its close tag, the plan."""
    return _tail_lines(_check_labels("tool", tools), narration_max_chars, narration_required, tags,
                       start="start: narration_body ws plan ws", narration_open="")


def _tail_lines(tool_list: list[str], narration_max_chars: int, narration_required: bool, tags: W1Tags, *,
                start: str | None = None, narration_open: str | None = None) -> str:
    o, c = tags.open, tags.close
    rule = "narration_body" if start else "narration"
    opening = _lit(o("NARRATION")) + " " if narration_open is None else narration_open
    lines = [start] if start else []
    lines += [
        f'{rule}: {opening}NARRATION_TEXT{"" if narration_required else "?"} {_lit(c("NARRATION"))}',
        f"NARRATION_TEXT: /[^<]{{1,{int(narration_max_chars)}}}/",
        f'plan: {_lit(o("PLAN"))} ws "[" ws calls? ws "]" ws {_lit(c("PLAN"))}',
        'calls: call | call ws "," ws call | call ws "," ws call ws "," ws call',
        'call: "{" ws "\\"tool\\"" ws ":" ws tool_name ws "," ws "\\"args\\"" ws ":" ws args ws "}"',
        f"tool_name: {' | '.join(_lit(_lit(t)) for t in tool_list)}",
    ]
    return "\n".join(lines) + "\n" + _JSON_RULES.lstrip("\n")


def grammar(
    intents: Collection[str],
    sub_intents: Mapping[str, Collection[str]] | Collection[str],
    tools: Collection[str],
    *,
    narration_max_chars: int = NARRATION_MAX_CHARS,
    narration_required: bool = False,
    opened: bool = False,
    tags: W1Tags = LONG_TAGS,
) -> str:
    """The Lark grammar of the 4-in-1 stream for these labels and tools.

    ``sub_intents`` is either a mapping intent → sub-intents (then only
    registered pairs are allowed) or a flat collection (any intent with any
    sub-intent). Raises :class:`ConfigError` for an empty or unusable label.
    """
    intent_list = _check_labels("intent", intents)
    tool_list = _check_labels("tool", tools)
    # Opened (the tandem turn): the sections are adjacent, no whitespace to decode between them.
    sep = "" if opened else "ws "
    lines = ["start: head narration ws plan ws" if opened else "start: ws head ws narration ws plan ws"]
    o, c = tags.open, tags.close
    open_tag = "" if opened else f"{_lit(o('INTENT'))} "
    head_tail = f'{_lit(c("INTENT"))} {sep}{_lit(o("SUB_INTENT"))} '
    if isinstance(sub_intents, Mapping):
        heads = []
        for i, intent in enumerate(intent_list):
            subs = _check_labels(f"sub-intent of {intent!r}", sub_intents.get(intent, ()))
            lines.append(
                f'head_{i}: {open_tag}{_lit(intent)} {head_tail}sub_{i} {_lit(c("SUB_INTENT"))}'
            )
            lines.append(f"sub_{i}: {_alts(subs)}")
            heads.append(f"head_{i}")
        lines.append(f"head: {' | '.join(heads)}")
    else:
        subs = _check_labels("sub-intent", sub_intents)
        lines.append(f'head: {open_tag}intent {head_tail}sub_intent {_lit(c("SUB_INTENT"))}')
        lines.append(f"intent: {_alts(intent_list)}")
        lines.append(f"sub_intent: {_alts(subs)}")
    return "\n".join(lines) + "\n" + _tail_lines(tool_list, narration_max_chars, narration_required, tags)
