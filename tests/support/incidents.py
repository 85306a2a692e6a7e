"""A 20-case suite whose per-case scores (or infrastructure errors) a test sets between runs,
for the incident lifecycle tests: real runs, real SQLite history, the real embedded memory store."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from evalloop import load_settings, run_suite
from evalloop.learning import incidents as learning
from evalloop.memory.store import MemoryStore
from support.project import make_project

TARGET = '''
import json, os

def answer(input):
    """The score the test wrote for this case (default 1.0); "infra" raises a network error."""
    with open(os.environ["EVALLOOP_TEST_ANSWERS"]) as f:
        value = json.load(f).get(input["id"], 1.0)
    if value == "infra":
        raise ConnectionResetError("connection reset by the test's server")
    return value
'''

SCORERS = '''
from evalloop import Score, scorer

@scorer("level", kind="heuristic")
def level(input, output, expected):
    """Passes the target's number through as the score."""
    return Score(value=float(output))
'''

SUITE = "inc"
SCORER = "level"
CASES = [f"c{i:02d}" for i in range(20)]
BROKEN = CASES[:6]  # the regression: 6 of 20 cases from 1.0 to 0.0


def project(root: Path, monkeypatch: Any = None, *, pass_mark: float | None = None, window: int | None = None) -> Path:
    """The suite in ``root``; the answers file is named by ``EVALLOOP_TEST_ANSWERS`` (through
    ``monkeypatch`` when given, else set in ``os.environ``: the caller restores it)."""
    ref: dict[str, Any] = {"name": SCORER} if pass_mark is None else {"name": SCORER, "pass_mark": pass_mark}
    suite: dict[str, Any] = {"name": SUITE, "target": "sut:answer", "scorers": [ref],
                             "cases": [{"id": c, "input": {"id": c}} for c in CASES],
                             "holdout": 0}  # the lifecycle remembers every case: no held-out part
    if window is not None:
        suite["window"] = window
    make_project(root, {SUITE: suite}, target=TARGET, scorers=SCORERS)
    if monkeypatch is not None:
        monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(root / "answers.json"))
    else:
        os.environ["EVALLOOP_TEST_ANSWERS"] = str(root / "answers.json")
    (root / "answers.json").write_text("{}")
    return root


def run(root: Path, answers: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """One real run with these per-case answers (every other case scores 1.0)."""
    (root / "answers.json").write_text(json.dumps(answers or {}))
    return run_suite(SUITE, settings=load_settings(root), **kwargs)


def broken(cases: list[str] = BROKEN, value: Any = 0.0, **more: Any) -> dict[str, Any]:
    return {**{c: value for c in cases}, **more}


def records(root: Path, status: str | None = None) -> list[Any]:
    """The suite's incident records (any status unless given), newest first."""
    settings = load_settings(root)
    if not settings.memory_file.exists():
        return []
    with MemoryStore(settings.memory_file) as store:
        return learning.incidents(store, SUITE, status=status)
