"""``tandem cost``'s figures: per-turn distributions, production prices, ratios, the table and the plot.

::

    per kind   turns; calls, prompt / cached prompt / decode tokens, orchestrator-role tokens (prompt + decode)
               and engine seconds per turn, each as p50 and mean over the turns played alone; the same per
               purpose (means); first token and end to end; turns per second and goodput at the SLO at the
               run's user count (closed loop); the load levels (the plot's points)
    production the same token counts priced on the production profile's models: the config's table of
               GPU-seconds per token and role (``cost.pricing``: uncached prompt, cached prompt, decode)
    ratios     tandem over prompting (and every other kind over prompting): engine seconds per turn,
               goodput at the SLO, orchestrator tokens per turn, tokens per turn, production GPU-seconds

A turn whose ``done`` event carried no cost block (refused before it ran) counts in ``turns_failed`` and
not in the distributions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .measure import TurnCostRecord

__all__ = ["dist", "turn_values", "price_turn", "summarize_kind", "ratios", "build_doc", "format_table", "plot_goodput"]

PER_TURN = ("calls", "prompt_tokens", "cached_prompt_tokens", "decode_tokens", "orchestrator_tokens",
            "orchestrator_uncached_tokens", "engine_s")


def dist(values: Sequence[float]) -> dict[str, float | None]:
    """p50 (the median, interpolated) and mean of ``values``; ``None`` for none."""
    xs = sorted(float(v) for v in values)
    if not xs:
        return {"p50": None, "mean": None}
    mid = (len(xs) - 1) / 2
    p50 = (xs[math.floor(mid)] + xs[math.ceil(mid)]) / 2
    return {"p50": round(p50, 4), "mean": round(sum(xs) / len(xs), 4)}


def turn_values(cost: Mapping[str, Any]) -> dict[str, float]:
    """One turn's cost block as the per-turn measures (:data:`PER_TURN`)."""
    orch = (cost.get("by_role") or {}).get("orchestrator") or {}
    o_prompt, o_cached, o_decode = (int(orch.get(k) or 0) for k in ("prompt_tokens", "cached_prompt_tokens",
                                                                     "decode_tokens"))
    return {"calls": float(cost.get("calls") or 0), "prompt_tokens": float(cost.get("prompt_tokens") or 0),
            "cached_prompt_tokens": float(cost.get("cached_prompt_tokens") or 0),
            "decode_tokens": float(cost.get("decode_tokens") or 0),
            "orchestrator_tokens": float(o_prompt + o_decode),
            "orchestrator_uncached_tokens": float(o_prompt - o_cached + o_decode),
            "engine_s": float(cost.get("engine_ms") or 0.0) / 1000.0}


def price_turn(cost: Mapping[str, Any], pricing: Mapping[str, Any]) -> dict[str, float]:
    """GPU-seconds of one turn's tokens on the priced profile, per role and in ``total`` (a role the table
    lacks costs nothing). ``pricing``: role → ``{prefill,cached,decode}_gpu_s_per_token``."""
    out: dict[str, float] = {}
    for role, t in (cost.get("by_role") or {}).items():
        p = pricing.get(role)
        if p is None:
            continue
        get = p.get if isinstance(p, Mapping) else lambda k, _p=p: getattr(_p, k)
        prompt, cached, decode = (int(t.get(k) or 0) for k in ("prompt_tokens", "cached_prompt_tokens",
                                                               "decode_tokens"))
        out[role] = ((prompt - cached) * float(get("prefill_gpu_s_per_token")) + cached
                     * float(get("cached_gpu_s_per_token")) + decode * float(get("decode_gpu_s_per_token")))
    out["total"] = sum(out.values())
    return out


def summarize_kind(records: Sequence[TurnCostRecord], load: Sequence[Mapping[str, Any]], *, users: int,
                   alone: Mapping[str, float], pricing: Mapping[str, Any],
                   gpu_hour_usd: float | None = None) -> dict[str, Any]:
    """One kind's entry of ``cost.json`` (see module docstring)."""
    costed = [r for r in records if r.cost is not None and r.ok]
    values = [turn_values(r.cost) for r in costed if r.cost is not None]
    out: dict[str, Any] = {"turns": len(costed), "turns_failed": len(records) - len(costed)}
    for k in PER_TURN:
        out[f"{k}_per_turn"] = dist([v[k] for v in values])
    purposes: dict[str, list[dict[str, Any]]] = {}
    for r in costed:
        for name, t in ((r.cost or {}).get("by_purpose") or {}).items():
            purposes.setdefault(name, []).append(t)
    n = max(1, len(costed))
    out["by_purpose"] = {name: {"calls_per_turn": round(sum(t["calls"] for t in ts) / n, 4),
                                "prompt_tokens_per_turn": round(sum(t["prompt_tokens"] for t in ts) / n, 2),
                                "cached_prompt_tokens_per_turn": round(sum(t["cached_prompt_tokens"] for t in ts) / n, 2),
                                "decode_tokens_per_turn": round(sum(t["decode_tokens"] for t in ts) / n, 2),
                                "engine_s_per_turn": round(sum(t["engine_ms"] for t in ts) / n / 1000.0, 4)}
                         for name, ts in purposes.items()}
    out["unreported_calls"] = sum(int((r.cost or {}).get("unreported") or 0) for r in costed)
    ok = [r for r in records if r.ok]
    out["first_token_ms"] = dist([r.first_token_ms for r in ok if r.first_token_ms is not None])
    out["e2e_ms"] = dist([r.e2e_ms for r in ok])
    at = next((lv for lv in load if lv["users"] == users), None)
    out["users"] = users
    out["turns_per_s"] = at["turns_per_s"] if at else None
    out["goodput_at_slo"] = at["goodput_rps"] if at else None
    out["goodput_fraction_at_slo"] = at["goodput_fraction"] if at else None
    out["load"] = [dict(alone), *load]
    prices = [price_turn(r.cost or {}, pricing) for r in costed]
    prod: dict[str, Any] = {"gpu_s_per_turn": dist([p["total"] for p in prices]),
                            "gpu_s_per_turn_by_role": {role: dist([p.get(role, 0.0) for p in prices])
                                                       for role in sorted({k for p in prices for k in p} - {"total"})}}
    if gpu_hour_usd:
        mean = prod["gpu_s_per_turn"]["mean"]
        prod["usd_per_1k_turns"] = None if mean is None else round(mean * gpu_hour_usd / 3600.0 * 1000, 4)
    out["production"] = prod
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 4)


