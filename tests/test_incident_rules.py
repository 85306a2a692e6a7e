"""The evidence rules of the incident state machine, pure (:mod:`evalloop.learning.incident_machine`):
what "back" and "joins" mean on numbers one can check by hand. The real-run tests are
``test_incident_machine.py`` (Hypothesis), ``test_incident_hysteresis.py`` and ``test_lesson_hold.py``."""

from __future__ import annotations

from evalloop.learning.incident_machine import (
    Cause,
    Incident,
    Level,
    Past,
    Seen,
    State,
    Step,
    ablation_cases,
    back,
    binomial_tail,
    joining,
    keeps_out,
    levels,
    noise,
    transition,
)
from evalloop.verdicts.verdict import VerdictStatus

CASES = [f"c{i}" for i in range(10)]


def seen(scores: dict[str, float], **kw) -> Seen:
    return Seen(run_id=kw.pop("run_id", "r"), full=kw.pop("full", True), regressed=kw.pop("regressed", False),
                pass_mark=0.5, graded=scores, threshold=kw.pop("threshold", 0.2),
                status=kw.pop("status", VerdictStatus.STEADY), **kw)


def incident(**kw) -> Incident:
    return Incident(state=kw.pop("state", State.OPEN), remembered=kw.pop("remembered", CASES),
                    before=kw.pop("before", {c: Level(0.7, 0.9, 5) for c in CASES}),
                    noise=kw.pop("noise", 0.2), window_runs=5, **kw)


def test_back_is_the_shortfall_within_half_the_threshold_with_its_bound_under_it():
    # 10 cases at 0.7 before, judge threshold 20 %: delta = 0.14, half of it 0.07
    assert back(incident(), seen(dict.fromkeys(CASES, 0.7)))            # level reached: se 0.069, 0 + 0.089 ≤ 0.14
    assert not back(incident(), seen(dict.fromkeys(CASES, 0.6)))        # shortfall 0.10 > 0.07
    assert not back(incident(), seen(dict.fromkeys(CASES, 0.64)))       # 0.06 ≤ 0.07, but 0.06 + 0.089 > 0.14
    three = [Past(f"p{i}", False, False, dict.fromkeys(CASES, 0.64)) for i in range(2)]
    assert back(incident(past=three), seen(dict.fromkeys(CASES, 0.64)))  # three runs: se 0.046, 0.06 + 0.059 ≤ 0.14
    assert back(incident(noise=0.0), seen(dict.fromkeys(CASES, 0.64)))  # a deterministic suite: one run is enough


def test_back_needs_a_clean_verdict_and_every_remembered_case_graded():
    good = dict.fromkeys(CASES, 0.9)
    assert not back(incident(), seen(good, regressed=True))
    assert not back(incident(), seen(good, significant_drop=True))
    assert back(incident(), seen(good, significant_drop=True, ablation=True))  # its cases' shortfall decides
    assert not back(incident(), seen({c: 0.9 for c in CASES[1:]}))      # c0 errored: no evidence
    assert back(incident(), seen({c: 0.9 for c in CASES[1:]}, ran=frozenset(CASES[1:])))  # c0 gone from the suite
    assert not back(incident(), seen(good, status=VerdictStatus.BELOW_FLOOR))
    assert back(incident(), seen(good, status=VerdictStatus.BELOW_FLOOR, ablation=True))  # a floor is the suite's
    floor = incident(cause=Cause.FLOOR)
    assert back(floor, seen(good)) and not back(floor, seen(good, at_floor=False))


def test_back_with_the_lesson_reads_the_runs_that_had_it():
    lessoned = [Past("p1", False, True, dict.fromkeys(CASES, 0.3)), Past("p2", False, False, dict.fromkeys(CASES, 0.7))]
    inc = incident(past=lessoned, noise=0.0)
    assert back(inc, seen(dict.fromkeys(CASES, 0.7)))                  # clean: this run (and p2) back
    assert back(inc, seen(dict.fromkeys(CASES, 0.7), lesson=True), lesson=True)  # j = 1 already back
    # to hold, the estimate is enough (holding retires nothing); to resolve, its bound must be too
    one = dict.fromkeys(CASES, 0.64)
    assert back(incident(), seen(one, lesson=True), lesson=True) and not back(incident(), seen(one))


