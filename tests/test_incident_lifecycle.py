"""Issue #22, items 2–6: the incident lifecycle through real runs (real SQLite history, the real
embedded memory store). Each test is one finding that main got wrong."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from evalloop import RunOptions, load_settings
from evalloop.cli import app
from evalloop.history import HistoryStore
from evalloop.learning import incidents as learning
from evalloop.learning import injection
from evalloop.report.trends import build_trends
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
    assert meta["reopened"] == 1 and meta["reopened_run_id"] == again.executed.run.id
    assert sorted(meta["failing_cases"]) == BROKEN
    assert len(records(root)) == 1                                       # nothing silently dropped or doubled
    injected, _ = injection.injected_for(load_settings(root), "inc")
    assert injected.memory_ids == [opened.id]                            # `prompt enhance` shows it
    assert again.extras["memories"][0]["action"] == "reopened"


def test_a_partial_run_never_resolves_an_incident(tmp_path, monkeypatch):
    """Item 3: a run that did not run the incident's cases (--limit, -k/--tag) leaves it open."""
    root = project(tmp_path, monkeypatch)
    good_runs(root)
    assert run(root, dict.fromkeys(BROKEN, 0.0)).comparison.has_regression
    (opened,) = records(root, "open")
    limited = run(root, options=RunOptions(limit=10))   # the fix is in, but only c00..c09 run
    assert limited.executed.run.partial
    selected = run(root, options=RunOptions(select=lambda case: case.id not in BROKEN))
    assert selected.executed.run.partial
    (still,) = records(root, "open")
    assert still.id == opened.id and still.metadata.get("resolved_run_id") is None
    # a partial run that does grade every remembered case passing still cannot resolve it
    run(root, options=RunOptions(select=lambda case: case.id in BROKEN))
    assert [r.id for r in records(root, "open")] == [opened.id]
    full = run(root)                                    # the full run does
    assert full.extras["memories"][0]["action"] == "resolved"
    (resolved,) = records(root, "resolved")
    assert resolved.metadata["resolved_run_id"] == full.executed.run.id


def test_errored_cases_never_resolve_an_incident(tmp_path, monkeypatch):
    """Item 4: the remembered failing cases hit infrastructure errors (under the errored limit, so
    the run is valid): they were not graded, so the incident stays open."""
    root = project(tmp_path, monkeypatch)
    good_runs(root)
    assert run(root, dict.fromkeys(BROKEN, 0.0)).comparison.has_regression
    (opened,) = records(root, "open")
    errored = run(root, dict.fromkeys(BROKEN[:4], "infra"))   # 4/20 errored: within the 20 % limit
    assert errored.executed.run.valid and not errored.executed.run.partial
    assert errored.executed.summaries["level"].errored == 4
    (still,) = records(root, "open")
    assert still.id == opened.id and still.metadata.get("resolved_run_id") is None
    assert run(root).extras["memories"][0]["action"] == "resolved"


def test_learning_takes_the_pass_mark_from_the_suite(tmp_path, monkeypatch):
    """Item 5: with pass_mark 0.9, cases scoring 0.6 are failing to the memory as to the verdict."""
    root = project(tmp_path, monkeypatch, pass_mark=0.9)
    good_runs(root)
    sagging = CASES[:10]  # a drop of 20 %, shown to be at least the 10 % threshold
    report = run(root, dict.fromkeys(sagging, 0.6))
    s = report.comparison.scorers[0]
    assert s.is_regression and sorted(c for c, _ in s.newly_failing) == sagging
    (opened,) = records(root, "open")
    assert sorted(opened.metadata["failing_cases"]) == sagging
    assert "level: 10/20 correct" in opened.information
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
    assert any("1 case(s) failed before this regression too (chronic, kept apart from it): c19" in n
               for n in report.notices)
    line = "level: open, runs seen 1; regression cases (6) c00, c01, c02, c03, c04, c05; " \
           "chronic, failing before it too (1) c19"
    shown = CliRunner().invoke(app, ["show", "last", "--project", str(root)], terminal_width=400)
    assert shown.exit_code == 0 and f"incident {opened.id} — {line}" in shown.output, shown.output
    listed = CliRunner().invoke(app, ["memories", "list", "--tag", "eval-failure", "--json", "--project", str(root)])
    assert listed.exit_code == 0 and [r["incident"] for r in json.loads(listed.output)] == [line]
    settings = load_settings(root)
    (note,) = build_trends(HistoryStore(settings.database_url), ["inc"], memory_file=settings.memory_file) \
        .suites[0].memories                            # the HTML and Markdown reports show its state
    assert note.state == "open; chronic (failing before it too): c19"

    fixed = run(root, chronic)                          # the regression fixed; c19 still fails
    assert fixed.extras["memories"][0]["action"] == "resolved"
    (resolved,) = records(root, "resolved")
    assert resolved.id == opened.id and resolved.information == text   # never rewritten about c19
    assert resolved.metadata["chronic_cases"] == ["c19"]
    for _ in range(2):                                  # c19 alone opens nothing and touches nothing
        quiet = run(root, chronic)
        assert "memories" not in quiet.extras or quiet.extras["memories"] == []
        assert records(root, "open") == []


