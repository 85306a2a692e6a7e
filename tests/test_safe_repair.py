"""`doctor` tells a store it may not open from a damaged one and never moves the first;
`doctor --repair` says what it will do, asks (or needs --yes), and keeps schedules and memories
that the run logs cannot rebuild. A read-only history stops `run` with exit 2 in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalloop.config import load_settings
from evalloop.memory.store import MemoryStore
from support.cli import cli
from support.otheruser import can_simulate, cli_as_other, give_away, snapshot, take_back
from support.project import make_project
from support.sqlitedb import sqlite_conn

pytestmark = pytest.mark.skipif(not can_simulate(), reason="needs setpriv to drop root's file permission bypass")

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": f"x{i}", "expected": f"x{i}"} for i in range(20)]}


def project(tmp_path: Path) -> tuple[Path, Path]:
    """A project with two runs, a schedule and a memory; returns (root, history folder)."""
    root = make_project(tmp_path / "p", {"s": SUITE})
    for _ in range(2):
        assert cli(root, "run", "--suite", "s").returncode == 0
    assert cli(root, "schedule", "add", "--suite", "s", "--every", "1d", "--id", "nightly").returncode == 0
    hist = load_settings(root).history_dir
    with MemoryStore(hist / "memory.db") as memory:
        memory.store("the greeting lost its name", tags=["eval-failure"])
    return root, hist


def kept(root: Path) -> None:
    """The schedule and the memory are there (read by the owner)."""
    schedules = cli(root, "schedule", "list")
    assert "nightly" in schedules.stdout, schedules.stdout + schedules.stderr
    memories = cli(root, "memories", "list")
    assert "the greeting lost its name" in memories.stdout, memories.stdout + memories.stderr


def test_doctor_says_cannot_open_not_damaged_and_repair_moves_nothing(tmp_path):
    root, hist = project(tmp_path)
    files = [hist / "evalloop.db", hist / "memory.db"]
    give_away(*files)
    before = snapshot(hist)
    proc = cli_as_other(root, "doctor")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = {line.split()[0] + " " + line.split()[1]: line for line in proc.stdout.splitlines()}
    for store, path in (("history database", files[0]), ("memory store", files[1])):
        line = lines[store]
        assert f"{path}: cannot open" in line and ": damaged" not in line, line
        assert "nobody" in line and "mode 600" in line and "chown" in line, line
        assert "--repair" not in line, line
    repaired = cli_as_other(root, "doctor", "--repair", "--yes")
    assert repaired.returncode == 1, repaired.stdout + repaired.stderr
    assert "moved" not in repaired.stdout and "nothing to repair" in repaired.stdout, repaired.stdout
    assert snapshot(hist) == before  # nothing on disk changed
    take_back(*files)
    kept(root)


def test_a_read_only_history_stops_run_with_exit_2_in_one_line(tmp_path):
    root, hist = project(tmp_path)
    db = hist / "evalloop.db"
    give_away(db, mode=0o644)  # readable by all, writable by its owner only
    proc = cli_as_other(root, "run", "--suite", "s")
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {db}: cannot write the history database"), lines
    assert "nobody" in lines[0] and "chown" in lines[0], lines
    report = cli_as_other(root, "report")  # reading still works, from the file as it is
    assert report.returncode == 0, report.stderr
    assert "Traceback" not in report.stderr


def test_report_on_a_read_only_folder_reads_or_names_the_path(tmp_path):
    root, hist = project(tmp_path)
    give_away(hist, mode=0o755)  # the files are ours, the folder is not
    proc = cli_as_other(root, "report")
    assert proc.returncode == 0, proc.stderr
    run = cli_as_other(root, "run", "--suite", "s")
    assert run.returncode == 2, run.stderr
    (line,) = [line for line in run.stderr.splitlines() if line.strip()]
    assert str(hist) in line and "not writable" in line, line


def damage(db: Path, like: str) -> None:
    """Zero every page of the tables and indexes whose names match ``like``."""
    with sqlite_conn(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name LIKE ?", (like,))]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    assert pages
    with open(db, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(bytes(size))


def test_repair_shows_its_plan_and_asks_first(tmp_path):
    root, hist = project(tmp_path)
    damage(hist / "evalloop.db", "%case_%")
    before = snapshot(hist)
    proc = cli(root, "doctor", "--repair")  # no terminal to ask on, and no --yes
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "will repair: history database" in proc.stdout and "move it aside" in proc.stdout, proc.stdout
    assert "--yes" in proc.stderr, proc.stderr
    assert snapshot(hist) == before
    said_no = subprocess_with_input(root, "n\n")
    assert said_no.returncode == 1 and snapshot(hist) == before, said_no.stdout + said_no.stderr


def subprocess_with_input(root: Path, answer: str):
    """``doctor --repair`` answering the question on a pseudo-terminal."""
    import os
    import pty
    import subprocess

    from support.cli import EVALLOOP

    leader, follower = pty.openpty()
    proc = subprocess.Popen([EVALLOOP, "doctor", "--repair", "-C", str(root)], stdin=follower,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NO_COLOR": "1"})
    os.close(follower)
    os.write(leader, answer.encode())
    out, err = proc.communicate(timeout=60)
    os.close(leader)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_repair_keeps_schedules_and_memories_a_rebuild_cannot_restore(tmp_path):
    root, hist = project(tmp_path)
    damage(hist / "evalloop.db", "%case_%")
    damage(hist / "memory.db", "memory_fts%")
    proc = cli(root, "doctor", "--repair", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert "rebuilt from the run logs: 2 run(s)" in text, text
    assert "kept 1 schedule" in text and "kept 1 memor" in text, text
    kept(root)
    assert cli(root, "doctor").returncode == 0


def test_history_export_reads_a_history_it_may_not_write(tmp_path):
    root, hist = project(tmp_path)
    log = hist / "s.jsonl"
    log.unlink()
    give_away(hist / "evalloop.db", mode=0o644)
    proc = cli_as_other(root, "history", "export")
    assert proc.returncode == 0, proc.stderr
    assert len(log.read_text().splitlines()) == 2
