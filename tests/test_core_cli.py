"""The CLI as a newcomer uses it: the real console script in a fresh project directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.project import controlled_suite, make_project, write_answers
from support.sqlitedb import sqlite_conn

EVALLOOP = shutil.which("evalloop") or str(Path(sys.executable).parent / "evalloop")


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([EVALLOOP, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


def db_rows(root: Path) -> int:

    path = root / "history" / "evalloop.db"
    if not path.exists():
        return 0
    with sqlite_conn(path) as conn:
        return sum(conn.execute(f"select count(*) from {t}").fetchone()[0]
                   for t in ("runs", "case_results", "case_scores", "scorer_summaries"))


def test_exact_match_out_of_the_box_twice_then_history(tmp_path):
    first = cli(tmp_path, "run", "--suite", "exact-match")
    assert first.returncode == 0, first.stderr
    assert "exact-match-noop" in first.stdout and "no baseline yet" in first.stdout
    second = cli(tmp_path, "run", "--suite", "exact-match", "--json")
    assert second.returncode == 0, second.stderr
    doc = json.loads(second.stdout)
    noop = {s["scorer"]: s for s in doc["scorers"]}["exact-match-noop"]
    assert noop["current"] == 1.0 and noop["baseline"] == 1.0 and noop["verdict"] == "steady"
    assert doc["regression"] is False and doc["n_cases"] == 15
    hist = cli(tmp_path, "history", "--suite", "exact-match")
    assert hist.returncode == 0 and hist.stdout.count("completed") == 2
    hist_json = json.loads(cli(tmp_path, "history", "--json").stdout)
    assert len(hist_json) == 2 and hist_json[0]["scorers"]["exact-match-noop"]["mean"] == 1.0


def test_fail_on_regression_exit_code(tmp_path):
    root = make_project(tmp_path, {"controlled": controlled_suite(8)})
    answers = tmp_path / "answers.json"
    env = {"EVALLOOP_TEST_ANSWERS": str(answers)}
    write_answers(answers, {f"c{i}": 1.0 for i in range(8)})
    assert cli(root, "run", "-s", "controlled", "--fail-on-regression", env=env).returncode == 0
    write_answers(answers, {f"c{i}": 0.4 for i in range(8)})
    result = cli(root, "run", "-s", "controlled", "--fail-on-regression", env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "regressed" in result.stdout and "regression in controlled" in result.stderr
    assert "newly failing vs previous run: c0, c1, c2, c3, c4" in result.stdout
    # left broken, it stays a regression: a run with an open incident never joins the baseline (#22)
    assert cli(root, "run", "-s", "controlled", env=env).returncode == 1
    write_answers(answers, {f"c{i}": 1.0 for i in range(8)})
    assert cli(root, "run", "-s", "controlled", env=env).returncode == 0


@pytest.mark.parametrize("suite_text, expected", [
    ("name: x\ntarget: sut:echo\nscorers: [equals]\ncases:\n  - id: a\n   input: [1\n",
     "invalid YAML"),
    ("name: x\ntarget: sut:echo\nscorers: [nope]\ncases: [{id: a, input: 1}]\n",
     "unknown scorer 'nope'"),
    ("name: x\ntarget: sut:nowhere\nscorers: [equals]\ncases: [{id: a, input: 1}]\n",
     "has no attribute 'nowhere'"),
    ("name: x\ntarget: nosuchmodule:f\nscorers: [equals]\ncases: [{id: a, input: 1}]\n",
     "cannot import module 'nosuchmodule'"),
    ("name: x\ntarget: sut:echo\nscorers: [equals]\ncases: [{id: a, input: 1}, {id: a, input: 2}]\n",
     "duplicate case id 'a'"),
    ("name: x\ntarget: sut:echo\nscorers: [equals]\ncases: [{id: a}]\n", "input: required"),
])
def test_bad_input_is_one_line_exit_2_and_history_untouched(tmp_path, suite_text, expected):
    root = make_project(tmp_path)
    (root / "fixtures" / "x.yaml").write_text(suite_text)
    before = db_rows(root)
    result = cli(root, "run", "--suite", "x")
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert "Traceback" not in result.stderr
    assert db_rows(root) == before


def test_unknown_suite_and_no_suite(tmp_path):
    result = cli(tmp_path, "run", "--suite", "nope")
    assert result.returncode == 2 and "unknown suite 'nope'" in result.stderr
    assert cli(tmp_path, "run").returncode == 2


def test_init_then_run_the_example(tmp_path):
    assert cli(tmp_path, "init").returncode == 0
    for rel in ("evalloop.toml", "fixtures/greeting.yaml", "scorers/example.py"):
        assert (tmp_path / rel).exists()
    result = cli(tmp_path, "run", "--suite", "greeting", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    verdicts = {s["scorer"]: s["verdict"] for s in doc["scorers"]}
    assert verdicts == {"keywords": "no baseline yet", "polite": "no baseline yet"}
    again = cli(tmp_path, "init")
    assert again.returncode == 2 and "already exist" in again.stderr


def test_catalog_commands(tmp_path):
    make_project(tmp_path, {"controlled": controlled_suite(3)})
    scorers = cli(tmp_path, "scorers", "list", "--json")
    rows = {r["name"]: r for r in json.loads(scorers.stdout)}
    assert rows["value"]["kind"] == "llm_operation" and rows["value"]["threshold"] == 0.15
    assert rows["value"]["source"].endswith("project_scorers.py")
    assert rows["exact-match-noop"]["source"].startswith("builtin")
    listed = cli(tmp_path, "suites", "list")
    assert "controlled" in listed.stdout and "exact-match" in listed.stdout
    ok = cli(tmp_path, "suites", "validate", "exact-match", "controlled")
    assert ok.returncode == 0 and "ok  exact-match: 15 cases" in ok.stdout
    assert "--no-fail-on-regression" in cli(tmp_path, "run", "--help").stdout
