"""Blocking sync targets run at the suite's concurrency by default; ``target_threads`` overrides.

Real runs on real SQLite. Concurrency is shown with a barrier, never with timings: the cases
meet only when they run at once, and a call that waits at the barrier alone fails its case
when the barrier's own timeout breaks it. Where each call ran is what the target reports.
The adaptive rule itself (when a run moves its calls to threads) is a small state machine,
held to a reference model by Hypothesis.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalloop import RunOptions, load_settings, run_suite
from evalloop.errors import FixtureError
from evalloop.history import HistoryStore
from evalloop.run.placement import LONG_WAIT, PROBE, SLOW, WAITED, WAITS, Placement, thread_bound
from support.project import TARGET, make_project

MEETING_TARGET = TARGET + '''
import threading, time

_BARRIERS = {}
_LOCK = threading.Lock()

def meet(input):
    """Blocks: a first call sleeps (an SDK call), the others wait until ``parties`` calls are in."""
    if "sleep" in input:
        time.sleep(input["sleep"])
        return input["value"]
    with _LOCK:
        barrier = _BARRIERS.setdefault(input["group"], threading.Barrier(input["parties"], timeout=20))
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        return "alone"
    return input["value"]

def where(input):
    """The thread the call ran on: 'main' (in place, on the loop) or 'thread'."""
    if input.get("sleep"):
        time.sleep(input["sleep"])
    return "main" if threading.current_thread() is threading.main_thread() else "thread"
'''


def _project(tmp_path, **suites):
    return make_project(tmp_path, suites, target=MEETING_TARGET, scorers=None)


def _outputs(root, run_id):
    return {c.case_id: c.output for c in HistoryStore(load_settings(root).database_url).case_results(run_id)}


def test_blocking_sync_calls_run_at_the_suites_concurrency_by_default(tmp_path):
    # two calls that block briefly (a local service each), then 16 that can only finish together
    cases = [{"id": f"warm{i}", "input": {"sleep": 0.01, "value": 1}, "expected": 1} for i in range(WAITS)]
    cases += [{"id": f"c{i}", "input": {"group": "g", "parties": 16, "value": 1}, "expected": 1}
              for i in range(16)]
    root = _project(tmp_path, meet={"name": "meet", "target": "sut:meet", "scorers": ["equals"],
                                    "concurrency": 16, "cases": cases})
    report = run_suite("meet", settings=load_settings(root))
    outputs = _outputs(root, report.executed.run.id)
    assert report.executed.summaries["equals"].mean == 1.0, outputs
    assert "then on threads" in str(report.executed.run.notes["target_calls"])


def test_the_cli_concurrency_reaches_blocking_sync_targets(tmp_path):
    # one call that blocks as long as an LLM call, then 8 that can only finish together
    cases = [{"id": "warm", "input": {"sleep": LONG_WAIT * 2, "value": 1}, "expected": 1}]
    cases += [{"id": f"c{i}", "input": {"group": "h", "parties": 8, "value": 1}, "expected": 1}
              for i in range(8)]
    root = _project(tmp_path, meet={"name": "meet", "target": "sut:meet", "scorers": ["equals"], "cases": cases})
    report = run_suite("meet", RunOptions(concurrency=8), settings=load_settings(root))
    assert report.executed.summaries["equals"].mean == 1.0


@pytest.mark.parametrize(("threads", "expected"), [(False, "main"), (True, "thread")])
def test_target_threads_forces_where_a_sync_target_runs(tmp_path, threads, expected):
    cases = [{"id": f"c{i}", "input": {"sleep": 0.005}, "expected": expected} for i in range(6)]
    root = _project(tmp_path, where={"name": "where", "target": "sut:where", "scorers": ["equals"],
                                     "target_threads": threads, "cases": cases})
    report = run_suite("where", settings=load_settings(root))
    assert set(_outputs(root, report.executed.run.id).values()) == {f'"{expected}"'}


def test_a_fast_sync_target_runs_in_place(tmp_path):
    cases = [{"id": f"c{i}", "input": {}, "expected": "main"} for i in range(3)]
    root = _project(tmp_path, fast={"name": "fast", "target": "sut:where", "scorers": ["equals"], "cases": cases})
    report = run_suite("fast", settings=load_settings(root))
    assert set(_outputs(root, report.executed.run.id).values()) == {'"main"'}


def test_a_deadline_on_a_sync_target_kept_in_place_is_refused_in_one_line(tmp_path):
    root = _project(tmp_path, both={"name": "both", "target": "sut:where", "scorers": ["equals"],
                                    "target_threads": False, "timeout": 1,
                                    "cases": [{"id": "a", "input": {}, "expected": "main"}]})
    with pytest.raises(FixtureError, match="target_threads: false"):
        run_suite("both", settings=load_settings(root))


# -- the adaptive rule against a reference model ------------------------------------------------
def _reference(calls: list[tuple[float, float]]) -> int | None:
    """The call after which a run moves to threads (None: never), by the rule as documented: a call
    is measured while the run probes (its first PROBE calls, and the PROBE calls after any call in
    place that held the loop SLOW or longer); a measured call that waited LONG_WAIT or longer
    moves the run, as does the WAITS-th measured call that waited WAITED or longer."""
    probing, waits = PROBE, 0
    for i, (wall, cpu) in enumerate(calls):
        measured = probing > 0
        if measured and wall - cpu >= LONG_WAIT:
            return i
        if measured and wall - cpu >= WAITED:
            waits += 1
            if waits >= WAITS:
                return i
        if wall >= SLOW:
            probing = PROBE
        elif measured:
            probing -= 1
    return None


#: a call in place: its wall time, and its own CPU time (all of it: it computed; none: it waited)
_call = st.tuples(st.sampled_from([0.0, 1e-6, SLOW / 2, SLOW, WAITED, LONG_WAIT / 2, LONG_WAIT, 0.2]),
                  st.sampled_from([0.0, 1.0])).map(lambda c: (c[0], c[0] * c[1]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_call, max_size=120))
def test_the_adaptive_rule_matches_its_reference_model(calls):
    placement = Placement(None, is_async=False, timeout=None)
    moved = None
    for i, (wall, cpu) in enumerate(calls):
        assert placement.inline and not placement.threads
        placement.held(wall, cpu if placement.probing else None)
        if not placement.inline:
            moved = i
            break
    assert moved == _reference(calls)
    if moved is not None:
        assert placement.threads and placement.moved


@pytest.mark.parametrize(("mode", "is_async", "timeout", "inline", "threads"), [
    (None, True, None, True, False), (None, True, 5.0, False, False), (True, True, None, True, False),
    (None, False, 5.0, False, True), (True, False, None, False, True), (False, False, None, True, False),
])
def test_fixed_placements(mode, is_async, timeout, inline, threads):
    placement = Placement(mode, is_async=is_async, timeout=timeout)
    assert (placement.inline, placement.threads, placement.probing) == (inline, threads, 0)
    placement.held(1.0, 0.0)  # a fixed placement never moves
    assert (placement.inline, placement.threads) == (inline, threads)


THREAD_BOUND_TARGET = TARGET + '''
import os, sqlite3, time

DB = sqlite3.connect(os.environ["SUT_DB"])  # opened at import, on the main thread
DB.execute("CREATE TABLE IF NOT EXISTS seen (input)")

def remember(input):
    time.sleep(input["sleep"])  # blocks: the run moves its calls to threads
    DB.execute("INSERT INTO seen VALUES (?)", (input["value"],))
    DB.commit()
    return input["value"]
'''


def test_a_target_that_only_works_in_place_is_moved_back_and_its_cases_pass(tmp_path, monkeypatch):
    # the first call blocks long enough to move the run to threads; the calls there fail on
    # SQLite's same-thread check, and the run goes back in place and calls them again
    monkeypatch.setenv("SUT_DB", str(tmp_path / "sut.db"))
    cases = [{"id": f"c{i}", "input": {"sleep": LONG_WAIT * 1.2 if i == 0 else 0, "value": i}, "expected": i}
             for i in range(8)]
    root = make_project(tmp_path / "p", {"bound": {"name": "bound", "target": "sut:remember", "scorers": ["equals"],
                                                   "cases": cases}}, target=THREAD_BOUND_TARGET, scorers=None)
    report = run_suite("bound", settings=load_settings(root))
    run = report.executed.run
    assert report.executed.summaries["equals"].mean == 1.0 and run.target_failures == 0
    assert "in place again" in str(run.notes["target_calls"]) and "ProgrammingError" in str(run.notes["target_calls"])


def test_thread_bound_errors_are_known_by_what_they_say():
    import sqlite3

    made_elsewhere = sqlite3.ProgrammingError("SQLite objects created in a thread can only be used in that same "
                                              "thread. The object was created in thread id 1 and this is thread id 2.")
    assert thread_bound(made_elsewhere)
    assert thread_bound(ValueError("signal only works in main thread of the main interpreter"))
    try:
        try:
            raise RuntimeError("There is no current event loop in thread 'evalloop-target-3'.")
        except RuntimeError as inner:
            raise KeyError("client") from inner
    except KeyError as outer:
        assert thread_bound(outer)
    assert not thread_bound(ValueError("expected 3 items"))
