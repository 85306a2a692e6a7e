"""The loop's state through real runs: a lasting regression stays red until fixed or accepted,
absolute floors, one run outcome for every consumer, the nightly chart, and the statistics text."""

from __future__ import annotations

import json
import logging

import pytest

from evalloop import RunOptions
from evalloop.config import load_settings
from evalloop.loop.pipeline import run_suite
from evalloop.report.summary import run_summary
from evalloop.scheduling.sinks import CallableSink, LogSink, notify
from evalloop.verdicts.outcome import ORDER, RunOutcome, case_outcome, outcome_of_labels, run_outcome
from evalloop.verdicts.paired import pct as _pct
from evalloop.verdicts.verdict import VerdictStatus
from support.cli import cli
from support.project import SCORERS, make_project, write_answers

N = 20
HEURISTIC = SCORERS + '''
@scorer("exact", kind="heuristic")
def exact(input, output, expected):
    """1 when the target answers 1."""
    return Score(value=float(output))
'''
GOOD = {f"c{i}": 1.0 for i in range(N)}
BROKEN = {**GOOD, **{f"c{i}": 0.0 for i in range(6)}}  # 6 of 20 cases broken


def _suite(name: str = "lasting", floor: float | None = 0.0, scorer: str = "value", **extra) -> dict:
    ref = {"name": scorer} if floor is None else {"name": scorer, "min_score": floor}
    return {"name": name, "target": "sut:controlled", "scorers": [ref],
            "cases": [{"id": f"c{i}", "input": {"id": f"c{i}"}} for i in range(N)], **extra}


def _run(root, answers, values, name="lasting", **kwargs):
    write_answers(answers, values)
    return run_suite(name, settings=load_settings(root), **kwargs)


def test_a_lasting_regression_stays_red_until_accepted(tmp_path, answers):
    root = make_project(tmp_path, {"lasting": _suite(scorer="exact")}, scorers=HEURISTIC)
    for _ in range(3):
        _run(root, answers, GOOD)
    labels = [_run(root, answers, BROKEN).comparison.worst for _ in range(6)]
    # on main: regressed, regressed, watch, watch, steady — the break drifted into its own baseline
    assert labels == [VerdictStatus.REGRESSED] * 6
    done = cli(root, "accept", "lasting", "--reason", "six cases retired on purpose")
    assert done.returncode == 0, done.stderr
    assert "accepted run" in done.stdout
    after = _run(root, answers, BROKEN).comparison
    assert after.worst is VerdictStatus.STEADY and not after.fails
    assert after.scorers[0].baseline == pytest.approx(0.7)
    # the acceptance travels in the run log: a fresh database reading the log accepts it too
    log = (root / "history" / "lasting.jsonl").read_text().splitlines()
    assert any(json.loads(line)["id"].startswith("accept:") for line in log)


def test_fix_and_break_again_is_red_again(tmp_path, answers):
    root = make_project(tmp_path, {"lasting": _suite(scorer="exact")}, scorers=HEURISTIC)
    for _ in range(3):
        _run(root, answers, GOOD)
    assert _run(root, answers, BROKEN).comparison.worst is VerdictStatus.REGRESSED
    assert not _run(root, answers, GOOD).comparison.fails
    assert [_run(root, answers, BROKEN).comparison.worst for _ in range(3)] == [VerdictStatus.REGRESSED] * 3


def test_every_cli_run_of_a_lasting_break_exits_1(tmp_path, answers):
    root = make_project(tmp_path, {"lasting": _suite(scorer="exact")}, scorers=HEURISTIC)
    env = {"EVALLOOP_TEST_ANSWERS": str(answers)}
    write_answers(answers, GOOD)
    for _ in range(2):
        assert cli(root, "run", "--suite", "lasting", env=env).returncode == 0
    write_answers(answers, BROKEN)
    codes = [cli(root, "run", "--suite", "lasting", env=env).returncode for _ in range(4)]
    assert codes == [1, 1, 1, 1]


def test_a_scorer_under_its_floor_fails_whatever_the_baseline(tmp_path, answers):
    root = make_project(tmp_path, {"low": _suite("low", floor=None, scorer="exact")}, scorers=HEURISTIC)
    steady_but_low = {**GOOD, **{f"c{i}": 0.0 for i in range(5)}}  # 0.75 < the heuristic floor 0.95
    first = _run(root, answers, steady_but_low, name="low").comparison
    second = _run(root, answers, steady_but_low, name="low").comparison
    for c in (first, second):
        assert c.worst is VerdictStatus.BELOW_FLOOR and c.fails
        assert "absolute floor 0.95" in c.scorers[0].reason
    # below the floor is still the normal: it stays in the baseline (no incident drift, no blind spot)
    assert second.scorers[0].window_runs == 1


def test_an_invalid_run_is_an_alarm_everywhere(tmp_path, answers):
    suite = {"name": "boom", "target": "sut:flaky", "scorers": [{"name": "value", "min_score": 0}],
             "cases": [{"id": f"c{i}", "input": {"boom": True}} for i in range(4)]}
    root = make_project(tmp_path, {"boom": suite})
    report = run_suite("boom", settings=load_settings(root))
    outcome = run_outcome(report.comparison)
    assert outcome.label == "invalid run" and outcome.fails
    sent = []
    assert [d.ok for d in notify(report, [CallableSink("mine", sent.append)])] == [True]
    assert sent == [report]  # the sinks get it: it alarms
    assert run_summary(report).outcome == "invalid run"


