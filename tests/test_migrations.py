"""Numbered migrations (Alembic, issue #43): histories made by the code of f3594c2 and 4e61118
(tests/data/history_*.db.gz and memory_*.db.gz, made by tools/old_history.py running those
checkouts: four runs of a suite, the fourth a regression whose failure memory was written, a
schedule and one ledger entry) are stamped at the revision their columns show, migrated forward
with every run, schedule and memory intact and readable by `evalloop history` / `show`, and
round-trip down and up again. The scripts build exactly the models' schema."""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from evalloop.history import engine as history_engine
from evalloop.history import migrations, version
from evalloop.history.models import metadata
from support.cli import cli
from support.sqlitedb import sqlite_conn

DATA = Path(__file__).parent / "data"
#: the revision each old history is at, by what it is (its columns say so)
OLD = {"f3594c2": "0001", "4e61118": "0002"}
RUN_IDS = {"f3594c2": ["20261128T171141919-12350d", "20261128T171143080-5ea882", "20261128T171144226-dd58da",
                       "20261128T171145506-bcd178"],
           "4e61118": ["20261128T171150305-cafd9d", "20261128T171152406-6ca270", "20261128T171153887-996e92",
                       "20261128T171155144-abdfa7"]}
# the project the fixtures were made with: the very one tools/old_history.py builds
_TOOL = importlib.util.spec_from_file_location(
    "old_history", Path(__file__).resolve().parents[1] / "tools" / "old_history.py")
assert _TOOL is not None and _TOOL.loader is not None
old_history = importlib.util.module_from_spec(_TOOL)
_TOOL.loader.exec_module(old_history)
TARGET, SCORER, SUITE = old_history.TARGET, old_history.SCORER, old_history.SUITE
#: tables the migrations never touch the rows of (APScheduler's job store included)
TABLES = ("runs", "scorer_summaries", "case_results", "case_scores", "score_vectors", "calibrations",
          "evalloop_locks", "evalloop_fire_claims", "evalloop_schedule_runs", "evalloop_jobs")


def old_project(tmp_path: Path, commit: str) -> Path:
    """A project whose history/ holds the databases ``commit`` made."""
    root = tmp_path / "p"
    (root / "fixtures").mkdir(parents=True)
    (root / "scorers").mkdir()
    (root / "sut.py").write_text(textwrap.dedent(TARGET))
    (root / "scorers" / "project_scorers.py").write_text(textwrap.dedent(SCORER))
    (root / "fixtures" / "controlled.yaml").write_text(SUITE)
    (root / "answers.json").write_text(json.dumps({f"c{i}": 1.0 for i in range(6)}))
    (root / "history").mkdir()
    for name in ("history", "memory"):
        target = root / "history" / ("evalloop.db" if name == "history" else "memory.db")
        with gzip.open(DATA / f"{name}_{commit}.db.gz") as src, target.open("wb") as out:
            shutil.copyfileobj(src, out)
    return root


def rows(db: Path, tables: tuple[str, ...] = TABLES) -> dict[str, dict[str, list[object]]]:
    """Every row of these tables as {column: values in row order}; compared on the old columns."""
    with sqlite_conn(db) as conn:
        out: dict[str, dict[str, list[object]]] = {}
        for table in tables:
            names = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            order = "id" if "id" in names else ", ".join(f'"{n}"' for n in names)
            quoted = ", ".join(f'"{n}"' for n in names)
            found = conn.execute(f"SELECT {quoted} FROM {table} ORDER BY {order}").fetchall()
            out[table] = {n: [r[i] for r in found] for i, n in enumerate(names)}
        return out


def kept(before: dict[str, dict[str, list[object]]], after: dict[str, dict[str, list[object]]]) -> bool:
    """Whether every old column of every table still holds the same values."""
    return all(after[t].get(c) == values for t, columns in before.items() for c, values in columns.items())


def columns(url: str) -> dict[str, set[str]]:
    engine = create_engine(url)
    try:
        found = inspect(engine)
        return {t: {c["name"] for c in found.get_columns(t)} for t in found.get_table_names()}
    finally:
        engine.dispose()


