"""Negative controls that test the scorer (issue #36, item 9): a known-bad case with a fixed
``output:`` is graded without calling the target, and only such a case can show a scorer broken;
a known-bad case that runs through the target is an expected failure of the product, reported as
one, and never blames the scorer. The scaffold's control is a fixed output."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from evalloop import HistoryStore, load_settings, run_suite
from support.cli import cli
from support.project import make_project, write_answers


def suite(control: dict, n: int = 6, scorers=("value",)) -> dict:
    cases = [{"id": f"c{i}", "input": {"id": f"c{i}"}} for i in range(n)]
    return {"name": "ctl", "target": "sut:controlled", "scorers": list(scorers),
            "cases": [*cases, {"id": "bad", "input": {"id": "bad"}, "expect": "fail", **control}]}


def test_a_control_through_the_target_that_passes_is_the_products_expected_failure(tmp_path, answers):
    """The product now answers the known-bad case well: main blamed the scorer (``scorer broken``,
    exit 1); it is an expected failure of the product that did not fail, said as such."""
    root = make_project(tmp_path, {"ctl": suite({})})
    env = {"EVALLOOP_TEST_ANSWERS": str(answers)}
    write_answers(answers, {**{f"c{i}": 1.0 for i in range(6)}, "bad": 0.0})
    assert cli(root, "run", "-s", "ctl", env=env).returncode == 0
    write_answers(answers, {**{f"c{i}": 1.0 for i in range(6)}, "bad": 1.0})
    done = cli(root, "run", "-s", "ctl", "--junit", str(tmp_path / "j.xml"), env=env)
    text = " ".join(done.stdout.split())
    assert "scorer broken" not in done.stdout + done.stderr, done.stdout
    assert done.returncode == 0 and "steady" in done.stdout
    assert "value: expected to fail, but passed: bad — the product's answer to these known-bad cases changed" in text
    tcs = {tc.get("name"): tc for tc in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")}
    failure = tcs["bad"].find("failure")
    assert failure is not None and failure.get("type") == "expected failure passed"
    assert "scorer" not in failure.get("message").split("(")[0]  # the product's case, not the scorer's
    data = json.loads(cli(root, "run", "-s", "ctl", "--json", env=env).stdout)
    assert data["scorers"][0]["expected_failures_passed"] == ["bad"] and data["verdict"] == "steady"
    assert data["scorers"][0]["current"] == 1.0  # known-bad cases stay out of the mean, as before
    shown = " ".join(cli(root, "show", "last", env=env).stdout.split())
    assert "value: 1.000 fail (expected to fail)" in shown


def test_a_control_with_a_fixed_output_tests_the_scorer_without_calling_the_target(tmp_path, answers):
    """The fixed output is graded in place of the target's answer (a target that raised would
    show: ``sut:flaky`` raises on ``boom``); passing it is ``scorer broken``, failing it is not."""
    spec = suite({"output": 0.0})
    spec["target"] = "sut:flaky"
    spec["cases"] = [{"id": f"c{i}", "input": {"answer": 0.9}} for i in range(6)] + \
        [{"id": "bad", "input": {"boom": True}, "expect": "fail", "output": 0.0}]
    root = make_project(tmp_path, {"ctl": spec})
    settings = load_settings(root)
    first = run_suite("ctl", settings=settings)
    assert first.executed.case_errors == 0 and first.comparison.worst.value == "no baseline yet"
    result = first.executed.results["value"]
    assert result.scorer_controls == ["bad"] and result.controls == {"bad": 0.0} and result.mean == 0.9
    store = HistoryStore(settings.database_url)
    (row,) = [r for r in store.case_results(first.executed.run.id) if r.case_id == "bad"]
    assert (row.output, row.error) == ("0.0", None)
    spec["cases"][-1]["output"] = 1.0  # the scorer now passes a known-bad output: it is broken
    make_project(tmp_path, {"ctl": spec})
    broken = run_suite("ctl", settings=settings)
    assert broken.comparison.worst.value == "scorer broken" and broken.comparison.fails
    assert "bad" in broken.comparison.scorers[0].reason
    assert broken.executed.results["value"].controls_passed == ["bad"]


def test_a_fixed_output_is_graded_only_by_the_scorers_it_is_a_control_of(tmp_path, answers):
    spec = suite({"output": 0.0}, scorers=("value", "equals"))
    spec["cases"][-1]["expect"] = {"value": "fail"}
    root = make_project(tmp_path, {"ctl": spec})
    write_answers(answers, {f"c{i}": 1.0 for i in range(6)})
    report = run_suite("ctl", settings=load_settings(root))
    store = HistoryStore(load_settings(root).database_url)
    scored = {s.scorer for s in store.score_rows(report.executed.run.id) if s.case_id == "bad"}
    assert scored == {"value"}  # not a product case: "equals" never grades it
    assert report.executed.results["equals"].n == 6


def test_a_fixed_output_without_expect_fail_is_one_clear_line(tmp_path):
    spec = suite({"output": 0.0})
    spec["cases"][-1].pop("expect")
    root = make_project(tmp_path, {"ctl": spec})
    done = cli(root, "suites", "validate", "ctl")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line = done.stderr.strip()
    assert "ctl.yaml" in line and "'bad'" in line and "expect: fail" in line and len(line.splitlines()) <= 2, line


def test_the_scaffolds_control_does_not_blame_the_scorers_when_the_product_changes(tmp_path):
    """``evalloop init``: the greeter is changed to greet everyone, the rude case too. Main's
    control ran through the target, so the scorers passed it and were ``scorer broken``; the
    scaffold's control is a fixed output now, and tests the scorers only."""
    assert cli(tmp_path, "init").returncode == 0
    assert cli(tmp_path, "run", "--suite", "greeting").returncode == 0
    (tmp_path / "greeter.py").write_text(  # the product changes: everyone is greeted kindly
        "def greet(input: dict) -> str:\n    return f\"Hello, {input['name']}! Good to see you.\"\n")
    done = cli(tmp_path, "run", "--suite", "greeting", "--json")
    data = json.loads(done.stdout)
    assert [s["verdict"] for s in data["scorers"]] == ["steady", "steady"], data["scorers"]
    assert "output:" in (tmp_path / "fixtures" / "greeting.yaml").read_text()
    assert all(s["expected_failures_passed"] == [] for s in data["scorers"])
