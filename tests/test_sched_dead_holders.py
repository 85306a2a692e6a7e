"""A process killed with SIGKILL: its run is reaped as failed and its suite lock is free at once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import insert
from typer.testing import CliRunner

from evalloop.cli import app
from evalloop.config import load_settings
from evalloop.history.locks import LOCKS, DatabaseLock, current_holder, engine_for
from evalloop.history.models import Run, RunStatus
from evalloop.history.store import HistoryStore
from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import CONTROL, run_scheduled_job, serve
from support.project import SLOW_TARGET as SLOW
from support.project import make_project, slow_suite, wait_for

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
HOST = socket.gethostname()



@pytest.fixture
def project(tmp_path):
    root = make_project(tmp_path / "p", {"slow": slow_suite(40, 0.25)}, target=SLOW)
    settings = load_settings(root)
    return root, settings, HistoryStore(settings.database_url)


def kill_a_run(root: Path, store: HistoryStore) -> tuple[str, int]:
    """Start `evalloop run` in a real process, SIGKILL it mid-run; the run id and pid back."""
    proc = subprocess.Popen([EVALLOOP, "run", "--suite", "slow", "-C", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "NO_COLOR": "1"})
    try:
        assert wait_for(lambda: store.runs("slow", statuses=[RunStatus.RUNNING]), 30)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    (run,) = store.runs("slow")
    assert run.status == RunStatus.RUNNING  # nobody marked it: the process had no chance
    return run.id, proc.pid


def add_running(store: HistoryStore, run_id: str, host: str, pid: int) -> None:
    store.begin_run(Run(id=run_id, suite="slow", notes={"host": host, "pid": pid}))


def test_history_reaps_a_killed_run_and_leaves_other_hosts_alone(project):
    root, settings, store = project
    run_id, pid = kill_a_run(root, store)
    add_running(store, "other-host-run", "some-other-host", pid)  # cannot be checked from here
    add_running(store, "live-run", HOST, os.getpid())  # this process is alive

    result = CliRunner().invoke(app, ["history", "--json", "-C", str(root)])
    assert result.exit_code == 0, result.output
    runs = {r["id"]: r for r in json.loads(result.stdout)}
    assert runs[run_id]["status"] == "failed" and runs[run_id]["valid"] is False
    assert runs[run_id]["invalid_reason"] == f"process {pid} on {HOST} died"
    assert runs["other-host-run"]["status"] == "running"
    assert runs["live-run"]["status"] == "running"
    assert store.reap_dead_runs() == []  # idempotent


def test_scheduler_start_reaps_dead_runs_first(project):
    root, settings, store = project
    run_id, pid = kill_a_run(root, store)
    stop = threading.Event()
    stop.set()  # start, reap, stop at once
    assert serve(settings, stop=stop, poll_seconds=0.1) == 0
    run = store.get_run(run_id)
    assert run.status == RunStatus.FAILED and run.invalid_reason == f"process {pid} on {HOST} died"


def test_a_scheduler_that_fails_leaves_no_state_behind_in_its_process(tmp_path):
    """A scheduler that stops on an error (here: a history that is not a database) leaves this
    process as it found it: the next fire in it runs in its own project, not the failed
    scheduler's, and is not told that a scheduler is stopping."""
    from evalloop.errors import EvalloopError

    broken = make_project(tmp_path / "broken", {"slow": slow_suite(2, 0.01)}, target=SLOW)
    (broken / "history").mkdir(exist_ok=True)
    (broken / "history" / "evalloop.db").write_bytes(b"this is not a database" * 100)
    stop = threading.Event()
    stop.set()
    with pytest.raises(EvalloopError):
        serve(load_settings(broken), stop=stop, poll_seconds=0.1)
    assert CONTROL.url is None
    assert not CONTROL.stopping.is_set() and not CONTROL.hard.is_set()
    root = make_project(tmp_path / "ok", {"slow": slow_suite(2, 0.01)}, target=SLOW)
    (run_id,) = run_scheduled_job(str(root), ["slow"])
    assert HistoryStore(load_settings(root).database_url).get_run(run_id) is not None


def hold_lock_then_die(url: str, stale: float) -> int:
    script = textwrap.dedent(f"""
        import time
        from evalloop.history.locks import DatabaseLock
        assert DatabaseLock({url!r}, "suite:slow", stale_seconds={stale}).acquire()
        print("held", flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        assert current_holder(url, "suite:slow") is not None
        assert not DatabaseLock(url, "suite:slow", stale_seconds=stale).acquire()  # alive: busy
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    return proc.pid


def test_the_lock_of_a_killed_local_process_is_taken_over_at_once(project):
    _, settings, _ = project
    url = settings.database_url
    hold_lock_then_die(url, stale=3600)  # its expiry is an hour away
    assert current_holder(url, "suite:slow") is None
    taker = DatabaseLock(url, "suite:slow", stale_seconds=3600)
    assert taker.acquire()  # acquire never waits: an hour from stale, only the dead pid frees it
    assert taker.taken_from is not None
    assert current_holder(url, "suite:slow").owner == taker.owner
    taker.release()


def test_the_takers_stale_time_applies_to_a_remote_holder(project):
    _, settings, _ = project
    url, now = settings.database_url, time.time()
    with engine_for(url).begin() as conn:  # a holder on another host, silent for 20 s
        conn.execute(insert(LOCKS).values(name="suite:slow", owner="far-host:4242:abcdef",
                                          acquired_at=now - 60, expires_at=now + 3600,
                                          refreshed_at=now - 20, beat_seconds=1.0))
    assert not DatabaseLock(url, "suite:slow", stale_seconds=600).acquire()  # 20 s < 600 s
    assert current_holder(url, "suite:slow", 600).owner == "far-host:4242:abcdef"
    assert current_holder(url, "suite:slow", 10) is None
    taker = DatabaseLock(url, "suite:slow", stale_seconds=10)
    assert taker.acquire()  # its own 10 s, not the hour the dead holder wrote
    taker.release()


def test_a_live_holder_with_a_long_stale_time_is_safe_from_a_hasty_taker(project):
    _, settings, _ = project
    url = settings.database_url
    holder = DatabaseLock(url, "suite:slow", stale_seconds=3600)  # beats every 10 s
    assert holder.acquire()
    try:
        assert not DatabaseLock(url, "suite:slow", stale_seconds=0.01).acquire()
    finally:
        holder.release()


def test_the_skip_message_names_the_holders_scheduler_owner(project):
    _, settings, store = project
    CONTROL.reset()
    url = settings.database_url
    first = threading.Thread(target=run_scheduled_job, args=(str(settings.project_dir), ["slow"]),
                             kwargs={"job_id": "a"})
    first.start()
    try:
        assert wait_for(lambda: store.runs("slow", statuses=[RunStatus.RUNNING]), 20)
        assert current_holder(url, "suite:slow").owner == CONTROL.owner
        # a second fire in this same process must not enter the lock its owner already holds
        # (it waits for the suite within its misfire grace, here 0.3 s, then is skipped)
        assert run_scheduled_job(str(settings.project_dir), ["slow"], job_id="b", grace_seconds=0.3) == []
        (skipped,) = ledger.entries(url, "b")
        assert skipped.status == "skipped"
        assert skipped.detail == (f"suite busy: running elsewhere ({CONTROL.owner}) "
                                  "for the whole misfire grace (0.3 s)")
        (running,) = ledger.entries(url, "a")
        assert running.owner == CONTROL.owner  # the ledger and the message name the same owner
    finally:
        CONTROL.cancel_all()
        first.join(30)
        CONTROL.reset()
