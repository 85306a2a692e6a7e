"""Verdicts through real runs (issue #11): case sets, baseline 0, epochs, strata, eligibility,
suite verdict settings, fingerprints — and one verdict read the same everywhere."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from evalloop import RunOptions, load_settings, run_suite
from evalloop.history import HistoryStore
from evalloop.history.strata import strata_means
from evalloop.report.trends import build_trends
from support.project import SCORERS, TARGET, make_project, write_answers
from support.sqlitedb import sqlite_conn

EPOCH_SCORERS = SCORERS + '''
@scorer("epoch-flaky", kind="heuristic")
def epoch_flaky(input, output, expected, ctx):
    """Errors on case c0 in epoch 0; otherwise passes the target's number through."""
    if ctx.case.id == "c0" and ctx.epoch == 0:
        raise RuntimeError("grader hiccup")
    return Score(value=float(output))
'''


def suite(name, n=10, scorers=("value",), **extra):
    return {"name": name, "target": "sut:controlled", "scorers": list(scorers),
            "cases": [{"id": f"c{i}", "input": {"id": f"c{i}"}} for i in range(n)], **extra}


def run(root, name, answers_path, values, **kwargs):
    write_answers(answers_path, values)
    return run_suite(name, settings=load_settings(root), **kwargs)


def test_added_harder_cases_are_not_a_drop(tmp_path, answers):
    root = make_project(tmp_path, {"grow": suite("grow", 10, ("value",))})
    for _ in range(2):
        run(root, "grow", answers, {f"c{i}": 1.0 for i in range(10)})
    (root / "fixtures" / "grow.yaml").unlink()
    make_project(tmp_path, {"grow": suite("grow", 20, ("value",))})
    report = run(root, "grow", answers, {**{f"c{i}": 1.0 for i in range(10)},
                                         **{f"c{i}": 0.0 for i in range(10, 20)}})
    s = report.comparison.scorers[0]
    assert s.verdict == "steady" and not s.fails and s.drop == 0.0
    assert s.current == 0.5 and s.baseline == 1.0  # the run's mean, and the shared cases' baseline
    assert (s.evidence.added, s.evidence.added_mean, s.evidence.n_paired) == (10, 0.0, 10)
    assert not report.comparison.fails and "memories" not in report.extras


def test_baseline_zero_then_a_real_rise_is_improved(tmp_path, answers):
    root = make_project(tmp_path, {"z": suite("z", 20)})
    for _ in range(3):
        run(root, "z", answers, {f"c{i}": 0.0 for i in range(20)})
    s = run(root, "z", answers, {f"c{i}": 0.9 for i in range(20)}).comparison.scorers[0]
    assert s.baseline == 0.0 and s.evidence.p_value < 0.001 and s.verdict == "improved"


def test_epochs_average_per_case_and_every_reader_agrees(tmp_path, answers):
    root = make_project(tmp_path, {"ep": suite("ep", 5, ("epoch-flaky",), epochs=2)},
                       scorers=EPOCH_SCORERS)
    values = {"c0": 0.0, "c1": 1.0, "c2": 0.0, "c3": 1.0, "c4": 0.0}
    report = run(root, "ep", answers, values)
    s = report.comparison.scorers[0]
    # c0's epoch-0 grade errored: c0 is averaged over the one epoch that graded it
    assert s.current == pytest.approx(0.4) and s.n == 5 and s.errored == 1 and s.grades == 10
    store = HistoryStore(load_settings(root).database_url)
    summary = store.summaries(report.executed.run.id)["epoch-flaky"]
    assert summary.mean == pytest.approx(0.4) and summary.n == 5
    trend = build_trends(store, ["ep"]).suites[0].scorers[0].points[-1]
    assert trend.mean == pytest.approx(0.4) and trend.n == 5
    assert summary.details["grades"] == 10
    # a second run: the CLI's run JSON, `history` and `report` give the same mean, n and drop
    from support.cli import cli

    env = {"EVALLOOP_TEST_ANSWERS": str(answers)}
    again = json.loads(cli(root, "run", "--suite", "ep", "--json", env=env).stdout)["scorers"][0]
    assert (again["current"], again["n"], again["baseline"], again["drop"]) == (
        pytest.approx(0.4), 5, pytest.approx(0.4), pytest.approx(0.0))
    latest = json.loads(cli(root, "history", "--suite", "ep", "--json", env=env).stdout)[0]
    stored = latest["scorers"]["epoch-flaky"]
    assert (stored["mean"], stored["n"], stored["drop"]) == (pytest.approx(0.4), 5, pytest.approx(0.0))
    point = json.loads(cli(root, "report", "--suite", "ep", "--json", env=env).stdout)[
        "suites"][0]["scorers"][0]["points"][-1]
    assert (point["mean"], point["n"], point["drop"]) == (pytest.approx(0.4), 5, pytest.approx(0.0))


def test_per_tag_overall_equals_the_run_mean_with_controls(tmp_path, answers):
    spec = suite("tags", 6)
    for case in spec["cases"]:
        case["tags"] = ["a"]
    spec["cases"].append({"id": "neg", "input": {"id": "neg"}, "tags": ["a"], "expect": "fail"})
    root = make_project(tmp_path, {"tags": spec})
    report = run(root, "tags", answers, {**{f"c{i}": 1.0 for i in range(6)}, "neg": 0.0})
    store = HistoryStore(load_settings(root).database_url)
    strata = strata_means(store, report.executed.run.id)
    assert strata.overall["value"] == report.comparison.scorers[0].current == 1.0
    assert strata.mean("a", "value") == 1.0


def test_limit_and_broken_runs_count_in_no_baseline_anywhere(tmp_path, answers):
    def with_control(output: float) -> dict:
        spec = suite("elig", 6)
        spec["cases"].append({"id": "neg", "input": {"id": "neg"}, "expect": "fail", "output": output})
        return spec

    root = make_project(tmp_path, {"elig": with_control(0.0)})
    good = {f"c{i}": 0.8 for i in range(6)}
    run(root, "elig", answers, good)
    make_project(tmp_path, {"elig": with_control(1.0)})
    assert run(root, "elig", answers, good).comparison.worst.value == "scorer broken"  # passed a known-bad output
    make_project(tmp_path, {"elig": with_control(0.0)})
    run(root, "elig", answers, {f"c{i}": 0.1 for i in range(6)}, options=RunOptions(limit=3))  # --limit
    last = run(root, "elig", answers, good).comparison.scorers[0]
    assert last.window_runs == 1 and last.baseline == pytest.approx(0.8)
    store = HistoryStore(load_settings(root).database_url)
    point = build_trends(store, ["elig"]).suites[0].scorers[0].points[-1]
    assert point.window_runs == 1 and point.baseline == pytest.approx(0.8)
    assert point.band_low == point.band_high == pytest.approx(0.8)


def test_suite_verdict_block_sets_threshold_and_pass_mark(tmp_path, answers):
    root = make_project(tmp_path, {"v": suite("v", 4, verdict={"threshold": 0.3, "pass_mark": 0.9,
                                                               "rule": "paired"})})
    report = run(root, "v", answers, {f"c{i}": 0.85 for i in range(4)})
    s = report.comparison.scorers[0]
    assert s.threshold == 0.3
    policy = (HistoryStore(load_settings(root).database_url)
              .summaries(report.executed.run.id)["value"].details["policy"])
    assert policy["threshold"] == 0.3 and policy["pass_mark"] == 0.9 and policy["rule"] == "paired"
    # and the verdict judges with them: at pass mark 0.9, 0.85 fails where 0.95 passed
    run(root, "v", answers, {f"c{i}": 0.95 for i in range(4)})
    s = run(root, "v", answers, {f"c{i}": 0.85 for i in range(4)}).comparison.scorers[0]
    assert [c for c, _ in s.newly_failing] == ["c0", "c1", "c2", "c3"]
    # a scorer entry's own threshold still wins over the suite's verdict block
    make_project(tmp_path, {"v": suite("v", 4, scorers=[{"name": "value", "threshold": 0.05}],
                                       verdict={"threshold": 0.3})})
    assert run(root, "v", answers, {f"c{i}": 0.85 for i in range(4)}).comparison.scorers[0].threshold == 0.05


def test_a_stored_legacy_label_is_a_watch_for_report_as_for_run(tmp_path, answers):
    """Older versions stored "regressed (not significant)"; `report --fail-on-regression` once
    read any label starting with "regressed" as a regression, where `run` exited 0."""
    from support.cli import cli

    root = make_project(tmp_path, {"old": suite("old", 4)})
    (root / "evalloop.toml").write_text("run_log = false\nlearn = false\n")
    for _ in range(2):
        last = run(root, "old", answers, {f"c{i}": 1.0 for i in range(4)})
    with sqlite_conn(root / "history" / "evalloop.db") as db:
        db.execute("update scorer_summaries set verdict = 'regressed (not significant)' where run_id = ?",
                   (last.executed.run.id,))
    report = cli(root, "report", "--suite", "old", "--json", "--fail-on-regression")
    assert report.returncode == 0, report.stdout + report.stderr
    point = json.loads(report.stdout)["suites"][0]["scorers"][0]["points"][-1]
    assert point["fails"] is False and point["regression"] is False


def test_bad_verdict_settings_and_retired_keys_fail_in_one_line(tmp_path, answers):
    from evalloop.errors import FixtureError

    root = make_project(tmp_path, {"b": suite("b", 2, verdict={"require_significance": True})})
    with pytest.raises(FixtureError, match="require_significance is retired"):
        run(root, "b", answers, {})


FP_TARGET = TARGET + '''
def versioned(input, prompt="v1"):
    return 1.0

