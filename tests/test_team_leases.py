"""Leases on the database's clock, taken over after a few missed heartbeats (issue #28).

A holder on another "host" (its own hostname, so its pid means nothing here) runs in a real
process whose clock is faked ±2 minutes; the test process's clock is faked the other way. On
SQLite and on a real PostgreSQL, neither a live lock nor a live run lease is taken or reaped,
and once the holder is killed both lapse after a few heartbeats — not after ten minutes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from evalloop.history.locks import DatabaseLock, current_holder
from evalloop.history.models import RunStatus
from evalloop.history.store import HistoryStore

#: taken over after 3 s without a heartbeat (the holder beats every second): a live holder's
#: beat may be late by two seconds on a loaded machine and still not lose its lease, while a
#: skew of two minutes, on a host's clock instead of the database's, would show at once
LEASE = 3.0
BEAT = LEASE / 3


def skewed_holder(url: str, skew: float) -> subprocess.Popen[str]:
    """A process on 'skewed-host' whose clock is off by ``skew`` seconds: it holds suite:s and a run."""
    script = textwrap.dedent(f"""
        import socket, time
        real = time.time
        time.time = lambda: real() + {skew}
        socket.gethostname = lambda: "skewed-host"
        from evalloop.history.locks import DatabaseLock
        from evalloop.history.models import Run
        from evalloop.history.store import HistoryStore
        assert DatabaseLock({url!r}, "suite:s", stale_seconds={LEASE}).acquire()
        store = HistoryStore({url!r})
        store.lease_seconds = {LEASE}
        store.begin_run(Run(id="r-skewed", suite="s"))
        print("held", flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("skew", [120.0, -120.0])
def test_clock_skew_neither_kills_a_live_run_nor_lets_two_hosts_hold_a_suite(history_url, monkeypatch, skew):
    holder = skewed_holder(history_url, skew)
    try:
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() - skew)  # this host is off the other way
        store = HistoryStore(history_url)
        store.lease_seconds = LEASE
        deadline = real() + LEASE
        while real() < deadline:  # a lease long, past the holder's next beats: it keeps both
            taker = DatabaseLock(history_url, "suite:s", stale_seconds=LEASE)
            assert not taker.acquire(), "took a live holder's lock"
            assert current_holder(history_url, "suite:s") is not None
            assert store.reap_dead_runs() == []
            time.sleep(BEAT)
        assert store.get_run("r-skewed").status == RunStatus.RUNNING
    finally:
        holder.kill()
        holder.wait(10)
    killed = real()
    taker = DatabaseLock(history_url, "suite:s", stale_seconds=LEASE)
    while not taker.acquire():
        assert real() - killed < 10 * LEASE, "a dead holder's lock was never taken over"
        time.sleep(0.05)
    waited = real() - killed
    taker.release()
    assert LEASE * 0.5 < waited < 4 * LEASE, waited  # a few heartbeats, on the database's clock
    assert wait_reaped(store, "r-skewed", 4 * LEASE)


def wait_reaped(store: HistoryStore, run_id: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if run_id in store.reap_dead_runs():
            return True
        time.sleep(0.05)
    return False


def test_taking_over_a_dead_hosts_suite_closes_its_fire_and_interrupts_its_run(tmp_path, history_url, monkeypatch):
    """A scheduler on a host that died holds suite:s (its heartbeat stopped); its fire's ledger
    row is 'running' with no run id, and its run is 'running'. The next fire takes the suite
    over, marks that run interrupted, closes the row with the run's id, and runs the suite."""
    from sqlalchemy import insert

    from evalloop.config import load_settings
    from evalloop.history.locks import LOCKS, database_time, engine_for
    from evalloop.history.models import Run
    from evalloop.scheduling import ledger
    from evalloop.scheduling.scheduler import CONTROL, run_scheduled_job
    from support.project import make_project

    monkeypatch.setenv("EVALLOOP_HISTORY_URL", history_url)
    root = make_project(tmp_path / "p", {"s": {"name": "s", "target": "sut:echo", "scorers": ["equals"],
                                               "cases": [{"id": "a", "input": 1, "expected": 1}]}})
    (root / "evalloop.toml").write_text("heartbeat_seconds = 0.25\ntakeover_heartbeats = 4\n")
    settings = load_settings(root)
    dead, dead_run = "deadhost:4242:aaaaaa", "deadhost:4243:bbbbbb"
    entry = ledger.start(history_url, job_id="nightly", fire_id="f0", suite="s", owner=dead)
    store = HistoryStore(history_url)
    with engine_for(history_url).begin() as conn:
        conn.execute(insert(Run.__table__).values(id="r-dead", suite="s", status=RunStatus.RUNNING,
                                                  notes=f'{{"fire": "{entry}", "lease": "{dead_run}"}}'))
        beat = database_time(engine_for(history_url)) - 30  # its last heartbeat, 30 s ago
        for name, owner in (("suite:s", dead), ("run:r-dead", dead_run)):
            conn.execute(insert(LOCKS).values(name=name, owner=owner, acquired_at=beat - 60, expires_at=beat + 1,
                                              refreshed_at=beat, beat_seconds=0.25))
    CONTROL.reset()
    (new_run,) = run_scheduled_job(str(root), ["s"], job_id="nightly", grace_seconds=5)
    rows = {e.fire_id: e for e in ledger.entries(history_url, "nightly")}
    assert rows["f0"].status == "interrupted" and rows["f0"].run_id == "r-dead", rows["f0"]
    assert "stopped heartbeating" in rows["f0"].detail
    assert store.get_run("r-dead").status == RunStatus.INTERRUPTED
    (fresh,) = [e for f, e in rows.items() if f != "f0"]
    assert fresh.status == "completed" and fresh.run_id == new_run
    assert json_notes(store, new_run)["fire"] == str(fresh_entry_id(history_url, new_run))
    assert settings.lease_seconds == 1.0


def json_notes(store: HistoryStore, run_id: str) -> dict:

    return store.get_run(run_id).notes


def fresh_entry_id(url: str, run_id: str) -> int:
    from sqlalchemy import select

    from evalloop.history.engine import get_engine
    from evalloop.scheduling.ledger import ENTRIES

    with get_engine(url).connect() as conn:
        return int(conn.execute(select(ENTRIES.c.id).where(ENTRIES.c.run_id == run_id)).scalar_one())
