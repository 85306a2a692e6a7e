"""Ctrl-C stops a run mid-call, whatever the target: a sync one called in place (on the loop's
thread), one in a thread (a suite timeout), an async one. The finished cases are kept and the run
is marked interrupted. The call it stops would hang for an hour: that the run ends at all shows
the signal did not wait for it (no clock is read)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from evalloop.config import load_settings
from evalloop.history.models import CaseResult
from evalloop.history.store import HistoryStore
from support.cli import EVALLOOP
from support.project import SLOW_TARGET, make_project, wait_for

TARGET = SLOW_TARGET + '''
import time as _time

def slow_sync(input):
    with open(os.environ["STARTED"], "a") as f:
        f.write("x")
    _time.sleep(input["sleep"])
    return input["value"]

async def slow_async(input):
    with open(os.environ["STARTED"], "a") as f:
        f.write("x")
    await asyncio.sleep(input["sleep"])
    return input["value"]
'''


def suite(target: str, timeout: float | None = None) -> dict:
    doc = {"name": "slow", "target": target, "scorers": ["equals"], "concurrency": 1,
           "cases": [{"id": f"c{i}", "input": {"sleep": 0 if i == 0 else 3600, "value": i}, "expected": i}
                     for i in range(4)]}
    return doc | ({"timeout": timeout} if timeout else {})


@pytest.mark.parametrize(("target", "timeout"),
                         [("sut:slow_sync", None), ("sut:slow_sync", 60), ("sut:slow_async", None)])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_run_mid_call(tmp_path, target, timeout, sig):
    root = make_project(tmp_path / "p", {"slow": suite(target, timeout)}, target=TARGET)
    started = tmp_path / "started"
    started.write_text("")
    proc = subprocess.Popen([EVALLOOP, "run", "--suite", "slow", "-C", str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NO_COLOR": "1", "STARTED": str(started)})
    try:
        assert wait_for(lambda: len(started.read_text()) >= 2, 30)  # in the second case's hour-long call
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
    assert "marked 'interrupted'" in err, err
    store = HistoryStore(load_settings(root).database_url)
    (run,) = store.runs("slow", limit=None)
    assert run.status == "interrupted"
    assert store.count(CaseResult) == 1  # the first case finished and was kept
