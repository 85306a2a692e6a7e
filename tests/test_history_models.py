"""The history's tables are SQLModel models (issue #25): one declaration of every table evalloop
keeps, the same DDL on SQLite and PostgreSQL as the release before them (f3594c2, whose DDL and a
database it made are saved in tests/data/schema_f3594c2.json), so existing databases open
unchanged, and reads hand back the models themselves."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.schema import CreateIndex, CreateTable
from sqlmodel import SQLModel

from evalloop.history import engine as history_engine
from evalloop.history import models, version
from support.cli import cli
from support.project import make_project
from support.sqlitedb import sqlite_conn

BEFORE = json.loads((Path(__file__).parent / "data" / "schema_f3594c2.json").read_text())
# what came after f3594c2, added (never changed) and so migrated in place: issue 27's prompt-cache and
# batch columns of runs, and the batches a batch run submitted; issue 24's traceback of a target's
# exception on case_results; issue 36's product fingerprint and bridge link of runs (and its index) and
# the measurement of a scorer's summary; issue 39's size and hash of a truncated output; issue 43's
# acceptance column of a summary (the numbered migrations, evalloop.history.migrations)
ADDED_COLUMNS = {"runs": ("cache_write_tokens", "cache_read_tokens", "batched_calls", "product_fingerprint",
                          "bridge_of"),
                 "scorer_summaries": ("measurement", "accepted"),
                 "case_results": ("traceback", "output_bytes", "output_sha256")}
ADDED_INDEXES = ("ix_runs_bridge_of",)
# issue 43: JSON objects typed as JSON — on PostgreSQL (migration 0005 alters them); SQLite keeps their VARCHAR
JSON_COLUMNS = {"runs": ("fingerprint", "notes"), "scorer_summaries": ("details",)}
# issue 27; issue 28: the shared schema's version; issue 43: the revision (Alembic's table)
ADDED_TABLES = ("run_batches", "evalloop_schema", "alembic_version")
ADDED_DDL = ["CREATE TABLE alembic_version",  # stamped at 0001 by its columns, then migrations 0002-0004
             *(f"ALTER TABLE runs ADD COLUMN {c} INTEGER" for c in ADDED_COLUMNS["runs"][:3]),
             "ALTER TABLE case_results ADD COLUMN traceback VARCHAR",
             "CREATE TABLE run_batches", "CREATE INDEX ix_run_batches_run_id", "CREATE TABLE evalloop_schema",
             "ALTER TABLE runs ADD COLUMN product_fingerprint VARCHAR",
             "ALTER TABLE runs ADD COLUMN bridge_of VARCHAR", "CREATE INDEX IF NOT EXISTS ix_runs_bridge_of",
             "ALTER TABLE scorer_summaries ADD COLUMN measurement VARCHAR",
             "ALTER TABLE case_results ADD COLUMN output_bytes INTEGER",
             "ALTER TABLE case_results ADD COLUMN output_sha256 VARCHAR",
             "ALTER TABLE scorer_summaries ADD COLUMN accepted BOOLEAN"]
SRC = Path(__file__).resolve().parents[1] / "src" / "evalloop"
TINY = {"name": "tiny", "target": "sut:echo", "scorers": ["equals"],
        "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(5)]}


def ddl(dialect) -> list[str]:
    order = [s.split()[2] for s in BEFORE["sqlite"] if s.startswith("CREATE TABLE")]
    out = []
    for name in order:
        table = models.metadata.tables[name]
        text = str(CreateTable(table).compile(dialect=dialect)).strip()
        for column in ADDED_COLUMNS.get(name, ()):  # the DDL the table had, before the additions
            text = re.sub(rf"\n\t{column} [^\n]*", "", text)
        for column in JSON_COLUMNS.get(name, ()):  # the type it had before 0005
            typed = "JSON" if dialect.name == "postgresql" else "VARCHAR"
            assert f"\n\t{column} {typed} NOT NULL" in text, (column, text)
            text = text.replace(f"\n\t{column} {typed} NOT NULL", f"\n\t{column} VARCHAR NOT NULL")
        out.append(text)
        indexes = sorted((i for i in table.indexes if i.name not in ADDED_INDEXES), key=lambda i: i.name)
        out += [str(CreateIndex(i).compile(dialect=dialect)).strip() for i in indexes]
    return out


def test_every_table_is_a_sqlmodel_model_with_the_ddl_it_had():
    tables = {m.__table__.name: m for m in models.TableModel.__subclasses__()}
    assert sorted(tables) == sorted(models.metadata.tables)  # every table of the metadata has its model
    assert sorted(tables) == sorted([*(s.split()[2] for s in BEFORE["sqlite"] if s.startswith("CREATE TABLE")),
                                     *ADDED_TABLES])
    assert all(issubclass(m, SQLModel) and m.model_config.get("table") for m in tables.values())
    assert ddl(sqlite.dialect()) == BEFORE["sqlite"]
    assert ddl(postgresql.dialect()) == BEFORE["postgresql"]
    # evalloop's tables stay out of the SQLModel.metadata a system under test may use itself
    assert not set(models.metadata.tables) & set(SQLModel.metadata.tables)


def test_no_module_declares_a_table_outside_the_models():
    """Tables come from SQLModel models only: no module calls SQLAlchemy's ``Table``, ``Column``
    or ``MetaData`` (outside the engine's own use of them as types). The migrations are the
    exception: each states the schema of its own time, which the models leave behind."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if "migrations" in path.relative_to(SRC).parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("sqlalchemy") for alias in node.names
                    if alias.name in ("Table", "Column", "MetaData")}
        offenders += [f"{path.relative_to(SRC)}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported]
    assert offenders == []


def test_a_database_made_by_the_release_before_opens_unchanged(tmp_path):
    """A history made by f3594c2 (two runs, locks, a ledger entry) is read, run against and
    written by this code with no DDL but the migrations since (new nullable columns and new
    tables, :data:`ADDED_DDL`): its tables otherwise the same, its runs readable."""
    root = make_project(tmp_path / "p", {"tiny": TINY}, scorers=None)
    db = root / "history" / "evalloop.db"
    db.parent.mkdir()
    with sqlite_conn(db) as conn:
        conn.executescript("\n".join(BEFORE["database_dump"]))
    with sqlite_conn(db) as conn:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()

    statements: list[str] = []

    def seen(conn, cursor, statement, *rest) -> None:
        statements.append(statement)

    from evalloop.history import locks
    from evalloop.history.store import HistoryStore
    from evalloop.scheduling import ledger

    history_engine._ENGINES.clear()
    event.listen(Engine, "before_cursor_execute", seen)
    try:
        url = f"sqlite:///{db}"
        store = HistoryStore(url)
        runs = store.runs("tiny")
        locks.engine_for(url)
        entries = ledger.entries(url)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
        history_engine._ENGINES.clear()
    changes = [" ".join(s.split()) for s in statements if any(w in s.upper() for w in ("CREATE", "ALTER", "DROP"))]
    assert len(changes) == len(ADDED_DDL) and all(c.startswith(a) for c, a in zip(changes, ADDED_DDL, strict=True)), \
        changes
    assert len(runs) == 2 and all(isinstance(r, models.Run) for r in runs)
    assert runs[0].status == "completed" and runs[0].started_at.tzinfo is not None
    assert {s.scorer for s in store.summaries(runs[0].id).values()} == {"equals"}
    assert [e.job_id for e in entries] == ["j"] and isinstance(entries[0], models.LedgerEntry)

    done = cli(root, "run", "--suite", "tiny")  # a run of this code on top of it
    assert done.returncode == 0, done.stderr
    assert "steady" in done.stdout
    with sqlite_conn(db) as conn:
        after = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        changed = (*ADDED_COLUMNS, *ADDED_TABLES, *ADDED_INDEXES)
        new = ("ix_run_batches", "sqlite_autoindex_alembic_version", "sqlite_autoindex_evalloop_schema")
        assert [r for r in after if r[1] not in changed and not r[1].startswith(new)] \
            == [r for r in schema if r[1] not in ADDED_COLUMNS]
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (version.HEAD,)
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (3,)
        # the migration read the old runs' product and measurement from their stored fingerprints:
        # the same as the new run's, so its baseline holds both old runs (issue 36)
        products = conn.execute("SELECT DISTINCT product_fingerprint FROM runs").fetchall()
        measured = conn.execute("SELECT DISTINCT measurement FROM scorer_summaries").fetchall()
        assert len(products) == 1 and products[0][0] and len(measured) == 1 and measured[0][0]
    assert "1.000 (2)" in done.stdout


def test_reads_hand_back_the_models(tmp_path):
    """What `history`, `show` and the Python API read are the SQLModel objects themselves."""
    from evalloop import HistoryStore, Run

    root = make_project(tmp_path / "p", {"tiny": TINY}, scorers=None)
    for _ in range(2):
        assert cli(root, "run", "--suite", "tiny").returncode == 0
    store = HistoryStore(f"sqlite:///{root / 'history' / 'evalloop.db'}")
    runs = store.runs("tiny")
    assert Run is models.Run and all(type(r) is models.Run for r in runs)
    newest, older = runs
    assert [type(s) for s in store.summaries(newest.id).values()] == [models.ScorerSummary]
    assert {type(r) for r in store.case_results(newest.id)} == {models.CaseResult}
    assert {type(s) for s in store.score_rows(newest.id)} == {models.CaseScore}
    (run, summary), = store.baseline_runs("tiny", "equals", newest, 5)
    assert (type(run), type(summary), run.id) == (models.Run, models.ScorerSummary, older.id)
    assert store.get_run(newest.id[:-2]).id == newest.id  # a unique prefix
    assert newest.model_dump()["suite"] == "tiny"  # the row a model writes is its dump


@pytest.mark.parametrize("kind", ["runs", "summaries"])
def test_models_built_in_python_write_and_read_back_alike(tmp_path, kind):
    from evalloop.history.store import HistoryStore

    store = HistoryStore(f"sqlite:///{tmp_path / 'h.db'}")
    run = store.begin_run(models.Run(id="r1", suite="s"))
    summary = models.ScorerSummary(run_id="r1", scorer="x", kind="heuristic", mean=0.5, n=2)
    done = store.finish_run("r1", [summary], status="completed")
    if kind == "runs":
        again = store.get_run("r1")
        assert again.model_dump() == done.model_dump() and again.started_at == run.started_at
    else:
        got = store.summaries("r1")["x"]
        assert got.id is not None and got.mean == 0.5 and got.n == 2 and got.kind == "heuristic"


def test_a_history_class_name_names_one_class_in_the_package():
    """One name per concept (issue #43): a class of history/ is the only class of that name in
    evalloop (the store was both a class and, in leases, a Protocol of what leases read of it)."""
    found: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(str(path.relative_to(SRC)))
    twice = {name: where for name, where in found.items()
             if len(where) > 1 and any(w.startswith("history/") for w in where)}
    assert twice == {}
