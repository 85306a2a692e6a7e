"""Damaged stores fail into one line that names the file and how to recover; a damaged memory
store or LLM cache never stops a run; `evalloop doctor` checks every store."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from evalloop.config import load_settings
from evalloop.history import runlog
from evalloop.history.models import RunStatus
from support.messages_server import Reply, llm_server  # noqa: F401
from support.project import make_project

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": "x" * 500 + str(i), "expected": "x" * 500 + str(i)}
                   for i in range(60)]}


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EVALLOOP, *args, "-C", str(root)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})


def damage_case_pages(db: Path, how: str) -> None:
    """Overwrite every page of the case tables and their indexes (random bytes or zeros)."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name LIKE '%case_%'")]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with open(db, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(os.urandom(size) if how == "random" else bytes(size))


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines()
            if not line.startswith(("no ANTHROPIC_API_KEY", "ok: ", "FAILED ("))]  # the closing line is no error


@pytest.mark.parametrize(("how", "run_log"), [("random", True), ("zeros", False)])
def test_a_damaged_history_database_is_one_line_and_no_completed_run(tmp_path, how, run_log):
    root = make_project(tmp_path / "p", {"s": SUITE})
    if not run_log:
        (root / "evalloop.toml").write_text("run_log = false\n")
    settings = load_settings(root)
    assert cli(root, "run", "--suite", "s").returncode == 0
    log = runlog.log_path(settings.history_dir, "s")
    before = log.read_bytes() if run_log else b""
    db = settings.history_dir / "evalloop.db"
    damage_case_pages(db, how)
    proc = cli(root, "run", "--suite", "s")
    assert proc.returncode == 1
    (line,) = errors(proc)
    assert line.startswith(f"error: {db}: the history database is damaged") and "evalloop doctor" in line, line
    assert "evalloop history import" in line and "permission" not in line
    with sqlite3.connect(db) as conn:  # the runs table itself is intact: no second completed run
        statuses = [r[0] for r in conn.execute("SELECT status FROM runs ORDER BY started_at")]
    assert statuses[0] == RunStatus.COMPLETED and RunStatus.COMPLETED not in statuses[1:]
    if run_log:
        assert log.read_bytes() == before  # the log holds only the good run


def test_a_damaged_memory_store_never_stops_a_run(tmp_path):
    root = make_project(tmp_path / "p", {"s": SUITE})
    memory = root / "history" / "memory.db"
    memory.parent.mkdir(parents=True)
    memory.write_bytes(os.urandom(64 * 1024))
    proc = cli(root, "run", "--suite", "s", "--json")
    assert proc.returncode == 0, proc.stderr
    (line,) = errors(proc)
    assert str(memory) in line and "memory store is damaged" in line and "skipped" in line, line
    assert "evalloop doctor" in line


def test_doctor_names_each_damaged_store_and_how_to_recover(tmp_path):
    root = make_project(tmp_path / "p", {"s": SUITE})
    assert cli(root, "run", "--suite", "s").returncode == 0
    healthy = cli(root, "doctor")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert "history database" in healthy.stdout and "ok" in healthy.stdout
    settings = load_settings(root)
    damage_case_pages(settings.history_dir / "evalloop.db", "zeros")
    log = runlog.log_path(settings.history_dir, "s")
    log.write_bytes(log.read_bytes() + b'{"v":1,"id":"half')
    (settings.history_dir / "memory.db").write_bytes(b"not a database" * 100)
    (settings.history_dir / "llm-cache.db").write_bytes(os.urandom(8192))
    proc = cli(root, "doctor")
    assert proc.returncode == 1
    text = proc.stdout
    assert f"{settings.history_dir / 'evalloop.db'}: damaged" in text and "history import" in text, text
    assert f"{log}: damaged (partial last line" in text, text
    assert f"{settings.history_dir / 'memory.db'}: damaged" in text, text
    assert f"{settings.history_dir / 'llm-cache.db'}: damaged" in text, text


async def test_a_damaged_llm_cache_never_stops_a_run(tmp_path, llm_server, monkeypatch):  # noqa: F811
    from evalloop.errors import StoreError
    from evalloop.llm import LLMRequest, Message
    from evalloop.services import build_services, close_services

    root = make_project(tmp_path / "p", {"s": SUITE})
    cache = root / "history" / "llm-cache.db"
    cache.parent.mkdir(parents=True)
    cache.write_bytes(os.urandom(16 * 1024))
    llm_server.responder = lambda seen: Reply.of_text("fine")
    monkeypatch.delenv("EVALLOOP_LLM_BASE_URL", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm_server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    services, notices = build_services(load_settings(root))
    (notice,) = [n for n in notices if "LLM cache" in n]
    assert notice.startswith(f"{cache}: the LLM cache is damaged") and "caching is skipped" in notice
    ask = LLMRequest(model="claude-haiku-4-5", messages=[Message(role="user", content="hi")])
    assert (await services.llm.complete(ask)).text == "fine"
    assert (await services.llm.complete(ask)).cached is False  # uncached, and still answering
    await close_services(services)
    with pytest.raises(StoreError, match="cache-only"):  # a replay cannot go on without its file
        build_services(load_settings(root), cache="only")
