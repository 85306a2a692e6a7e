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
    return reader(input)

def reader(input, lessons=""):
    """The same, for a target that reads its lessons: a case listed under "__held__" scores 1.0
    whenever a lesson is injected (the lesson holds it)."""
    with open(os.environ["EVALLOOP_TEST_ANSWERS"]) as f:
        answers = json.load(f)
    value = answers.get(input["id"], 1.0)
    if value == "infra":
        raise ConnectionResetError("connection reset by the test's server")
    if lessons and input["id"] in answers.get("__held__", []):
        return 1.0
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


def project(root: Path, monkeypatch: Any = None, *, pass_mark: float | None = None, window: int | None = None,
            min_score: float | None = None, ablation_every: int | None = None, lessons: bool = False) -> Path:
    """The suite in ``root``; the answers file is named by ``EVALLOOP_TEST_ANSWERS`` (through
    ``monkeypatch`` when given, else set in ``os.environ``: the caller restores it). ``min_score``
    is the scorer's floor (default: the heuristic kind's 0.95), ``ablation_every`` the suite's;
    with ``lessons`` the target reads its lessons (``sut:reader``)."""
    ref: dict[str, Any] = {"name": SCORER} if pass_mark is None else {"name": SCORER, "pass_mark": pass_mark}
    suite: dict[str, Any] = {"name": SUITE, "target": "sut:reader" if lessons else "sut:answer", "scorers": [ref],
                             "cases": [{"id": c, "input": {"id": c}} for c in CASES],
                             "holdout": 0}  # the lifecycle remembers every case: no held-out part
    if window is not None:
        suite["window"] = window
    if min_score is not None:
        suite["verdict"] = {"min_score": min_score}
    if ablation_every is not None:
        suite["ablation_every"] = ablation_every
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
    kwargs.setdefault("settings", load_settings(root))
    return run_suite(SUITE, **kwargs)


def broken(cases: list[str] = BROKEN, value: Any = 0.0, **more: Any) -> dict[str, Any]:
    return {**{c: value for c in cases}, **more}


def records(root: Path, status: str | None = None) -> list[Any]:
    """The suite's incident records (any status unless given), newest first."""
    settings = load_settings(root)
    if not settings.memory_file.exists():
        return []
    with MemoryStore(settings.memory_file) as store:
        return learning.incidents(store, SUITE, status=status)
