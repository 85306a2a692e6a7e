"""Inspecting failures from the CLI (`show`, per-case JSON, -k/--tag, -v) and the exit codes
(a failing verdict exits 1 by default; a run whose every target call failed is no pass)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from evalloop.cli import app
from support.project import controlled_suite, make_project, write_answers

TARGETS = '''
import json, os

def controlled(input):
    with open(os.environ["EVALLOOP_TEST_ANSWERS"]) as f:
        return json.load(f).get(input["id"], 0.0)

def refused(input):
    raise ConnectionRefusedError("[Errno 111] Connection refused")

def broken(input):
    raise RuntimeError("the deploy lost its config")
'''


def invoke(root, *args, env=None):
    result = CliRunner().invoke(app, [*args, "-C", str(root)], env={"NO_COLOR": "1", **(env or {})})
    return result


@pytest.fixture
def project(tmp_path, monkeypatch):
    suite = controlled_suite(8)
    for i, case in enumerate(suite["cases"]):
        case["tags"] = ["even" if i % 2 == 0 else "odd"]
    root = make_project(tmp_path / "p", {"controlled": suite}, target=TARGETS)
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    write_answers(answers, {f"c{i}": 1.0 for i in range(8)})
    first = invoke(root, "run", "-s", "controlled", "--json")
    assert first.exit_code == 0, first.output
    return root, answers, json.loads(first.stdout)["run_id"]


def test_show_lists_each_case_and_what_changed(project):
    root, answers, first = project
    write_answers(answers, {**{f"c{i}": 1.0 for i in range(8)}, "c0": 0.0, "c1": 0.0, "c2": 0.0})
    second = invoke(root, "run", "-s", "controlled", "--json", "--no-fail-on-regression")
    assert second.exit_code == 0, second.output
    doc = json.loads(second.stdout)
    cases = {c["case_id"]: c for c in doc["cases"]}  # run --json carries every case
    assert len(cases) == 8 and cases["c0"]["passed"] is False and cases["c3"]["passed"] is True
    assert cases["c0"]["input"] == {"id": "c0"} and cases["c0"]["output"] == 0.0
    assert cases["c0"]["scores"][0]["value"] == 0.0 and cases["c0"]["tags"] == ["even"]

    shown = invoke(root, "show", doc["run_id"], "--failed")
    assert shown.exit_code == 0, shown.output
    assert [line.split()[1] for line in shown.stdout.splitlines() if line.startswith("FAIL")] == ["c0", "c1", "c2"]
    assert "newly failing" in shown.stdout and 'input:    {"id": "c0"}' in shown.stdout
    assert f"3 case(s) matching: 3 failing, 3 newly failing, 0 newly passing against run {first}" in shown.stdout

    picked = json.loads(invoke(root, "show", doc["run_id"][:-2], "-k", "c1", "--json").stdout)
    assert [c["case_id"] for c in picked["cases"]] == ["c1"] and picked["previous_run"] == first
    assert picked["cases"][0]["change"] == "newly failing"
    odd = json.loads(invoke(root, "show", "last", "--tag", "odd", "-k", "c[0-4]", "--json").stdout)
    assert [c["case_id"] for c in odd["cases"]] == ["c1", "c3"]

    hist_result = invoke(root, "history", "--run", doc["run_id"], "--json", "-k", "c2")
    assert hist_result.exit_code == 0, hist_result.output
    hist = json.loads(hist_result.stdout)
    assert [c["case_id"] for c in hist[0]["cases"]] == ["c2"] and hist[0]["cases"][0]["passed"] is False

    verbose = invoke(root, "run", "-s", "controlled", "-v", "--no-fail-on-regression")
    assert "failing cases (3):" in verbose.stdout and "FAIL c2" in verbose.stdout


def test_newly_passing_says_how_many_more(project, monkeypatch):
    root, answers, _ = project
    write_answers(answers, {f"c{i}": 0.0 for i in range(8)})
    # a regressed run never serves as a baseline unless it is accepted as the new normal
    assert invoke(root, "run", "-s", "controlled", "--no-fail-on-regression").exit_code == 0
    assert invoke(root, "accept", "controlled", "--reason", "all failing on purpose").exit_code == 0
    write_answers(answers, {f"c{i}": 1.0 for i in range(8)})
    result = invoke(root, "run", "-s", "controlled")
    assert "newly passing: c0, c1, c2, c3, c4 (+3 more)" in result.stdout


def test_run_with_a_case_filter_is_partial_and_never_a_baseline(project):
    root, _, _ = project
    result = invoke(root, "run", "-s", "controlled", "-k", "c1", "-k", "c7", "--json", "--no-cases")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["n_cases"] == 2 and "cases" not in doc
    tagged = json.loads(invoke(root, "run", "-s", "controlled", "--tag", "odd", "--json").stdout)
    assert sorted(c["case_id"] for c in tagged["cases"]) == ["c1", "c3", "c5", "c7"]
    none = invoke(root, "run", "-s", "controlled", "-k", "zzz")
    assert none.exit_code == 2 and "no case matches the case filter" in none.output


def test_a_regression_exits_1_by_default_and_0_when_opted_out(project):
    root, answers, _ = project
    assert invoke(root, "run", "-s", "controlled").exit_code == 0
    write_answers(answers, {f"c{i}": 0.0 for i in range(8)})
    failed = invoke(root, "run", "-s", "controlled")
    assert failed.exit_code == 1 and "regression in controlled" in failed.output
    assert "FAILED (1 of 1): 1 suite run, 1 regression, 0 watches, 0 invalid runs in" in failed.output
    assert invoke(root, "run", "-s", "controlled", "--no-fail-on-regression").exit_code == 0
    assert invoke(root, "run", "-s", "controlled", "--fail-on-regression").exit_code == 1  # still accepted


@pytest.mark.parametrize("target", ["refused", "broken"])
def test_a_run_whose_every_target_call_failed_is_no_pass(tmp_path, target):
    suite = {"name": "down", "target": f"sut:{target}", "scorers": ["equals"],
             "cases": [{"id": f"c{i}", "input": i, "expected": i} for i in range(4)]}
    root = make_project(tmp_path, {"down": suite}, target=TARGETS)
    result = invoke(root, "run", "-s", "down", "--json", "--no-cases")
    assert result.exit_code == 1, result.output  # a first run: no baseline, and still no pass
    doc = json.loads(result.stdout)
    assert doc["valid"] is False and doc["verdict"] == "invalid run" and doc["fails"] is True
    if target == "broken":
        assert doc["invalid_reason"].startswith("every target call failed (4/4; first: case 'c0': RuntimeError")


def test_the_closing_line_and_the_exit_code_module(project):
    from evalloop.loop.exitcodes import exit_code

    root, _, _ = project
    result = invoke(root, "run", "-s", "controlled")
    assert result.output.rstrip().splitlines()[-1].startswith(
        "ok: 1 suite run, 0 regressions, 0 watches, 0 invalid runs in ")

    class Failing:
        fails = True

    assert exit_code(Failing()) == 1 and exit_code(Failing(), fail_on_regression=False) == 0


def test_the_scheduler_and_yaml_agree_on_filters(tmp_path):
    """Tags given as a comma string filter like a list (`tags: "a, b"`)."""
    suite = {"name": "t", "target": "sut:echo", "scorers": ["equals"],
             "cases": [{"id": "x", "input": 1, "expected": 1, "tags": "a, b"},
                       {"id": "y", "input": 2, "expected": 2, "tags": ["a"]}]}
    root = make_project(tmp_path, {"t": suite})
    (root / "fixtures" / "t.yaml").write_text(yaml.safe_dump(suite))
    doc = json.loads(invoke(root, "run", "-s", "t", "--tag", "a", "--tag", "b", "--json").stdout)
    assert [c["case_id"] for c in doc["cases"]] == ["x"]
