"""Reports of a real history (8 runs, a regression at the end): trend data, HTML, Markdown, CLI."""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from evalloop import HistoryStore, load_settings, run_suite
from evalloop.cli import app
from evalloop.report.html import render_html
from evalloop.report.markdown import render_markdown, sparkline
from evalloop.report.trends import build_trends
from support.project import make_project, write_answers

CASES = [f"c{i}" for i in range(8)]
# run k: every case at LEVELS[k]; run 3 fails c5 (recovers in run 4); run 7 drops every case
# (a significant paired drop) and fails c1 and c3. Every case moving together is significant, and a
# significant drop never joins a baseline, so the runs before the drop hold their level.
LEVELS = [0.80, 0.80, 0.80, 0.80, 0.80, 0.80, 0.80, 0.60]
EVIL = "<script>alert('x')</script> & co"
SCORERS = f'''
from evalloop import Score, scorer

@scorer("value", kind="llm_operation", min_score=0)
def value(input, output, expected):
    return Score(value=float(output), message="" if float(output) >= 0.5 else "low {EVIL}")
'''


def _answers(k: int) -> dict[str, float]:
    values = {c: LEVELS[k] for c in CASES}
    if k == 3:
        values["c5"] = 0.3
    if k == 7:
        values.update(c1=0.1, c3=0.2)
    return values


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    root = tmp_path_factory.mktemp("report-project")
    suite = {"name": "similarity", "target": "sut:controlled", "scorers": ["value"],
             "cases": [{"id": c, "input": {"id": c}} for c in CASES]}
    other = {**suite, "name": "other"}
    make_project(root, {"similarity": suite, "other": other}, scorers=SCORERS)
    answers = root / "answers.json"
    old = os.environ.get("EVALLOOP_TEST_ANSWERS")
    os.environ["EVALLOOP_TEST_ANSWERS"] = str(answers)
    try:
        settings = load_settings(root)
        for k in range(len(LEVELS)):
            write_answers(answers, _answers(k))
            last = run_suite("similarity", settings=settings)
        write_answers(answers, {c: 0.9 for c in CASES})
        run_suite("other", settings=settings)
    finally:
        if old is None:
            os.environ.pop("EVALLOOP_TEST_ANSWERS", None)
        else:
            os.environ["EVALLOOP_TEST_ANSWERS"] = old
    assert last.comparison.has_regression and settings.memory_file.is_file()  # the learning loop wrote
    return settings, last.executed.run.id


@pytest.fixture(scope="module")
def trends(history):
    settings, _ = history
    return build_trends(HistoryStore(settings.database_url), ["similarity"], last=20,
                        memory_file=settings.memory_file)


def _means(k: int) -> float:
    values = _answers(k)
    return sum(values.values()) / len(values)


def test_trend_points_band_threshold_and_flips(trends, history):
    (suite,) = trends.suites
    assert suite.suite == "similarity" and len(suite.runs) == 8
    (trend,) = suite.scorers
    assert trend.scorer == "value" and trend.kind == "llm_operation" and trend.threshold == 0.15
    first, last = trend.points[0], trend.points[-1]
    assert first.baseline is None and first.band_low is None and first.verdict == "no baseline yet"
    prior = [_means(k) for k in range(2, 7)]
    assert last.mean == pytest.approx(_means(7))
    assert last.baseline == pytest.approx(sum(prior) / 5) and last.window_runs == 5
    assert last.band_low == pytest.approx(min(prior)) and last.band_high == pytest.approx(max(prior))
    assert last.threshold_line == pytest.approx(last.baseline * 0.85)
    assert last.mean < last.threshold_line and last.regression and last.verdict == "regressed"
    assert [c.case_id for c in last.newly_failing] == ["c1", "c3"]
    assert [(c.before, c.after, c.output) for c in last.newly_failing] == [(0.8, 0.1, "0.1"),
                                                                           (0.8, 0.2, "0.2")]
    assert [c.case_id for c in trend.points[3].newly_failing] == ["c5"]
    assert [c.case_id for c in trend.points[4].newly_passing] == ["c5"]
    assert [p.regression for p in trend.points].count(True) == 1
    assert all(r.latency_p95_ms is not None and r.latency_p95_ms >= r.latency_p50_ms for r in suite.runs)
    (memory,) = suite.memories  # written by the learning loop for the one regression
    assert memory.scorer == "value" and memory.run_id == history[1] == last.run_id
    assert "eval-failure" in memory.tags and "status:open" in memory.tags
    assert memory.status == "open" and memory.chronic_cases == [] and memory.state == "open"
    assert "- c1\n" in memory.information and "reason: low <script>" in memory.information
    assert last.newly_failing[0].message == f"low {EVIL}"


