"""Aggregates of ``tandem eval`` (serve/eval/report.py): percentiles, rates, ratios, goals, table, plot."""

from __future__ import annotations

from typing import Any

from serve.eval.report import (
    goals,
    markdown,
    p50_p90,
    percentile,
    plot_first_token_cdf,
    rate,
    ratios,
    summarise,
    summary_doc,
)


def test_percentiles_interpolate_linearly():
    assert percentile([400, 100, 300, 200], 0.5) == 250.0
    assert percentile([100, 200, 300, 400], 0.9) == 370.0
    assert percentile([], 0.5) is None
    assert p50_p90([None, 10.0]) == {"p50": 10.0, "p90": 10.0, "n": 1}


def test_rate_ignores_unscored_turns():
    assert rate([True, False, None]) == {"n": 2, "ok": 1, "pct": 50.0}
    assert rate([None, None]) is None


def row(kind: str, suite: str, ft: float | None, **kw: Any) -> dict[str, Any]:
    return {"kind": kind, "suite": suite, "first_token_ms": ft, "e2e_ms": (ft or 0) + 1000, "status": "ok",
            "correct": None, "terminal": None, "invented": [], "unrequested": [], "unselected": [], **kw}


def test_summarise_counts_lists_and_keeps_unmeasured_as_none():
    rows = [row("dr", "flows", 100, invented=[{"arg": "email"}, {"arg": "zip"}], correct=True),
            row("dr", "flows", None, invented=[], correct=False, unrequested=["card.cancel_order"])]
    s = summarise(rows)
    assert s["invented_arguments"] == 2 and s["unrequested_cards"] == 1 and s["delivered_unselected_actions"] == 0
    assert s["correct"] == {"n": 2, "ok": 1, "pct": 50.0} and s["turns_without_delta"] == 1
    assert "intent_accuracy" not in s
    unmeasured = summarise([row("sgc_full", "flows", 10, invented=None)])
    assert unmeasured["invented_arguments"] is None


def m(**measures: Any) -> dict[str, Any]:
    """A row's pack measures."""
    return {"measures": measures}


def test_pack_measures_are_rates_of_verdicts_and_counts_of_findings():
    rows = [row("tandem", "coach", 50, **m(intent_accuracy=True, grounding_accuracy=None, unowned_mentions=["Bb"],
                                          consecutive_repeats=[], contradictions=["reply"])),
            row("tandem", "coach", 60, **m(intent_accuracy=False, grounding_accuracy=True, unowned_mentions=[],
                                          consecutive_repeats=["c7"], contradictions=[])),
            row("tandem", "coach", 70, **m(intent_accuracy=None, grounding_accuracy=None, unowned_mentions=None,
                                          consecutive_repeats=None, contradictions=["reply", "c2"]))]
    s = summarise(rows)
    assert s["intent_accuracy"] == {"n": 2, "ok": 1, "pct": 50.0}
    assert s["grounding_accuracy"] == {"n": 1, "ok": 1, "pct": 100.0}
    assert (s["unowned_mentions"], s["consecutive_repeats"], s["contradictions"]) == (1, 1, 3)
    assert s["measures"] == ["intent_accuracy", "grounding_accuracy", "unowned_mentions", "consecutive_repeats",
                             "contradictions"]
    assert "measures" not in summarise([row("tandem", "flows", 10)])  # no judge, no pack measures
    unjudged = summarise([row("tandem", "coach", 10, **m(intent_accuracy=None))])
    assert unjudged["intent_accuracy"] is None


def _pipelines(t: float, d: float, p: float) -> dict[str, Any]:
    rows = [row("tandem", "tau2-openings", t), row("dr", "tau2-openings", d), row("prompting", "tau2-openings", p)]
    return summary_doc(rows, {})["pipelines"]


