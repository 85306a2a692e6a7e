"""CI output: exit codes, JUnit XML parsed back, the JSON summary file, and `evalloop compare`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalloop.cli import app
from support.project import controlled_suite, make_project, write_answers


@pytest.fixture
def project(tmp_path, monkeypatch):
    suite = controlled_suite(5)
    suite["cases"].append({"id": "bad", "input": {"id": "bad"}, "expect": "fail"})  # a control
    root = make_project(tmp_path, {"controlled": suite})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    monkeypatch.setenv("NO_COLOR", "1")
    return root, answers


def cli(root: Path, *args: str):
    return CliRunner().invoke(app, [*args, "-C", str(root)])


def cases_of(suite_el):
    return {(tc.get("classname"), tc.get("name")): tc for tc in suite_el.iter("testcase")}


def test_junit_json_and_exit_codes_on_a_steady_then_regressed_run(project):
    root, answers = project
    write_answers(answers, {f"c{i}": 1.0 for i in range(5)} | {"bad": 0.0})
    first = cli(root, "run", "-s", "controlled", "--fail-on-regression",
                "--junit", str(root / "out" / "j1.xml"), "--json-out", str(root / "out" / "s1.json"))
    assert first.exit_code == 0, first.output
    assert "controlled" in first.stdout  # the table is still printed
    doc = ET.parse(root / "out" / "j1.xml").getroot()
    assert doc.tag == "testsuites" and doc.get("failures") == "0"
    (suite_el,) = doc.findall("testsuite")
    assert suite_el.get("name") == "controlled" and suite_el.get("tests") == "7"  # 6 cases + verdict
    tcs = cases_of(suite_el)
    assert ("controlled.value", "bad") in tcs and not list(tcs[("controlled.value", "bad")])
    assert "no baseline yet" in tcs[("controlled.baseline", "value")].find("system-out").text
    summary = json.loads((root / "out" / "s1.json").read_text())
    assert summary["regression"] is False and summary["suite"] == "controlled"

    # c0 and c1 fail; the scorer now passes the known-bad output of a control (it is broken)
    suite = controlled_suite(5)
    suite["cases"].append({"id": "bad", "input": {"id": "bad"}, "expect": "fail", "output": 1.0})
    make_project(root, {"controlled": suite})
    write_answers(answers, {"c0": 0.0, "c1": 0.0, "c2": 1.0, "c3": 1.0, "c4": 1.0, "bad": 0.0})
    result = cli(root, "run", "-s", "controlled", "--fail-on-regression", "--json",
                 "--junit", str(root / "out" / "j2.xml"), "--json-out", str(root / "out" / "s2.json"))
    assert result.exit_code == 1, result.output
    assert "scorer broken in controlled" in result.stderr  # a broken scorer fails CI too
    assert json.loads(result.stdout) == json.loads((root / "out" / "s2.json").read_text())
    (suite_el,) = ET.parse(root / "out" / "j2.xml").getroot().findall("testsuite")
    tcs = cases_of(suite_el)
    c0 = tcs[("controlled.value", "c0")].find("failure")
    assert c0 is not None and c0.get("message").startswith("score 0.000 < 0.5")
    assert tcs[("controlled.value", "c2")].find("failure") is None
    control = tcs[("controlled.value", "bad")].find("failure")
    assert control is not None and "known-bad output passed" in control.get("message")
    assert control.get("type") == "control passed"
    verdict = tcs[("controlled.baseline", "value")].find("failure")
    assert verdict is not None and verdict.get("type") == "scorer broken"
    assert suite_el.get("failures") == "4" and suite_el.get("tests") == "7"
    props = {p.get("name"): p.get("value") for p in suite_el.iter("property")}
    assert props["run_id"] == json.loads(result.stdout)["run_id"]


def test_compare_shows_deltas_and_flipped_cases(project):
    root, answers = project
    write_answers(answers, {f"c{i}": 1.0 for i in range(5)})
    a = json.loads(cli(root, "run", "-s", "controlled", "--json").stdout)["run_id"]
    write_answers(answers, {"c0": 0.0, "c1": 0.2, "c2": 1.0, "c3": 1.0, "c4": 1.0})
    b = json.loads(cli(root, "run", "-s", "controlled", "--json").stdout)["run_id"]
    diff = json.loads(cli(root, "compare", a, b, "--json").stdout)
    (value,) = diff["scorers"]
    assert value["mean_a"] == 1.0 and value["mean_b"] == pytest.approx(0.64)
    assert value["delta"] == pytest.approx(-0.36) and value["relative"] == pytest.approx(-0.36)
    assert value["newly_failing"] == ["c0", "c1"] and value["newly_passing"] == []
    # 2 of 5 paired cases dropped, 3 unchanged: an exact sign-flip test gives p = 2/4 = 0.5
    assert value["test"] == "paired permutation (exact)"
    assert value["p_value"] == pytest.approx(0.5) and value["stars"] == ""
    assert value["ci_a"] == [1.0, 1.0] and value["ci_b"][0] < 0.64 < value["ci_b"][1]
    text = cli(root, "compare", a[:-3], b).stdout  # ids or unique prefixes
    assert "value newly failing: c0, c1" in text and "-36.0%" in text
    back = json.loads(cli(root, "compare", b, a, "--json").stdout)["scorers"][0]
    assert back["newly_passing"] == ["c0", "c1"]
    missing = cli(root, "compare", a, "nope")
    assert missing.exit_code == 2 and "no run 'nope'" in missing.stderr