def test_last_n_keeps_the_window_before_the_first_shown_run(history):
    report = build_trends(HistoryStore(history[0].database_url), ["similarity"], last=3)
    points = report.suites[0].scorers[0].points
    assert len(points) == 3 and points[0].window_runs == 5 and points[0].band_low is not None
    assert report.suites[0].memory_note == "no memory store"


def test_html_is_self_contained_and_draws_the_charts(trends):
    drop = trends.suites[0].scorers[0].points[-1].drop
    page = render_html(trends, title="Nightly <evals>")
    assert page.startswith("<!DOCTYPE html>") and "<title>Nightly &lt;evals&gt;</title>" in page
    assert "<script" not in page.replace("&lt;script", "") and not re.search(r"(src|href)=\"https?:", page)
    svgs = re.findall(r"<svg class=\"chart wide\".*?</svg>", page, flags=re.S)
    assert len(svgs) == 2  # the scorer's trend and the latency chart
    assert len(re.findall(r"<svg class=\"chart narrow\"", page)) == 2  # each drawn again for a phone
    chart = ET.fromstring(svgs[0])
    polygons = [e for e in chart.iter("polygon") if e.get("class") == "band"]
    lines = {e.get("class"): e.get("points") for e in chart.iter("polyline")}
    assert len(polygons) == 1 and {"mean", "baseline", "threshold"} <= set(lines)
    markers = [g for g in chart.iter("g") if "marker" in (g.get("class") or "")]
    assert len(markers) == 8
    regressed = [g for g in markers if g.get("class") == "marker regressed"]
    assert len(regressed) == 1 and f"−{drop:.0%}" in "".join(regressed[0].itertext())
    cy = float(regressed[0].find("circle").get("cy"))
    threshold_y = float(lines["threshold"].split()[-1].split(",")[1])
    baseline_y = float(lines["baseline"].split()[-1].split(",")[1])
    assert cy > threshold_y > baseline_y  # below the threshold line on screen (y grows downward)
    assert "verdict: regressed" in regressed[0].find("circle/title").text
    assert "pass → fail" in page and "<code>c1</code>" in page and "<code>c3</code>" in page
    assert "baseline: mean of the 5 runs before" in page and "band: min–max of those runs" in page
    assert "Regression in the latest run of 1 suite" in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co" in page
    runs = page[page.index('<table class="runs stack">'):]
    assert runs[:runs.index("</table>")].count('<tr><td data-label="run"><code>') == 8  # a row per run: cost, latency


def test_markdown_for_a_pull_request(trends):
    text = render_markdown(trends)
    assert text.startswith("### evalloop: ❌ regression in `similarity`")
    row = next(line for line in text.splitlines() if line.startswith("| `value`"))
    drop = (trends.suites[0].scorers[0].points[-1].drop or 0) * 100
    assert f"−{drop:.1f}%".replace("−", "-") in row and "❌ **regressed**" in row
    assert row.rstrip(" |").endswith(sparkline([p.mean for p in trends.suites[0].scorers[0].points]))
    assert "| `c1` | pass → **fail** | 0.80 → 0.10 | low \\<script\\>" in text
    outside_code = re.sub(r"```text\n.*?\n```", "", text, flags=re.S)
    assert "<script>" not in outside_code and "<script>" in text  # raw only inside a code block
    assert "1 failure memory stored for this suite" in text and "reason: low <script>" in text


def test_sparkline_scales_and_marks_gaps():
    assert sparkline([0.0, 0.5, 1.0, None]) == "▁▅█·"
    assert sparkline([0.7, 0.7]) == "▅▅" and sparkline([]) == ""


