"""What the `evalloop` process does before and after a run (issue #16): a trivial run imports only
what it uses, and the program's fast ending (no interpreter teardown) still leaves every file
flushed, every SQLite database closed, every atexit handler and thread finished, and the exit
code as it was. Structural checks, never timed: the figures live in bench/whole_process.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from support.cli import cli
from support.project import TARGET, make_project
from support.sqlitedb import sqlite_conn

SUITE = {"name": "tiny", "target": "sut:echo", "scorers": ["equals"],
         "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(5)]}

#: never needed by a run of a heuristic scorer over an in-process target, printed to a pipe (sqlmodel
#: and sqlalchemy.orm are: the run writes the history, whose tables are SQLModel models, issue #25)
UNUSED = ("anthropic", "openai", "httpx", "jinja2", "apscheduler", "model2vec", "huggingface_hub",
          "tokenizers", "safetensors", "sqlite_vec", "tenacity",
          "rich.progress", "rich.markdown", "rich.syntax",
          "evalloop.learning", "evalloop.memory", "evalloop.scheduling.scheduler", "evalloop.scheduling.sinks",
          "evalloop.report.cases", "evalloop.report.html", "evalloop.report.markdown",
          "evalloop.report.junit", "evalloop.report.trends", "evalloop.report.summary",
          "evalloop.history.strata", "evalloop.history.readonly", "evalloop.llm.anthropic_client",
          "evalloop.llm.openai_client", "evalloop.llm.batching", "evalloop.llm.retry",
          "evalloop.retrieval.reference_retrievers", "evalloop.retrieval.generator",
          "evalloop.retrieval.compare", "evalloop.retrieval.dataset")

CHILD = textwrap.dedent("""
    import atexit, json, sys
    atexit.register(lambda: print("MODULES " + json.dumps(sorted(sys.modules)), file=sys.stderr))
    from evalloop.cli import main
    sys.argv = ["evalloop", *sys.argv[1:]]
    main()