def test_an_invalid_run_reaches_the_log_sink(tmp_path, caplog):
    # the log sink wrote one line per failing *scorer*: an invalid run (its scorer 'no baseline
    # yet') was "delivered" to it and logged nothing
    suite = {"name": "boom", "target": "sut:flaky", "scorers": [{"name": "value", "min_score": 0}],
             "cases": [{"id": f"c{i}", "input": {"boom": True}} for i in range(4)]}
    root = make_project(tmp_path, {"boom": suite})
    report = run_suite("boom", settings=load_settings(root))
    with caplog.at_level("WARNING", logger="evalloop.sinks"):
        deliveries = notify(report, [LogSink()])
    assert [d.ok for d in deliveries] == [True]
    lines = [r.getMessage() for r in caplog.records if r.name == "evalloop.sinks"]
    assert len(lines) == 1 and "invalid run" in lines[0] and report.executed.run.id in lines[0]
    assert report.executed.run.invalid_reason and report.executed.run.invalid_reason in lines[0]


FAILS = {VerdictStatus.REGRESSED, VerdictStatus.BELOW_FLOOR, VerdictStatus.SCORER_BROKEN, VerdictStatus.INVALID}


@pytest.mark.parametrize("status", [*VerdictStatus, None])
def test_a_run_alarms_exactly_when_it_fails(status):
    # one concept, held to a table written out here (not to the property it was an alias of):
    # a run fails, and so alarms (logged as a warning), when regressed, below its floor, scorer
    # broken or invalid; a watch, a steady or an improved run, a skipped one and one without
    # scorers do not
    outcome = RunOutcome(status)
    assert outcome.fails is (status in FAILS)
    assert outcome.log_level == (logging.WARNING if status in FAILS else logging.INFO)


def test_the_old_name_for_fails_still_answers_with_a_warning():
    with pytest.deprecated_call():
        assert RunOutcome(VerdictStatus.REGRESSED).alarm is True
    with pytest.deprecated_call():
        assert RunOutcome(VerdictStatus.WATCH).alarm is False


def test_one_order_for_the_run_outcome():
    # the scheduler ranked regressed above invalid; Comparison.worst ranked invalid first
    assert ORDER[0] is VerdictStatus.INVALID
    assert outcome_of_labels(["regressed", "invalid run"]).label == "invalid run"
    assert outcome_of_labels(["watch", "steady"]).label == "watch"  # a watch is never logged as ok
    assert outcome_of_labels(["steady"], valid=False).label == "invalid run"
    from evalloop.scheduling.ledger import severity

    ranked = [s.value for s in ORDER]
    assert [s for s in reversed(severity()) if s in ranked] == ranked  # every verdict, in the one order


def test_case_outcome_is_the_mean_of_graded_epochs():
    assert case_outcome([0.0, 1.0], 0.5).passed  # a target failure in one epoch of two: mean 0.5
    assert case_outcome([], 0.5, errored=2).state == "errored"
    assert case_outcome([], 0.5).state == "skipped"
    assert case_outcome([1.0], 0.5, control=True).failed


def test_nightly_chart_red_by_night_two_and_stays_red(tmp_path, answers):
    import numpy as np

    rng = np.random.default_rng(5)
    quality = rng.beta(6, 2, size=N)
    root = make_project(tmp_path, {"judged": {**_suite("judged"), "name": "judged"}})

    def night(drop: float) -> VerdictStatus:
        noisy = np.clip(quality * (1 - drop) + rng.normal(0, 0.05, N), 0, 1)
        report = _run(root, answers, {f"c{i}": float(v) for i, v in enumerate(noisy)}, name="judged",
                      options=RunOptions(nightly=True))
        return report.comparison.scorers[0]

    for _ in range(5):
        assert not night(0.0).status.fails
    drops = [night(0.3) for _ in range(5)]
    red = [s.status is VerdictStatus.REGRESSED for s in drops]
    assert any(red[:2]) and all(red[2:])
    assert "Nightly CUSUM" in drops[-1].reason and drops[-1].chart.red
    assert night(0.0).status is not VerdictStatus.REGRESSED  # fixed: the alarm ends


def test_percentages_print_as_they_are():
    assert _pct(0.9999) == "99.99%" and _pct(0.1) == "10%" and _pct(0.127) == "12.7%"


def test_compare_names_its_test_and_why_run_differs(tmp_path, answers):
    """Item 9: `run` and `compare` gave different p-values for the same two runs with nothing
    saying they are different tests."""
    root = make_project(tmp_path, {"lasting": _suite(scorer="exact")}, scorers=HEURISTIC)
    env = {"EVALLOOP_TEST_ANSWERS": str(answers), "COLUMNS": "120"}
    write_answers(answers, GOOD)
    assert cli(root, "run", "--suite", "lasting", env=env).returncode == 0
    write_answers(answers, BROKEN)
    assert cli(root, "run", "--suite", "lasting", env=env).returncode == 1
    shown = cli(root, "compare", "last", env=env)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "p: McNemar" in text and "run-label permutation test), so their p differs" in text
