"""The pytest plugin, run by pytester: suites as tests (case × scorer), history, the fixture."""

from __future__ import annotations

import pytest

from evalloop import HistoryStore, load_settings
from support.project import make_project, write_answers

pytest_plugins = ["pytester"]

SCORERS = '''
from evalloop import Score, scorer

@scorer("value", kind="llm_operation", min_score=0)
def value(input, output, expected):
    return Score(value=float(output), message=f"got {output}")

@scorer("picky")
def picky(input, output, expected):
    if input.get("skip"):
        return Score.skip("no judge configured")
    if input.get("boom"):
        raise ValueError("grader bug")
    return Score(value=1.0)
'''

MIXED = {
    "name": "mixed", "target": "sut:controlled", "scorers": ["value", "picky"],
    "cases": [
        {"id": "ok", "input": {"id": "ok"}},
        {"id": "low", "input": {"id": "low"}},
        {"id": "skipme", "input": {"id": "skipme", "skip": True}},
        {"id": "boom", "input": {"id": "boom", "boom": True}},
        {"id": "control", "input": {"id": "control"}, "expect": {"value": "fail"}},
    ],
}
ANSWERS = {"ok": 0.9, "low": 0.2, "skipme": 0.9, "boom": 0.9, "control": 0.1}


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(tmp_path_factory):
    """One real run first, so that what a run imports (the LLM SDKs are slow to import) is in
    sys.modules before pytester snapshots it, and in-process inner sessions do not re-import it."""
    from evalloop import run_suite

    root = make_project(tmp_path_factory.mktemp("warm"), {"warm": {
        "name": "warm", "target": "sut:echo", "scorers": ["json-valid"],
        "cases": [{"id": "a", "input": {"x": 1}}]}})
    run_suite("warm", settings=load_settings(root))


@pytest.fixture
def project(pytester, monkeypatch):
    root = make_project(pytester.path, {"mixed": MIXED}, scorers=SCORERS)
    answers = root / "answers.json"
    write_answers(answers, ANSWERS)
    (root / "evalloop.toml").write_text("errored_limit = 0.5\n")  # one errored grade of four is fine
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    monkeypatch.delenv("EVALLOOP_PROJECT", raising=False)
    return root


def runs_in(root) -> int:
    return len(HistoryStore(load_settings(root).database_url).runs("mixed"))


