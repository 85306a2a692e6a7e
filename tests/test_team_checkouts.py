"""Schedules any worker can run (issue #28): a schedule names suites, each worker runs them in its
own checkout (`scheduler start -C DIR`), and a worker whose checkout cannot run a schedule says
so in one line in the ledger and leaves its fires to a worker that can. Real scheduler processes
on one shared database (SQLite file and PostgreSQL)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from evalloop.config import load_settings
from evalloop.history.models import RunStatus
from evalloop.history.store import HistoryStore
from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import add_schedule
from support.project import make_project, wait_for

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"], "cases": [{"id": "a", "input": 1, "expected": 1}]}
OTHER = {**SUITE, "name": "other"}


def worker(root: Path, url: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen([EVALLOOP, "scheduler", "start", "--poll", "0.2", "-C", str(root)],
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"),  # noqa: SIM115
                            env={**os.environ, "NO_COLOR": "1", "EVALLOOP_HISTORY_URL": url})


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def test_each_worker_runs_a_schedule_in_its_own_checkout(tmp_path, history_url, monkeypatch):
    monkeypatch.setenv("EVALLOOP_HISTORY_URL", history_url)
    adder = make_project(tmp_path / "laptop" / "proj", {"s": SUITE})
    add_schedule(load_settings(adder), ["s"], every="1h", job_id="nightly", first_run=datetime.now(UTC))
    shutil.rmtree(tmp_path / "laptop")  # the adding host's path exists on no worker
    lacking = make_project(tmp_path / "host-a" / "srv" / "checkout", {"other": OTHER})  # no suite s
    having = make_project(tmp_path / "host-b" / "home" / "ci" / "evals", {"s": SUITE})
    first = worker(lacking, history_url, tmp_path / "a.log")
    try:
        assert wait_for(lambda: ledger.entries(history_url, "nightly"), 60), (tmp_path / "a.log").read_text()
        second = worker(having, history_url, tmp_path / "b.log")
        try:
            assert wait_for(lambda: any(e.status == "completed" for e in ledger.entries(history_url, "nightly")), 60), \
                (tmp_path / "b.log").read_text()
        finally:
            stop(second)
    finally:
        stop(first)
    entries = ledger.entries(history_url, "nightly")
    (cannot,) = [e for e in entries if e.status == "cannot run"]
    assert "cannot run it" in cannot.detail and "'s'" in cannot.detail and "\n" not in cannot.detail, cannot.detail
    (done,) = [e for e in entries if e.status == "completed"]
    (run,) = HistoryStore(history_url).runs("s")
    assert run.status == RunStatus.COMPLETED and done.run_id == run.id
    assert "cannot run it" in (tmp_path / "a.log").read_text()
