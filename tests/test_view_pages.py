"""A run's page reads every case's facts and one page's rows: its counts, filters and pages over a
run larger than a page, a comparison's pages, the flips of known-bad cases, and a suite file
edited between requests (over real HTTP on 127.0.0.1)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
import yaml

from evalloop import HistoryStore, load_settings, run_suite
from evalloop.report.cases import load_cases
from evalloop.suites.lookup import find_suite
from support.project import controlled_suite, make_project, write_answers
from support.viewer import serving

N = 130  # more than two pages of 50
SMOKE = {f"c{i}" for i in range(N) if i % 5 == 0}  # tagged smoke, and held out (holdout: {tags: [smoke]})
FAILING = {f"c{i}" for i in range(N) if i % 2 == 0}  # fail in the second run (passed in the first)


def _ids(page: str) -> list[str]:
    return re.findall(r"<h3><code>(c\d+)</code>", page)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    suite = controlled_suite(N)
    suite["holdout"] = {"tags": ["smoke"]}
    for case in suite["cases"]:
        case["tags"] = ["smoke" if case["id"] in SMOKE else "deep"]
    make_project(root, {"controlled": suite})
    mp = pytest.MonkeyPatch()
    mp.setenv("EVALLOOP_TEST_ANSWERS", str(root / "answers.json"))
    mp.syspath_prepend(str(root))
    settings = load_settings(root)
    ids = []
    try:
        for k in range(2):
            write_answers(root / "answers.json", {f"c{i}": 0.1 if k and f"c{i}" in FAILING else 0.9 for i in range(N)})
            ids.append(run_suite("controlled", settings=settings).comparison.run.id)
    finally:
        mp.undo()
    return root, settings, ids


def get(base: str, path: str, **params: str) -> str:
    res = httpx.get(base + path, params=params, timeout=30)
    assert res.status_code == 200, res.text
    return res.text


def test_filters_count_every_case_and_page_what_they_keep(two_runs):
    _, settings, (_, run) = two_runs
    order = [f"c{i}" for i in range(N)]  # run order
    with serving(settings) as base:
        page = get(base, f"/runs/{run}")
        assert "failing (65)" in page and "flipped (65)" in page and "yes (26)" in page
        assert _ids(page) == order[:50]
        failing = [c for c in order if c in FAILING]
        first, second = (get(base, f"/runs/{run}", failing="1", page=str(n)) for n in (1, 2))
        assert _ids(first) == failing[:50] and _ids(second) == failing[50:]
        assert "65 of 130 cases; 51–65 shown" in second
        smoke = get(base, f"/runs/{run}", failing="1", tag="smoke")
        assert _ids(smoke) == [c for c in failing if c in SMOKE] and "13 of 130 cases" in smoke
        kept = [c for c in failing if c not in SMOKE]
        learn = get(base, f"/runs/{run}", flipped="1", held_out="no", page="2")
        assert _ids(learn) == kept[50:] and f"{len(kept)} of 130 cases" in learn
        by_scorer = get(base, f"/runs/{run}", scorer="value", failing="1", q="c1*", page="1")
        assert _ids(by_scorer) == [c for c in failing if c.startswith("c1")]


def test_a_comparison_pages_the_newly_failing_first(two_runs):
    _, settings, (before, after) = two_runs
    newly = sorted(FAILING)  # each moved by the same 0.8: by id
    with serving(settings) as base:
        first = get(base, f"/compare/{before}/{after}")
        assert "65 newly failing · 0 newly passing · 0 still failing · 65 moved" in first
        assert _ids(first) == newly[:50]
        second = get(base, f"/compare/{before}/{after}", page="2")
        shown = _ids(second)
        assert shown[:15] == newly[50:] and len(shown) == 50 and not set(shown[15:]) & FAILING
        assert "held out" in get(base, f"/compare/{before}/{after}", page="1")  # c0: smoke, held out


def test_a_suite_file_edited_between_requests_is_read_again(two_runs, tmp_path):
    root, settings, (_, run) = two_runs
    path = root / "fixtures" / "controlled.yaml"
    original = path.read_text()
    with serving(settings) as base:
        assert "yes (26)" in get(base, f"/runs/{run}") and "edited-input" not in get(base, f"/runs/{run}")
        suite = yaml.safe_load(original)
        suite["holdout"] = {"tags": ["deep"]}
        suite["cases"][0]["input"]["note"] = "edited-input"
        try:
            path.write_text(yaml.safe_dump(suite, sort_keys=False))
            page = get(base, f"/runs/{run}")
            assert "edited-input" in page and "yes (104)" in page  # the input, and the held-out part
        finally:
            path.write_text(original)


def test_a_known_bad_case_that_fails_again_has_not_flipped(tmp_path, monkeypatch):
    """A negative control passes by failing; the run before it is graded by the same rule, so a
    control that fails in both runs is no flip (it was "newly passing" in every run)."""
    suite = controlled_suite(4)
    suite["cases"][0]["expect"] = "fail"
    root = make_project(tmp_path, {"controlled": suite})
    write_answers(root / "answers.json", {"c0": 0.1, "c1": 0.9, "c2": 0.9, "c3": 0.1})
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(root / "answers.json"))
    monkeypatch.syspath_prepend(str(root))
    settings = load_settings(root)
    ids = [run_suite("controlled", settings=settings).comparison.run.id for _ in range(2)]
    views = load_cases(HistoryStore(settings.database_url, readonly=True), ids[1],
                       suite=find_suite("controlled", Path(root)), previous_run=ids[0])
    assert [(v.case_id, v.passed, v.change) for v in views] == [
        ("c0", True, None), ("c1", True, None), ("c2", True, None), ("c3", False, None)]
    with serving(settings) as base:
        assert "flipped (0)" in get(base, f"/runs/{ids[1]}")
