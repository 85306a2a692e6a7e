"""A nightly `run --all` survives one bad file: every suite that loads runs, each one that does
not is one line, and the exit code is 2 at the end. A broken `scorers/*.py` stops only the suites
that need a scorer it would have defined."""

from __future__ import annotations

from pathlib import Path

from evalloop.config import load_settings
from evalloop.history.store import HistoryStore
from support.cli import cli
from support.project import make_project


def good(name: str, scorer: str = "equals") -> dict:
    return {"name": name, "target": "sut:echo", "scorers": [scorer],
            "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(3)]}


def runs_of(root: Path) -> set[str]:
    store = HistoryStore(load_settings(root).database_url)
    return set(store.suites())


def problem_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("error:", "warning:"))]


def test_one_bad_suite_file_does_not_stop_the_others(tmp_path):
    root = make_project(tmp_path / "p", {"alpha": good("alpha"), "omega": good("omega")})
    bad = root / "fixtures" / "broken.yaml"
    bad.write_text("name: broken\ntarget: sut:echo\nscorers: [equals]\ncases: [{id: a, input: 1, expectd: 2}]\n")
    proc = cli(root, "run", "--all")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert runs_of(root) == {"alpha", "omega"}
    (line,) = problem_lines(proc.stderr)
    assert line.startswith(f"error: {bad}:") and "expectd" in line, line
    assert "Traceback" not in proc.stderr


def test_a_broken_scorer_file_stops_only_the_suites_that_need_it(tmp_path):
    root = make_project(tmp_path / "p", {"plain": good("plain"), "custom": good("custom", scorer="mine")},
                        scorers=None)
    broken = root / "scorers" / "mine.py"
    broken.write_text("from evalloop import scorer\n\n@scorer('mine')\ndef mine(i, o, e):\n    return 1.0\n\n"
                      "raise RuntimeError('half-edited')\n")
    proc = cli(root, "run", "--all")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert runs_of(root) == {"plain"}
    lines = problem_lines(proc.stderr)
    assert len(lines) == 2, lines
    (file_line,) = [x for x in lines if x.startswith(f"warning: {broken}")]
    assert "half-edited" in file_line, file_line
    (suite_line,) = [x for x in lines if "unknown scorer 'mine'" in x]
    assert str(broken) in suite_line and suite_line.startswith("error:"), suite_line
    alone = cli(root, "run", "--suite", "plain")  # a suite that needs nothing of it runs, and is told
    assert alone.returncode == 0, alone.stderr
    assert [x for x in problem_lines(alone.stderr) if x.startswith("warning:")], alone.stderr
