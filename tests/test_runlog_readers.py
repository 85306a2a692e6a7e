"""A fresh clone's `report`, `history` and `compare` read the committed run log (and only read it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalloop import load_settings, run_suite
from evalloop.cli import app
from support.project import controlled_suite, make_project, write_answers

GIT = shutil.which("git")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run([GIT, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid",
                           "-c", "init.defaultBranch=main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def clone(tmp_path, monkeypatch):
    origin = make_project(tmp_path / "origin", {"controlled": controlled_suite(4)})
    (origin / ".gitignore").write_text("history/*.db*\n")
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    monkeypatch.setenv("NO_COLOR", "1")
    ids = []
    for value in (1.0, 1.0, 0.2):
        write_answers(answers, {f"c{i}": value for i in range(4)})
        ids.append(run_suite("controlled", settings=load_settings(origin)).executed.run.id)
    git(origin, "init", "-q")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "suite and its run log")
    copy = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(copy))
    assert not (copy / "history" / "evalloop.db").exists()
    return copy, ids


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_report_history_and_compare_read_the_log_of_a_fresh_clone(clone):
    root, ids = clone
    log = root / "history" / "controlled.jsonl"
    before = log.read_bytes()

    report = invoke("report", "--json", "-C", str(root))
    assert report.exit_code == 1, report.output  # its latest run regressed: `report` fails like `run`
    (suite,) = json.loads(report.stdout)["suites"]
    assert suite["suite"] == "controlled" and [r["run_id"] for r in suite["runs"]] == ids
    (value,) = suite["scorers"]
    assert [p["mean"] for p in value["points"]] == [1.0, 1.0, 0.2]
    assert value["points"][-1]["verdict"].startswith("regressed")

    history = invoke("history", "--json", "-C", str(root))
    assert history.exit_code == 0, history.output
    assert [r["id"] for r in json.loads(history.stdout)] == list(reversed(ids))
    assert {r["origin"] for r in json.loads(history.stdout)} == {"log"}

    compare = invoke("compare", ids[0], ids[2], "--json", "-C", str(root))
    assert compare.exit_code == 0, compare.output
    (delta,) = json.loads(compare.stdout)["scorers"]
    assert delta["mean_a"] == 1.0 and delta["mean_b"] == 0.2
    assert delta["newly_failing"] == ["c0", "c1", "c2", "c3"]

    assert log.read_bytes() == before  # read, never written
    assert "controlled.jsonl" not in git(root, "status", "--porcelain")


@pytest.mark.skipif(GIT is None, reason="needs git")
def test_an_ambiguous_run_prefix_says_so(clone):
    root, ids = clone
    prefix = ids[0][:4]  # the year: every run matches
    result = invoke("compare", prefix, prefix, "-C", str(root))
    assert result.exit_code == 2
    assert f"run prefix '{prefix}' is ambiguous: it matches {ids[0]}, {ids[1]}, {ids[2]}" in result.output
    missing = invoke("compare", "1999", ids[0], "-C", str(root))
    assert missing.exit_code == 2 and "no run '1999'" in missing.output
    one = invoke("history", "--run", prefix, "-C", str(root))
    assert one.exit_code == 2 and "is ambiguous" in one.output


def test_report_without_any_history_creates_nothing(tmp_path):
    result = invoke("report", "-C", str(tmp_path))
    assert result.exit_code == 2
    assert "no history yet" in result.output and "evalloop run --suite" in result.output
    assert not (tmp_path / "history").exists()
