"""``tandem explain SESSION [TURN]``: one turn's story from the stored turn, its events and its spans.

Prints the user's text (redacted), every logged decision with its inputs (in log
order; any event kind prints, known or not), the forward contract, the guard
decisions, what was delivered, what the turn cost (model calls, prompt / cached /
decode tokens and engine time, from the engine's usage, per role, purpose and
call), and the turn's spans as a text waterfall;
``--png FILE`` draws the waterfall with matplotlib.

    tandem explain alex-1            # the session's last turn
    tandem explain alex-1 0          # its first turn (an index, or a turn id)
    tandem explain alex-1 --png results/turn.png

Reads the turns from the configured session store and the JSON lines from the
telemetry directory. Every text shown passes :func:`pipelines.telemetry.safe_text`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.protocols import TurnRecord
from pipelines.telemetry import safe_text

__all__ = ["main", "explain_turn", "load_spans", "waterfall", "render_waterfall", "draw_png", "pick_turn", "Bar",
           "cost_lines"]

SECTIONS = ("contract", "guard", "turn")  # events routed to their own section; everything else is a decision
_SKIP_FIELDS = {"ts", "kind", "component", "trace_id", "turn_id", "session_id", "pipeline"}


@dataclass(frozen=True)
class Bar:
    """One span in the waterfall: its depth in the tree and its time window (ms from the first start)."""

    name: str
    depth: int
    start_ms: float
    end_ms: float
    kind: str = ""
    error: bool = False

    @property
    def ms(self) -> float:
        return self.end_ms - self.start_ms


def load_spans(directory: Path, trace_id: str) -> list[dict[str, Any]]:
    """Every span of ``trace_id`` in ``spans-*.jsonl`` under ``directory``."""
    needle = f'"trace_id": "{trace_id}"'
    out = []
    for f in sorted(directory.glob("spans-*.jsonl")):
        with f.open() as fh:
            for line in fh:
                if needle in line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue
    return out


def waterfall(spans: Sequence[dict[str, Any]]) -> list[Bar]:
    """Spans as bars, depth-first in start order (children under their parent)."""
    done = [s for s in spans if s.get("start_ns") and s.get("end_ns")]
    if not done:
        return []
    ids = {s["span_id"] for s in done}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for s in done:
        parent = s.get("parent_span_id") if s.get("parent_span_id") in ids else None
        children.setdefault(parent, []).append(s)
    t0 = min(s["start_ns"] for s in done)
    bars: list[Bar] = []

    def walk(parent: str | None, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda x: (x["start_ns"], x["name"])):
            kind = (s.get("attributes") or {}).get("openinference.span.kind", "")
            bars.append(Bar(s["name"], depth, (s["start_ns"] - t0) / 1e6, (s["end_ns"] - t0) / 1e6,
                            kind, s.get("status") == "ERROR"))
            walk(s["span_id"], depth + 1)

    walk(None, 0)
    return bars


def render_waterfall(bars: Sequence[Bar], width: int = 40) -> list[str]:
    """Text rows: indented name, a bar over the turn's time axis, start and duration in ms."""
    if not bars:
        return ["  (no spans for this trace: tracing off, or not flushed yet)"]
    total = max(b.end_ms for b in bars) or 1.0
    name_w = min(48, max(len("  " * b.depth + b.name) for b in bars))
    rows = []
    for b in bars:
        lo = min(width - 1, int(b.start_ms / total * width))
        hi = max(lo + 1, min(width, round(b.end_ms / total * width)))
        label = ("  " * b.depth + b.name)[:name_w]
        mark = " !" if b.error else ""
        rows.append(f"  {label:<{name_w}} |{' ' * lo}{'█' * (hi - lo)}{' ' * (width - hi)}| "
                    f"{b.start_ms:8.1f} +{b.ms:8.1f} ms {b.kind}{mark}".rstrip())
    return rows


