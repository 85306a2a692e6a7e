"""Markdown code spans show ids verbatim: no HTML entities inside, backticks and pipes kept."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

from markdown_it import MarkdownIt

from evalloop.report.markdown import render_markdown
from evalloop.report.trends import (
    FlippedCase,
    RunRow,
    ScorerTrend,
    SuiteTrend,
    TrendPoint,
    TrendReport,
)

NOW = datetime(2026, 1, 2, tzinfo=UTC)
CASE = "a<b>`c|d"
EDGE = "`edge"
SCORER = "val`ue"
SUITE = "s<1>"


def report() -> TrendReport:
    flips = [FlippedCase(case_id=CASE, before=1.0, after=0.0, message="x < y"),
             FlippedCase(case_id=EDGE, before=1.0, after=0.0)]
    point = TrendPoint(run_id="r2", started_at=NOW, mean=0.5, n=2, errored=0, skipped=False,
                       verdict="regressed", drop=0.5, baseline=1.0, previous_run="r<1>",
                       newly_failing=flips)
    run = RunRow(run_id="r2", started_at=NOW, status="completed", valid=True, invalid_reason=None,
                 code_version=None, n_cases=2, epochs=1, case_errors=0, cost_usd=0.0,
                 input_tokens=0, output_tokens=0, llm_calls=0, cache_hits=0, latency_mean_ms=None,
                 latency_p50_ms=None, latency_p95_ms=None)
    suite = SuiteTrend(suite=SUITE, runs=[run], scorers=[ScorerTrend(
        scorer=SCORER, kind="heuristic", threshold=0.1, pass_mark=0.5, points=[point])])
    return TrendReport(generated_at=NOW, database="sqlite://", last=20, window=5, suites=[suite])


def code_texts(markdown: str) -> list[str]:
    """What a CommonMark + tables renderer (as GitHub) shows inside <code>."""
    rendered = MarkdownIt("commonmark").enable("table").render(markdown)
    return [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", rendered, flags=re.S)]


def test_ids_in_code_spans_render_verbatim():
    text = render_markdown(report())
    assert "&lt;" not in text.split("<details")[0]  # no entities in the Markdown spans
    shown = code_texts(text)
    for raw in (CASE, EDGE, SCORER, SUITE, "r2"):
        assert raw in shown, (raw, shown)
    assert "r<1>" in shown  # the <summary> is HTML: escaped there, and decoded by the browser
    assert "| ``a<b>`c\\|d`` | pass → **fail** |" in text
