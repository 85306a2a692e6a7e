"""Environment problems exit 2 with the right advice (#40 item 10): a full disk mid-run (a real
1 MiB tmpfs), a damaged history, a read-only history; and the read-only commands (`memories
list`, `memories find`, `schedule list`) read a history this user may not write."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from evalloop.config import load_settings
from evalloop.memory.store import MemoryStore
from support.cli import cli
from support.otheruser import can_simulate, cli_as_other, give_away
from support.project import make_project
from support.sqlitedb import sqlite_conn

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": f"x{i}", "expected": f"x{i}"} for i in range(20)]}


def one_error(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def zero_pages(db: Path, like: str) -> None:
    with sqlite_conn(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name LIKE ?", (like,))]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with open(db, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(bytes(size))


def test_a_damaged_history_is_an_environment_error_for_run_and_history(tmp_path):
    root = make_project(tmp_path / "p", {"s": SUITE})
    assert cli(root, "run", "--suite", "s").returncode == 0
    zero_pages(load_settings(root).history_dir / "evalloop.db", "%case%")
    zero_pages(load_settings(root).history_dir / "evalloop.db", "runs")
    for args in (("run", "--suite", "s"), ("history",)):
        proc = cli(root, *args)
        assert proc.returncode == 2, (args, proc.stderr)
        line = one_error(proc)
        assert "damaged" in line and "doctor --repair" in line, line


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB file system (tmpfs) as a project's ``history/``; skipped where mounting is refused."""
    disk = tmp_path / "p" / "history"
    disk.mkdir(parents=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> None:
    """Fill the disk to the last byte."""
    fd = os.open(disk / f"filler-{uuid.uuid4().hex}", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def test_a_full_disk_mid_run_exits_2_and_damages_nothing(tmp_path, small_disk):
    suite = {**SUITE, "cases": [{"id": f"c{i}", "input": "x" * 2000, "expected": "x" * 2000} for i in range(200)]}
    root = make_project(tmp_path / "p", {"s": suite})
    first = cli(root, "run", "--suite", "s", "--limit", "5")
    assert first.returncode == 0, first.stderr
    fill(small_disk)
    proc = cli(root, "run", "--suite", "s")
    assert proc.returncode == 2, proc.stderr
    line = one_error(proc)
    assert "no space left" in line and "free disk space" in line, line
    assert "doctor" not in line and "damaged" not in line, line
    for filler in small_disk.glob("filler-*"):
        filler.unlink()
    doctor = cli(root, "doctor")
    assert doctor.returncode == 0 and "damaged" not in doctor.stdout, doctor.stdout


@pytest.mark.skipif(not can_simulate(), reason="needs setpriv to drop root's file permission bypass")
def test_read_only_commands_read_a_history_this_user_may_not_write(tmp_path):
    root = make_project(tmp_path / "p", {"s": SUITE})
    assert cli(root, "run", "--suite", "s").returncode == 0
    assert cli(root, "schedule", "add", "--suite", "s", "--every", "1d", "--id", "nightly").returncode == 0
    hist = load_settings(root).history_dir
    with MemoryStore(hist / "memory.db") as memory:
        memory.store("the greeting lost its name", tags=["eval-failure", "s"])
    for path in hist.iterdir():
        give_away(path, mode=0o644)
    give_away(hist, mode=0o755)
    for args, shows in ((("memories", "list"), "the greeting lost its name"),
                        (("memories", "find", "greeting"), "the greeting lost its name"),
                        (("schedule", "list"), "nightly"),
                        (("history",), "s")):
        proc = cli_as_other(root, *args)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        assert shows in proc.stdout, (args, proc.stdout)
    run = cli_as_other(root, "run", "--suite", "s")
    assert run.returncode == 2, run.stderr
