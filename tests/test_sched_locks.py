"""Database locks and fire claims on a real SQLite file and a real PostgreSQL, across threads and processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from evalloop.history.locks import LOCKS, DatabaseLock, LockBusy, claim_fire, current_holder, engine_for
from support.project import wait_for


@pytest.fixture
def url(history_url):
    return history_url


def test_one_holder_at_a_time_then_released(url):
    a = DatabaseLock(url, "suite:x", stale_seconds=30)
    b = DatabaseLock(url, "suite:x", stale_seconds=30)
    assert a.acquire() and not b.acquire()
    assert current_holder(url, "suite:x").owner == a.owner
    other = DatabaseLock(url, "suite:other")
    assert other.acquire()  # other names are independent
    other.release()  # (its heartbeat would outlive the database the session's fixture stops)
    a.release()
    assert current_holder(url, "suite:x") is None
    assert b.acquire()
    with pytest.raises(LockBusy, match="held by"), DatabaseLock(url, "suite:x"):
        pass
    b.release()


def test_a_dead_holder_goes_stale_and_is_taken_over(url):
    # the holder stopped beating (heartbeat=False): once its lease runs out, on the database's
    # clock, a taker gets the lock. Waited for, not slept: the taker tries until it has it.
    dead = DatabaseLock(url, "suite:x", stale_seconds=0.3, heartbeat=False)
    assert dead.acquire()
    other = DatabaseLock(url, "suite:x", stale_seconds=30)
    assert wait_for(other.acquire, 30), "a lease nobody refreshed never went stale"
    assert other.taken_from == dead.owner
    assert not dead.refresh()  # the old holder learns that it lost the lock
    other.release()


def test_a_fresh_lease_is_not_taken_over_and_an_aged_one_is(url):
    # no clock is raced: the lease is made old by writing its times an hour back
    holder = DatabaseLock(url, "suite:x", stale_seconds=30, heartbeat=False)
    assert holder.acquire()
    other = DatabaseLock(url, "suite:x", stale_seconds=30)
    assert not other.acquire()
    _age(url, "suite:x", 3600)
    assert other.acquire() and other.taken_from == holder.owner
    other.release()


def test_heartbeat_keeps_a_long_holder_alive(url):
    # the lease is aged as if the holder had been silent for an hour: only its heartbeat can
    # make it fresh again, and the test waits for that beat, then a taker finds it held
    alive = DatabaseLock(url, "suite:x", stale_seconds=30, beat_seconds=0.05)
    assert alive.acquire()
    _age(url, "suite:x", 3600)
    assert wait_for(lambda: current_holder(url, "suite:x", 30) is not None, 30), "no heartbeat refreshed it"
    assert not DatabaseLock(url, "suite:x", stale_seconds=30).acquire()
    alive.release()


def _age(url: str, name: str, seconds: float) -> None:
    """Move a lock row's times ``seconds`` into the past (its holder silent that long)."""
    with engine_for(url).begin() as conn:
        conn.execute(update(LOCKS).where(LOCKS.c.name == name).values(
            acquired_at=LOCKS.c.acquired_at - seconds, expires_at=LOCKS.c.expires_at - seconds,
            refreshed_at=LOCKS.c.refreshed_at - seconds))


def test_lock_is_exclusive_across_processes(url):
    script = textwrap.dedent(f"""
        import sys, time
        from evalloop.history.locks import DatabaseLock
        lock = DatabaseLock({url!r}, "suite:x", stale_seconds=30)
        assert lock.acquire()
        print("held", flush=True)
        sys.stdin.readline()
        lock.release()
        print("released", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        mine = DatabaseLock(url, "suite:x", stale_seconds=30)
        assert not mine.acquire()
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "released"
        assert mine.acquire()
        mine.release()
    finally:
        proc.kill()
        proc.wait()


def test_a_fire_is_claimed_once(url):
    at = datetime(2025, 1, 1, 3, tzinfo=UTC)
    assert claim_fire(url, "job1", at, "a")
    assert not claim_fire(url, "job1", at, "b")
    assert not claim_fire(url, "job1", at.astimezone(), "b")  # same instant, other zone
    assert claim_fire(url, "job1", at.replace(day=2), "b")
    assert claim_fire(url, "job2", at, "b")
