"""A suite that is broken when its fire comes due (#40 item 9): the fire is taken, recorded as an
error with the file and line, and alarmed at the sinks (a real loopback webhook); the schedule
moves on to its next fire. A real scheduler on a thread, a real APScheduler job store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from evalloop.config import load_settings
from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import CONTROL, add_schedule, list_schedules
from support.project import make_project, wait_for
from support.scheduling import serving
from support.webhook_server import webhook_server

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"], "cases": [{"id": "a", "input": 1, "expected": 1}]}


@pytest.fixture
def project(tmp_path):
    CONTROL.reset()
    yield make_project(tmp_path / "p", {"s": SUITE})
    CONTROL.reset()


def test_a_broken_suite_at_fire_time_alarms_and_the_schedule_moves_on(project):
    with webhook_server() as server:
        (project / "evalloop.toml").write_text(f'webhook_url = "{server.url}"\n')
        settings = load_settings(project)
        add_schedule(settings, ["s"], every="1h", job_id="nightly", first_run=datetime.now(UTC))
        (project / "fixtures" / "s.yaml").write_text("name: s\ncases:\n  - id: a\n   input: [1, 2\n")
        with serving(settings):
            assert wait_for(lambda: server.received, 30)
            assert wait_for(lambda: ledger.entries(settings.database_url, "nightly"), 10)
        (entry,) = ledger.entries(settings.database_url, "nightly")
        assert entry.status == "error" and "s.yaml:" in (entry.detail or "") and "invalid YAML" in entry.detail
        (posted,) = [r.body for r in server.received]
        assert posted["event"] == "error" and posted["suite"] == "s" and "invalid YAML" in posted["detail"]
        (info,) = list_schedules(settings)
        assert info.last_verdict == "error"
        assert info.next_run is not None and info.next_run > datetime.now(UTC) + timedelta(minutes=50)


def test_a_fire_process_that_fails_alarms(project):
    """A suite that loads but cannot run (an unknown scorer): the fire's process exits 2; the
    ledger says why and the sinks hear of it."""
    with webhook_server() as server:
        (project / "evalloop.toml").write_text(f'webhook_url = "{server.url}"\n')
        settings = load_settings(project)
        add_schedule(settings, ["s"], every="1h", job_id="nightly", first_run=datetime.now(UTC))
        (project / "fixtures" / "s.yaml").write_text(
            "name: s\ntarget: sut:echo\nscorers: [no-such-scorer]\ncases:\n  - {id: a, input: 1}\n")
        with serving(settings):
            assert wait_for(lambda: server.received, 60)
        (entry,) = ledger.entries(settings.database_url, "nightly")
        assert entry.status == "error" and "no-such-scorer" in (entry.detail or "")
        (posted,) = [r.body for r in server.received]
        assert posted["event"] == "error" and "no-such-scorer" in posted["detail"]
