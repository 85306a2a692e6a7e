"""A suite's ``verdict:`` block is a typed model (``suites.settings.SuiteVerdict``, issue #43): the
project's verdict settings it overrides and its scorers' threshold and pass mark, checked when the
suite is read — a malformed block is one clear line naming the file and the key, exit code 2."""

from __future__ import annotations

import pytest

from evalloop.errors import FixtureError
from evalloop.suites.models import Suite, load_suite
from support.cli import cli
from support.project import make_project


def suite(verdict: object) -> dict:
    return {"name": "v", "target": "sut:echo", "scorers": ["equals"], "verdict": verdict,
            "cases": [{"id": "c0", "input": 1, "expected": 1}]}


def test_the_block_is_typed_and_keeps_only_what_it_sets():
    s = Suite.model_validate(suite({"threshold": 0.3, "pass_mark": 0.9, "rule": "paired"}))
    assert (s.verdict.threshold, s.verdict.pass_mark, s.verdict.rule, s.verdict.min_score) == (0.3, 0.9, "paired", None)
    assert s.verdict.overrides() == {"threshold": 0.3, "pass_mark": 0.9, "rule": "paired"}
    assert Suite.model_validate(suite({})).verdict.overrides() == {}


@pytest.mark.parametrize(("block", "said"), [
    ({"alpah": 0.1}, "verdict.alpah"),
    ({"threshold": 2}, "verdict.threshold"),
    ({"rule": "vibes"}, "verdict.rule"),
    ({"require_significance": True}, "require_significance is retired"),
    ([0.1], "verdict"),
])
def test_a_malformed_block_is_one_line_when_the_suite_is_read(tmp_path, block, said):
    root = make_project(tmp_path, {"v": suite(block)})
    with pytest.raises(FixtureError, match=said.replace(".", r"\.")) as exc:
        load_suite(root / "fixtures" / "v.yaml")
    assert "\n" not in exc.value.one_line() and "v.yaml" in exc.value.one_line()


def test_the_command_line_says_it_in_one_line(tmp_path):
    root = make_project(tmp_path, {"v": suite({"alpah": 0.1})})
    done = cli(root, "run", "--suite", "v")
    assert done.returncode == 2, done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and "alpah" in said[0] and "alpha" in said[0], done.stderr
