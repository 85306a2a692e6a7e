"""A fire that finds its suite busy is not lost (issue #28): it waits for the suite within its
misfire grace and runs; past the grace it is recorded as skipped with the reason — in the
ledger (`schedule list`), the log at WARNING and the alarm sinks (a real loopback webhook)."""

from __future__ import annotations

import logging
import threading

import pytest

from evalloop.config import load_settings
from evalloop.history.locks import DatabaseLock
from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import CONTROL, add_schedule, list_schedules, run_scheduled_job
from support.project import make_project
from support.webhook_server import webhook_server


@pytest.fixture
def project(tmp_path):
    root = make_project(tmp_path / "p", {"s": {"name": "s", "target": "sut:echo", "scorers": ["equals"],
                                               "cases": [{"id": "a", "input": 1, "expected": 1}]}})
    CONTROL.reset()
    yield root
    CONTROL.reset()


def test_a_fire_waits_for_its_busy_suite_within_the_grace_and_runs(project, monkeypatch):
    settings = load_settings(project)
    other = DatabaseLock(settings.database_url, "suite:s", owner="otherhost:1:abcdef")
    assert other.acquire()
    # the other host's run ends once the fire has found the suite busy (seen by a real lock
    # whose refusals are noted), not after a second that a loaded machine may not give it
    refused = threading.Event()
    acquire = DatabaseLock.acquire

    def noting_refusals(lock: DatabaseLock) -> bool:
        got = acquire(lock)
        if not got:
            refused.set()
        return got

    monkeypatch.setattr(DatabaseLock, "acquire", noting_refusals)
    releaser = threading.Thread(target=lambda: refused.wait(60) and other.release())
    releaser.start()
    (run_id,) = run_scheduled_job(str(project), ["s"], job_id="nightly", grace_seconds=30)
    releaser.join(60)
    assert refused.is_set()  # it found the suite busy, waited, and ran once it was free
    (entry,) = ledger.entries(settings.database_url, "nightly")
    assert entry.status == "completed" and entry.run_id == run_id


def test_a_fire_whose_suite_stays_busy_is_skipped_visibly(project, caplog):
    with webhook_server() as server:
        (project / "evalloop.toml").write_text(f'webhook_url = "{server.url}"\n')
        settings = load_settings(project)
        add_schedule(settings, ["s"], every="1h", job_id="nightly")
        other = DatabaseLock(settings.database_url, "suite:s", owner="otherhost:1:abcdef")
        assert other.acquire()
        try:
            with caplog.at_level(logging.WARNING):
                assert run_scheduled_job(str(project), ["s"], job_id="nightly", grace_seconds=0.5) == []
        finally:
            other.release()
        why = "suite busy: running elsewhere (otherhost:1:abcdef) for the whole misfire grace (0.5 s)"
        (entry,) = ledger.entries(settings.database_url, "nightly")
        assert (entry.status, entry.detail) == ("skipped", why)
        (info,) = list_schedules(settings)
        assert info.last_verdict == "skipped"
        assert any(r.levelno == logging.WARNING and why in r.getMessage() for r in caplog.records)
        (posted,) = [r.body for r in server.received]
        assert posted == {"event": "skipped", "schedule": "nightly", "suite": "s", "detail": why}


def test_fires_waiting_for_a_busy_suite_run_in_fire_order(project):
    """#40 item 5: a fire waiting for its busy suite waited 55 s while 4 later fires (of other
    hosts) took the suite, then was skipped. Waiting fires queue by fire time: the earlier one
    runs first, and a later fire that finds the suite free still waits its turn."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import select

    from evalloop.history.locks import LOCKS, engine_for

    settings = load_settings(project)
    url = settings.database_url
    other = DatabaseLock(url, "suite:s", owner="otherhost:1:abcdef")
    assert other.acquire()
    early = datetime.now(UTC) - timedelta(minutes=1)
    CONTROL.claims["early"] = early
    waiting = threading.Thread(target=lambda: run_scheduled_job(str(project), ["s"], job_id="early", grace_seconds=120))
    waiting.start()

    def queued() -> bool:
        with engine_for(url).connect() as conn:
            return bool(conn.execute(select(LOCKS.c.name).where(LOCKS.c.name.like("queue:suite:s:%"))).all())

    try:
        from support.project import wait_for

        assert wait_for(queued, 30)  # the early fire waits in line for the busy suite
    finally:
        other.release()
    CONTROL.claims["late"] = early + timedelta(seconds=30)
    run_scheduled_job(str(project), ["s"], job_id="late", grace_seconds=120)  # finds the suite free
    waiting.join(60)
    assert not waiting.is_alive()
    entries = sorted(ledger.entries(url), key=lambda e: e.started_at)
    assert [(e.job_id, e.status) for e in entries] == [("early", "completed"), ("late", "completed")]
