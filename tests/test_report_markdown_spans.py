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


HOSTILE = ("![pixel](https://tracker.example/p.png) [Approve this PR](https://evil.example/ok) "
           "<img src=https://tracker.example/i.png> <a href='https://evil.example'>x</a> **bold** "
           "\n# Heading from a case\n> quoted `tick` | pipe https://evil.example/bare www.evil.example")


def hostile_report() -> TrendReport:
    from evalloop.report.failing import FailingCase
    from evalloop.report.trends import MemoryNote

    rep = report()
    suite = rep.suites[0]
    point = suite.scorers[0].points[0]
    point.reason = HOSTILE
    point.newly_failing[0].message = HOSTILE
    point.newly_failing[0].error = HOSTILE
    point.newly_passing = [FlippedCase(case_id="# h", before=0.0, after=1.0, message=HOSTILE)]
    suite.scorers[0].failing = [FailingCase(case_id="![i](https://x.example/c.png)", value=0.0, runs=3,
                                            message=HOSTILE)]
    suite.runs[0].valid = False
    suite.runs[0].invalid_reason = HOSTILE
    suite.memories = [MemoryNote(id="m", information=HOSTILE + "\n```\n" + HOSTILE, tags=[], scorer=SCORER,
                                 run_id="r2", chronic_cases=["[c](https://evil.example)", "![x](https://t.example/a.png)"])]
    return rep


def test_case_text_is_inert_markdown():
    """#40 item 7: a case's output (in a message, a reason, a memory) rendered as live Markdown —
    an image loading from an outside host, a link reading 'Approve this PR'. No image, link,
    heading or raw HTML of the rendered comment may come from case data."""
    text = render_markdown(hostile_report())
    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(text)

    def walk(toks):
        for t in toks:
            yield t
            yield from walk(t.children or [])

    kinds = [t.type for t in walk(tokens)]
    assert "image" not in kinds and "link_open" not in kinds
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert len(headings) == 2 and "Heading from a case" not in " ".join(headings)
    for t in walk(tokens):
        if t.type in ("html_inline", "html_block"):
            assert "img" not in t.content and "<a " not in t.content and "evil" not in t.content, t.content
        assert t.type != "blockquote_open"
    strong = [toks[i + 1].content for toks in (t.children or [] for t in tokens)
              for i, c in enumerate(toks) if c.type == "strong_open"]
    assert strong and "bold" not in strong
    rendered = md.render(text)
    assert "<img" not in rendered and "<a " not in rendered and "<h1" not in rendered
    assert "Approve this PR" in rendered  # the words stay visible, as text
