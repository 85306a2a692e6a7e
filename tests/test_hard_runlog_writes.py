"""Run-log appends are all-or-nothing, and a partial last line is repaired, never buried."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from evalloop.config import load_settings
from evalloop.history import runlog
from evalloop.history.models import RunStatus
from evalloop.history.store import HistoryStore
from evalloop.loop.pipeline import run_suite
from support.project import make_project

SUITE = {"name": "logged", "target": "sut:echo", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(5)]}
PAD = 2_000_000  # a blank line this long: the log is then bigger than the database files
LIMITED = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), it does not kill
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    import evalloop.cli
    sys.argv = ["evalloop", *sys.argv[2:]]
    evalloop.cli.main()
""")


def test_a_full_disk_leaves_no_partial_line_and_the_run_says_so(tmp_path):
    root = make_project(tmp_path / "p", {"logged": SUITE})
    log = runlog.log_path(root / "history", "logged")
    log.parent.mkdir(parents=True)
    log.write_bytes(b" " * PAD + b"\n")
    before = log.read_bytes()
    # room for 100 more bytes in any file: the run's line (~1 KB) is cut short by the kernel
    proc = subprocess.run([sys.executable, "-c", LIMITED, str(len(before) + 100), "run", "--suite", "logged",
                           "-C", str(root)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr
    notice = [line for line in proc.stderr.splitlines() if "run log not written" in line]
    assert len(notice) == 1 and str(log) in notice[0] and "evalloop history export" in notice[0], proc.stderr
    assert log.read_bytes() == before  # rolled back: no partial line
    store = HistoryStore(load_settings(root).database_url)
    (run,) = store.runs("logged")
    assert run.status == RunStatus.COMPLETED
    # with room again, `history export` adds the run the log lacks, and the log reads cleanly
    assert runlog.export_runs(store, root / "history") == {"logged": 1}
    assert [e.id for e in runlog.read_log(log)] == [run.id]

def test_a_partial_last_line_is_cut_off_with_a_notice_before_the_next_append(tmp_path):
    root = make_project(tmp_path / "p", {"logged": SUITE})
    settings = load_settings(root)
    first = run_suite("logged", settings=settings)
    log = runlog.log_path(settings.history_dir, "logged")
    good = log.read_bytes()
    log.write_bytes(good + good[: len(good) // 2])  # a crash mid-write left half a line
    assert [e.id for e in runlog.read_log(log)] == [first.executed.run.id]  # readers skip it
    second = run_suite("logged", settings=settings)
    assert any("partial last line" in n and str(log) in n for n in second.notices), second.notices
    lines = log.read_bytes().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["id"] for line in lines)
    assert [e.id for e in runlog.read_log(log)] == [first.executed.run.id, second.executed.run.id]


def test_a_complete_last_line_without_newline_is_kept(tmp_path):
    root = make_project(tmp_path / "p", {"logged": SUITE})
    settings = load_settings(root)
    first = run_suite("logged", settings=settings)
    log = runlog.log_path(settings.history_dir, "logged")
    log.write_bytes(log.read_bytes().rstrip(b"\n"))  # hand-edited: the newline is gone
    second = run_suite("logged", settings=settings)
    assert [e.id for e in runlog.read_log(log)] == [first.executed.run.id, second.executed.run.id]