""")


def modules_of_a_run(root, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    proc = subprocess.run([sys.executable, "-c", CHILD, "run", "--suite", "tiny", "-C", str(root), *args],
                          capture_output=True, text=True, timeout=120)
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    return proc, set(json.loads(line.removeprefix("MODULES ")))


def test_a_trivial_run_imports_nothing_it_does_not_use(tmp_path):
    root = make_project(tmp_path / "p", {"tiny": SUITE}, scorers=None)
    for _ in range(2):  # the first run creates the database, the second has a baseline
        proc, modules = modules_of_a_run(root)
        assert proc.returncode == 0, proc.stderr
    assert "tiny" in proc.stdout and "steady" in proc.stdout
    loaded = sorted(name for name in UNUSED if name in modules)
    assert loaded == [], f"a trivial run imported {loaded}"


def test_the_verbose_and_json_paths_still_import_what_they_use(tmp_path):
    """The modules left out of the trivial path come in when asked for (-v, --json, --junit)."""
    root = make_project(tmp_path / "p", {"tiny": SUITE}, scorers=None)
    proc, modules = modules_of_a_run(root, "--json", "--junit", str(tmp_path / "j.xml"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cases"][0]["case_id"] == "c0"
    assert {"evalloop.report.cases", "evalloop.report.summary", "evalloop.report.junit"} <= modules
    junit = (tmp_path / "j.xml").read_text()
    assert all(f'name="c{i}' in junit or f"c{i}" in junit for i in range(5))


LEFTOVERS = TARGET + '''
import atexit, os, sqlite3, threading, time
from concurrent.futures import ThreadPoolExecutor

LOG = open(os.environ["SUT_LOG"], "w")  # never closed: flushed at exit, as a teardown would
DB = sqlite3.connect(os.environ["SUT_DB"])  # never closed: its WAL is checkpointed and removed
DB.execute("PRAGMA journal_mode=WAL")
DB.execute("CREATE TABLE IF NOT EXISTS seen (input)")

def late():
    time.sleep(0.3)
    with open(os.environ["SUT_LOG"] + ".thread", "w") as f:
        f.write("done")

def ending():  # says whether the program ended the fast way (evalloop.cli.lifecycle)
    from evalloop.cli import lifecycle

    with open(os.environ["SUT_LOG"] + ".atexit", "w") as f:
        f.write(f"ran, program={lifecycle.PROGRAM}")

atexit.register(ending)
POOL = ThreadPoolExecutor(2)  # never shut down: its idle workers are told to end at exit

OPENED_IN_A_CASE = []

def leaky(input):
    LOG.write(f"case {input}\\n")
    DB.execute("INSERT INTO seen VALUES (?)", (input,))
    DB.commit()
    if input == 0:
        threading.Thread(target=late).start()  # not a daemon: the process waits for it
        OPENED_IN_A_CASE.append(open(os.environ["SUT_LOG"] + ".case", "w"))  # made after the set-up
    OPENED_IN_A_CASE[0].write(f"{input}\\n")
    POOL.submit(time.sleep, 0).result()
    return input
'''


def test_the_fast_ending_leaves_files_databases_threads_and_the_exit_code_as_a_teardown_would(tmp_path):
    # in place throughout: its connection is the main thread's, and each case writes its log line once
    # (a call that waits for the pool could move the run to threads, docs/targets.md)
    leaky = {**SUITE, "target": "sut:leaky", "target_threads": False}
    root = make_project(tmp_path / "p", {"tiny": leaky}, target=LEFTOVERS,
                        scorers=None)
    env = {"SUT_LOG": str(tmp_path / "sut.log"), "SUT_DB": str(tmp_path / "sut.db")}
    done = cli(root, "run", "--suite", "tiny", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith(")") or "ok:" in done.stderr
    assert "tiny" in done.stdout and "equals" in done.stdout
    assert sorted((tmp_path / "sut.log").read_text().splitlines()) == [f"case {i}" for i in range(5)]
    assert (tmp_path / "sut.log.atexit").read_text() == "ran, program=True"
    assert (tmp_path / "sut.log.thread").read_text() == "done"
    assert sorted((tmp_path / "sut.log.case").read_text().split()) == [str(i) for i in range(5)]
    leftover = sorted(p.name for p in [*tmp_path.glob("*-wal"), *(root / "history").glob("*-wal"),
                                        *tmp_path.glob("*-shm"), *(root / "history").glob("*-shm")])
    assert leftover == []
    with sqlite_conn(tmp_path / "sut.db") as conn:
        assert conn.execute("SELECT count(*) FROM seen").fetchone() == (5,)
    # exit codes are kept: bad input 2, a usage error 2, and `python -m evalloop` ends the same way
    bad = cli(root, "run", "--suite", "missing", env=env)
    assert bad.returncode == 2 and "unknown suite 'missing'" in bad.stderr
    usage = cli(root, "run", "--epochs", "0", env=env)
    assert usage.returncode == 2 and "--epochs" in usage.stderr
    as_module = subprocess.run([sys.executable, "-m", "evalloop", "run", "--suite", "tiny", "--json"],
                               cwd=root, capture_output=True, text=True, timeout=120,
                               env={**__import__("os").environ, **env})
    assert as_module.returncode == 0, as_module.stderr
    assert json.loads(as_module.stdout)["suite"] == "tiny"
    assert (tmp_path / "sut.log.atexit").read_text() == "ran, program=True"
    # a script of the user's that calls main() ends as it always did (it may carry on after it)
    script = tmp_path / "mine.py"
    script.write_text("import sys\nfrom evalloop.cli import main\ntry:\n    main()\nexcept SystemExit:\n"
                      "    print('carried on')\n")
    mine = subprocess.run([sys.executable, str(script), "run", "--suite", "tiny"], cwd=root, capture_output=True,
                          text=True, timeout=120, env={**__import__("os").environ, **env})
    assert mine.returncode == 0 and mine.stdout.rstrip().endswith("carried on"), mine.stderr
    assert (tmp_path / "sut.log.atexit").read_text() == "ran, program=False"


FROZEN = textwrap.dedent("""
    import json, sys
    from evalloop.cli import lifecycle, main

    loaded = lifecycle.own_code_loaded

    def checked():  # what is frozen here is never scanned at the end: it must hold no leftover
        streams = {id(s) for s in (sys.stdin, sys.stdout, sys.stderr) if s is not None}
        streams |= {id(s.buffer) for s in (sys.stdin, sys.stdout, sys.stderr) if s is not None}
        found = [repr(o) for o in lifecycle.leftovers() if id(o) not in streams]
        print("LEFTOVERS " + json.dumps(found), file=sys.stderr)
        loaded()

    lifecycle.own_code_loaded = checked
    lifecycle.is_program = lambda entry: True
    sys.argv = ["evalloop", *sys.argv[1:]]
    main()
