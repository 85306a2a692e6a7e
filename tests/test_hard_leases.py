"""Liveness by lease, not hostname + pid: containers that share a hostname (not a PID namespace)
never take each other's live locks or fail each other's live runs; lapsed leases are reaped."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from sqlalchemy import insert, update

from evalloop.history.locks import LOCKS, DatabaseLock, current_holder, engine_for
from evalloop.history.models import Run, RunStatus, utcnow
from evalloop.history.store import HistoryStore
from evalloop.scheduling import ledger

HOST = socket.gethostname()


def dead_pid() -> int:
    """A pid that no process of this namespace has now."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def other_container(pid: int, token: str = "aaaaaa") -> str:
    """An owner of the same hostname in another PID namespace (its pid means nothing here)."""
    return f"{HOST}:{pid}:{token}~00000000.4026539999"


def hold(url: str, name: str, owner: str, *, expires_in: float = 600.0, beat: float = 10.0) -> None:
    now = time.time()
    with engine_for(url).begin() as conn:
        conn.execute(insert(LOCKS).values(name=name, owner=owner, acquired_at=now, expires_at=now + expires_in,
                                          refreshed_at=now, beat_seconds=beat))


def test_a_live_lock_of_another_container_with_the_same_host_and_pid_is_not_taken(history_url):
    pid = dead_pid()
    hold(history_url, "suite:s", other_container(pid, "aaaaaa"))
    taker = DatabaseLock(history_url, "suite:s", owner=other_container(pid, "bbbbbb").replace("4026539999", "1"))
    assert not taker.acquire()
    assert current_holder(history_url, "suite:s").owner == other_container(pid, "aaaaaa")
    with engine_for(history_url).begin() as conn:  # its heartbeat stops: the lease lapses
        conn.execute(update(LOCKS).values(expires_at=time.time() - 1))
    assert taker.acquire()
    taker.release()


def test_a_lock_of_a_dead_process_of_this_namespace_is_taken_at_once(history_url):
    from evalloop.history.locks import process_owner

    mine = process_owner()
    host, pid, token = mine.split(":", 2)
    hold(history_url, "suite:s", f"{host}:{dead_pid()}:{token}")
    taker = DatabaseLock(history_url, "suite:s", stale_seconds=3600)
    assert taker.acquire()
    taker.release()


def test_a_run_of_another_container_is_reaped_only_when_its_lease_lapses(history_url):
    store = HistoryStore(history_url)
    pid = dead_pid()
    owner = other_container(pid)
    with engine_for(history_url).begin() as conn:  # a run begun by the other container
        conn.execute(insert(Run.__table__).values(
            id="r-other", suite="s", status=RunStatus.RUNNING, started_at=utcnow(), valid=True,
            notes={"host": HOST, "pid": pid, "lease": owner}))
    hold(history_url, "run:r-other", owner, expires_in=60.0)
    assert store.reap_dead_runs() == []
    assert store.get_run("r-other").status == RunStatus.RUNNING
    with engine_for(history_url).begin() as conn:
        conn.execute(update(LOCKS).where(LOCKS.c.name == "run:r-other").values(expires_at=time.time() - 1))
    assert store.reap_dead_runs() == ["r-other"]
    run = store.get_run("r-other")
    assert run.status == RunStatus.FAILED and run.invalid_reason.startswith("its lease expired (expired")


def test_a_running_run_keeps_its_lease_fresh(history_url):
    store = HistoryStore(history_url)
    run = store.begin_run(Run(id="r-live", suite="s"))
    first = current_holder(history_url, "run:r-live")
    assert first is not None and store.get_run(run.id).notes["lease"] == first.owner
    assert store.reap_dead_runs() == []
    store.mark(run.id, RunStatus.INTERRUPTED)
    assert current_holder(history_url, "run:r-live") is None  # the lease ends with the run


def test_a_killed_schedulers_ledger_row_is_closed(history_url):
    live = DatabaseLock(history_url, "suite:alive")
    assert live.acquire()
    try:
        ledger.start(history_url, job_id="j", fire_id="f1", suite="alive", owner=live.owner)
        ledger.start(history_url, job_id="j", fire_id="f1", suite="gone", owner=other_container(4242))
        rows = {e.suite: e for e in ledger.entries(history_url, "j")}
        assert rows["alive"].status == "running"
        assert rows["gone"].status == "interrupted" and "stopped mid-run" in rows["gone"].detail
    finally:
        live.release()


def test_a_scheduler_killed_mid_run_leaves_no_running_rows(tmp_path):
    """kill -9 of a real scheduler process: its ledger entry and its run are closed afterwards."""
    import os
    import shutil
    import signal
    from datetime import UTC, datetime
    from pathlib import Path

    from evalloop.config import load_settings
    from evalloop.scheduling.scheduler import add_schedule
    from support.project import SLOW_TARGET, make_project, slow_suite, wait_for

    root = make_project(tmp_path / "p", {"slow": slow_suite(40, 0.2)}, target=SLOW_TARGET)
    settings = load_settings(root)
    store = HistoryStore(settings.database_url)
    add_schedule(settings, ["slow"], every="1h", job_id="once", first_run=datetime.now(UTC))
    evalloop = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
    proc = subprocess.Popen([evalloop, "scheduler", "start", "--poll", "0.2", "-C", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"})
    try:
        assert wait_for(lambda: store.runs("slow", statuses=[RunStatus.RUNNING]), 90)
        assert [e.status for e in ledger.entries(settings.database_url, "once")] == ["running"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    # the fire's own process got SIGTERM from the kernel when its scheduler died: it wrote the
    # cases that finished and marked its run interrupted (a reaper would mark it failed); the
    # ledger row is closed once its run no longer lives, with that run's id
    # (its last write may wait out a busy database with backoff, up to 120 s: history.store)
    assert wait_for(lambda: store.runs("slow")[0].status != RunStatus.RUNNING, 150)
    assert store.runs("slow")[0].status == RunStatus.INTERRUPTED
    (entry,) = ledger.entries(settings.database_url, "once")
    assert entry.status == "interrupted" and "stopped mid-run" in entry.detail, entry
    assert entry.run_id == store.runs("slow")[0].id
    assert store.reap_dead_runs() == []
