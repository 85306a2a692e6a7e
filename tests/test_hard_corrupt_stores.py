"""Damaged stores fail into one line that names the file and how to recover; a damaged memory
store or LLM cache never stops a run; `evalloop doctor` checks every store."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evalloop.config import load_settings
from evalloop.history import runlog
from evalloop.history.models import RunStatus
from support.messages_server import Reply, llm_server  # noqa: F401
from support.project import make_project
from support.sqlitedb import sqlite_conn

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")

SUITE = {"name": "s", "target": "sut:echo", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": "x" * 500 + str(i), "expected": "x" * 500 + str(i)}
                   for i in range(60)]}


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EVALLOOP, *args, "-C", str(root)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})


def damage_case_pages(db: Path, how: str) -> None:
    """Overwrite every page of the case tables and their indexes (random bytes or zeros)."""
    with sqlite_conn(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name LIKE '%case_%'")]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with open(db, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(os.urandom(size) if how == "random" else bytes(size))


CLOSING = re.compile(r"^(ok|FAILED \(\d+ of \d+\)): \d+ suites? run")


def errors(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr without the key notice, the prompt-caching notice and the closing summary line: what
    went wrong, if anything."""
    return [line for line in proc.stderr.splitlines()
            if line.strip() and not line.startswith(("no ANTHROPIC_API_KEY", "prompt caching:"))
            and not CLOSING.match(line)]


@pytest.mark.parametrize(("how", "run_log"), [("random", True), ("zeros", True), ("zeros", False)])
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
    assert proc.returncode == 2  # an environment error (#40 item 10), never the verdict code
    (line,) = errors(proc)
    assert line.startswith(f"error: {db}: the history database is damaged") and "evalloop doctor" in line, line
    assert "evalloop history import" in line and "permission" not in line
    with sqlite_conn(db) as conn:  # the runs table itself is intact: no second completed run
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
    from evalloop.run.services import build_services, close_services

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


def test_a_history_file_of_random_bytes_is_one_line_naming_it(tmp_path):
    root = make_project(tmp_path / "p", {"s": SUITE})
    db = root / "history" / "evalloop.db"
    db.parent.mkdir(parents=True)
    db.write_bytes(os.urandom(64 * 1024))
    proc = cli(root, "run", "--suite", "s")
    assert proc.returncode == 2, proc.stderr
    (line,) = errors(proc)
    assert line.startswith(f"error: {db}: the history database is damaged (file is not a database)"), line
    assert "evalloop doctor --repair" in line and "run logs" in line, line


