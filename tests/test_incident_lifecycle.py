"""Issue #22, items 2–6: the incident lifecycle through real runs (real SQLite history, the real
embedded memory store). Each test is one finding that main got wrong."""

from __future__ import annotations

from evalloop import learning, load_settings
from support.incidents import BROKEN, CASES, project, records, run


def good_runs(root, n=3, answers=None):
    for _ in range(n):
        report = run(root, answers)
        assert not report.comparison.has_regression


def test_a_recurring_regression_reopens_its_incident(tmp_path, monkeypatch):
    """Item 2: regress, fix (resolved), break the same way again: an incident is open again and
    reaches the prompt (main: the store's de-duplication returned the resolved record unchanged)."""
    root = project(tmp_path, monkeypatch, window=1)
    good_runs(root)
    first = run(root, dict.fromkeys(BROKEN, 0.0))
    assert first.comparison.has_regression
    (opened,) = records(root, "open")
    fixed = run(root)
    assert fixed.extras["memories"][0]["action"] == "resolved"
    assert records(root, "open") == []

    again = run(root, dict.fromkeys(BROKEN, 0.0))
    assert again.comparison.has_regression
    (reopened,) = records(root, "open")
    assert reopened.id == opened.id                                      # the same incident, open again
    meta = reopened.metadata
    assert meta["status"] == "open" and "status:open" in reopened.tags
    assert meta["reopened"] == 1 and meta["reopened_run_id"] == again.outcome.run.id
    assert sorted(meta["failing_cases"]) == BROKEN
    assert len(records(root)) == 1                                       # nothing silently dropped or doubled
    injected, _ = learning.injected_for(load_settings(root), "inc")
    assert injected.memory_ids == [opened.id]                            # `prompt enhance` shows it
    assert again.extras["memories"][0]["action"] == "reopened"


def test_a_partial_run_never_resolves_an_incident(tmp_path, monkeypatch):
    """Item 3: a run that did not run the incident's cases (--limit, -k/--tag) leaves it open."""
    root = project(tmp_path, monkeypatch)
    good_runs(root)
    assert run(root, dict.fromkeys(BROKEN, 0.0)).comparison.has_regression
    (opened,) = records(root, "open")
    limited = run(root, limit=10)                       # the fix is in, but only c00..c09 run
    assert limited.outcome.run.partial
    selected = run(root, select=lambda case: case.id not in BROKEN)
    assert selected.outcome.run.partial
    (still,) = records(root, "open")
    assert still.id == opened.id and still.metadata.get("resolved_run_id") is None
    # a partial run that does grade every remembered case passing still cannot resolve it
    run(root, select=lambda case: case.id in BROKEN)
    assert [r.id for r in records(root, "open")] == [opened.id]
    full = run(root)                                    # the full run does
    assert full.extras["memories"][0]["action"] == "resolved"
    (resolved,) = records(root, "resolved")
    assert resolved.metadata["resolved_run_id"] == full.outcome.run.id


def test_errored_cases_never_resolve_an_incident(tmp_path, monkeypatch):
    """Item 4: the remembered failing cases hit infrastructure errors (under the errored limit, so
    the run is valid): they were not graded, so the incident stays open."""
    root = project(tmp_path, monkeypatch)
    good_runs(root)
    assert run(root, dict.fromkeys(BROKEN, 0.0)).comparison.has_regression
    (opened,) = records(root, "open")
    errored = run(root, dict.fromkeys(BROKEN[:4], "infra"))   # 4/20 errored: within the 20 % limit
    assert errored.outcome.run.valid and not errored.outcome.run.partial
    assert errored.outcome.summaries["level"].errored == 4
    (still,) = records(root, "open")
    assert still.id == opened.id and still.metadata.get("resolved_run_id") is None
    assert run(root).extras["memories"][0]["action"] == "resolved"


def test_learning_takes_the_pass_mark_from_the_suite(tmp_path, monkeypatch):
    """Item 5: with pass_mark 0.9, cases scoring 0.6 are failing to the memory as to the verdict."""
    root = project(tmp_path, monkeypatch, pass_mark=0.9)
    good_runs(root)
    sagging = CASES[:8]
    report = run(root, dict.fromkeys(sagging, 0.6))
    s = report.comparison.scorers[0]
    assert s.is_regression and sorted(c for c, _ in s.newly_failing) == sagging
    (opened,) = records(root, "open")
    assert sorted(opened.metadata["failing_cases"]) == sagging
    assert "level: 12/20 correct" in opened.information
    for _ in range(4):                                  # still 0.6: still failing, never resolved
        run(root, dict.fromkeys(sagging, 0.6))
        assert [r.id for r in records(root, "open")] == [opened.id]
    assert run(root).extras["memories"][0]["action"] == "resolved"


def test_a_chronic_failure_is_kept_apart_and_never_keeps_an_incident_open(tmp_path, monkeypatch):
    """Item 6: c19 failed before the regression (in the baseline too): it is listed as chronic,
    the incident is about the newly failing cases only, and fixing those resolves it."""
    root = project(tmp_path, monkeypatch)
    chronic = {"c19": 0.0}
    good_runs(root, answers=chronic)
    report = run(root, {**dict.fromkeys(BROKEN, 0.0), **chronic})
    assert report.comparison.has_regression
    (opened,) = records(root, "open")
    meta = opened.metadata
    assert sorted(meta["failing_cases"]) == BROKEN and meta["chronic_cases"] == ["c19"]
    assert "- c19" not in opened.information            # the text is about the regression
    text = opened.information

    fixed = run(root, chronic)                          # the regression fixed; c19 still fails
    assert fixed.extras["memories"][0]["action"] == "resolved"
    (resolved,) = records(root, "resolved")
    assert resolved.id == opened.id and resolved.information == text   # never rewritten about c19
    assert resolved.metadata["chronic_cases"] == ["c19"]
    for _ in range(2):                                  # c19 alone opens nothing and touches nothing
        quiet = run(root, chronic)
        assert "memories" not in quiet.extras or quiet.extras["memories"] == []
        assert records(root, "open") == []
