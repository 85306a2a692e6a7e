"""Runs end to end on real SQLite: errors per case, errored scores, epochs, baselines, verdicts."""

from __future__ import annotations

import asyncio

import pytest

from evalloop import RunOptions, load_settings, run_suite
from evalloop.errors import ScorerError, TargetError
from evalloop.history import CaseResult, CaseScore, HistoryStore, Run, RunStatus
from evalloop.run.runner import execute, prepare
from evalloop.scoring.registry import discover
from evalloop.suites.lookup import find_suite
from support.project import controlled_suite, make_project, write_answers
from support.sqlitedb import sqlite_conn


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"controlled": controlled_suite(10)})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    return root, answers


def run_with(root, answers_path, values):
    write_answers(answers_path, values)
    return run_suite("controlled", settings=load_settings(root))


def uniform(value, n=10):
    return {f"c{i}": value for i in range(n)}


def test_five_runs_then_drops_at_15_percent_threshold(project):
    root, answers = project
    for _ in range(5):
        report = run_with(root, answers, uniform(0.8))
    assert report.comparison.scorers[0].verdict == "steady"
    # 16 % drop on a 15 % (llm_operation) scorer: a regression
    report = run_with(root, answers, uniform(0.8 * 0.84))
    s = report.comparison.scorers[0]
    assert s.threshold == 0.15 and s.window_runs == 5
    assert s.baseline == pytest.approx(0.8) and s.drop == pytest.approx(0.16)
    assert s.verdict == "regressed" and s.is_regression and report.comparison.has_regression


def test_fourteen_percent_is_not_and_exactly_threshold_is(project):
    root, answers = project
    for _ in range(5):
        run_with(root, answers, uniform(0.8))
    s = run_with(root, answers, uniform(0.8 * 0.86)).comparison.scorers[0]
    # certain (every case fell), but the data show it smaller than the 15 % worth acting on
    assert s.drop == pytest.approx(0.14) and not s.is_regression and s.verdict == "watch"
    # a significant drop, even under the threshold, stays out of the window (no drift into it)
    s = run_with(root, answers, uniform(0.7)).comparison.scorers[0]
    assert s.baseline == pytest.approx(0.8)


def test_exactly_at_threshold_counts(tmp_path, monkeypatch):
    root = make_project(tmp_path, {"controlled": controlled_suite(4)})
    answers = tmp_path / "answers.json"
    monkeypatch.setenv("EVALLOOP_TEST_ANSWERS", str(answers))
    for _ in range(5):
        run_with(root, answers, uniform(0.85, 4))
    s = run_with(root, answers, uniform(0.85 * (1 - 0.15), 4)).comparison.scorers[0]
    # every case fell below each of its 5 earlier runs: p ≈ 2 / 6**4, significant, at the threshold
    assert abs(s.drop - 0.15) < 1e-9 and s.is_regression and s.verdict == "regressed"
    assert s.evidence.p_value < 0.01
    # the same drop after one earlier run cannot be significant with 4 cases (p = 2/16): a watch
    make_project(tmp_path, {"controlled": {**controlled_suite(4), "window": 1}})
    run_with(root, answers, uniform(0.85, 4))
    one = run_with(root, answers, uniform(0.85 * (1 - 0.15), 4)).comparison.scorers[0]
    assert one.window_runs == 1 and one.verdict == "watch" and not one.is_regression


def test_window_is_the_last_five_before_the_run(project):
    root, answers = project
    for value in (0.1, 0.9, 0.9, 0.9, 0.9, 0.9):
        run_with(root, answers, uniform(value))
    s = run_with(root, answers, uniform(0.9)).comparison.scorers[0]
    assert s.window_runs == 5 and s.baseline == pytest.approx(0.9)


def test_first_run_has_no_baseline_and_zero_baseline_gives_no_nan(project):
    root, answers = project
    s = run_with(root, answers, uniform(0.0)).comparison.scorers[0]
    assert s.verdict == "no baseline yet" and s.baseline is None
    s = run_with(root, answers, uniform(0.0)).comparison.scorers[0]
    assert s.baseline == 0.0 and s.drop is None and s.verdict == "steady"
    assert "(n/a)" in s.reason and "nan" not in s.reason.lower()


