"""`evalloop scheduler start` as real processes: two on one SQLite file, and graceful shutdown."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from evalloop.config import load_settings
from evalloop.history.models import CaseResult, RunStatus
from evalloop.history.store import HistoryStore
from evalloop.scheduling import ledger
from evalloop.scheduling.scheduler import add_schedule
from support.project import SLOW_TARGET, make_project, slow_suite, wait_for

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")


def start_scheduler(root: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([EVALLOOP, "scheduler", "start", "--poll", "0.2", "-C", str(root)],
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"),  # noqa: SIM115
                            env={**os.environ, "NO_COLOR": "1"})



@pytest.fixture
def project(tmp_path):
    def build(n: int, sleep: float):
        root = make_project(tmp_path / "p", {"slow": slow_suite(n, sleep)}, target=SLOW_TARGET)
        settings = load_settings(root)
        return root, settings, HistoryStore(settings.database_url)
    return build


def test_two_schedulers_on_one_database_never_overlap_a_suite(project, tmp_path):
    root, settings, store = project(4, 0.3)  # a run takes ~1.2 s, the job fires every 1 s
    add_schedule(settings, ["slow"], every="1s", job_id="tick", first_run=datetime.now(UTC))
    procs = [start_scheduler(root, tmp_path / f"s{i}.log") for i in range(2)]
    try:
        done = wait_for(lambda: len(store.runs("slow", statuses=[RunStatus.COMPLETED])) >= 2, 90)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(20) for proc in procs]
    logs = "".join((tmp_path / f"s{i}.log").read_text() for i in range(2))
    assert done, logs
    assert codes == [0, 0], logs
    runs = sorted(store.runs("slow", limit=None), key=lambda r: r.started_at)
    assert all(r.status == RunStatus.COMPLETED for r in runs)  # graceful: none half-written
    for before, after in zip(runs, runs[1:], strict=False):
        assert after.started_at >= before.ended_at, (before, after)
    entries = ledger.entries(settings.database_url, "tick")
    assert {e.status for e in entries} <= {"completed", "skipped", "coalesced"}  # late fires are said (#40)
    assert sum(e.status == "completed" for e in entries) == len(runs)


def test_sigterm_finishes_the_run_in_progress_then_exits_cleanly(project, tmp_path):
    root, settings, store = project(5, 0.3)
    add_schedule(settings, ["slow"], every="1h", job_id="once", first_run=datetime.now(UTC))
    proc = start_scheduler(root, tmp_path / "s.log")
    try:
        assert wait_for(lambda: store.runs("slow", statuses=[RunStatus.RUNNING]), 20)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(20)
    finally:
        proc.kill()
    log = (tmp_path / "s.log").read_text()
    assert code == 0, log
    assert "finishing the run in progress" in log
    (run,) = store.runs("slow")
    assert run.status == RunStatus.COMPLETED and run.valid
    assert store.count(CaseResult) == 5
    assert store.summaries(run.id)["equals"].mean == 1.0
    (entry,) = ledger.entries(settings.database_url, "once")
    assert entry.status == "completed" and entry.run_id == run.id
    assert run.id in (root / "history" / "slow.jsonl").read_text()


def test_a_second_signal_interrupts_the_run_and_marks_it(project, tmp_path):
    root, settings, store = project(20, 0.3)
    add_schedule(settings, ["slow"], every="1h", job_id="once", first_run=datetime.now(UTC))
    proc = start_scheduler(root, tmp_path / "s.log")
    try:
        assert wait_for(lambda: store.runs("slow", statuses=[RunStatus.RUNNING]), 20)
        proc.send_signal(signal.SIGINT)
        # the second signal once the first is handled (two at once may arrive as one)
        assert wait_for(lambda: "finishing the run in progress" in (tmp_path / "s.log").read_text(), 30)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(20)
    finally:
        proc.kill()
    log = (tmp_path / "s.log").read_text()
    assert code == 130, log
    (run,) = store.runs("slow")
    assert run.status == RunStatus.INTERRUPTED and not run.valid
    assert store.count(CaseResult) < 20
    (entry,) = ledger.entries(settings.database_url, "once")
    assert entry.status == "interrupted"
    log_file = root / "history" / "slow.jsonl"
    assert not log_file.exists() or run.id not in log_file.read_text()