""")


def test_what_the_program_freezes_before_the_users_code_holds_no_file_or_database(tmp_path):
    """evalloop's own modules and libraries are frozen out of the collector before any user code
    runs, and the fast ending never looks at them again: none of them may be a file open for
    writing or a SQLite connection (else it would end unflushed or unclosed)."""
    root = make_project(tmp_path / "p", {"tiny": SUITE}, scorers=None)
    for args in (["--suite", "tiny"], ["--all", "--json"]):
        proc = subprocess.run([sys.executable, "-c", FROZEN, "run", *args, "-C", str(root)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        line = next(x for x in proc.stderr.splitlines() if x.startswith("LEFTOVERS "))
        assert json.loads(line.removeprefix("LEFTOVERS ")) == []


def test_main_called_in_process_still_raises_system_exit(tmp_path, monkeypatch, capsys):
    """Embedders and tests calling main() keep their process: only the program itself ends fast."""
    import pytest

    from evalloop.cli import main

    root = make_project(tmp_path / "p", {"tiny": SUITE}, scorers=None)
    monkeypatch.setattr(sys, "argv", ["evalloop", "run", "--suite", "tiny", "-C", str(root)])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 0
    assert "tiny" in capsys.readouterr().out


def test_an_older_history_database_is_still_migrated_and_a_current_one_is_not_checked(tmp_path):
    """Opening a history stamped at this evalloop's revision skips the table checks; an older one (no
    stamp, a table and a column missing) gets them back before the run writes."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from evalloop.history import engine as store
    from evalloop.history import version

    root = make_project(tmp_path / "p", {"tiny": SUITE}, scorers=None)
    first = cli(root, "run", "--suite", "tiny")
    assert first.returncode == 0, first.stderr
    db = root / "history" / "evalloop.db"
    with sqlite_conn(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (version.HEAD,)
        conn.execute("DROP TABLE score_vectors")
        conn.execute("ALTER TABLE scorer_summaries DROP COLUMN mdd")
        conn.execute("DROP TABLE alembic_version")  # as an evalloop before numbered migrations left it
    again = cli(root, "run", "--suite", "tiny")
    assert again.returncode == 0, again.stderr
    with sqlite_conn(db) as conn:
        assert conn.execute("SELECT count(*) FROM score_vectors").fetchone() == (1,)
        assert conn.execute("SELECT count(mdd) FROM scorer_summaries").fetchone() == (1,)
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (version.HEAD,)
    statements: list[str] = []

    def seen(conn, cursor, statement, *rest) -> None:
        statements.append(statement)

    store._ENGINES.clear()
    event.listen(Engine, "before_cursor_execute", seen)
    try:
        store.get_engine(f"sqlite:///{db}").dispose()
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
        store._ENGINES.clear()
    assert not [s for s in statements if "table_info" in s.lower() or "create" in s.lower()], statements


def test_typer_builds_only_the_command_named_and_the_whole_app_otherwise():
    from evalloop.cli import _app_for, app

    def names(args: list[str]) -> list[str]:
        chosen = _app_for(args)
        return sorted([c.callback.__name__ for c in chosen.registered_commands]
                      + [g.name for g in chosen.registered_groups])

    assert names(["run", "--suite", "x"]) == ["run"]
    assert names(["-C", "dir", "run"]) == ["run"] == names(["--project=dir", "run"])
    assert names(["suites", "list"]) == ["suites"]
    for whole in ([], ["--help"], ["rnu"], ["-C"], ["--bogus", "run"]):
        assert _app_for(whole) is app


def test_the_history_schema_is_still_the_one_sqlmodel_made(tmp_path):
    """A database made by the releases before (SQLModel tables at d907b87, Core tables built from
    pydantic records at f3594c2, SQLModel again since) is migrated, not rebuilt: same PostgreSQL
    column types, and timestamps still come back aware, in UTC."""
    from datetime import datetime, timedelta, timezone

    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateTable

    # the schema's changes since f3594c2 are numbered migrations (tests/test_migrations.py checks
    # that they build exactly these models)
    from evalloop.history import version
    from evalloop.history.models import Run
    from evalloop.history.store import HistoryStore

    assert version.HEAD == "0005"
    ddl = str(CreateTable(Run.__table__).compile(dialect=postgresql.dialect()))
    assert "started_at TIMESTAMP WITH TIME ZONE NOT NULL" in ddl and "valid BOOLEAN NOT NULL" in ddl
    assert "fingerprint JSON NOT NULL" in ddl and "notes JSON NOT NULL" in ddl  # 0005
    store = HistoryStore(f"sqlite:///{tmp_path / 'h.db'}")
    at = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone(timedelta(hours=2)))
    store.begin_run(Run(id="r1", suite="s", started_at=at))
    done = store.finish_run("r1", [], status="completed")
    again = store.get_run("r1")
    assert again.started_at == at and again.started_at.utcoffset() == timedelta(0)
    assert done.ended_at.tzinfo is not None and again.ended_at == done.ended_at and again.status == "completed"
    assert store.find_runs("r_") == []  # a prefix is matched literally, not as a LIKE pattern


def test_the_time_a_run_prints_is_the_time_the_user_waited(tmp_path):
    """The closing line's seconds count from the process's start: imports, loading the target and
    checking the suites included (a target that takes 1.5 s to import makes the run say so)."""
    import re
    import time

    slow = TARGET + "\nimport time\ntime.sleep(1.5)\n"
    root = make_project(tmp_path / "p", {"tiny": SUITE}, target=slow, scorers=None)
    started = time.monotonic()
    done = cli(root, "run", "--suite", "tiny")
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    printed = float(re.findall(r" in (\d+\.\d)s", done.stderr)[-1])
    assert 1.5 <= printed <= wall + 0.05, (printed, wall)


