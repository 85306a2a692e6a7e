"""`doctor --repair` killed at every step loses nothing (#40 item 1): on main a kill -9 during
the repair left a history that `doctor` called ok with 0 of 10 runs and no schedule. The kill
points are deterministic (``EVALLOOP_FAULT`` names the step, :mod:`evalloop.faults`); after the
kill the damaged file or the verified new one is in place, and the next `doctor` says which and
finishes (or undoes) the repair. Real CLI processes, real SQLite files."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from evalloop import run_suite
from evalloop.config import load_settings
from evalloop.faults import ENV
from evalloop.history.engine import forget
from evalloop.history.swap import KILL_POINTS, journal_path
from evalloop.memory.store import MemoryStore
from evalloop.scheduling.scheduler import add_schedule
from support.cli import cli
from support.project import make_project
from support.sqlitedb import sqlite_conn

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": f"x{i}", "expected": f"x{i}"} for i in range(4)]}
RUNS = 10


def zero_pages(db: Path, like: str) -> None:
    with sqlite_conn(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name LIKE ?", (like,))]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    assert pages
    with open(db, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(bytes(size))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> Path:
    """A project with 10 runs, a schedule and a memory, whose history database is damaged."""
    root = make_project(tmp_path_factory.mktemp("repair") / "p", {"s": SUITE})
    settings = load_settings(root)
    for _ in range(RUNS):
        run_suite("s", settings=settings)
    add_schedule(settings, ["s"], every="1d", job_id="nightly")
    with MemoryStore(settings.memory_file) as memory:
        memory.store("the greeting lost its name", tags=["eval-failure"])
    forget(settings.database_url)
    zero_pages(settings.history_dir / "evalloop.db", "%case%")
    return root


def counts(db: Path) -> tuple[int, int]:
    """(runs, schedules) the file holds."""
    with sqlite_conn(f"file:{db}?mode=ro", uri=True) as conn:
        return (conn.execute("SELECT count(*) FROM runs").fetchone()[0],
                conn.execute("SELECT count(*) FROM evalloop_jobs").fetchone()[0])


@pytest.mark.parametrize("step", KILL_POINTS)
def test_a_repair_killed_at_any_step_loses_nothing(damaged, tmp_path, step):
    root = tmp_path / "p"
    shutil.copytree(damaged, root)
    db = root / "history" / "evalloop.db"
    before = db.read_bytes()
    killed = cli(root, "doctor", "--repair", "--yes", env={ENV: step})
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert db.exists()  # never a missing history that the next run would start afresh
    assert db.read_bytes() == before or counts(db) == (RUNS, 1), step  # the old state or the new one

    after = cli(root, "doctor", "--json")
    doc = json.loads(after.stdout)
    (said,) = [r["action"] for r in doc["interrupted"] if r["store"] == "history database"]
    assert ("undone" in said) == (step in ("repair.building", "repair.built")), said
    assert not journal_path(db).exists()
    if after.returncode != 0:  # undone: the damaged file as it was, repaired now
        assert db.read_bytes() == before
        assert cli(root, "doctor", "--repair", "--yes").returncode == 0
    assert counts(db) == (RUNS, 1)
    assert list((root / "history").glob("evalloop.db.broken-*")), "the damaged file is kept"
    assert not list((root / "history").glob("*.repair-new*"))
    listed = cli(root, "history", "--limit", "50")
    assert listed.returncode == 0 and listed.stdout.count(" s ") + listed.stdout.count("│ s ") >= 1, listed.stdout
    memories = cli(root, "memories", "list")
    assert "the greeting lost its name" in memories.stdout, memories.stdout + memories.stderr


def test_a_repair_that_is_not_killed_needs_no_second_doctor(damaged, tmp_path):
    root = tmp_path / "p"
    shutil.copytree(damaged, root)
    assert cli(root, "doctor", "--repair", "--yes").returncode == 0
    db = root / "history" / "evalloop.db"
    assert counts(db) == (RUNS, 1) and not journal_path(db).exists()
    again = json.loads(cli(root, "doctor", "--json").stdout)
    assert again["interrupted"] == [] and all(c["ok"] for c in again["checks"])