def _fp(params):  # injected failure memories change on their own; the prompt is the system
    return {"prompt_sha": params.get("prompt", "v1"), "injected": os.environ.get("FP_INJECTED", "")}

versioned.fingerprint = _fp
'''


def test_fingerprint_change_is_reported_and_can_restart_the_baseline(tmp_path, answers, monkeypatch):
    def spec(prompt, restart=False):
        s = suite("fp", 4)
        s["target"] = {"ref": "sut:versioned", "params": {"prompt": prompt}}
        if restart:
            s["verdict"] = {"restart_on_change": True}
        return {"fp": s}

    root = make_project(tmp_path, spec("v1"), target=FP_TARGET)
    run(root, "fp", answers, {})
    # injected memories change the full fingerprint but not the system: no notice
    monkeypatch.setenv("FP_INJECTED", "memory-1")
    same = run(root, "fp", answers, {})
    assert same.executed.run.fingerprint_hash != same.comparison.scorers[0].previous_run
    assert same.comparison.fingerprint_change is None
    assert not any("changed since run" in n for n in same.notices)
    make_project(tmp_path, spec("v2"), target=FP_TARGET)
    changed = run(root, "fp", answers, {})
    change = changed.comparison.fingerprint_change
    assert change is not None and not change.restarted
    assert any("target_params.prompt" in c or "target_fingerprint.prompt_sha" in c for c in change.changed)
    assert any("the product changed" in n for n in changed.notices)
    assert changed.comparison.scorers[0].window_runs == 2
    make_project(tmp_path, spec("v3", restart=True), target=FP_TARGET)
    restarted = run(root, "fp", answers, {})
    assert restarted.comparison.fingerprint_change.restarted
    assert restarted.comparison.scorers[0].verdict == "no baseline yet"


def test_one_verdict_everywhere_for_every_state(tmp_path, answers):
    """run (exit code, JSON, JUnit) and report (exit code, JSON, Markdown) agree, state by state."""
    from support.cli import cli

    states = {
        "no baseline yet": [{}],
        "steady": [{}, {}],
        "regressed": [{}] * 3 + [{f"c{i}": 0.3 for i in range(10)}],
        "watch": [{}] * 3 + [{"c0": 0.0, "c1": 0.0}],
        "improved": [{f"c{i}": 0.3 for i in range(10)}] * 3 + [{}],
        "invalid run": [{}],
        "scorer broken": [{"neg": 1.0}],
        "skipped": [{}],
    }
    suites = {}
    for state in states:
        name = state.replace(" ", "-")
        scorer = {"invalid run": "explodes", "skipped": "not-run"}.get(state, "value")
        spec = suite(name, 10, (scorer,))
        if state == "scorer broken":  # a known-bad output the scorer passes
            spec["cases"].append({"id": "neg", "input": {"id": "neg"}, "expect": "fail", "output": 1.0})
        suites[name] = spec
    root = make_project(tmp_path, suites, scorers=SCORERS + '''
