"""Database locks and fire claims on a real SQLite file and a real PostgreSQL, across threads and processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime

import pytest

from evalloop.history.locks import DatabaseLock, LockBusy, claim_fire, current_holder


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
    dead = DatabaseLock(url, "suite:x", stale_seconds=0.3, heartbeat=False)
    assert dead.acquire()
    other = DatabaseLock(url, "suite:x", stale_seconds=30)
    assert not other.acquire()
    time.sleep(0.4)
    assert other.acquire()
    assert not dead.refresh()  # the old holder learns that it lost the lock
    other.release()


def test_heartbeat_keeps_a_long_holder_alive(url):
    alive = DatabaseLock(url, "suite:x", stale_seconds=0.3)
    assert alive.acquire()
    time.sleep(0.8)  # well past the stale timeout, but refreshed every 0.1 s
    assert not DatabaseLock(url, "suite:x", stale_seconds=0.3).acquire()
    alive.release()


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
