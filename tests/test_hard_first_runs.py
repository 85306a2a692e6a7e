"""Eight first runs at once on a fresh project: every one succeeds (SQLite and PostgreSQL).

Each child imports evalloop first and then waits on a barrier file, so all of them create
the history tables in the same instant, as a team's CI jobs or a fleet of containers would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from sqlalchemy import inspect

from evalloop.history.models import RunStatus
from evalloop.history.store import HistoryStore, get_engine
from support.project import make_project

N = 8
CHILD = textwrap.dedent("""
    import os, sys, time
    import evalloop.cli, evalloop.loop.pipeline, evalloop.scheduling.scheduler  # the slow part, before the barrier
    barrier = sys.argv[1]
    open(f"{barrier}.ready.{os.getpid()}", "w").close()
    while not os.path.exists(barrier):
        time.sleep(0.005)
    sys.argv = ["evalloop", *sys.argv[2:]]
    evalloop.cli.main()
""")
SUITE = {"name": "first", "target": "sut:echo", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(5)]}


def start_together(argv: list[str], env: dict[str, str], barrier: Path, n: int = N,
                   logs: list[Path] | None = None) -> list[subprocess.Popen]:
    """Start ``n`` children; release them at once when every one has imported evalloop."""
    from support.project import wait_for

    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(barrier), *argv], env=env, text=True,
                              stdout=subprocess.DEVNULL if logs else subprocess.PIPE,
                              stderr=open(logs[i], "w") if logs else subprocess.PIPE)  # noqa: SIM115
             for i in range(n)]
    ready = lambda: len(list(barrier.parent.glob(barrier.name + ".ready.*"))) == n  # noqa: E731
    assert wait_for(lambda: ready() or any(p.poll() is not None for p in procs), 180)
    barrier.touch()
    return procs


def test_eight_first_runs_at_once_all_succeed(tmp_path, history_url):
    root = make_project(tmp_path / "p", {"first": SUITE})
    env = {**os.environ, "EVALLOOP_HISTORY_URL": history_url, "NO_COLOR": "1"}
    procs = start_together(["run", "--suite", "first", "-C", str(root)], env, tmp_path / "go")
    results = [(p.wait(120), p.stdout.read(), p.stderr.read()) for p in procs]
    failed = [(rc, err) for rc, _, err in results if rc != 0]
    assert not failed, failed
    store = HistoryStore(history_url)
    runs = store.runs("first", limit=None)
    assert len(runs) == N and {r.status for r in runs} == {RunStatus.COMPLETED}
    tables = set(inspect(get_engine(history_url)).get_table_names())
    assert {"runs", "case_results", "case_scores", "scorer_summaries"} <= tables


def test_a_schema_lock_held_too_long_is_named_as_such(tmp_path):
    """The race is retried; a lock that outlasts the wait says so (not 'check permissions')."""
    import sqlite3

    import pytest
    from sqlalchemy import create_engine

    from evalloop.errors import StoreError
    from evalloop.history.models import metadata
    from evalloop.history.schema import ensure_tables

    db = tmp_path / "held.db"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        engine = create_engine(f"sqlite:///{db}", connect_args={"timeout": 0.05})
        started = time.monotonic()
        with pytest.raises(StoreError) as info:
            ensure_tables(engine, metadata, where=str(db), timeout=1.0)
        assert time.monotonic() - started >= 1.0  # it retried for its timeout (a hang is pytest-timeout's)
    finally:
        holder.rollback()
        holder.close()
    line = info.value.one_line()
    assert line.startswith(f"{db}: the history database stayed locked by another process (database is locked)"), line
    assert "permission" not in line
    ensure_tables(engine, metadata, where=str(db), timeout=1.0)  # free again: created


def test_an_unreachable_server_is_named_as_such_without_its_password():
    import pytest

    from evalloop.errors import StoreError
    from support.loopback import free_port

    url = f"postgresql+psycopg://evals:sk-ant-PASS1@127.0.0.1:{free_port()}/evalloop"
    with pytest.raises(StoreError) as info:
        HistoryStore(url)
    line = info.value.one_line()
    assert "cannot reach the history database" in line and "check the URL, the server" in line, line
    assert "postgresql+psycopg://***@127.0.0.1" in line and "sk-ant-PASS1" not in line, line


def test_eight_processes_migrate_an_older_database_at_once(tmp_path, history_url):
    """A database made by an older evalloop (columns missing) opened by 8 processes at once:
    each adds what is missing or finds it added; none fails. On a shared server migrating is
    explicit (issue #28): 8 processes refuse to write (exit 2), 8 `history migrate` at once all
    succeed, and then every process opens it."""
    from sqlalchemy import create_engine, text

    from evalloop.history.models import metadata

    (tmp_path / "shared").mkdir(exist_ok=True)
    old = create_engine(history_url)
    metadata.create_all(old)
    dropped = [("runs", "target_failures"), ("runs", "infra_failures"), ("scorer_summaries", "mdd")]
    with old.begin() as conn:
        for table, column in dropped:
            conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
    old.dispose()
    root = make_project(tmp_path / "p", {"first": SUITE})
    env = {**os.environ, "EVALLOOP_HISTORY_URL": history_url, "NO_COLOR": "1"}
    if history_url.startswith("postgresql"):
        procs = start_together(["history", "-C", str(root)], env, tmp_path / "go")
        results = [(p.wait(120), p.stderr.read()) for p in procs]
        assert all(rc == 2 and "history migrate" in err for rc, err in results), results
        procs = start_together(["history", "migrate", "-C", str(root)], env, tmp_path / "go2")
        results = [(p.wait(120), p.stderr.read()) for p in procs]
        assert not [r for r in results if r[0] != 0], results
    procs = start_together(["history", "-C", str(root)], env, tmp_path / "go3")
    results = [(p.wait(120), p.stderr.read()) for p in procs]
    assert not [r for r in results if r[0] != 0], results
    check = create_engine(history_url)
    columns = {t: {c["name"] for c in inspect(check).get_columns(t)} for t, _ in dropped}
    check.dispose()
    assert all(column in columns[table] for table, column in dropped), columns


def test_eight_scheduler_starts_at_once_all_start(tmp_path, history_url):
    """The probe itself: `scheduler start` ×8 on a fresh database: APScheduler's job store table,
    the lock, claim and ledger tables and the history tables are all created race-free."""
    import signal

    from support.project import wait_for

    root = make_project(tmp_path / "p", {"first": SUITE})
    env = {**os.environ, "EVALLOOP_HISTORY_URL": history_url, "NO_COLOR": "1"}
    logs = [tmp_path / f"s{i}.log" for i in range(N)]
    procs = start_together(["scheduler", "start", "--poll", "0.2", "-C", str(root)], env, tmp_path / "go", logs=logs)

    def settled() -> bool:
        return all(p.poll() is not None or "scheduler started" in log.read_text()
                   for p, log in zip(procs, logs, strict=True))

    try:
        assert wait_for(settled, 120)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(60) for proc in procs]
    text = "\n".join(log.read_text() for log in logs)
    assert codes == [0] * N and text.count("scheduler started") == N, text
    assert "Traceback" not in text and "error" not in text.lower(), text
    tables = set(inspect(get_engine(history_url)).get_table_names())
    assert {"evalloop_jobs", "evalloop_locks", "runs"} <= tables, tables
