"""The what-if report a person reads: ``whatif.md`` and ``whatif.html`` from ``whatif.json``'s data.

Both show the candidate, the counts (turns re-decided, changed, newly refused / escalated, how many the
baseline reproduced from the log, where the model outputs came from), a table per decision kind, and the
first changed turns: the user's text (vault placeholders), each changed decision before and after, and the
rule or row responsible. The HTML page is self-contained (no script, no external asset); every text is
escaped.
"""

from __future__ import annotations

import html as _html
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["markdown", "html", "brief"]


def _j(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _args(args: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{k}={_j(v, 40)}" for k, v in (args or {}).items())


def brief(kind: str, value: Any) -> str:
    """One decision, in a line a person reads."""
    if value in (None, [], {}):
        return "—"
    if kind == "intent":
        return f"{value.get('intent')}/{value.get('sub_intent')}"
    if kind == "phi":
        return "; ".join(f"{p.get('outcome')} " + (", ".join(f"{c.get('tool')}({_args(c.get('args'))})"
                                                             for c in p.get("calls") or []) or "no tools")
                         + f" then {p.get('then') or 'orchestrate'}" for p in value)
    if kind == "offer":
        return "; ".join(f"step {o.get('step')}: tools {o.get('tools')} cards {o.get('cards')} clarify "
                         f"{o.get('clarify')}" + (f" select {o.get('select')}" if o.get("select") else "")
                         + (f" candidates {_j(o.get('candidates'), 120)}" if o.get("candidates") else "")
                         for o in value)
    if kind == "action":
        return "; ".join(f"step {a.get('step')}: " + (f"repeat {a['repeat_read']}" if "repeat_read" in a else
                                                      _j(a.get("decision"), 140) + (f" ({a['error']})" if a.get("error")
                                                                                     else "")) for a in value)
    if kind == "card":
        parts = []
        if value.get("shown"):
            parts.append(f"shown {value['shown'].get('card_id')}({_args(value['shown'].get('params'))})")
        if value.get("executed"):
            parts.append(f"executed {value['executed']}")
        parts += [f"refused {r.get('card_id') or r.get('tool')}: {r.get('reason')}" for r in value.get("refused") or []]
        return "; ".join(parts) or "no card"
    if kind == "clarify":
        return str(value.get("question")) + (f" [{', '.join(value['options'])}]" if value.get("options") else "")
    if kind == "path":
        return " ".join(str(x) for x in (value.get("path"), value.get("fallback") and f"fallback {value['fallback']}",
                                          value.get("status"), value.get("error")) if x)
    if kind == "paragraphs":
        conflicts = ", ".join(f"{c.get('kind')}:{c.get('tier')}" for c in value.get("conflicts") or []) or "none"
        return f"plan {', '.join(value.get('plan') or []) or '—'}; conflicts {conflicts}; Ψ {', '.join(value.get('psi_fired') or [])}"
    if kind == "guidance":
        return f"{value.get('pick')} ({value.get('table_version')})"
    if kind == "gate":
        return "; ".join(f"{g.get('stage')}: {', '.join(g.get('kinds') or [])}" for g in value)
    if kind == "guard":
        pre = value.get("pre") or {}
        out = ["blocked" if pre.get("blocked") else "passed"]
        out += [f"route {pre['route']}"] if pre.get("route") else []
        out += [f"rules {', '.join(pre['hits'])}"] if pre.get("hits") else []
        out += [f"{r.get('route')} ({r.get('reason')})" for r in value.get("routes") or []]
        out += [f"mid {m.get('decision')} {m.get('violation')}" for m in value.get("mid") or []]
        return "; ".join(out)
    return _j(value)


def _summary(d: Mapping[str, Any]) -> list[tuple[str, str]]:
    calls = d.get("model_calls") or {}
    reproduced = d.get("replayed", 0) - len(d.get("not_reproduced") or [])
    return [
        ("candidate", "; ".join((d.get("candidate") or {}).get("facets") or []) or "no change"),
        ("turns re-decided", f"{d.get('replayed')} of {d.get('turns')} logged"),
        ("turns changed", str(d.get("changed"))),
        ("newly refused / escalated", f"{d.get('newly_refused')} / {d.get('newly_escalated')}"),
        ("baseline reproduces the log", f"{reproduced} of {d.get('replayed')} turns"),
        ("candidate's model outputs", ", ".join(f"{k} {v}" for k, v in calls.items()) or "—"),
        ("throughput", f"{d.get('turns_per_min')} turns/min ({d.get('wall_s')} s)"),
        ("sessions skipped", str(len(d.get("skipped") or []))),
    ]


def _cell(text: str) -> str:
    """A Markdown table cell: one line, its pipes escaped."""
    return text.replace("\n", " ").replace("|", "\\|")


def markdown(d: Mapping[str, Any]) -> str:
    """The report as Markdown."""
    out = ["# What-if report", "", "| | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in _summary(d)]
    out += ["", "## Decisions by kind", "", "| kind | same | changed |", "|---|---:|---:|"]
    out += [f"| {k} | {c['same']} | {c['changed']} |" for k, c in (d.get("by_kind") or {}).items()]
    changes = d.get("changes") or []
    out += ["", f"## Changed turns (first {len(changes)} of {d.get('changed')})", ""]
    for c in changes:
        out += [f"### {c['session_id']} · turn {c['turn']} ({c['turn_id']})", "", f"> {c['text']}", ""]
        out += ["| decision | before | after |", "|---|---|---|"]
        out += [f"| {k} | {_cell(brief(k, c['before'].get(k)))} | {_cell(brief(k, c['after'].get(k)))} |"
                for k in c["kinds"]]
        out += [""] + [f"- {r}" for r in c.get("rules") or []] + [f"- note: {n}" for n in c.get("notes") or []] + [""]
    if d.get("not_reproduced"):
        out += ["## Turns the baseline does not reproduce from the log", ""]
        out += [f"- {r['session_id']} turn {r['turn']}: {', '.join(r['kinds'])}" for r in d["not_reproduced"]]
        out.append("")
    if d.get("skipped"):
        out += ["## Sessions skipped", ""] + [f"- {s['session_id']}: {s['why']}" for s in d["skipped"]] + [""]
    return "\n".join(out)


_CSS = """
body{font:14px/1.45 -apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:24px 32px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #dde2ea;padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0 10px}td,th{border:1px solid #dde2ea;padding:4px 9px;text-align:left;vertical-align:top}
th{background:#f3f5f9;font-weight:600}.num{text-align:right}.hot{background:#fff1e6;font-weight:600}
.turn{border:1px solid #dde2ea;border-radius:6px;padding:10px 14px;margin:12px 0;background:#fbfcfe}
.turn h3{font-size:14px;margin:0 0 6px;color:#3a4458}.text{font-style:italic;margin:4px 0 8px;color:#2a3140}
.turn table{width:100%}.before,.after{width:44%}.before{color:#8a2b2b}.after{color:#1f6b3a}.rule{font-size:13px;color:#3a4458;margin:2px 0}
.note{font-size:12px;color:#6b7385}code{font:12px/1.4 'DejaVu Sans Mono',monospace}
"""


def html(d: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page."""
    e = _html.escape
    rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _summary(d))
    by_kind = d.get("by_kind") or {}
    heads = "".join(f"<th{' class=hot' if c['changed'] else ''}>{e(k)}</th>" for k, c in by_kind.items())
    same = "".join(f"<td class=num>{c['same']}</td>" for c in by_kind.values())
    moved = "".join(f"<td class='num{' hot' if c['changed'] else ''}'>{c['changed']}</td>" for c in by_kind.values())
    kinds = f"<tr><th></th>{heads}</tr><tr><th>same</th>{same}</tr><tr><th>changed</th>{moved}</tr>"
    turns = []
    for c in d.get("changes") or []:
        diff = "".join(f"<tr><td>{e(k)}</td><td class=before><code>{e(brief(k, c['before'].get(k)))}</code></td>"
                       f"<td class=after><code>{e(brief(k, c['after'].get(k)))}</code></td></tr>" for k in c["kinds"])
        rules = "".join(f"<div class=rule>↳ {e(r)}</div>" for r in c.get("rules") or [])
        notes = "".join(f"<div class=note>note: {e(n)}</div>" for n in c.get("notes") or [])
        turns.append(f"<div class=turn><h3>{e(c['session_id'])} · turn {c['turn']} <span class=note>"
                     f"{e(c['turn_id'])}</span></h3><div class=text>“{e(c['text'])}”</div><table><tr><th>decision"
                     f"</th><th>before</th><th>after</th></tr>{diff}</table>{rules}{notes}</div>")
    extra = ""
    if d.get("not_reproduced"):
        extra += "<h2>Turns the baseline does not reproduce from the log</h2><ul>" + "".join(
            f"<li>{e(r['session_id'])} turn {r['turn']}: {e(', '.join(r['kinds']))}</li>" for r in d["not_reproduced"]
        ) + "</ul>"
    if d.get("skipped"):
        extra += "<h2>Sessions skipped</h2><ul>" + "".join(
            f"<li>{e(s['session_id'])}: {e(s['why'])}</li>" for s in d["skipped"]) + "</ul>"
    n = len(d.get("changes") or [])
    return (f"<!doctype html><html><head><meta charset=utf-8><title>What-if report</title><style>{_CSS}</style>"
            f"</head><body><h1>What-if report</h1><table>{rows}</table><h2>Decisions by kind</h2><table>{kinds}</table><h2>Changed turns (first {n} of "
            f"{d.get('changed')})</h2>{''.join(turns) or '<p>none</p>'}{extra}</body></html>\n")