def ratios(kinds: Mapping[str, Mapping[str, Any]], base: str = "prompting") -> dict[str, dict[str, float | None]]:
    """``<kind>_over_<base>`` for every other kind: means per turn and goodput (``None``: the base has none)."""
    b = kinds.get(base)
    if b is None:
        return {}
    out = {}
    for kind, k in kinds.items():
        if kind == base:
            continue
        out[f"{kind}_over_{base}"] = {
            "engine_s_per_turn": _ratio(k["engine_s_per_turn"]["mean"], b["engine_s_per_turn"]["mean"]),
            "goodput_at_slo": _ratio(k["goodput_at_slo"], b["goodput_at_slo"]),
            "orchestrator_tokens_per_turn": _ratio(k["orchestrator_tokens_per_turn"]["mean"],
                                                   b["orchestrator_tokens_per_turn"]["mean"]),
            "tokens_per_turn": _ratio((k["prompt_tokens_per_turn"]["mean"] or 0) + (k["decode_tokens_per_turn"]["mean"] or 0),
                                      (b["prompt_tokens_per_turn"]["mean"] or 0) + (b["decode_tokens_per_turn"]["mean"] or 0)),
            "first_token_ms_p50": _ratio(k["first_token_ms"]["p50"], b["first_token_ms"]["p50"]),
            "production_gpu_s_per_turn": _ratio(k["production"]["gpu_s_per_turn"]["mean"],
                                                b["production"]["gpu_s_per_turn"]["mean"]),
        }
    return out


def build_doc(kinds: Mapping[str, Mapping[str, Any]], run: Mapping[str, Any]) -> dict[str, Any]:
    """The whole ``cost.json``: the run, every kind, the ratios over prompting."""
    return {"run": dict(run), "pipelines": dict(kinds), "ratios": ratios(kinds)}


def _f(v: Any, nd: int = 2) -> str:
    return "-" if v is None else f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def format_table(doc: Mapping[str, Any]) -> str:
    """The kinds side by side (means per turn, goodput at the SLO), then the ratios."""
    cols = [("turns", lambda k: k["turns"]), ("calls", lambda k: _f(k["calls_per_turn"]["mean"])),
            ("prompt", lambda k: _f(k["prompt_tokens_per_turn"]["mean"], 0)),
            ("cached", lambda k: _f(k["cached_prompt_tokens_per_turn"]["mean"], 0)),
            ("decode", lambda k: _f(k["decode_tokens_per_turn"]["mean"], 0)),
            ("orch tok", lambda k: _f(k["orchestrator_tokens_per_turn"]["mean"], 0)),
            ("engine s", lambda k: _f(k["engine_s_per_turn"]["mean"])),
            ("ttft p50", lambda k: _f(k["first_token_ms"]["p50"], 0)),
            ("turns/s", lambda k: _f(k["turns_per_s"], 3)), ("goodput", lambda k: _f(k["goodput_at_slo"], 3)),
            ("GPU-s", lambda k: _f(k["production"]["gpu_s_per_turn"]["mean"], 3))]
    rows = [["kind", *[c for c, _ in cols]]]
    rows += [[name, *[str(f(k)) for _, f in cols]] for name, k in doc["pipelines"].items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    for name, r in doc["ratios"].items():
        lines.append(f"{name}: " + "  ".join(f"{k} {_f(v, 3)}" for k, v in r.items()))
    return "\n".join(lines)


def plot_goodput(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Goodput at the SLO (and turns per second, dashed) against the offered load, one line per kind."""
    from serve.loadtest.report import _plt

    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, k in doc["pipelines"].items():
        pts = sorted((lv["users"], lv["goodput_rps"], lv["turns_per_s"]) for lv in k["load"])
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{name} goodput")
        ax.plot([p[0] for p in pts], [p[2] for p in pts], linestyle="--", color=line.get_color(), alpha=0.5,
                label=f"{name} turns/s")
    slo = doc["run"].get("slo") or {}
    ax.set_xlabel("offered load: concurrent users (closed loop)")
    ax.set_ylabel("turns per second")
    ax.set_title(f"goodput at the SLO (first token ≤ {slo.get('ttft_ms')} ms, end ≤ {slo.get('e2e_ms')} ms)",
                 fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