BLAS_TARGET = '''
import os

def threads(input):
    return os.environ.get("OPENBLAS_NUM_THREADS")
'''


def test_the_program_runs_blas_on_one_thread_unless_the_user_chose(tmp_path):
    """numpy's OpenBLAS starts a thread per core at import, which costs a run more than evalloop's
    small products gain: the program sets one thread, a user's own setting wins, and a process
    that imports evalloop is left alone."""
    suite = {"name": "blas", "target": "sut:threads", "scorers": ["equals"],
             "cases": [{"id": "c", "input": 0, "expected": "1"}]}
    root = make_project(tmp_path / "p", {"blas": suite}, target=BLAS_TARGET, scorers=None)
    clean = {k: v for k, v in __import__("os").environ.items()
             if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}

    def output(env: dict[str, str]) -> object:
        done = subprocess.run([sys.executable, "-m", "evalloop", "run", "--suite", "blas", "--json"],
                              cwd=root, capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode in (0, 1), done.stderr
        return json.loads(done.stdout)["cases"][0]["output"]

    assert output(clean) == "1"
    assert output({**clean, "OMP_NUM_THREADS": "3"}) is None
    assert output({**clean, "OPENBLAS_NUM_THREADS": "4"}) == "4"
    in_process = subprocess.run([sys.executable, "-c", "import evalloop.cli, os; "
                                 "print(os.environ.get('OPENBLAS_NUM_THREADS'))"],
                                capture_output=True, text=True, timeout=60, env=clean)
    assert in_process.stdout.strip() == "None"



GC_TARGET = TARGET + '''
import gc, os

def collecting(input):
    with open(os.environ["GC_LOG"], "a") as f:
        f.write(f"case {gc.isenabled()}\\n")
    with open(os.environ["GC_LOG"] + ".count", "w") as f:  # collections since the process started
        f.write(str(sum(generation["collections"] for generation in gc.get_stats())))
    return input
'''

GC_SCORERS = '''
import gc, os

with open(os.environ["GC_LOG"], "a") as f:
    f.write(f"scorers {gc.isenabled()}\\n")
'''


def test_the_program_starts_without_collections_and_collects_while_the_users_code_runs(tmp_path):
    """The command line holds the collector while its own modules load; a run's cases, any other
    command, a script that calls main() and a process that imports evalloop all collect."""
    suite = {"name": "gc", "target": "sut:collecting", "scorers": ["equals"],
             "cases": [{"id": "c", "input": 1, "expected": 1}]}
    root = make_project(tmp_path / "p", {"gc": suite}, target=GC_TARGET, scorers=GC_SCORERS)
    log = tmp_path / "gc.log"
    env = {**__import__("os").environ, "GC_LOG": str(log)}

    def seen(*argv: str) -> list[str]:
        log.write_text("")
        done = subprocess.run(list(argv), cwd=root, capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr
        return log.read_text().split("\n")[:-1]

    # a run: its start and set-up (the project's scorers load) without collections, its cases with
    # them; what collections there are before the first case come from opening the run's history
    assert seen(sys.executable, "-m", "evalloop", "run", "--suite", "gc") == ["scorers False", "case True"]
    assert int((tmp_path / "gc.log.count").read_text()) < 60  # ≈ 25; ≈ 95 when only the set-up held it
    assert seen(sys.executable, "-m", "evalloop", "scorers", "list") == ["scorers True"]
    script = tmp_path / "mine.py"
    script.write_text("from evalloop.cli import main\nmain()\n")
    assert seen(sys.executable, str(script), "run", "--suite", "gc") == ["scorers True", "case True"]
    assert int((tmp_path / "gc.log.count").read_text()) > 100  # ≈ 230: a library collects as it always did
    library = subprocess.run([sys.executable, "-c", "import evalloop.cli, gc; print(gc.isenabled())"],
                             capture_output=True, text=True, timeout=60)
    assert library.stdout.strip() == "True"


def test_the_program_imports_numpy_before_typers_pydantic_for_a_run(tmp_path):
    """On Python 3.11 typing_extensions (which Typer's pydantic brings in) slows every later
    ``Literal`` type, and numpy's typing modules are hundreds of them (≈ 30 ms of a run): ``run``
    imports numpy first. A structural check on the import order, not a timing."""
    if sys.version_info >= (3, 12):
        return
    root = make_project(tmp_path / "p", {"tiny": SUITE}, scorers=None)
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "evalloop", "run", "--suite", "tiny"],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    order = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert order.index("numpy") < order.index("typing_extensions")
