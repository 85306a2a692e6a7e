"""SIGTERM stops `evalloop run` like Ctrl-C: finished cases kept, run `interrupted`, exit 143."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from evalloop.config import load_settings
from evalloop.history.models import CaseResult, RunStatus
from evalloop.history.store import HistoryStore
from support.project import SLOW_TARGET, make_project, slow_suite, wait_for

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")


def test_sigterm_keeps_finished_cases_and_marks_the_run_interrupted(tmp_path):
    root = make_project(tmp_path / "p", {"slow": slow_suite(40, 0.2)}, target=SLOW_TARGET)
    store = HistoryStore(load_settings(root).database_url)
    proc = subprocess.Popen([EVALLOOP, "run", "--suite", "slow", "-C", str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NO_COLOR": "1"})
    try:
        assert wait_for(lambda: store.runs("slow", statuses=[RunStatus.RUNNING]), 30)
        time.sleep(1.5)  # several cases finish (buffered, not yet written)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    finally:
        proc.kill()
    stderr = proc.stderr.read()
    assert rc == 143, (rc, stderr)
    (run,) = store.runs("slow")
    assert run.status == RunStatus.INTERRUPTED and run.valid is False
    assert 3 <= store.count(CaseResult) < 40
    assert len(stderr.strip().splitlines()) == 1 and "interrupted" in stderr, stderr