def test_one_test_per_case_and_scorer_with_pass_fail_skip_error(pytester, project):
    result = pytester.runpytest("--evalloop-suite", "mixed", "-rfs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=7, failed=2, skipped=1)
    result.stdout.fnmatch_lines([
        "collected 10 items",
        "*mixed / low / value: value scored 0.200, want ≥ 0.5: got 0.2*",
        "*mixed / boom / picky: picky errored: scorer picky raised ValueError: grader bug*",
        "mixed: run *, 5 cases",
        "  value: 0.725 — no baseline yet",
        "FAILED evalloop/mixed::low[[]value[]] - mixed / low / value: *",
        "FAILED evalloop/mixed::boom[[]picky[]] - mixed / boom / picky: *",
        "SKIPPED [[]1[]] fixtures/mixed.yaml:13: picky did not run: no judge configured",
    ])
    assert runs_in(project) == 1  # stored in the project's history like any run


def test_collect_only_and_keyword_selection_run_nothing_extra(pytester, project):
    result = pytester.runpytest("--evalloop-suite", "mixed", "--collect-only", "-q")
    assert "evalloop/mixed::control[value]" in result.stdout.str()
    assert result.stdout.str().count("evalloop/mixed::") == 10 and runs_in(project) == 0
    result = pytester.runpytest("--evalloop-suite", "mixed", "-k", "value and not low")
    result.assert_outcomes(passed=4, deselected=6)
    assert runs_in(project) == 1


def test_no_history_option_and_explicit_project(pytester, project, tmp_path):
    pytester.chdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = pytester.runpytest("--evalloop-suite", "mixed", "--evalloop-project", str(project),
                                "--evalloop-no-history", "--rootdir", str(elsewhere))
    result.assert_outcomes(passed=7, failed=2, skipped=1)
    assert runs_in(project) == 0


def test_unknown_suite_is_one_usage_error(pytester, project):
    result = pytester.runpytest("--evalloop-suite", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: evalloop: */fixtures: unknown suite 'nope' — see `evalloop suites list`"])


def test_regression_fails_the_session_when_asked(pytester, project):
    steady = {k: 0.9 for k in ANSWERS} | {"low": 0.9, "control": 0.1}
    args = ["--evalloop-suite", "mixed", "-k", "value", "--evalloop-fail-on-regression"]
    for _ in range(3):
        write_answers(project / "answers.json", steady)
        assert pytester.runpytest(*args).ret == pytest.ExitCode.OK
    write_answers(project / "answers.json", {k: 0.6 for k in ANSWERS} | {"control": 0.1})
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=5, deselected=5)  # every case still passes its mark ...
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ... but the scorer regressed
    result.stdout.fnmatch_lines(["  value: 0.*, baseline 0.*, drop +*% — regressed*"])


def test_evalloop_fixture(pytester, project):
    pytester.makepyfile(test_uses_fixture=f'''
        from pathlib import Path

        def test_fixture(evalloop):
            assert evalloop.settings.project_dir == Path({str(project)!r})
            assert "value" in evalloop.registry and "picky" in evalloop.registry
            assert [c.id for c in evalloop.suite("mixed").iter_cases()][:2] == ["ok", "low"]
            report = evalloop.run("mixed")
            assert report.executed.run.suite == "mixed" and report.executed.run.n_cases == 5
            assert [r.id for r in evalloop.history.runs("mixed")] == [report.executed.run.id]
    ''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert runs_in(project) == 1


def test_no_history_reads_the_committed_log_so_a_regression_still_fails(pytester, project):
    from evalloop import run_suite

    steady = {k: 0.9 for k in ANSWERS} | {"low": 0.9, "control": 0.1}
    write_answers(project / "answers.json", steady)
    for _ in range(3):  # the team's runs: in the project's database and its run log
        run_suite("mixed", settings=load_settings(project))
    log = project / "history" / "mixed.jsonl"
    logged = log.read_bytes()
    assert len(logged.splitlines()) == 3

    write_answers(project / "answers.json", {k: 0.6 for k in ANSWERS} | {"control": 0.1})
    result = pytester.runpytest("--evalloop-suite", "mixed", "-k", "value", "--evalloop-no-history",
                                "--evalloop-fail-on-regression")
    result.assert_outcomes(passed=5, deselected=5)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # judged against the logged baseline
    result.stdout.fnmatch_lines(["  value: 0.*, baseline 0.900, drop +*% — regressed*"])
    assert log.read_bytes() == logged and runs_in(project) == 3  # the project is untouched


FLIP_TARGET = '''
import json, os

def flip(input):
    """Fails the first time it sees a case, answers 1.0 after (a one-epoch target failure)."""
    path = os.environ["EVALLOOP_TEST_SEEN"]
    seen = json.load(open(path)) if os.path.exists(path) else []
    if input["id"] not in seen:
        json.dump(seen + [input["id"]], open(path, "w"))
        raise RuntimeError("first try fails")
    return 1.0
'''


def test_a_case_is_judged_the_same_by_the_plugin_junit_and_show(pytester, monkeypatch, tmp_path):
    # two epochs, the target fails one of them: the case's score is the mean, 0.5, which meets the
    # pass mark; on main the plugin failed it ("the target raised") while JUnit and `show` passed it
    from evalloop.report.cases import load_cases
    from evalloop.report.junit import junit_xml

    suite = {"name": "flip", "target": "sut:flip", "scorers": [{"name": "value", "min_score": 0}],
             "epochs": 2, "concurrency": 1, "cases": [{"id": "a", "input": {"id": "a"}},
                                                      {"id": "b", "input": {"id": "b"}}]}
    root = make_project(pytester.path, {"flip": suite}, scorers=SCORERS, target=FLIP_TARGET)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    monkeypatch.setenv("EVALLOOP_TEST_SEEN", str(tmp_path / "seen.json"))
    monkeypatch.delenv("EVALLOOP_PROJECT", raising=False)
    result = pytester.runpytest("--evalloop-suite", "flip", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    store = HistoryStore(load_settings(root).database_url)
    run = store.runs("flip")[0]
    assert all(v.passed for v in load_cases(store, run.id))
    from evalloop import run_suite

    (tmp_path / "seen.json").unlink()
    report = run_suite("flip", settings=load_settings(root))
    assert "<failure" not in junit_xml([report], store).split('classname="flip.baseline"')[0]


def test_a_fixed_output_control_is_a_test_only_for_the_scorers_it_tests(pytester, project):
    """A control with a fixed output is graded by the scorers it names alone: one item, not one
    per scorer (the other scorer has no grade of it to test)."""
    suite = {**MIXED, "cases": [*MIXED["cases"], {"id": "fixed", "input": {"id": "fixed"},
                                                  "expect": {"value": "fail"}, "output": 0.0}]}
    make_project(project, {"mixed": suite}, scorers=SCORERS)
    result = pytester.runpytest("--evalloop-suite", "mixed", "--collect-only", "-q")
    assert "evalloop/mixed::fixed[value]" in result.stdout.str()
    assert "evalloop/mixed::fixed[picky]" not in result.stdout.str()
    result = pytester.runpytest("--evalloop-suite", "mixed", "-k", "fixed", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=10)
