"""One shared history database for a team: runs, baselines, run logs and schedules on SQLite and
on a real PostgreSQL server (the README offers `history_url = "postgresql://…"`)."""

from __future__ import annotations

import pytest

from evalloop.config import load_settings
from evalloop.history import runlog
from evalloop.history.models import RunStatus
from evalloop.history.store import HistoryStore
from evalloop.loop.pipeline import run_suite
from evalloop.scheduling.scheduler import add_schedule, list_schedules, remove_schedule
from support.project import controlled_suite, make_project, write_answers


@pytest.fixture
def team(tmp_path, monkeypatch, history_url):
    root = make_project(tmp_path / "p", {"controlled": controlled_suite(10)})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    monkeypatch.setenv("EVALLOOP_HISTORY_URL", history_url)
    return root, answers, history_url


def test_baseline_regression_and_run_log_on_a_shared_database(team, tmp_path, pg_server):
    root, answers, url = team
    settings = load_settings(root)
    for _ in range(3):
        write_answers(answers, {f"c{i}": 0.8 for i in range(10)})
        report = run_suite("controlled", settings=settings)
    assert report.comparison.scorers[0].verdict == "steady"
    write_answers(answers, {f"c{i}": 0.5 for i in range(10)})
    report = run_suite("controlled", settings=settings)
    s = report.comparison.scorers[0]
    assert s.window_runs == 3 and s.baseline == pytest.approx(0.8) and report.comparison.has_regression
    store = HistoryStore(url)
    assert [r.status for r in store.runs("controlled")] == [RunStatus.COMPLETED] * 4
    # a fresh clone on another (PostgreSQL) database gets the same baseline from the run log
    # (with a shared server the database is the truth and the run log an export)
    runlog.export_runs(store, settings.history_dir)
    clone = HistoryStore(pg_server.create_database())
    assert runlog.import_logs(clone, settings.history_dir) == {"controlled": 4}
    (last, *_) = clone.runs("controlled")
    assert last.id == report.executed.run.id
    assert clone.case_scores(last.id, "value") == store.case_scores(last.id, "value")


def test_schedules_live_in_the_shared_database(team):
    root, _, url = team
    settings = load_settings(root)
    info = add_schedule(settings, ["controlled"], every="1h", job_id="nightly")
    assert [s.id for s in list_schedules(settings)] == ["nightly"] and info.suites == ["controlled"]
    assert remove_schedule(settings, "nightly") == "nightly"
    assert list_schedules(settings) == []


def test_doctor_checks_a_shared_postgresql_database(tmp_path, pg_server):
    """`postgresql://` (psycopg 3 when psycopg2 is absent, as a run uses it), counted, exit 0."""
    import os
    import subprocess

    from support.project import make_project as make

    url = pg_server.create_database().replace("postgresql+psycopg://", "postgresql://", 1)
    root = make(tmp_path / "p", {"s": {"name": "s", "target": "sut:echo", "scorers": ["equals"],
                                       "cases": [{"id": "a", "input": 1, "expected": 1}]}})
    env = {**os.environ, "EVALLOOP_HISTORY_URL": url, "NO_COLOR": "1"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["evalloop", *args, "-C", str(root)], capture_output=True, text=True,
                              timeout=120, env=env)

    assert cli("doctor").stdout.startswith("history database")  # no tables yet: missing, not damaged
    assert cli("run", "--suite", "s").returncode == 0
    proc = cli("doctor")
    from evalloop.redact import redact_url

    assert proc.returncode == 0 and f"{redact_url(url)}: ok (1 runs)" in proc.stdout, proc.stdout + proc.stderr