def test_doctor_repair_rebuilds_the_history_from_the_run_logs_and_moves_damaged_files_aside(tmp_path):
    root = make_project(tmp_path / "p", {"s": SUITE})
    for _ in range(2):
        assert cli(root, "run", "--suite", "s").returncode == 0
    settings = load_settings(root)
    hist = settings.history_dir
    log = runlog.log_path(hist, "s")
    good = log.read_bytes()
    damage_case_pages(hist / "evalloop.db", "random")
    log.write_bytes(good + b'{"v":1,"id":"half')
    (hist / "memory.db").write_bytes(b"not a database" * 100)
    (hist / "llm-cache.db").write_bytes(os.urandom(8192))
    proc = cli(root, "doctor", "--repair", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = proc.stdout
    assert "repaired: history database" in text and "rebuilt from the run logs: 2 run(s) (s 2)" in text, text
    assert "repaired: run log" in text and "removed a partial last line" in text, text
    assert "damaged" not in text.split("repaired:")[-1].split("\n", 1)[1], text  # the re-check is clean
    assert log.read_bytes() == good
    moved = {p.name.split(".broken-")[0] for p in hist.glob("*.broken-*")}  # kept, never deleted
    assert moved == {"evalloop.db", "llm-cache.db", "memory.db"}, moved
    assert not (hist / "evalloop.db-wal").exists() or (hist / "evalloop.db").exists()
    assert cli(root, "doctor").returncode == 0
    proc = cli(root, "run", "--suite", "s", "--json")  # the rebuilt history gives the baseline
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    summary = summary[0] if isinstance(summary, list) else summary
    assert [sc["window_runs"] for sc in summary["scorers"]] == [2], summary


def test_doctor_exit_codes(tmp_path):
    root = make_project(tmp_path / "p", {"s": SUITE})
    fresh = cli(root, "doctor")
    assert fresh.returncode == 0 and "missing (made by the first run)" in fresh.stdout, fresh.stdout
    (root / "evalloop.toml").write_text('history_url = "postgresql+psycopg://u@127.0.0.1:1/x"\n')
    gone = cli(root, "doctor")
    assert gone.returncode == 1 and "unreachable" in gone.stdout, gone.stdout
    (root / "evalloop.toml").write_text('window = "many"\n')
    bad = cli(root, "doctor")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_a_run_with_a_damaged_llm_cache_goes_on_and_says_so_in_one_line(tmp_path):
    """The real CLI on the llm engine: every call goes to the server, the run completes."""
    import yaml

    from evalloop.suites.models import PACKAGE_FIXTURES
    from support.messages_server import LLMServer

    similarity = yaml.safe_load((PACKAGE_FIXTURES / "similarity.yaml").read_text(encoding="utf-8"))
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "similarity.yaml").write_text(
        # no floor: the scripted server answers CREATE to every case; this test is about the cache
        yaml.safe_dump({**similarity, "cases": similarity["cases"][:4], "verdict": {"min_score": 0}},
                       sort_keys=False))
    cache = tmp_path / "history" / "llm-cache.db"
    cache.parent.mkdir()
    cache.write_bytes(os.urandom(16 * 1024))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVALLOOP_"))}
    with LLMServer(lambda seen: Reply.of_tool({"action": "CREATE", "reason": "scripted"})) as server:
        env |= {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": server.url, "NO_COLOR": "1"}
        runs = [subprocess.run([EVALLOOP, "run", "--suite", "similarity", "--engine", "llm", "--json"], cwd=tmp_path,
                               capture_output=True, text=True, timeout=120, env=env) for _ in range(2)]
        assert server.count == 8  # nothing cached: both runs asked the server
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        (line,) = errors(proc)
        assert line.startswith(f"{cache}: the LLM cache is damaged") and "caching is skipped" in line, line
        assert json.loads(proc.stdout)["status"] == "completed"


def test_a_scheduled_run_logs_the_damaged_store_it_went_on_without(tmp_path):
    import signal
    from datetime import UTC, datetime

    from evalloop.scheduling import ledger
    from evalloop.scheduling.scheduler import add_schedule
    from support.project import wait_for

    root = make_project(tmp_path / "p", {"s": SUITE})
    settings = load_settings(root)
    memory = settings.history_dir / "memory.db"
    memory.parent.mkdir(parents=True)
    memory.write_bytes(os.urandom(64 * 1024))
    add_schedule(settings, ["s"], every="1h", job_id="once", first_run=datetime.now(UTC))
    logged = tmp_path / "scheduler.log"
    with open(logged, "w") as sink:
        proc = subprocess.Popen([EVALLOOP, "scheduler", "start", "--poll", "0.2", "-C", str(root)],
                                stdout=subprocess.DEVNULL, stderr=sink, text=True,
                                env={**os.environ, "NO_COLOR": "1"})
    try:
        done = wait_for(lambda: [e for e in ledger.entries(settings.database_url, "once") if e.status != "running"]
                        and "memory store is damaged" in logged.read_text(), 90)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    finally:
        proc.kill()
    log = logged.read_text()
    assert done and rc == 0, log
    assert [e.status for e in ledger.entries(settings.database_url, "once")] == ["completed"], log
    (line,) = [x for x in log.splitlines() if "memory store is damaged" in x]
    assert "evalloop.scheduler: s: " in line and f"{memory}: the memory store is damaged" in line, log
    assert "Traceback" not in log, log
