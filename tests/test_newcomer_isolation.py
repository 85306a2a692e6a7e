"""A newcomer's first minutes: evalloop is never re-imported from a project, store errors name
their real cause, and a user's project runs its own suites only."""

from __future__ import annotations

import sys

import pytest
import yaml

from evalloop.errors import is_db_error, store_error
from evalloop.run.targets import resolve_target
from evalloop.suites.lookup import discover_suites, suites_for_all
from evalloop.suites.models import PACKAGE_FIXTURES
from support.cli import cli

POISON = "raise RuntimeError('this copy of evalloop must never be imported')\n"


def test_a_project_holding_src_evalloop_never_reimports_evalloop(tmp_path):
    """The evalloop repository's root: ./src/evalloop exists beside the installed package."""
    fake = tmp_path / "src" / "evalloop"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(POISON)
    (fake / "reference").mkdir()
    (fake / "reference" / "__init__.py").write_text(POISON)
    before = sys.modules["evalloop"]
    target = resolve_target("evalloop.reference.memory_ops:decide", project_dir=tmp_path)
    assert sys.modules["evalloop"] is before and target.fn.__module__ == "evalloop.reference.memory_ops"
    result = cli(tmp_path, "run", "--suite", "exact-match")  # a shipped suite whose target is evalloop's
    assert result.returncode == 0, result.stderr
    assert "already defined" not in result.stderr and "no baseline yet" in result.stdout


def test_store_errors_name_their_real_cause():
    from sqlalchemy.exc import InvalidRequestError, OperationalError

    assert not is_db_error(InvalidRequestError("Table 'runs' is already defined"))  # a bug, not the store
    missing = OperationalError("SELECT", {}, Exception("no such table: runs"))
    assert is_db_error(missing)
    line = store_error(missing, store="history database", where="h.db").one_line()
    assert "lacks part of evalloop's schema" in line and "check history_url" not in line
    locked = store_error(OperationalError("x", {}, Exception("database is locked")), store="history database",
                         where="h.db").one_line()
    assert "locked by another process" in locked


def test_init_then_all_runs_only_the_projects_suites(tmp_path):
    assert cli(tmp_path, "init", ".").returncode == 0
    (tmp_path / "fixtures" / "mine.yaml").write_text(yaml.safe_dump({
        "name": "mine", "target": "greeter:greet", "scorers": [{"name": "contains", "params": {"text": "Hello"}}],
        "cases": [{"id": "a", "input": {"name": "A"}}]}))
    result = cli(tmp_path, "run", "--all", "--json", "--no-cases")
    assert result.returncode == 0, result.stderr
    assert sorted(doc["suite"] for doc in __import__("json").loads(result.stdout)) == ["greeting", "mine"]
    logs = sorted(p.name for p in (tmp_path / "history").glob("*.jsonl"))
    assert logs == ["greeting.jsonl", "mine.jsonl"]  # nothing of the shipped suites in the project


def test_which_suites_all_means(tmp_path):
    shipped = sorted(discover_suites(tmp_path))
    assert suites_for_all(tmp_path) == shipped  # no project suites: the demo runs what ships
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "own.yaml").write_text("name: own\ntarget: a:b\nscorers: [equals]\ncases: []\n")
    assert suites_for_all(tmp_path) == ["own"]
    assert suites_for_all(tmp_path, shipped=True) == sorted({*shipped, "own"})
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "evalloop"\n')  # evalloop's own repository
    assert suites_for_all(tmp_path) == sorted({*shipped, "own"})
    assert all(p.parent == PACKAGE_FIXTURES for n, p in discover_suites(tmp_path).items() if n != "own")


@pytest.mark.parametrize("name", ["sentimnet"])
def test_unknown_suite_says_did_you_mean(tmp_path, name):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "sentiment.yaml").write_text(
        "name: sentiment\ntarget: a:b\nscorers: [equals]\ncases: [{id: a, input: 1}]\n")
    result = cli(tmp_path, "run", "--suite", name)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'fixtures'}: unknown suite '{name}' — did you mean 'sentiment'? "
        "see `evalloop suites list`"]
