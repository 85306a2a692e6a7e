"""Baselines that travel: a fresh clone with an empty database is judged against the committed log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalloop import load_settings, run_suite
from evalloop.cli import app
from evalloop.history.store import HistoryStore
from support.project import controlled_suite, make_project, write_answers

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")
GIT = shutil.which("git")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run([GIT, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid",
                           "-c", "init.defaultBranch=main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_a_fresh_clone_gets_its_verdict_against_the_logged_baseline(tmp_path, monkeypatch):
    origin = make_project(tmp_path / "origin", {"controlled": controlled_suite(5)})
    (origin / ".gitignore").write_text("history/*.db*\n")
    (origin / ".gitattributes").write_text("history/*.jsonl merge=union\n")
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    write_answers(answers, {f"c{i}": 1.0 for i in range(5)})
    settings = load_settings(origin)
    logged = [run_suite("controlled", settings=settings).executed.run.id for _ in range(3)]
    git(origin, "init", "-q")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "suite and its run log")
    assert "history/controlled.jsonl" in git(origin, "ls-files")

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    assert (clone / "history" / "controlled.jsonl").is_file()
    assert not (clone / "history" / "evalloop.db").exists()

    write_answers(answers, {"c0": 0.0, "c1": 0.0, "c2": 0.0, "c3": 1.0, "c4": 1.0})
    result = subprocess.run([EVALLOOP, "run", "-s", "controlled", "--fail-on-regression",
                             "--json-out", "summary.json"], cwd=clone, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert result.returncode == 1, result.stdout + result.stderr
    (value,) = json.loads((clone / "summary.json").read_text())["scorers"]
    assert value["baseline"] == 1.0 and value["window_runs"] == 3 and value["current"] == 0.4
    assert value["regression"] is True and value["verdict"] == "regressed"
    assert [c["case"] for c in value["newly_failing"]] == ["c0", "c1", "c2"]
    # the clone lives elsewhere, but it is the same system: no fingerprint change reported
    assert "the system changed" not in result.stderr + result.stdout

    store = HistoryStore(load_settings(clone).database_url)
    runs = store.runs("controlled", limit=None)
    assert [r.origin for r in runs] == ["local", "log", "log", "log"]
    assert [r.id for r in reversed(runs[1:])] == logged
    # the clone's new run joined the log, ready to be committed with the change
    assert "history/controlled.jsonl" in git(clone, "status", "--porcelain")
    assert len((clone / "history" / "controlled.jsonl").read_text().splitlines()) == 4


def test_history_import_and_export_commands(tmp_path, monkeypatch):
    root = make_project(tmp_path / "p", {"controlled": controlled_suite(3)})
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(tmp_path / "answers.json"))
    monkeypatch.setenv("NO_COLOR", "1")
    write_answers(tmp_path / "answers.json", {"c0": 1.0, "c1": 1.0, "c2": 1.0})
    ids = [run_suite("controlled", settings=load_settings(root)).executed.run.id for _ in range(2)]
    log = root / "history" / "controlled.jsonl"
    text = log.read_text()
    log.unlink()
    runner = CliRunner()
    exported = runner.invoke(app, ["history", "export", "-C", str(root)])
    assert exported.exit_code == 0 and "controlled: 2 run(s) appended" in exported.stdout
    assert sorted(log.read_text().splitlines()) == sorted(text.splitlines())

    (root / "history" / "evalloop.db").unlink()
    for extra in root.glob("history/evalloop.db-*"):
        extra.unlink()
    from evalloop.history import engine as store_module

    store_module._ENGINES.pop(load_settings(root).database_url, None)  # the file is gone
    imported = runner.invoke(app, ["history", "import", "-C", str(root)])
    assert imported.exit_code == 0 and "controlled: 2 run(s) imported" in imported.stdout
    again = runner.invoke(app, ["history", "import", "--suite", "controlled", "-C", str(root)])
    assert "controlled: 0 run(s) imported" in again.stdout
    listed = runner.invoke(app, ["history", "--suite", "controlled", "--json", "-C", str(root)])
    assert listed.exit_code == 0
    assert [r["id"] for r in json.loads(listed.stdout)] == list(reversed(ids))