def draw_png(bars: Sequence[Bar], path: Path, title: str = "") -> Path:
    """The waterfall as a horizontal bar chart (matplotlib, Agg)."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise SystemExit("--png needs matplotlib (pip install matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"LLM": "#e07b39", "TOOL": "#3b8ea5", "GUARDRAIL": "#7a5195", "RETRIEVER": "#58a55c", "CHAIN": "#4c6ef5"}
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(bars) + 1.4))
    for i, b in enumerate(bars):
        ax.barh(i, max(b.ms, 0.05), left=b.start_ms, color=colors.get(b.kind, "#999999"),
                edgecolor="#c92a2a" if b.error else "none")
        ax.text(b.end_ms, i, f" {b.ms:.0f} ms", va="center", fontsize=7)
    ax.set_yticks(range(len(bars)), ["  " * b.depth + b.name for b in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms since the first span started")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _value(v: Any, limit: int) -> str:
    return safe_text(v, limit=limit)


def _fields(ev: dict[str, Any], limit: int) -> str:
    return "  ".join(f"{k}={_value(v, limit)}" for k, v in ev.items() if k not in _SKIP_FIELDS and v not in (None, [], {}))


def _section(kind: str) -> str:
    if kind.startswith("contract."):
        return "contract"
    if "guard" in kind.rsplit(".", 1)[-1]:  # dr.guard, dr.pre_guard, sgc.post_guard, ...
        return "guard"
    if kind.startswith("turn.") or kind.startswith("stage."):
        return "turn"
    return "decision"


def _user_text(record: TurnRecord, events: Iterable[dict[str, Any]]) -> str:
    for ev in events:  # the pipeline's own redacted copy, when it logged one (e.g. dr.start)
        if isinstance(ev.get("user_text"), str):
            return safe_text(ev["user_text"])
    return safe_text(record.user_text)


def explain_turn(record: TurnRecord, events: Sequence[dict[str, Any]], spans: Sequence[dict[str, Any]],
                 *, session_id: str, width: int = 40, limit: int = 240) -> str:
    """The turn's story as text (see module docstring)."""
    ev_sorted = sorted(events, key=lambda e: e.get("ts", 0.0))
    out = [f"session {session_id}  turn {record.index}  {record.turn_id}  pipeline {record.pipeline or '?'}  "
           f"status {record.status}  trace {record.trace_id or '-'}",
           "", "user (redacted)", f"  {_user_text(record, ev_sorted)}", "", "decisions (in order)"]
    groups: dict[str, list[dict[str, Any]]] = {s: [] for s in (*SECTIONS, "decision")}
    for ev in ev_sorted:
        groups[_section(str(ev.get("kind", "?")))].append(ev)
    out += [f"  {ev.get('kind', '?'):<24} {_fields(ev, limit)}" for ev in groups["decision"]] or ["  (none logged)"]
    out += ["", "forward contract"]
    forward = [e for e in groups["contract"] if e.get("kind") == "contract.forward"]
    if forward:
        contract = forward[-1].get("contract") or {}
        out += [f"  {k:<20} {_value(v, limit * 2)}" for k, v in contract.items() if v not in (None, [], {}, "")]
    else:
        out.append("  (this pipeline logged none)")
    out += [f"  {e['kind']:<20} {_fields(e, limit)}" for e in groups["contract"] if e.get("kind") != "contract.forward"]
    out += ["", "guard decisions"]
    out += [f"  {e.get('kind', '?'):<24} {_fields(e, limit)}" for e in groups["guard"]] or ["  (none logged)"]
    out += ["", "model calls (LLM spans)"]
    out += _model_calls(spans, limit) or ["  (none traced)"]
    out += ["", "delivered", f"  {safe_text(record.reply_text) or '(nothing)'}"]
    meta = next((v for v in record.meta.values() if isinstance(v, dict) and "path" in v), None)
    if meta:
        out.append("  " + "  ".join(f"{k}={_value(meta[k], limit)}" for k in
                                    ("path", "card_id", "executed", "escalation", "fallback") if meta.get(k)))
    end = next((e for e in reversed(groups["turn"]) if e.get("kind") == "turn.end"), None)
    out += ["", "cost (the engine's usage)"]
    out += cost_lines(end) or ["  (not recorded)"]
    out += ["", "timings"]
    if end and isinstance(end.get("timings"), dict):
        t = end["timings"]
        out.append(f"  first token {t.get('first_token_ms')} ms   end {t.get('end_ms')} ms   "
                   + "  ".join(f"{k} {v:.1f} ms" for k, v in (t.get("stages") or {}).items()))
    out += render_waterfall(waterfall(spans), width=width)
    return "\n".join(out)


def _tokens(t: dict[str, Any]) -> str:
    return (f"{t.get('calls', 0)} calls  prompt {t.get('prompt_tokens', 0)} (cached "
            f"{t.get('cached_prompt_tokens', 0)})  decode {t.get('decode_tokens', 0)}  engine "
            f"{float(t.get('engine_ms') or 0.0):.1f} ms")