def test_target_errors_fail_only_their_case(tmp_path):
    suite = {"name": "flaky", "target": "sut:flaky", "scorers": ["equals"], "cases": [
        {"id": "ok", "input": {"answer": "a"}, "expected": "a"},
        {"id": "bad", "input": {"boom": True}, "expected": "a"},
    ]}
    root = make_project(tmp_path, {"flaky": suite})
    report = run_suite("flaky", settings=load_settings(root))
    assert report.executed.case_errors == 1
    assert "case 'bad': RuntimeError: target exploded" in report.executed.first_case_error
    summary = report.executed.summaries["equals"]
    assert summary.mean == 0.5 and summary.n == 2 and summary.errored == 0
    store = HistoryStore(load_settings(root).database_url)
    rows = {r.case_id: r for r in store.case_results(report.executed.run.id)}
    assert rows["bad"].error.startswith("RuntimeError") and rows["bad"].output is None
    assert rows["ok"].output == '"a"'


def test_scorer_raising_is_errored_and_can_invalidate_the_run(tmp_path):
    suite = {"name": "e", "target": "sut:echo", "scorers": ["explodes", "json-valid"],
             "cases": [{"id": str(i), "input": {"x": i}} for i in range(3)]}
    root = make_project(tmp_path, {"e": suite})
    report = run_suite("e", settings=load_settings(root))
    summary = report.executed.summaries["explodes"]
    assert summary.errored == 3 and summary.n == 0 and summary.mean is None
    assert not report.executed.run.valid
    assert "explodes: 3/3 grades errored" in report.executed.run.invalid_reason
    assert report.comparison.scorers[0].verdict == "invalid run"
    assert report.executed.summaries["json-valid"].mean == 1.0
    # an invalid run never becomes a baseline
    store = HistoryStore(load_settings(root).database_url)
    again = run_suite("e", settings=load_settings(root))
    s = {c.scorer: c for c in again.comparison.scorers}["json-valid"]
    assert s.window_runs == 0 and store.count(Run) == 2


def test_async_target_epochs_limit(tmp_path):
    suite = {"name": "a", "target": "sut:async_echo", "scorers": ["json-valid"],
             "cases": [{"id": str(i), "input": {"i": i}} for i in range(20)]}
    root = make_project(tmp_path, {"a": suite})
    report = run_suite("a", RunOptions(epochs=3, limit=7), settings=load_settings(root))
    run = report.executed.run
    assert run.n_cases == 7 and run.epochs == 3
    store = HistoryStore(load_settings(root).database_url)
    results = store.case_results(run.id)
    assert len(results) == 21 and {r.epoch for r in results} == {0, 1, 2}


def test_bad_input_writes_nothing(tmp_path):
    root = make_project(tmp_path, {
        "unknown-scorer": {"name": "unknown-scorer", "target": "sut:echo", "scorers": ["nope"],
                           "cases": [{"id": "a", "input": 1}]},
        "unknown-target": {"name": "unknown-target", "target": "sut:missing", "scorers": ["equals"],
                           "cases": [{"id": "a", "input": 1}]},
        "bad-param": {"name": "bad-param", "target": "sut:echo",
                      "scorers": [{"name": "regex", "params": {"patern": "x"}}],
                      "cases": [{"id": "a", "input": 1}]},
    })
    settings = load_settings(root)
    with pytest.raises(ScorerError, match="unknown scorer 'nope'"):
        run_suite("unknown-scorer", settings=settings)
    with pytest.raises(TargetError, match="module 'sut' has no attribute 'missing'"):
        run_suite("unknown-target", settings=settings)
    with pytest.raises(ScorerError, match="no parameter 'patern'"):
        run_suite("bad-param", settings=settings)
    store = HistoryStore(settings.database_url)
    assert store.count(Run) == 0 and store.count(CaseScore) == 0


