"""Schedules on a real APScheduler with a SQLite job store: persistence, coalescing, grace, admin."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from evalloop.config import load_settings
from evalloop.history.store import HistoryStore
from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import (
    ScheduleError,
    add_schedule,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
)
from support.project import make_project, wait_for
from support.scheduling import serving

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
ECHO = {"name": "echo", "target": "sut:echo", "scorers": ["equals"],
        "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(3)]}


@pytest.fixture
def settings(tmp_path):
    return load_settings(make_project(tmp_path, {"echo": ECHO}))





def runs(settings, suite="echo"):
    return HistoryStore(settings.database_url).runs(suite, limit=None)


def test_schedules_persist_across_restarts_and_record_their_last_run(settings):
    add_schedule(settings, ["echo"], cron="30 2 * * *", tz="Europe/Berlin", job_id="nightly")
    add_schedule(settings, ["echo"], every="1h", job_id="soon", first_run=datetime.now(UTC))
    # another process on the same database sees both
    listed = subprocess.run([EVALLOOP, "schedule", "list", "--json", "-C", str(settings.project_dir)],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    by_id = {s["id"]: s for s in json.loads(listed.stdout)}
    assert by_id["nightly"]["trigger"] == "cron 30 2 * * * Europe/Berlin"
    assert by_id["soon"]["trigger"].startswith("every 1:00:00")
    assert by_id["nightly"]["last_verdict"] is None

    with serving(settings) as result:
        assert wait_for(lambda: len(runs(settings)) == 1)
    assert result["code"] == 0
    first = {s.id: s for s in list_schedules(settings)}
    assert first["soon"].last_verdict == "no baseline yet"
    assert first["soon"].last_runs == [runs(settings)[0].id]
    next_soon = first["soon"].next_run
    assert next_soon > datetime.now(UTC) + timedelta(minutes=59)
    nightly_next = first["nightly"].next_run.astimezone(UTC).astimezone(
        __import__("zoneinfo").ZoneInfo("Europe/Berlin"))
    assert nightly_next.strftime("%H:%M") == "02:30"

    # a restart: the persisted job is due again (moved into the past), and runs once more
    from evalloop.scheduling.jobstore import admin_scheduler

    with admin_scheduler(settings) as scheduler:
        scheduler.modify_job("soon", next_run_time=datetime.now(UTC))
    with serving(settings):
        assert wait_for(lambda: len(runs(settings)) == 2)
    again = {s.id: s for s in list_schedules(settings)}
    assert again["soon"].last_verdict == "steady" and set(again) == {"nightly", "soon"}
    # both runs were appended to the committed run log
    assert len((settings.history_dir / "echo.jsonl").read_text().splitlines()) == 2


def test_missed_fires_after_downtime_coalesce_into_one_run(settings):
    # down for 2.5 h with an hourly job: three fires missed, each within the 3 h grace (with a
    # shorter grace the older ones would be dropped as too late, coalescing or not)
    info = add_schedule(settings, ["echo"], every="1h", grace_seconds=3 * 3600, job_id="hourly",
                        first_run=datetime.now(UTC) - timedelta(hours=2, minutes=30))
    assert info.misfire_grace_seconds == 3 * 3600
    with serving(settings):
        # the scheduler moved the job on: every missed fire was dealt with (the block's end
        # waits for the fires it started), so more than one run would be counted below
        assert wait_for(lambda: runs(settings) and list_schedules(settings)[0].next_run > datetime.now(UTC))
    assert len(runs(settings)) == 1
    entries = ledger.entries(settings.database_url, "hourly")  # the two older fires are said (#40 item 4)
    assert sorted(e.status for e in entries) == ["coalesced", "coalesced", "completed"]
    (after,) = list_schedules(settings)
    assert timedelta(minutes=25) < after.next_run - datetime.now(UTC) < timedelta(minutes=31)


def test_a_fire_later_than_the_grace_time_is_skipped(settings):
    add_schedule(settings, ["echo"], every="1h", grace_seconds=60, job_id="strict",
                 first_run=datetime.now(UTC) - timedelta(hours=2, minutes=30))
    with serving(settings):
        # the late fire was dealt with; one that ran anyway is waited for by the block's end
        assert wait_for(lambda: list_schedules(settings)[0].next_run > datetime.now(UTC))
    assert runs(settings) == []
    entries = ledger.entries(settings.database_url, "strict")  # not silent (#40 item 4): each fire missed
    assert entries and {e.status for e in entries} == {"missed"}


def test_pause_resume_remove_and_unknown_ids(settings):
    add_schedule(settings, ["echo"], cron="0 3 * * 0", tz="UTC", job_id="weekly")
    add_schedule(settings, ["echo"], every="6h", tz="UTC", job_id="sixhourly")
    assert pause_schedule(settings, "week") == "weekly"  # a unique prefix is enough
    paused = {s.id: s for s in list_schedules(settings)}
    assert paused["weekly"].paused and paused["weekly"].next_run is None
    resume_schedule(settings, "weekly")
    resumed = {s.id: s for s in list_schedules(settings)}["weekly"]
    assert not resumed.paused and resumed.next_run.strftime("%a %H:%M") == "Sun 03:00"
    remove_schedule(settings, "weekly")
    assert [s.id for s in list_schedules(settings)] == ["sixhourly"]
    with pytest.raises(ScheduleError, match="no schedule 'weekly'"):
        remove_schedule(settings, "weekly")
    with pytest.raises(ScheduleError, match="exists"):
        add_schedule(settings, ["echo"], every="1h", job_id="sixhourly")


def test_cli_add_list_remove_and_bad_input(settings):
    from typer.testing import CliRunner

    from evalloop.cli import app

    root = str(settings.project_dir)

    def cli(*args):
        return CliRunner().invoke(app, [*args, "-C", root], env={"NO_COLOR": "1"})

    added = cli("schedule", "add", "--suite", "echo", "--cron", "0 3 * * *", "--tz",
                "America/New_York", "--id", "n1")
    assert added.exit_code == 0, added.output
    assert "added n1: echo cron 0 3 * * * America/New_York" in added.stdout
    bad = cli("schedule", "add", "--suite", "nope", "--every", "6h")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "nope" in bad.stderr
    bad_tz = cli("schedule", "add", "--suite", "echo", "--every", "6h", "--tz", "Nowhere/City")
    assert bad_tz.exit_code == 2 and "unknown time zone 'Nowhere/City'" in bad_tz.stderr
    listed = cli("schedule", "list")
    assert "n1" in listed.stdout and "America/New_York" in listed.stdout
    assert cli("schedule", "pause", "n1").exit_code == 0
    assert "paused" in cli("schedule", "list").stdout
    assert cli("schedule", "remove", "n1").exit_code == 0
    gone = cli("schedule", "remove", "n1")
    assert gone.exit_code == 2 and "no schedule 'n1'" in gone.stderr


def test_a_schedule_stored_before_the_package_layout_still_loads(settings):
    """A job stored when the job function was ``evalloop.scheduler:run_scheduled_job`` (before
    scheduling/ held it) keeps running: APScheduler would otherwise fail to import the function
    and drop the job from the store."""
    import pickle

    from sqlalchemy import create_engine, text

    from evalloop.scheduling.scheduler import JOB_FUNC, JOBS_TABLE

    add_schedule(settings, ["echo"], every="1h", job_id="old")
    engine = create_engine(settings.database_url)
    with engine.begin() as conn:
        (blob,) = conn.execute(text(f"SELECT job_state FROM {JOBS_TABLE} WHERE id = 'old'")).one()
        state = pickle.loads(blob)
        assert state["func"] == JOB_FUNC
        state["func"] = "evalloop.scheduler:run_scheduled_job"
        conn.execute(text(f"UPDATE {JOBS_TABLE} SET job_state = :s WHERE id = 'old'"), {"s": pickle.dumps(state)})
    engine.dispose()
    assert [s.id for s in list_schedules(settings)] == ["old"]
    assert [s.id for s in list_schedules(settings)] == ["old"]  # and it stays


def test_the_job_function_keeps_the_path_stored_jobs_name():
    """Stored jobs name the job function by its import path, and schedulers of every version on one
    database share them: the path stays where jobs since the package layout name it, and resolves
    to the one job function (which lives in scheduling/job.py since scheduler.py was split)."""
    from apscheduler.util import ref_to_obj

    from evalloop.scheduling.job import run_scheduled_job
    from evalloop.scheduling.scheduler import JOB_FUNC

    assert JOB_FUNC == "evalloop.scheduling.scheduler:run_scheduled_job"
    assert ref_to_obj(JOB_FUNC) is run_scheduled_job