def cost_lines(end: dict[str, Any] | None) -> list[str]:
    """The turn's cost from its ``turn.end`` event: totals, per role, per purpose, then each call in order."""
    t = (end or {}).get("timings") or {}
    cost = t.get("cost") if isinstance(t, dict) else None
    if not isinstance(cost, dict):
        return []
    rows = [f"  total          {_tokens(cost)}"
            + (f"  ({cost['unreported']} stopped early: running counts)" if cost.get("unreported") else "")]
    rows += [f"  role {k:<9} {_tokens(v)}" for k, v in (cost.get("by_role") or {}).items()]
    rows += [f"  {k:<14} {_tokens(v)}" for k, v in (cost.get("by_purpose") or {}).items()]
    for i, c in enumerate((end or {}).get("model_calls") or [], 1):
        engine = c.get("engine_ms")
        rows.append(f"  call {i:<2} {c.get('role', '?'):<14} {c.get('purpose', '?'):<18} prompt "
                    f"{c.get('prompt_tokens', 0)} (cached {c.get('cached_tokens', 0)})  decode "
                    f"{c.get('decode_tokens', 0)}  engine {'-' if engine is None else f'{engine:.1f}'} ms  "
                    f"wall {float(c.get('wall_ms') or 0.0):.1f} ms" + ("" if c.get("reported", True) else "  (stopped early)"))
    return rows


def _model_calls(spans: Sequence[dict[str, Any]], limit: int) -> list[str]:
    """One line per LLM span, in start order: role, model, tokens, first-token time, redacted output."""
    rows = []
    for sp in sorted(spans, key=lambda x: x.get("start_ns") or 0):
        a = sp.get("attributes") or {}
        if a.get("openinference.span.kind") != "LLM":
            continue
        ms = ((sp.get("end_ns") or 0) - (sp.get("start_ns") or 0)) / 1e6
        tokens = f"{a.get('llm.token_count.prompt', '?')}+{a.get('llm.token_count.completion', '?')} tok"
        if "llm.token_count.prompt_details.cache_read" in a:
            tokens += f" ({a['llm.token_count.prompt_details.cache_read']} cached)"
        who = a.get("tandem.role", sp["name"]) + (f"/{a['tandem.purpose']}" if a.get("tandem.purpose") else "")
        rows.append(f"  {who:<14} {a.get('llm.model_name', '?')}  {tokens}  "
                    f"first {a.get('tandem.first_token_ms', '?')} ms  total {ms:.1f} ms  "
                    f"-> {safe_text(a.get('output.value', ''), limit=limit)}")
    return rows


def pick_turn(turns: Sequence[TurnRecord], which: str | None) -> TurnRecord:
    """The turn named by an index (negative counts from the end) or a turn id; the last when ``None``."""
    if not turns:
        raise LookupError("the session has no stored turns")
    if which is None:
        return turns[-1]
    for t in turns:
        if t.turn_id == which:
            return t
    try:
        return turns[int(which)]
    except (ValueError, IndexError):
        raise LookupError(f"no turn {which!r} (the session has {len(turns)} turns)") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tandem explain", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("session_id")
    ap.add_argument("turn", nargs="?", default=None, help="turn index (default: the last) or turn id")
    ap.add_argument("--config", default="configs/embedded.yaml", help="the Serve file the app ran with")
    ap.add_argument("--telemetry", default=None, help="override the telemetry directory")
    ap.add_argument("--png", type=Path, default=None, help="also draw the waterfall into this PNG file")
    ap.add_argument("--width", type=int, default=40, help="waterfall width in characters")
    ns = ap.parse_args(argv)

    from pipelines.errors import ConfigError
    from serve.config import load_serve_file
    from serve.ingress import make_store
    from serve.replay import load_events
    from serve.telemetry import telemetry_dir

    try:
        args = load_serve_file(ns.config).applications[0].args
    except ConfigError as exc:
        print(f"error: {exc.message}")
        return 2
    tele = Path(ns.telemetry or args.telemetry.jsonl_dir or telemetry_dir()).expanduser()
    try:
        turns = asyncio.run(make_store(args.store).get_history(ns.session_id))
        if not turns:
            raise LookupError(f"no stored turns for session {ns.session_id!r}")
        record = pick_turn(turns, ns.turn)
    except LookupError as exc:
        print(f"error: {exc}")
        return 2
    events = load_events(tele, {record.turn_id}).get(record.turn_id, [])
    spans = load_spans(tele, record.trace_id) if record.trace_id else []
    print(explain_turn(record, events, spans, session_id=ns.session_id, width=ns.width))
    if ns.png is not None:
        draw_png(waterfall(spans), ns.png, title=f"{ns.session_id} turn {record.index} ({record.pipeline})")
        print(f"\nwaterfall: {ns.png}")
    return 0