def column_types(url: str, table: str, *names: str) -> list[str]:
    engine = create_engine(url)
    try:
        found = {c["name"]: str(c["type"]) for c in inspect(engine).get_columns(table)}
        return [found[n] for n in names]
    finally:
        engine.dispose()


def schema_diff(url: str) -> list[object]:
    """What the database lacks or has beyond the models (Alembic's own comparison)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={
                "compare_type": True,
                "include_name": lambda name, kind, _: not (kind == "table" and name in ("evalloop_jobs",
                                                                                        "alembic_version"))})
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


def on(url: str, step) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            step(conn)
    finally:
        engine.dispose()


def damage(db: Path, commit: str) -> None:
    """Values no evalloop wrote but a hand edit or a damaged row may hold: a run's notes that are
    not JSON, a summary's details that are JSON but not an object."""
    with sqlite_conn(db) as conn:
        conn.execute("UPDATE runs SET notes = 'not json {' WHERE id = ?", (RUN_IDS[commit][0],))
        conn.execute("UPDATE scorer_summaries SET details = '[1, 2]' WHERE run_id = ?", (RUN_IDS[commit][1],))


def repaired(found: dict[str, dict[str, list[object]]], commit: str) -> dict[str, dict[str, list[object]]]:
    """The rows as migration 0005 leaves them: the values :func:`damage` wrote as ``{}``."""
    out = {t: {c: list(v) for c, v in columns.items()} for t, columns in found.items()}
    out["runs"]["notes"] = ["{}" if r == RUN_IDS[commit][0] else n
                            for r, n in zip(out["runs"]["id"], out["runs"]["notes"], strict=True)]
    out["scorer_summaries"]["details"] = ["{}" if r == RUN_IDS[commit][1] else d for r, d in
                                          zip(out["scorer_summaries"]["run_id"], out["scorer_summaries"]["details"],
                                              strict=True)]
    return out


def reads_back_as_models(url: str, before: dict[str, dict[str, list[object]]], commit: str) -> None:
    """Every run's fingerprint and notes and every summary's details read back as the objects
    their old text held (the damaged ones of :func:`damage` as ``{}``), through the models."""
    from evalloop.history.details import SummaryDetails, run_fingerprint, run_notes, summary_details
    from evalloop.history.store import HistoryStore

    def parsed(text: object) -> object:
        try:
            found = json.loads(str(text))
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    runs, summaries = before["runs"], before["scorer_summaries"]
    store = HistoryStore(url)
    for i, run_id in enumerate(runs["id"]):
        run = store.get_run(str(run_id))
        assert run is not None and run.fingerprint == parsed(runs["fingerprint"][i]) and run.fingerprint
        assert run.notes == parsed(runs["notes"][i]) and run_fingerprint(run) == run.fingerprint
        assert run_notes(run).model_dump(exclude_unset=True) == run.notes
        for name, summary in store.summaries(str(run_id)).items():
            (at,) = [j for j, (r, n) in enumerate(zip(summaries["run_id"], summaries["scorer"], strict=True))
                     if (r, n) == (run_id, name)]
            assert summary.details == parsed(summaries["details"][at])
            assert summary_details(summary) == SummaryDetails.model_validate(summary.details)
    assert store.get_run(RUN_IDS[commit][0]).notes == {}
    assert all(s.details == {} for s in store.summaries(RUN_IDS[commit][1]).values())


def test_the_revisions_this_evalloop_knows_are_its_scripts():
    assert migrations.revisions() == list(version.REVISIONS)
    assert migrations.revisions()[-1] == version.HEAD


@pytest.fixture(autouse=True)
def _fresh_engines():
    history_engine._ENGINES.clear()
    yield
    history_engine._ENGINES.clear()