def test_interrupted_run_is_marked_and_never_a_baseline(tmp_path):
    target = '''
import asyncio, os
async def slow(input):
    if input["i"] >= 3:  # says so, then hangs: the test cancels the run once it has
        open(os.path.join(input["dir"], "hung"), "w").close()
        await asyncio.sleep(3600)
    return {"i": input["i"]}
'''
    suite = {"name": "slow", "target": "sut:slow", "scorers": ["json-valid"], "concurrency": 1,
             "cases": [{"id": str(i), "input": {"i": i, "dir": str(tmp_path)}} for i in range(10)]}
    root = make_project(tmp_path, {"slow": suite}, target=target)
    settings = load_settings(root)
    store = HistoryStore(settings.database_url)
    prepared = prepare(find_suite("slow", root), discover(root), project_dir=root)

    async def interrupt():
        task = asyncio.create_task(execute(prepared, store, RunOptions(concurrency=1), batch_size=2))
        for _ in range(6000):  # until case 3 hangs (cases 0-2 finished), at most a minute
            if (tmp_path / "hung").exists() or task.done():
                break
            await asyncio.sleep(0.01)
        assert (tmp_path / "hung").exists()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupt())
    (run,) = store.runs("slow")
    assert run.status == RunStatus.INTERRUPTED and not run.valid
    assert store.count(CaseResult) == 3  # the finished cases are kept, nothing half-written
    assert store.summaries(run.id) == {}


def test_an_older_history_database_gains_new_columns(tmp_path):

    path = tmp_path / "old.db"
    with sqlite_conn(path) as conn:  # case_results as an earlier version made it: no tags
        conn.execute("CREATE TABLE case_results (id INTEGER PRIMARY KEY, run_id VARCHAR NOT NULL, "
                     "case_id VARCHAR NOT NULL, epoch INTEGER NOT NULL, output VARCHAR, error VARCHAR, "
                     "latency_ms FLOAT NOT NULL, cost_usd FLOAT NOT NULL, input_tokens INTEGER NOT NULL, "
                     "output_tokens INTEGER NOT NULL)")
    store = HistoryStore(f"sqlite:///{path}")
    store.begin_run(Run(id="r1", suite="s"))
    store.add_results([{"run_id": "r1", "case_id": "a", "epoch": 0, "tags": "x,y", "output": "1",
                        "error": None, "latency_ms": 1.0, "cost_usd": 0.0, "input_tokens": 0,
                        "output_tokens": 0}], [])
    assert store.case_results("r1")[0].tags == "x,y"


@pytest.mark.parametrize("n", [1, 70, 71, 72, 82, 83, 84, 111, 112, 250, 1000])
def test_case_rows_are_stored_in_order_whatever_their_number(tmp_path, n):
    """The SQLite path writes many rows to a statement (up to SQLite's 999 parameters): every
    row lands, in the order given, for counts on either side of a statement's size (71 case
    results, 111 scores), as tuples and as mappings."""
    from evalloop.history.store import CASE_RESULT_COLUMNS, CASE_SCORE_COLUMNS

    store = HistoryStore(f"sqlite:///{tmp_path / 'h.db'}")
    store.begin_run(Run(id="r1", suite="s"))
    ids = [f"c{(i * 7919) % n:05d}-{i}" for i in range(n)]  # not in sorted order
    cases = [("r1", c, 0, None, f'"{i}"', None, None, float(i), 0.0, 0, 0, None, None, None)
             for i, c in enumerate(ids)]
    scores = [("r1", c, 0, "equals", i / n, False, False, f"m{i}", None) for i, c in enumerate(ids)]
    assert len(cases[0]) == len(CASE_RESULT_COLUMNS) and len(scores[0]) == len(CASE_SCORE_COLUMNS)
    store.add_results(cases[: n // 2], scores[: n // 2])
    store.add_results([dict(zip(CASE_RESULT_COLUMNS, row, strict=True)) for row in cases[n // 2:]],
                      [dict(zip(CASE_SCORE_COLUMNS, row, strict=True)) for row in scores[n // 2:]])
    assert [(r.case_id, r.latency_ms) for r in store.case_results("r1")] == [(c, float(i)) for i, c in enumerate(ids)]
    assert [(s.case_id, s.message) for s in store.score_rows("r1")] == [(c, f"m{i}") for i, c in enumerate(ids)]
