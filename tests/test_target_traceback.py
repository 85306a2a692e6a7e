"""A target that raises keeps its traceback: `run --json`, `show --json` and `show -v` give the
frames of the target's own code (evalloop's frames left out), so the fix starts from a line."""

from __future__ import annotations

import json

from support.cli import cli
from support.project import TARGET, make_project

NESTED = TARGET + '''
def _parse(text):
    return int(text)

def parses(input):
    return _parse(input["text"])
'''
SUITE = {"name": "p", "target": "sut:parses", "scorers": ["equals"],
         "cases": [{"id": "good", "input": {"text": "1"}, "expected": 1},
                   {"id": "bad", "input": {"text": "one"}, "expected": 1}]}


def test_a_target_exception_keeps_its_traceback(tmp_path):
    root = make_project(tmp_path / "p", {"p": SUITE}, target=NESTED)
    proc = cli(root, "run", "--suite", "p", "--json")
    cases = {c["case_id"]: c for c in json.loads(proc.stdout)["cases"]}
    trace = cases["bad"]["traceback"]
    assert trace.startswith("Traceback (most recent call last):"), trace
    assert "sut.py" in trace and "in parses" in trace and "in _parse" in trace, trace
    assert trace.rstrip().endswith("ValueError: invalid literal for int() with base 10: 'one'"), trace
    assert "evalloop/runner.py" not in trace and "asyncio" not in trace, trace
    assert cases["good"]["traceback"] is None
    shown = cli(root, "show", "last", "--json")
    assert {c["case_id"]: c["traceback"] for c in json.loads(shown.stdout)["cases"]}["bad"] == trace
    verbose = cli(root, "show", "last", "-v")
    assert verbose.returncode == 0, verbose.stderr
    assert "in _parse" in verbose.stdout and "return int(text)" in verbose.stdout, verbose.stdout
    assert "in _parse" not in cli(root, "show", "last").stdout