@pytest.mark.parametrize("commit", sorted(OLD))
def test_an_old_history_is_migrated_with_every_run_schedule_and_memory_intact(tmp_path, commit):
    root = old_project(tmp_path, commit)
    db = root / "history" / "evalloop.db"
    url = f"sqlite:///{db}"
    before = rows(db)
    assert len(before["runs"]["id"]) == 4 and before["evalloop_jobs"]["id"] and before["evalloop_schedule_runs"]["id"]
    with create_engine(url).connect() as conn:
        assert migrations.inferred_revision(conn) == OLD[commit]
    with sqlite_conn(db) as conn:  # `evalloop accept` of the third run, as those versions wrote it
        details = json.loads(conn.execute("SELECT details FROM scorer_summaries WHERE run_id = ? AND scorer = 'value'",
                                          (RUN_IDS[commit][2],)).fetchone()[0])
        details["accepted"] = {"reason": "new normal", "at": "2026-11-28T17:12:00+00:00", "by": "someone"}
        conn.execute("UPDATE scorer_summaries SET details = ? WHERE run_id = ? AND scorer = 'value'",
                     (json.dumps(details), RUN_IDS[commit][2]))
    damage(db, commit)
    damaged = rows(db)
    before = repaired(damaged, commit)

    migrated = cli(root, "history", "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert f"made before numbered migrations (its columns: revision {OLD[commit]}) → revision {version.HEAD}" \
        in " ".join(migrated.stdout.split())
    assert kept(before, rows(db))  # not a value changed in the columns it had, but the damaged ones: {}
    assert schema_diff(url) == []  # and now exactly the models' schema
    reads_back_as_models(url, damaged, commit)
    with sqlite_conn(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(version.HEAD,)]
        assert conn.execute("SELECT count(*) FROM runs WHERE product_fingerprint IS NULL").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM scorer_summaries WHERE measurement IS NULL").fetchone() == (0,)
        assert conn.execute("SELECT run_id, scorer FROM scorer_summaries WHERE accepted").fetchall() \
            == [(RUN_IDS[commit][2], "value")]  # 0004 read the acceptance into its column

    listed = cli(root, "history", "controlled", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["id"] for r in json.loads(listed.stdout)) == RUN_IDS[commit]
    shown = cli(root, "show", RUN_IDS[commit][-1])
    assert shown.returncode == 0 and "c2" in shown.stdout, shown.stderr
    schedules = cli(root, "schedule", "list", "--json")
    assert schedules.returncode == 0 and [s["id"] for s in json.loads(schedules.stdout)] == ["nightly"], \
        schedules.stderr
    memories = cli(root, "memories", "list", "--json")
    assert memories.returncode == 0 and "controlled" in memories.stdout, memories.stderr

    env = {"EVALLOOP_TEST_ANSWERS": str(root / "answers.json")}
    again = cli(root, "run", "--suite", "controlled", env=env)  # a run of this code on top of it
    assert again.returncode in (0, 1), again.stderr
    assert len(rows(db, ("runs",))["runs"]["id"]) == 5
    assert cli(root, "history", "migrate").stdout.strip().endswith(f"already at revision {version.HEAD}")


@pytest.mark.parametrize("commit", sorted(OLD))
def test_migrations_round_trip_down_to_the_old_revision_and_up(tmp_path, commit):
    root = old_project(tmp_path, commit)
    db = root / "history" / "evalloop.db"
    url = f"sqlite:///{db}"
    shape, before = columns(url), rows(db)
    history_engine.get_engine(url)  # an old SQLite file is migrated when opened
    history_engine.forget(url)
    assert schema_diff(url) == []

    on(url, lambda conn: migrations.downgrade(conn, OLD[commit]))
    back = columns(url)
    assert {t: c for t, c in back.items() if t in shape} == shape  # the old columns, no more
    assert set(back) - set(shape) <= {"alembic_version", "evalloop_schema"}
    assert rows(db) == before

    on(url, lambda conn: migrations.upgrade(conn))
    assert schema_diff(url) == [] and kept(before, rows(db))


def test_the_scripts_from_nothing_build_the_models_schema_and_undo_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    on(url, lambda conn: migrations.upgrade(conn))
    assert schema_diff(url) == []
    on(url, lambda conn: migrations.downgrade(conn, "base"))
    assert set(columns(url)) == {"alembic_version"}


def test_a_revision_this_evalloop_does_not_know_is_refused_and_nothing_written(tmp_path):
    root = old_project(tmp_path, "4e61118")
    db = root / "history" / "evalloop.db"
    assert cli(root, "history", "migrate").returncode == 0
    with sqlite_conn(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    proc = cli(root, "history", "controlled")
    assert proc.returncode == 2 and "revision 9999, which this evalloop" in proc.stderr, proc.stderr
    assert "upgrade evalloop" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    with sqlite_conn(db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("9999",)]


def test_a_new_database_is_created_at_the_head_without_alembic(tmp_path):
    """A fresh history is made from the models and stamped in one transaction: Alembic (≈ 90 ms
    of imports) is not loaded by a process that only creates or opens a current database."""
    import subprocess
    import sys

    code = ("import sys; from evalloop.history.store import HistoryStore; "
            f"HistoryStore('sqlite:///{tmp_path / 'h.db'}'); HistoryStore('sqlite:///{tmp_path / 'h.db'}'); "
            "print('alembic' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    assert schema_diff(f"sqlite:///{tmp_path / 'h.db'}") == []
    with sqlite_conn(tmp_path / "h.db") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(version.HEAD,)]


# -- PostgreSQL ------------------------------------------------------------------------------------

def copy_rows(source: Path, url: str) -> None:
    """Every row of an old SQLite history into a PostgreSQL database at the same revision."""
    engine = create_engine(url)
    try:
        with sqlite_conn(source) as old, engine.begin() as conn:
            for table in TABLES[:-1]:
                names = [r[1] for r in old.execute(f"PRAGMA table_info({table})")]
                kinds = {c["name"]: str(c["type"]) for c in inspect(conn).get_columns(table)}
                quoted = ", ".join(f'"{n}"' for n in names)
                for row in old.execute(f"SELECT {quoted} FROM {table}"):
                    values = {n: (bool(v) if kinds[n] == "BOOLEAN" and v is not None else v)
                              for n, v in zip(names, row, strict=True)}
                    conn.execute(text(f"INSERT INTO {table} ({quoted}) VALUES ({', '.join(':' + n for n in names)})"),
                                 values)
    finally:
        engine.dispose()


@pytest.mark.parametrize("commit", sorted(OLD))
def test_an_old_history_on_postgresql_is_migrated_by_history_migrate_and_round_trips(tmp_path, pg_server, commit):
    """The same histories on a shared server: the scripts up to the old revision build the tables
    that commit made (f3594c2's DDL is in tests/data/schema_f3594c2.json), its rows copied in, the
    stamp removed (as that evalloop left it); `history migrate` stamps and migrates it."""
    url = pg_server.create_database()
    on(url, lambda conn: migrations.upgrade(conn, OLD[commit]))
    if commit == "f3594c2":
        saved = json.loads((DATA / "schema_f3594c2.json").read_text())["postgresql"]
        made = {t: c for t, c in columns(url).items() if t not in ("alembic_version",)}
        assert made == {s.split()[2]: {line.split()[0].strip('"') for line in s.splitlines()[1:]
                                       if line.startswith("\t") and not line.strip().startswith(("PRIMARY", "FOREIGN"))}
                        for s in saved if s.startswith("CREATE TABLE")}
    root = old_project(tmp_path, commit)
    damage(root / "history" / "evalloop.db", commit)  # not JSON: `USING notes::json` alone would refuse it
    copy_rows(root / "history" / "evalloop.db", url)
    on(url, lambda conn: conn.execute(text("DROP TABLE alembic_version")))

    env = {"EVALLOOP_HISTORY_URL": url}
    refused = cli(root, "history", "controlled", env=env)
    assert refused.returncode == 2 and "made before numbered migrations" in refused.stderr, refused.stderr
    migrated = cli(root, "history", "migrate", env=env)
    assert migrated.returncode == 0 and f"revision {OLD[commit]}) → revision {version.HEAD}" \
        in " ".join(migrated.stdout.split()), migrated.stdout + migrated.stderr
    assert schema_diff(url) == []
    listed = cli(root, "history", "controlled", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["id"] for r in json.loads(listed.stdout)) == RUN_IDS[commit]
    assert cli(root, "show", RUN_IDS[commit][0], env=env).returncode == 0
    reads_back_as_models(url, rows(root / "history" / "evalloop.db"), commit)
    assert column_types(url, "runs", "fingerprint", "notes") == ["JSON", "JSON"]

    on(url, lambda conn: migrations.downgrade(conn, OLD[commit]))
    on(url, lambda conn: migrations.upgrade(conn))
    assert schema_diff(url) == []
    history_engine.forget(url)
    assert version.stored_revision(history_engine.get_engine(url)) == version.HEAD