def test_cli_report_html_markdown_and_errors(history, tmp_path):
    runner = CliRunner()
    project = ["--project", str(history[0].project_dir)]
    out = tmp_path / "r" / "report.html"
    res = runner.invoke(app, ["report", "--suite", "similarity", "--html", str(out), *project])
    assert res.exit_code == 1, res.output  # the latest run regressed: a report fails like `run` by default
    assert out.read_text().count("<svg class=\"chart wide\"") == 2
    res = runner.invoke(app, ["report", "--all", "--markdown", "--fail-on-regression", *project])
    assert res.exit_code == 1 and "regression in `similarity`" in res.stdout and "#### `other`" in res.stdout
    res = runner.invoke(app, ["report", "--json", "--last", "2", "--no-fail-on-regression", *project])
    assert res.exit_code == 0 and '"suite": "other"' in res.stdout
    res = runner.invoke(app, ["report", "--suite", "nope", *project])
    assert res.exit_code == 2 and "no runs of suite 'nope'" in res.stderr
    assert "suites with runs: other, similarity" in res.stderr
    res = runner.invoke(app, ["report", "--project", str(tmp_path)])
    assert res.exit_code == 2 and "no history yet" in res.stderr
    assert not (tmp_path / "history" / "evalloop.db").exists()  # a report creates nothing


def test_invalid_runs_and_ungraded_scorers_still_render(tmp_path, monkeypatch):
    suite = {"name": "broken", "target": "sut:controlled", "scorers": ["value", "explodes"],
             "cases": [{"id": c, "input": {"id": c}} for c in CASES[:3]]}
    root = make_project(tmp_path, {"broken": suite})
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(tmp_path / "answers.json"))
    write_answers(tmp_path / "answers.json", {c: 0.9 for c in CASES})
    settings = load_settings(root)
    for _ in range(2):
        run_suite("broken", settings=settings)
    report = build_trends(HistoryStore(settings.database_url))
    value, explodes = sorted(report.suites[0].scorers, key=lambda t: t.scorer != "value")
    assert [p.eligible for p in value.points] == [False, False]
    # validity is per scorer: "value" is judged in an invalid run (no valid run before it to compare with)
    assert value.points[1].baseline is None and value.points[1].verdict == "no baseline yet"
    assert [p.mean for p in explodes.points] == [None, None] and explodes.points[0].errored == 3
    page = render_html(report)
    charts = {c.get("aria-label"): c for c in map(ET.fromstring, re.findall(r"<svg .*?</svg>", page, flags=re.S))}
    assert [g.get("class") for g in charts["value over 2 runs"].iter("g")] == ["marker ineligible"] * 2
    assert not list(charts["explodes over 2 runs"].iter("g"))
    assert page.count(">invalid <span") == 2 and "explodes: 3/3 grades errored" in page
    assert "| `explodes` | — | — | — | 10.0% | — | ❌ **invalid run** |" in render_markdown(report)


def test_reports_during_a_suites_first_run(tmp_path, monkeypatch):
    """#40 item 8: `report --all --html` while a suite's first run was in progress ended in a
    traceback (jinja2 UndefinedError). Every format marks the suite 'first run in progress'."""
    from evalloop.history.models import Run

    suite = {"name": "done", "target": "sut:controlled", "scorers": ["value"],
             "cases": [{"id": c, "input": {"id": c}} for c in CASES[:2]]}
    root = make_project(tmp_path, {"done": suite, "fresh": {**suite, "name": "fresh"}}, scorers=SCORERS)
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(tmp_path / "answers.json"))
    write_answers(tmp_path / "answers.json", {c: 0.9 for c in CASES})
    settings = load_settings(root)
    run_suite("done", settings=settings)
    store = HistoryStore(settings.database_url)
    store.begin_run(Run(id="20990101T000000000-fresh0", suite="fresh"))
    runner = CliRunner()
    project = ["--project", str(root)]
    out = tmp_path / "report.html"
    res = runner.invoke(app, ["report", "--all", "--html", str(out), *project])
    assert res.exit_code == 0 and res.exception is None, res.output
    page = out.read_text()
    assert "fresh" in page and "first run in progress" in page
    for fmt in (["--markdown"], ["--json"], []):
        res = runner.invoke(app, ["report", "--all", *fmt, *project])
        assert res.exit_code == 0 and res.exception is None, (fmt, res.output)
        assert "first run in progress" in res.stdout or '"in_progress": 1' in res.stdout, (fmt, res.stdout)
    res = runner.invoke(app, ["report", "--suite", "fresh", "--html", str(out), *project])
    assert res.exit_code == 0 and "first run in progress" in out.read_text()