@scorer("not-run", kind="llm_judge")
def not_run(input, output, expected):
    return Score.skip("no judge configured")
''')
    (root / "evalloop.toml").write_text("run_log = false\nlearn = false\n")
    env = {"EVALLOOP_TEST_ANSWERS": str(answers)}
    for state, sequence in states.items():
        name = state.replace(" ", "-")
        for values in sequence:
            write_answers(answers, {**{f"c{i}": 1.0 for i in range(10)}, "neg": 0.0, **values})
            result = cli(root, "run", "--suite", name, "--json", "--fail-on-regression",
                         "--junit", str(tmp_path / f"{name}.xml"), env=env)
        data = json.loads(result.stdout)
        verdict = data["scorers"][0]["verdict"]
        assert verdict == state, (state, data["scorers"][0]["reason"])
        fails = state in ("regressed", "invalid run", "scorer broken")
        assert result.returncode == (1 if fails else 0), (state, result.stderr)
        assert data["fails"] is fails and data["scorers"][0]["fails"] is fails
        junit = ET.parse(tmp_path / f"{name}.xml").getroot()
        failures = [tc for tc in junit.iter("testcase") if tc.get("classname", "").endswith(".baseline")
                    and tc.find("failure") is not None]
        assert bool(failures) is fails, state
        report = cli(root, "report", "--suite", name, "--json", "--fail-on-regression", env=env)
        assert report.returncode == (1 if fails else 0), (state, report.stderr)
        latest = json.loads(report.stdout)["suites"][0]["scorers"][0]["points"][-1]
        assert latest["verdict"] == state and latest["fails"] is fails
        markdown = cli(root, "report", "--suite", name, "--markdown", env=env).stdout
        assert ("❌" in markdown.splitlines()[0]) is fails, (state, markdown.splitlines()[0])
