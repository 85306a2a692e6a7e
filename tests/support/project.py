"""Builds throwaway evalloop projects (fixtures, scorers, a target module) for tests."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import yaml

TARGET = '''
import asyncio, json, os

def echo(input):
    return input

def flaky(input):
    if input.get("boom"):
        raise RuntimeError("target exploded")
    return input.get("answer")

async def async_echo(input):
    await asyncio.sleep(0)
    return input

def controlled(input):
    """Answers from a file the test rewrites between runs: {case_id: answer}."""
    with open(os.environ["EVALLOOP_TEST_ANSWERS"]) as f:
        answers = json.load(f)
    return answers.get(input["id"], 0.0)
'''

SCORERS = '''
from evalloop import Score, scorer

@scorer("value", kind="llm_operation", min_score=0)
def value(input, output, expected):
    """Passes the target's number through as the score."""
    return Score(value=float(output))

@scorer("explodes")
def explodes(input, output, expected):
    raise ValueError("scorer bug")
'''


def make_project(root: Path, suites: dict[str, dict[str, Any]] | None = None,
                 target: str = TARGET, scorers: str | None = SCORERS) -> Path:
    (root / "fixtures").mkdir(parents=True, exist_ok=True)
    (root / "scorers").mkdir(exist_ok=True)
    (root / "sut.py").write_text(textwrap.dedent(target))
    if scorers:
        (root / "scorers" / "project_scorers.py").write_text(textwrap.dedent(scorers))
    for name, suite in (suites or {}).items():
        (root / "fixtures" / f"{name}.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    return root


def controlled_suite(n: int = 10, scorer: str = "value") -> dict[str, Any]:
    return {
        "name": "controlled",
        "target": "sut:controlled",
        "scorers": [scorer],
        "cases": [{"id": f"c{i}", "input": {"id": f"c{i}"}} for i in range(n)],
    }


def write_answers(path: Path, answers: dict[str, float]) -> None:
    path.write_text(json.dumps(answers))


SLOW_TARGET = TARGET + '''
async def slow(input):
    await asyncio.sleep(input["sleep"])
    return input["value"]
'''


def slow_suite(n: int, sleep: float) -> dict[str, Any]:
    """``n`` cases of a target that sleeps ``sleep`` seconds each, one at a time."""
    return {"name": "slow", "target": "sut:slow", "scorers": ["equals"], "concurrency": 1,
            "cases": [{"id": f"c{i}", "input": {"sleep": sleep, "value": i}, "expected": i}
                      for i in range(n)]}


GATED_TARGET = TARGET + '''
async def gated(input):
    """Answers at once, unless the case has a ``gate`` directory: then it writes ``started-<id>``
    there and waits until the test writes ``go-<id>`` (events the test waits on, not sleeps)."""
    gate = input.get("gate")
    if gate:
        open(os.path.join(gate, "started-" + input["id"]), "w").close()
        while not os.path.exists(os.path.join(gate, "go-" + input["id"])):
            await asyncio.sleep(0.01)
    return input["value"]
'''


class Gate:
    """The test's side of :data:`GATED_TARGET`: a directory where held cases say they started and
    where the test lets them go."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)

    def started(self, case_id: str, timeout: float = 90.0) -> bool:
        """Wait until the case's target call has started (True), or ``timeout`` seconds."""
        return wait_for(lambda: (self.path / f"started-{case_id}").exists(), timeout)

    def go(self, case_id: str) -> None:
        """Let the held case's call return."""
        (self.path / f"go-{case_id}").touch()


def gated_suite(n: int, held_from: int, gate: Gate, target: str = "sut:gated") -> dict[str, Any]:
    """``n`` cases of :data:`GATED_TARGET`, one at a time: the first ``held_from`` answer at once,
    each later one waits for ``gate`` to let it go. Case ``c{held_from}`` starting means every
    case before it has finished (been graded)."""
    return {"name": "slow", "target": target, "scorers": ["equals"], "concurrency": 1,
            "cases": [{"id": f"c{i}", "expected": i,
                       "input": {"id": f"c{i}", "value": i, **({"gate": str(gate.path)} if i >= held_from else {})}}
                      for i in range(n)]}


def wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    """Poll ``predicate`` every 50 ms until it is true or ``timeout`` seconds pass."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