def test_a_case_joins_only_when_it_fails_consistently():
    before = {"x": Level(1.0, 1.0, 5)}                                  # passed in all 5 window runs: rate 1/7
    fulls = [Past(f"p{i}", False, False, {"x": 0.1}) for i in range(2)]
    inc = incident(remembered=[], before={}, past=fulls, window=before)
    assert joining(inc, seen({"x": 0.1})) == ["x"]                      # 3 of 3: (1/7)^3 = 0.003 ≤ 1 %
    two = incident(remembered=[], before={}, past=fulls[:1], window=before)
    assert joining(two, seen({"x": 0.1})) == []                         # 2 of 2: 0.02 > 1 %
    flaky = incident(remembered=[], before={}, past=fulls, window={"x": Level(0.5, 0.6, 5)})
    assert joining(flaky, seen({"x": 0.1})) == []                       # it failed 2 of 5 before: 3 of 3 is no news
    assert joining(inc, seen({"x": 0.1}, full=False)) == []             # never on a partial run
    assert abs(binomial_tail(3, 3, 1 / 7) - (1 / 7) ** 3) < 1e-12


def test_the_table():
    assert transition(None, seen({}, regressed=True)) == Step("open", State.OPEN)
    assert transition(None, seen({}, status=VerdictStatus.BELOW_FLOOR)) == Step("open", State.OPEN)
    assert transition(None, seen({}, regressed=True, ablation=True)).action is None  # an ablation opens nothing
    held = incident(state=State.HELD, noise=0.0)
    assert transition(held, seen(dict.fromkeys(CASES, 0.9), regressed=True)).action == "release"
    assert transition(held, seen(dict.fromkeys(CASES, 0.9), lesson=True)) == Step("keep", State.HELD)
    assert transition(held, seen(dict.fromkeys(CASES, 0.2), ablation=True, full=False)) == Step("ablated", State.HELD)
    assert transition(held, seen(dict.fromkeys(CASES, 0.9), ablation=True, full=False)).action == "resolve"
    opened = incident(noise=0.0)
    assert transition(opened, seen(dict.fromkeys(CASES, 0.9), lesson=True)).action == "hold"
    assert transition(opened, seen(dict.fromkeys(CASES, 0.9))).action == "resolve"
    promoted = incident(state=State.PROMOTED, noise=0.0)
    assert transition(promoted, seen(dict.fromkeys(CASES, 0.9))).action == "resolve"
    assert transition(promoted, seen(dict.fromkeys(CASES, 0.2), regressed=True)).state is State.OPEN
    floor = incident(state=State.OPEN, cause=Cause.FLOOR)
    assert transition(floor, seen(dict.fromkeys(CASES, 0.2), regressed=True)).escalate


def test_what_keeps_runs_out_of_the_baseline_and_when_an_ablation_is_due():
    assert keeps_out(incident()) and keeps_out(incident(state=State.PROMOTED))
    assert keeps_out(incident(state=State.HELD, cause=Cause.FLOOR))
    assert not keeps_out(incident(cause=Cause.FLOOR)) and not keeps_out(incident(state=State.RESOLVED))
    held = Step("keep", State.HELD)
    run = seen(dict.fromkeys([*CASES, "other"], 0.9), lesson=True)
    assert ablation_cases(incident(state=State.HELD), run, held, 1) == CASES
    assert ablation_cases(incident(state=State.HELD, cause=Cause.FLOOR), run, held, 1) == sorted([*CASES, "other"])
    just = incident(state=State.HELD, past=[Past("a", True, False, {})])
    assert ablation_cases(just, run, held, 2) == [] and ablation_cases(just, run, held, 1) == CASES
    assert ablation_cases(incident(state=State.HELD), run, held, 0) == []


def test_levels_and_noise_of_a_window():
    window = [{"a": 1.0, "b": 0.2}, {"a": 0.6, "b": 0.4}, {"b": 0.3}]
    got = levels(window, ["a", "b", "c"], 0.5)
    assert set(got) == {"a", "b"} and (got["a"].passed, got["a"].runs, got["b"].passed, got["b"].runs) == (1, 2, 0, 3)
    assert abs(got["a"].mean - 0.8) < 1e-12 and abs(got["b"].mean - 0.3) < 1e-12
    assert abs(noise(window, ["a", "b"]) - ((0.08 + 0.02) / 3) ** 0.5) < 1e-12