def test_ratios_and_the_first_token_goals_at_their_boundaries():
    r = ratios(_pipelines(200, 1000, 180))
    assert r["tau2-openings"] == {"tandem_vs_dr_first_token_p50": 5.0, "tandem_over_prompting_first_token_p50": 1.11,
                                  "tandem_vs_dr_first_token_or_end_p50": 5.0,
                                  "tandem_over_prompting_first_token_or_end_p50": 1.11}
    g = goals(_pipelines(200, 1000, 180), r)
    assert g["tandem_first_token_5x_sooner_than_dr_tau2"]["met"] is True
    assert g["tandem_first_token_within_1.2x_prompting_tau2"]["met"] is True
    p = _pipelines(200, 999, 167)
    g2 = goals(p, ratios(p))
    assert g2["tandem_first_token_5x_sooner_than_dr_tau2"] == {"value": 5.0, "met": False}  # 4.995x, shown rounded
    assert g2["tandem_first_token_within_1.2x_prompting_tau2"] == {"value": 1.2, "met": True}  # 1.198x
    p = _pipelines(200, 999, 166)
    assert goals(p, ratios(p))["tandem_first_token_within_1.2x_prompting_tau2"] == {"value": 1.2, "met": False}


def test_a_turn_without_a_delta_counts_with_its_end_in_the_censored_measure():
    rows = [row("dr", "tau2-openings", None), row("dr", "tau2-openings", 3000.0),
            row("tandem", "tau2-openings", 500.0), row("tandem", "tau2-openings", 700.0)]
    rows[0]["e2e_ms"] = 60000.0
    p = summary_doc(rows, {})["pipelines"]
    dr = p["dr"]["suites"]["tau2-openings"]
    assert dr["first_token_ms"] == {"p50": 3000.0, "p90": 3000.0, "n": 1}
    assert dr["first_token_or_end_ms"]["p50"] == 31500.0  # (3000 + 60000) / 2
    assert ratios(p)["tau2-openings"]["tandem_vs_dr_first_token_or_end_p50"] == 52.5  # 31500 / 600


def test_correctness_and_safety_goals():
    rows = [row("tandem", "tau2-openings", 10, correct=True), row("tandem", "tau2-openings", 10, correct=False),
            row("tandem", "flows", 10, correct=True), row("tandem", "flows", 10, correct=False),
            row("dr", "flows", 10, unselected=["card.x"])]
    doc = summary_doc(rows, {})
    g = doc["goals"]
    assert g["tandem_tau2_correct_50pct"]["met"] is True
    assert g["tandem_flows_all_correct"]["met"] is False
    assert g["tandem_invented_arguments_zero"]["met"] is True
    assert g["delivered_unselected_actions_zero_everywhere"]["met"] is False
    assert g["tandem_first_token_5x_sooner_than_dr_tau2"]["met"] is None


def test_pack_goal_lists_the_measures_where_tandem_is_worse():
    rows = [row("tandem", "coach", 10, **m(intent_accuracy=False, unowned_mentions=[], contradictions=["x"])),
            row("sgc_full", "coach", 10, **m(intent_accuracy=True, unowned_mentions=["Bb"], contradictions=[]))]
    g = summary_doc(rows, {})["goals"]["coach_tandem_no_worse_than_sgc_full"]
    assert g == {"value": ["intent_accuracy", "contradictions"], "met": False}
    even = [row("tandem", "coach", 10, **m(intent_accuracy=True, unowned_mentions=["Bb"])),
            row("sgc_full", "coach", 10, **m(intent_accuracy=True, unowned_mentions=["Bb"]))]
    assert summary_doc(even, {})["goals"]["coach_tandem_no_worse_than_sgc_full"] == {"value": [], "met": True}


def test_markdown_table_and_plot(tmp_path):
    rows = [row("tandem", "tau2-openings", 200, correct=True), row("dr", "tau2-openings", 1000, correct=False),
            row("tandem", "coach", 300, **m(intent_accuracy=True, unowned_mentions=[]))]
    doc = summary_doc(rows, {"started_at": "now"})
    md = markdown(doc)
    assert "| tandem | tau2-openings | 1 | 200 / 200 |" in md and "| dr | tau2-openings |" in md
    assert "## Decisions" in md and "## coach (the pack's measures)" in md and "tandem_vs_dr_first_token_p50 = 5.0" in md
    assert "| intent accuracy | unowned mentions |" in md
    png = plot_first_token_cdf(tmp_path / "cdf.png", rows)
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
