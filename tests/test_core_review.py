"""Behaviours fixed after review: partial runs, per-scorer validity, settings and usage errors."""

from __future__ import annotations

import json

import pytest

from evalloop import RunOptions, load_settings, run_suite
from evalloop.errors import ConfigError, FixtureError, ScorerError
from support.project import controlled_suite, make_project, write_answers
from test_core_cli import cli, db_rows


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"controlled": controlled_suite(10)})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    write_answers(answers, {f"c{i}": 0.5 for i in range(10)})
    return root, answers


def test_a_limited_run_is_compared_on_its_cases_but_never_becomes_a_baseline(project):
    root, answers = project
    write_answers(answers, {**{f"c{i}": 0.5 for i in range(10)}, **{f"c{i}": 1.0 for i in range(3)}})
    settings = load_settings(root)
    for _ in range(3):
        run_suite("controlled", settings=settings)
    part = run_suite("controlled", RunOptions(limit=3), settings=settings)
    s = part.comparison.scorers[0]
    assert part.executed.run.partial and s.baseline == pytest.approx(1.0) and s.verdict == "steady"
    full = run_suite("controlled", settings=settings).comparison.scorers[0]
    assert full.window_runs == 3 and full.verdict == "steady"  # the partial run is not in the window


def test_one_scorer_errored_does_not_hide_another_scorers_regression(tmp_path, monkeypatch):
    suite = {**controlled_suite(10), "scorers": ["value", "explodes"]}
    root = make_project(tmp_path, {"controlled": suite})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    ok_suite = {**controlled_suite(10), "scorers": ["value"]}
    make_project(tmp_path, {"controlled": ok_suite})
    write_answers(answers, {f"c{i}": 1.0 for i in range(10)})
    for _ in range(2):
        run_suite("controlled", settings=load_settings(root))
    make_project(tmp_path, {"controlled": suite})
    write_answers(answers, {f"c{i}": 0.0 for i in range(10)})
    report = run_suite("controlled", settings=load_settings(root))
    verdicts = {s.scorer: s for s in report.comparison.scorers}
    assert not report.executed.run.valid
    assert verdicts["explodes"].verdict == "invalid run" and "10/10 grades errored" in verdicts["explodes"].reason
    assert verdicts["value"].verdict == "regressed" and verdicts["value"].is_regression
    # an invalid run writes no failure memory: its grades cannot be trusted to teach anything
    assert "memories" not in report.extras
    assert any("run is invalid" in n for n in report.notices)


def test_cli_concurrency_wins_over_the_suite(tmp_path):
    target = '''
import asyncio
ACTIVE = MAX = 0
async def slow(input):
    global ACTIVE, MAX
    ACTIVE += 1; MAX = max(MAX, ACTIVE)
    await asyncio.sleep(0.01)
    ACTIVE -= 1
    return MAX
'''
    suite = {"name": "c", "target": "sut:slow", "scorers": ["json-valid"], "concurrency": 2,
             "cases": [{"id": str(i), "input": i} for i in range(20)]}
    root = make_project(tmp_path, {"c": suite}, target=target)
    report = run_suite("c", RunOptions(concurrency=8), settings=load_settings(root))
    import sys

    assert sys.modules["sut"].MAX == 8  # the project module the run imported
    assert report.executed.run.n_cases == 20


def test_settings_and_suite_mistakes_are_caught(tmp_path):
    root = make_project(tmp_path, {"controlled": {**controlled_suite(2), "thresholds": {"valu": 0.2}}})
    with pytest.raises(FixtureError, match="'valu', which is not one of this suite's scorers"):
        run_suite("controlled", settings=load_settings(root))
    (root / "fixtures" / "controlled.yaml").unlink()
    (root / "evalloop.toml").write_text("[thresholds]\nheuristic = 5\n")
    with pytest.raises(ConfigError, match="thresholds.heuristic"):
        load_settings(root)
    with pytest.raises(ConfigError, match="project directory does not exist"):
        load_settings(root / "nope")


def test_unknown_verdict_keys_and_bad_parameter_types(tmp_path):
    bad_verdict = {**controlled_suite(2), "verdict": {"requre_significance": True}}
    root = make_project(tmp_path, {"controlled": bad_verdict})
    with pytest.raises(FixtureError, match="requre_significance"):
        run_suite("controlled", settings=load_settings(root))
    bad_param = {"name": "controlled", "target": "sut:echo",
                 "scorers": [{"name": "keywords", "params": {"max_words": "lots"}}],
                 "cases": [{"id": "a", "input": "x"}]}
    make_project(tmp_path, {"controlled": bad_param})
    with pytest.raises(ScorerError, match="parameter 'max_words'.*got 'lots'"):
        run_suite("controlled", settings=load_settings(root))


def test_two_files_declaring_one_suite_name(tmp_path):
    make_project(tmp_path, {"a": controlled_suite(1), "b": controlled_suite(1)})
    with pytest.raises(FixtureError, match="two files declare suite 'controlled': a.yaml and b.yaml"):
        run_suite("controlled", settings=load_settings(tmp_path))


def test_all_runs_every_suite_that_loads_and_exits_2_for_the_one_that_does_not(tmp_path):
    # issue #24 item 3: a nightly --all survives one bad file (it used to run nothing at all)
    root = make_project(tmp_path, {"good": {**controlled_suite(1), "name": "good", "target": "sut:echo",
                                            "scorers": ["json-valid"]},
                                   "zzz": {**controlled_suite(1), "name": "zzz", "scorers": ["nope"]}})
    result = cli(root, "run", "--all")
    assert result.returncode == 2 and "unknown scorer 'nope'" in result.stderr
    assert db_rows(root) > 0  # the good suite ran and was stored


def test_usage_errors_are_one_line_and_json_takes_a_path(tmp_path):
    result = cli(tmp_path, "run", "--suit", "x")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "No such option: --suit" in lines[0]
    out = tmp_path / "out.json"
    ran = cli(tmp_path, "run", "--suite", "exact-match", "--json", str(out))
    assert ran.returncode == 0 and json.loads(out.read_text())["suite"] == "exact-match"


def test_a_run_whose_scorer_was_broken_is_not_that_scorers_baseline(tmp_path, monkeypatch):
    def with_control(output: float) -> dict:
        suite = controlled_suite(4)
        suite["cases"].append({"id": "bad", "input": {"id": "bad"}, "expect": "fail", "output": output})
        return suite

    root = make_project(tmp_path, {"controlled": with_control(0.0)})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    write_answers(answers, {f"c{i}": 1.0 for i in range(4)})
    run_suite("controlled", settings=load_settings(root))
    make_project(tmp_path, {"controlled": with_control(1.0)})  # broken: passes the known-bad output
    write_answers(answers, {f"c{i}": 0.2 for i in range(4)})
    broken = run_suite("controlled", settings=load_settings(root)).comparison.scorers[0]
    assert broken.verdict == "scorer broken"
    make_project(tmp_path, {"controlled": with_control(0.0)})
    write_answers(answers, {f"c{i}": 1.0 for i in range(4)})
    after = run_suite("controlled", settings=load_settings(root)).comparison.scorers[0]
    assert after.window_runs == 1 and after.baseline == 1.0
