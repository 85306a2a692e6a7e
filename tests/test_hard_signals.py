"""SIGTERM stops `evalloop run` like Ctrl-C: finished cases kept, run `interrupted`, exit 143.

No sleeps decide anything here: the target holds case c5 until the test lets it go
(:class:`support.project.Gate`), so the signal is sent once cases c0-c4 are known finished and the
run cannot end on its own; exactly those cases are written."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from evalloop.config import load_settings
from evalloop.history.models import CaseResult, RunStatus
from evalloop.history.store import HistoryStore
from support.project import GATED_TARGET, Gate, gated_suite, make_project, wait_for

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
HELD = 5  #: the first held case: c0-c4 answer at once, c5 waits for the test


def test_sigterm_keeps_finished_cases_and_marks_the_run_interrupted(tmp_path):
    gate = Gate(tmp_path / "gate")
    root = make_project(tmp_path / "p", {"slow": gated_suite(40, HELD, gate)}, target=GATED_TARGET)
    store = HistoryStore(load_settings(root).database_url)
    proc = subprocess.Popen([EVALLOOP, "run", "--suite", "slow", "-C", str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NO_COLOR": "1"})
    try:
        assert gate.started(f"c{HELD}"), "the held case never started"  # c0-c4 finished, buffered
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    finally:
        proc.kill()
    stderr = proc.stderr.read()
    assert rc == 143, (rc, stderr)
    (run,) = store.runs("slow")
    assert run.status == RunStatus.INTERRUPTED and run.valid is False
    assert store.count(CaseResult) == HELD  # the finished cases, not the one held
    assert len(stderr.strip().splitlines()) == 1 and "interrupted" in stderr, stderr


def test_sigterm_twice_stops_a_scheduled_run_like_ctrl_c_with_exit_143(tmp_path):
    """The scheduler's first SIGTERM waits for the run in progress, the second interrupts it.

    That the first signal let the run go on is shown by the run itself: after the scheduler
    has logged it, the held case is let go and the next one starts."""
    root, store, proc = _scheduler_running(tmp_path, [])
    gate = Gate(tmp_path / "gate")
    try:
        assert gate.started(f"c{HELD}"), _log(tmp_path)
        proc.send_signal(signal.SIGTERM)
        assert wait_for(lambda: "finishing the run in progress" in _log(tmp_path), 60), _log(tmp_path)
        gate.go(f"c{HELD}")
        assert gate.started(f"c{HELD + 1}"), f"the first SIGTERM stopped the run:\n{_log(tmp_path)}"
        assert proc.poll() is None  # still finishing the run
        proc.send_signal(signal.SIGTERM)
        rc = _ended(proc, 30, tmp_path)
    finally:
        proc.kill()
    _assert_interrupted(root, store, rc, tmp_path, written=HELD + 1)


def test_a_stop_timeout_interrupts_a_scheduled_run_before_the_supervisor_kills_it(tmp_path):
    """One SIGTERM (docker stop: SIGKILL follows after 10 s) and --stop-timeout 1: the scheduler
    interrupts the run itself, not before the timeout, and the run is written `interrupted`
    before a supervisor's SIGKILL would come.

    What is timed is what matters. From below, tightly: the scheduler waited its timeout (a wall
    clock only grows under load). From above, the supervisor's own grace, 10 s from the signal
    to the run written `interrupted` (its ``ended_at``, set by the fire): not the processes'
    exit, which on a busy machine can take seconds more and loses nothing once the run is
    written (the old bound, exit < 8 s, failed under load for that reason). That the stop is
    the timeout's, and not the run ending or a second signal, is shown by the log line and by
    the cases left undone.
    """
    root, store, proc = _scheduler_running(tmp_path, ["--stop-timeout", "1"])
    rc, took, signalled = _stop_once(proc, tmp_path)
    log = _assert_interrupted(root, store, rc, tmp_path)
    assert "outlasted scheduler_stop_seconds (1 s): interrupting it" in log, log
    (run,) = store.runs("slow")
    written = (run.ended_at - signalled).total_seconds()
    print(f"signal -> run written interrupted {written:.2f} s; -> exit {took:.2f} s")
    assert took >= 1.0, took  # it waited out its timeout
    assert 0 < written < 10.0, written  # written before docker's SIGKILL (10 s after its SIGTERM)


DIES_ON_SIGTERM = GATED_TARGET + '''
import signal

async def dies(input):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a SIGTERM now kills the process outright
    return await gated(input)
'''


def test_a_stopped_fire_whose_process_died_unmarked_leaves_no_run_running(tmp_path):
    """The fire's process marks its run interrupted when it can; one killed before its handler
    ran (here: a target that restores SIGTERM's default) cannot, and the scheduler closes the
    run itself, so the history never keeps a 'running' run of a stopped fire."""
    suite = gated_suite(40, HELD, Gate(tmp_path / "gate"), target="sut:dies")
    root, store, proc = _scheduler_running(tmp_path, ["--stop-timeout", "1"], suite=suite,
                                           target=DIES_ON_SIGTERM)
    rc, _, _ = _stop_once(proc, tmp_path)
    log = _log(tmp_path)
    assert rc == 143, (rc, log)
    (run,) = store.runs("slow")
    assert run.status == RunStatus.INTERRUPTED and run.valid is False, log
    assert "fire was stopped mid-run" in (run.invalid_reason or ""), run.invalid_reason


def _log(tmp_path: Path) -> str:
    """What the scheduler has logged so far (its stderr goes to a file the test can poll)."""
    return (tmp_path / "scheduler.log").read_text()


def _ended(proc: subprocess.Popen, timeout: float, tmp_path: Path) -> int:
    """The scheduler's exit code; if it has not ended within ``timeout`` seconds, a failure that
    shows its log (what it was waiting for), not only the timeout."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"the scheduler did not end within {timeout:g} s:\n{_log(tmp_path)}") from None


def _stop_once(proc: subprocess.Popen, tmp_path: Path) -> tuple[int, float, datetime]:
    """Once the held case runs (the cases before it finished), send the scheduler one SIGTERM
    and wait for it to end: its exit code, the seconds from the signal to its exit, and when
    the signal was sent."""
    try:
        assert Gate(tmp_path / "gate").started(f"c{HELD}"), _log(tmp_path)
        signalled, started = datetime.now(UTC), time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = _ended(proc, 60, tmp_path)
        return rc, time.monotonic() - started, signalled
    finally:
        proc.kill()


def _scheduler_running(tmp_path: Path, options: list[str], *, suite: dict | None = None,
                       target: str = GATED_TARGET) -> tuple[Path, HistoryStore, subprocess.Popen]:
    """A scheduler whose one fire runs ``suite`` (default: 40 cases, c5 on held), once the run
    is stored; its log goes to ``scheduler.log``."""
    from evalloop.scheduling.scheduler import add_schedule

    suite = suite or gated_suite(40, HELD, Gate(tmp_path / "gate"))
    root = make_project(tmp_path / "p", {"slow": suite}, target=target)
    settings = load_settings(root)
    store = HistoryStore(settings.database_url)
    add_schedule(settings, ["slow"], every="1h", job_id="once", first_run=datetime.now(UTC))
    with open(tmp_path / "scheduler.log", "w") as log:
        proc = subprocess.Popen([EVALLOOP, "scheduler", "start", "--poll", "0.2", *options, "-C", str(root)],
                                stdout=subprocess.DEVNULL, stderr=log, text=True,
                                env={**os.environ, "NO_COLOR": "1"})
    if not wait_for(lambda: store.runs("slow", statuses=[RunStatus.RUNNING]), 90):
        proc.kill()
        raise AssertionError(_log(tmp_path))
    return root, store, proc


def _assert_interrupted(root: Path, store: HistoryStore, rc: int, tmp_path: Path, written: int = HELD) -> str:
    """The run and its ledger entry are `interrupted`, the finished cases (``written``) written; the log."""
    from evalloop.scheduling import ledger

    log = _log(tmp_path)
    assert rc == 143, (rc, log)
    (run,) = store.runs("slow")
    assert run.status == RunStatus.INTERRUPTED and run.valid is False, log
    assert store.count(CaseResult) == written  # the cases that finished were written
    (entry,) = ledger.entries(load_settings(root).database_url, "once")
    assert entry.status == "interrupted"
    assert "Traceback" not in log, log
    return log
