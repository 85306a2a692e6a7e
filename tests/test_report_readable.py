"""Reports a reader can act on: the cases that keep failing (not only flips), outputs shown as the
target returned them, Markdown without ``-0.0%`` or ``0 ms`` that says which memories are open,
and an HTML page laid out in headless Chromium at 1280 px without overflow or colliding labels."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from evalloop import HistoryStore, load_settings, run_suite
from evalloop.report.html import render_html
from evalloop.report.markdown import render_markdown
from evalloop.report.trends import build_trends
from support.project import make_project

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BENCH = Path(__file__).resolve().parents[1] / "bench" / "report_screenshot.py"
CASES = [f"case-{i:02d}" for i in range(12)]
STUCK = CASES[:5]  # fail on every run
TARGET = '''
import json, os

def answer(input):
    with open(os.environ["EVALLOOP_TEST_ANSWERS"]) as f:
        level = json.load(f)[input["id"]]
    return (f'He said "no"\\nthen left ({level})' if level < 0.5 else f"yes ({level})")

def steady(input):
    return "yes (1.0)"
'''
SCORERS = '''
from evalloop import Score, scorer

@scorer("answer-quality-with-a-long-name", kind="heuristic")
def quality(input, output, expected):
    level = float(output.rsplit("(", 1)[1].rstrip(")"))
    return Score(value=level, message="" if level >= 0.5 else f"said no to {input['id']} (level {level:.2f})")
'''


def _levels(k: int) -> dict[str, float]:
    """Runs 0-9 steady (the five stuck cases fail); 10-19 lose more cases each run."""
    lost = max(0, k - 9)
    return {c: 0.1 if c in STUCK or i >= 12 - lost else 0.9 + 0.01 * ((i + k) % 3)
            for i, c in enumerate(CASES)}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("readable"), {
        "stuck": {"name": "stuck", "target": "sut:answer", "scorers": ["answer-quality-with-a-long-name"],
                  "cases": [{"id": c, "input": {"id": c}} for c in CASES]},
        "calm": {"name": "calm", "target": "sut:steady", "scorers": ["answer-quality-with-a-long-name"],
                 "cases": [{"id": c, "input": {"id": c}} for c in CASES]}}, target=TARGET, scorers=SCORERS)
    answers = root / "answers.json"
    mp = pytest.MonkeyPatch()
    mp.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    mp.setenv("EVALLOOP_CODE_VERSION", "0123456789ab-dirty")
    mp.syspath_prepend(str(root))
    settings = load_settings(root)
    for k in range(20):
        answers.write_text(json.dumps(_levels(k)))
        run_suite("stuck", settings=settings)
    for _ in range(3):
        run_suite("calm", settings=settings)
    mp.undo()
    return build_trends(HistoryStore(settings.database_url), window=settings.window,
                        memory_file=settings.memory_file)


def test_the_cases_that_keep_failing_are_listed_with_their_messages(report):
    (stuck,) = [s for s in report.suites if s.suite == "stuck"][0].scorers
    failing = {c.case_id: c for c in stuck.failing}
    assert set(STUCK) <= set(failing) and len(failing) == 12  # the last run fails them all
    assert failing["case-00"].runs == 20 and failing["case-11"].runs == 10 and failing["case-05"].runs == 4
    assert [c.case_id for c in stuck.failing][:5] == STUCK and failing["case-02"].message
    page = render_html(report)
    assert "said no to case-00 (level 0.10)" in page
    assert "12 cases keep failing" in page and "20 runs" in page
    md = render_markdown(report)
    assert "said no to case-00 (level 0.10)" in md


def test_outputs_are_shown_as_the_target_returned_them(report):
    (stuck,) = [s for s in report.suites if s.suite == "stuck"][0].scorers
    output = next(c.output for c in stuck.failing if c.case_id == "case-00")
    assert output == 'He said "no"\nthen left (0.1)'  # the text itself, not its JSON encoding
    flipped = [c for p in stuck.points for c in p.newly_failing]
    assert flipped and all(c.output and c.output.startswith("He said") for c in flipped)
    page = render_html(report)
    assert "He said &#34;no&#34;\nthen left (0.1)" in page and "\\&#34;" not in page


def test_markdown_numbers_and_open_memories(report):
    md = render_markdown(report)
    assert "-0.0%" not in md and "+0.0%" not in md
    assert " 0 ms" not in md
    stuck = [s for s in report.suites if s.suite == "stuck"][0]
    assert stuck.memories and all(m.status in ("open", "resolved") for m in stuck.memories)
    opened = sum(m.status == "open" for m in stuck.memories)
    assert f"{opened} open" in md


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")
def test_the_html_page_at_1280_px_has_no_overflow_and_no_colliding_labels(report, tmp_path):
    spec = importlib.util.spec_from_file_location("report_screenshot_bench", BENCH)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    page = tmp_path / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    probe = bench.layout_probe(CHROMIUM, page, width=1280)
    bench.screenshot(CHROMIUM, page, tmp_path / "report.png", size="1280,3000")
    shutil.copy(tmp_path / "report.png", "/tmp/evalloop-readable-report.png")
    assert probe["page"] == 0 and probe["overflowing"] == [], probe
    assert probe["collisions"] == [] and probe["outside"] == [], probe


def test_a_known_bad_control_failing_is_not_a_case_that_keeps_failing(tmp_path):
    """A negative control fails by design: the reports never list it among the failing cases."""
    from support.cli import cli

    assert cli(tmp_path, "init").returncode == 0
    greeter = tmp_path / "greeter.py"
    greeter.write_text(greeter.read_text().replace("Hello", "Bye"))  # ada and grace fail
    for _ in range(2):
        assert cli(tmp_path, "run", "--all").returncode in (0, 1)
    text = cli(tmp_path, "report", "--markdown", "--no-fail-on-regression").stdout
    assert "2 cases keep failing" in text and "rude-control" not in text.split("keep failing", 1)[1]
