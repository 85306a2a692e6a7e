"""A revision in the shared database (issue #28; Alembic's since issue #43): a host whose evalloop
writes another revision refuses to write, with one line naming both; migrations are explicit
(`evalloop history migrate`), never implicit on a shared server; a current database is opened
without DDL. On a real PostgreSQL, through the real CLI."""

from __future__ import annotations

import os
import subprocess

from sqlalchemy import event, text

from evalloop.history import version
from evalloop.history.engine import forget, get_engine
from evalloop.history.store import HistoryStore
from support.project import make_project

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"], "cases": [{"id": "a", "input": 1, "expected": 1}]}


def cli(root, url, *args):
    return subprocess.run(["evalloop", *args, "-C", str(root)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "EVALLOOP_HISTORY_URL": url, "NO_COLOR": "1"})


def set_version(url: str, sql: str) -> None:
    forget(url)
    with _raw(url) as conn:
        conn.execute(text(sql))
        conn.commit()


def test_a_new_shared_database_is_stamped_and_opened_without_ddl(pg_server):
    url = pg_server.create_database()
    HistoryStore(url)
    assert version.stored_revision(get_engine(url)) == version.HEAD
    forget(url)
    statements: list[str] = []
    from evalloop.history.engine import new_engine

    original = new_engine

    def spying(u):
        engine = original(u)
        event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        return engine

    import evalloop.history.engine as engine_module

    engine_module.new_engine = spying
    try:
        from evalloop.history.locks import DatabaseLock
        from evalloop.scheduling import ledger

        HistoryStore(url)
        with DatabaseLock(url, "suite:s"):
            ledger.entries(url)
    finally:
        engine_module.new_engine = original
    ddl = [s for s in statements if s.lstrip().split()[0].upper() in ("CREATE", "ALTER", "DROP")]
    locks = [s for s in statements if "advisory" in s]
    assert ddl == [] and locks == [], statements


def test_hosts_at_another_revision_refuse_to_write_until_migrated(tmp_path, pg_server):
    url = pg_server.create_database()
    root = make_project(tmp_path / "p", {"s": SUITE})
    assert cli(root, url, "run", "--suite", "s").returncode == 0
    head = version.HEAD
    with _raw(url) as conn:  # what an evalloop before numbered migrations reads: not its version 2
        assert conn.execute(text("SELECT version FROM evalloop_schema")).scalar() == version.LEGACY_VERSION == 4

    set_version(url, "UPDATE alembic_version SET version_num = '9999'")  # a newer host migrated it
    proc = cli(root, url, "run", "--suite", "s")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and lines[0].startswith("error:"), proc.stderr
    assert "at revision 9999, which this evalloop" in lines[0] and f"revision {head}) does not know" in lines[0]
    assert cli(root, url, "history", "migrate").returncode == 2  # never downgraded

    set_version(url, "UPDATE alembic_version SET version_num = '0003'")  # an older host's database
    proc = cli(root, url, "run", "--suite", "s")
    assert proc.returncode == 2 and "is at revision 0003; this evalloop (" in proc.stderr, proc.stderr
    assert f"writes revision {head}" in proc.stderr and "history migrate" in proc.stderr

    set_version(url, "DROP TABLE alembic_version")  # made by an evalloop before numbered migrations
    proc = cli(root, url, "run", "--suite", "s")
    assert proc.returncode == 2 and "made before numbered migrations" in proc.stderr, proc.stderr
    assert "history migrate" in proc.stderr
    with _raw(url) as conn:  # nothing was written meanwhile
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == 1

    proc = cli(root, url, "history", "migrate")
    assert proc.returncode == 0 and f"→ revision {head}" in proc.stdout, proc.stdout
    assert cli(root, url, "history", "migrate").stdout.strip().endswith(f"already at revision {head}")
    assert cli(root, url, "run", "--suite", "s").returncode == 0


def _raw(url: str):
    from evalloop.history.engine import new_engine

    return new_engine(url).connect()


def test_in_team_mode_run_logs_are_an_export(tmp_path, pg_server):
    """With a shared server the database is the truth: a run writes no per-host run log
    (`history export` writes them); beside SQLite the run log stays on by default."""
    from evalloop.config import load_settings

    url = pg_server.create_database()
    root = make_project(tmp_path / "p", {"s": SUITE})
    assert load_settings(root).run_log is True  # SQLite: on
    assert cli(root, url, "run", "--suite", "s").returncode == 0
    assert not (root / "history" / "s.jsonl").exists()
    proc = cli(root, url, "history", "export")
    assert proc.returncode == 0 and (root / "history" / "s.jsonl").is_file(), proc.stdout + proc.stderr