def test_one_learning_step_at_a_time_per_suite(tmp_path, monkeypatch):
    """The learning step holds the suite's `learn:<suite>` lease in the history database: a step
    of another process waits for it, and past the wait the run says so and writes nothing."""
    import threading

    from evalloop.history.locks import DatabaseLock

    root = project(tmp_path, monkeypatch)
    good_runs(root)
    url = load_settings(root).database_url
    other = DatabaseLock(url, "learn:inc", owner="elsewhere:1:abc")   # another process's step
    assert other.acquire()
    monkeypatch.setattr(learning, "LOCK_WAIT_SECONDS", 0.3)
    busy = run(root, dict.fromkeys(BROKEN, 0.0))
    assert busy.comparison.has_regression and records(root) == []
    assert any("failure memories not stored: the learning step of suite 'inc' is held by elsewhere:1:abc" in n
               for n in busy.notices), busy.notices

    monkeypatch.setattr(learning, "LOCK_WAIT_SECONDS", 30.0)
    threading.Timer(0.5, other.release).start()                      # that step ends: this one goes on
    waited = run(root, dict.fromkeys(BROKEN, 0.0))
    assert waited.extras["memories"][0]["action"] == "opened"
    (opened,) = records(root, "open")
    assert opened.metadata["eval_run_id"] == waited.executed.run.id


def test_accepted_incidents_are_kept_closed_and_never_injected(tmp_path, monkeypatch):
    """`accept_incidents` (what `evalloop accept` calls) closes the open incidents of a suite (or of
    one scorer) as accepted: kept for history with the reason and run, never injected."""
    from evalloop.memory.store import MemoryStore

    root = project(tmp_path, monkeypatch)
    good_runs(root)
    broken_run = run(root, dict.fromkeys(BROKEN, 0.0))
    (opened,) = records(root, "open")
    settings = load_settings(root)
    with MemoryStore(settings.memory_file) as store:
        assert learning.accept_incidents(store, "inc", "other-scorer", "not this one", None) == []
        ids = learning.accept_incidents(store, "inc", None, "the new prompt answers differently",
                                        broken_run.executed.run.id)
        assert ids == [opened.id]
        assert learning.accept_incidents(store, "inc", None, "again", None) == []   # nothing open now
    (accepted,) = records(root, "accepted")
    meta = accepted.metadata
    assert accepted.id == opened.id and "status:accepted" in accepted.tags
    assert meta["accepted_reason"] == "the new prompt answers differently"
    assert meta["accepted_run_id"] == broken_run.executed.run.id
    assert accepted.information == opened.information
    injected, notice = injection.injected_for(settings, "inc")
    assert injected.memory_ids == [] and notice is None
    assert learning.describe(accepted).startswith("level: accepted, runs seen 1;")


def test_the_metadata_says_the_numbers_the_text_says(tmp_path, monkeypatch):
    """Issue #24 item 7: a failure memory's metadata is updated with its text (main kept the first
    baseline beside the newest drop, e.g. drop_percentage 0.0 beside a text saying 27 %)."""
    import re

    root = project(tmp_path, monkeypatch)
    good_runs(root)
    assert run(root, dict.fromkeys(BROKEN, 0.0)).comparison.has_regression
    for answers in (dict.fromkeys(BROKEN, 0.0),                      # unchanged: the text is kept
                    {**dict.fromkeys(BROKEN, 0.0), CASES[6]: 0.0}):  # one more case: the text is rewritten
        run(root, answers)
        (record,) = records(root, "open")
        # the text says the learn cases' scores (issue #37 item 5); the metadata says them too
        said = re.search(r"mean score: ([0-9.]+); the same cases in the baseline's last run: ([0-9.]+); "
                         r"drop ([0-9.]+)%", record.information)
        assert said is not None, record.information
        meta = record.metadata["text_scores"]
        assert f"{meta['learn_score']:.2f}" == said.group(1)
        assert f"{meta['learn_baseline']:.2f}" == said.group(2)
        assert f"{100 * meta['learn_drop']:.1f}" == said.group(3)


def test_a_scorer_below_its_floor_opens_an_incident_that_keeps_no_run_from_the_baseline(tmp_path, monkeypatch):
    """Issue #36 (finding 9): a ``below floor`` verdict wrote no failure memory, so the README's
    first failure never reached the learning loop. Now it opens an incident through the same
    state machine: it remembers the failing cases, is injected, and resolves when the scorer is
    back at its floor. Below its floor with no lesson holding it, the scorer's runs are its normal
    (not good enough): they stay baselines, and nothing freezes."""
    root = project(tmp_path, monkeypatch)                  # the heuristic floor: 0.95
    good_runs(root)
    low = run(root, dict.fromkeys(BROKEN[:2], 0.0))         # 0.90: under the floor, not a regression
    s = low.comparison.scorers[0]
    assert s.verdict == "below floor" and not s.is_regression
    assert low.extras["memories"][0]["action"] == "opened", low.notices
    (opened,) = records(root, "open")
    assert opened.metadata["cause"] == "below floor" and opened.metadata["failing_cases"] == BROKEN[:2]
    assert "floor cases (2) c00, c01" in learning.describe(opened)
    summaries = HistoryStore(load_settings(root).database_url).summaries(low.executed.run.id)
    assert summaries["level"].eligible is True                       # a scorer below its floor is its normal
    assert injection.injected_for(load_settings(root), "inc")[0].memory_ids == [opened.id]

    again = run(root, dict.fromkeys(BROKEN[:2], 0.0))
    assert again.extras["memories"][0]["action"] == "updated"
    assert run(root).extras["memories"][0]["action"] == "resolved"   # back at its floor
    assert records(root, "open") == []


def test_a_remembered_case_gone_from_the_suite_does_not_keep_its_incident_open(tmp_path, monkeypatch):
    """A remembered case the suite no longer has is never graded again: it is not waited for."""
    import yaml

    root = project(tmp_path, monkeypatch)
    good_runs(root)
    assert run(root, dict.fromkeys(BROKEN, 0.0)).comparison.has_regression
    path = root / "fixtures" / "inc.yaml"
    suite = yaml.safe_load(path.read_text())
    suite["cases"] = [c for c in suite["cases"] if c["id"] != BROKEN[-1]]
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    assert run(root).extras["memories"][0]["action"] == "resolved"
