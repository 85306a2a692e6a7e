"""evalloop.verdict: statuses, ADR threshold semantics, paired evidence, flaky and control cases."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats as sp

from evalloop import stats
from evalloop.verdict import VerdictPolicy, VerdictStatus, count_flips, decide

POLICY = VerdictPolicy(threshold=0.15, permutations=4_000, resamples=2_000)


def _cases(values, prefix="c"):
    return {f"{prefix}{i}": float(v) for i, v in enumerate(values)}


def _suite(n=40, seed=0, sd=0.05, drop=0.0, runs=5):
    """A window of ``runs`` runs and a current run whose quality fell by ``drop``."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.6, 0.9, size=n)
    window = [_cases(np.clip(q + rng.normal(0, sd, n), 0, 1)) for _ in range(runs)]
    current = _cases(np.clip(q * (1 - drop) + rng.normal(0, sd, n), 0, 1))
    return current, window


def test_no_baseline_still_reports_mean_and_ci():
    current = _cases([0.2, 0.4, 0.6, 0.8])
    v = decide(current, [], POLICY)
    assert v.status is VerdictStatus.NO_BASELINE and not v.is_regression
    assert v.current_mean == pytest.approx(0.5)
    assert v.ci_low is not None and v.ci_low < 0.5 < v.ci_high
    assert v.baseline_mean is None and v.drop is None and v.window_runs == 0
    assert "No earlier valid run" in v.reason


def test_invalid_runs():
    current, window = _suite()
    v = decide(current, window, POLICY, valid=False)
    assert v.status is VerdictStatus.INVALID and not v.is_regression
    empty = decide({"a": float("nan")}, window, POLICY)
    assert empty.status is VerdictStatus.INVALID and "no scored cases" in empty.reason


@pytest.mark.parametrize(("base", "cur"), [(0.6, 0.51), (0.3, 0.255), (0.8, 0.68)])
def test_drop_exactly_at_threshold_counts(base, cur):
    v = decide({"a": cur}, [{"a": base}], POLICY)
    assert v.drop == pytest.approx(0.15)
    assert v.threshold_met and v.is_regression
    assert v.status is VerdictStatus.REGRESSED_NS  # one case cannot be significant


def test_significant_drop_is_regressed_with_stars():
    current, window = _suite(n=40, drop=0.25)
    v = decide(current, window, POLICY)
    assert v.status is VerdictStatus.REGRESSED and v.is_regression
    assert v.drop is not None and v.drop > 0.15
    assert v.p_value is not None and v.p_value < 0.001 and v.stars == "***"
    assert v.n_paired == 40 and v.n_unpaired == 0 and v.window_runs == 5
    assert v.effect_size is not None and v.effect_size < -1
    assert v.test is not None and v.test.startswith("paired permutation")
    assert "significant" in v.reason


def test_verdict_p_value_is_the_paired_test_on_window_means():
    current, window = _suite(n=40, drop=0.05, sd=0.1)
    v = decide(current, window, POLICY)
    ids = sorted(current)
    x = [current[c] for c in ids]
    y = [np.mean([run[c] for run in window]) for c in ids]
    direct = stats.paired_permutation_test(x, y, permutations=4_000, seed=0)
    assert v.p_value == pytest.approx(direct.p_value)
    ref = sp.permutation_test(
        (np.array(x), np.array(y)), lambda a, b, axis: np.mean(a - b, axis=axis),
        permutation_type="samples", vectorized=True, n_resamples=4_000, random_state=0,
    ).pvalue
    assert abs(v.p_value - ref) < 0.03


def test_noisy_drop_is_not_significant_and_require_significance_clears_it():
    current = {"a": 0.2, "b": 0.9, "c": 0.8}
    window = [{"a": 0.9, "b": 0.8, "c": 0.9}, {"a": 0.8, "b": 0.9, "c": 0.7}]
    v = decide(current, window, POLICY)
    assert v.threshold_met and v.status is VerdictStatus.REGRESSED_NS and v.is_regression
    strict = decide(current, window, POLICY.model_copy(update={"require_significance": True}))
    assert strict.status is VerdictStatus.REGRESSED_NS and not strict.is_regression
    assert "not significant" in strict.reason


def test_rise_is_improved_and_small_change_is_steady():
    current, window = _suite(n=30, drop=-0.2)
    assert decide(current, window, POLICY).status is VerdictStatus.IMPROVED
    current, window = _suite(n=30, drop=0.02)
    steady = decide(current, window, POLICY)
    assert steady.status is VerdictStatus.STEADY and not steady.threshold_met


def test_zero_baseline_never_raises_or_gives_nan():
    v = decide({"a": 0.0, "b": 0.0}, [{"a": 0.0, "b": 0.0}, {"a": 0.0}], POLICY)
    assert v.status is VerdictStatus.STEADY and v.drop is None and v.baseline_mean == 0.0
    assert "undefined" in v.reason and v.p_value == 1.0
    up = decide({"a": 0.5, "b": 0.4}, [{"a": 0.0, "b": 0.0}], POLICY)
    assert up.drop is None and up.status is VerdictStatus.STEADY
    paired = decide({"a": 0.5, "b": 0.4}, [{"a": 0.0, "b": 0.0}],
                    POLICY.model_copy(update={"rule": "paired"}))
    assert paired.paired_drop is None and not paired.is_regression


def test_only_shared_cases_are_paired_and_empty_runs_are_ignored():
    current = {"a": 0.5, "b": 0.6, "new": 0.9}
    window = [{}, {"a": 0.7, "b": 0.8, "gone": 0.1}, {"a": 0.7, "b": 0.6, "gone": 0.3}]
    v = decide(current, window, POLICY)
    assert v.window_runs == 2 and v.n_paired == 2 and v.n_unpaired == 2
    # ADR baseline: mean of the run means
    run_means = [np.mean([0.7, 0.8, 0.1]), np.mean([0.7, 0.6, 0.3])]
    assert v.baseline_mean == pytest.approx(np.mean(run_means))
    assert "2 unpaired" in v.reason


def test_pass_fail_uses_mcnemar_and_lists_flipped_cases():
    base = [1.0] * 30 + [0.0] * 10
    cur = [0.0] * 9 + [1.0] * 21 + [1.0] + [0.0] * 9  # 9 newly failing, 1 newly passing
    window = [_cases(base)] * 3
    v = decide(_cases(cur), window, POLICY.model_copy(update={"threshold": 0.1}))
    assert v.binary and v.test is not None and v.test.startswith("McNemar exact")
    assert v.p_value == pytest.approx(sp.binomtest(1, 10, 0.5).pvalue)
    assert v.newly_failing == [f"c{i}" for i in range(9)]
    assert v.newly_passing == ["c30"]
    assert v.status is VerdictStatus.REGRESSED


def test_flaky_cases_are_listed_and_quarantined_when_asked():
    stable = {f"s{i}": 1.0 for i in range(20)}
    window = [{**stable, "f": float(i % 2)} for i in range(5)]  # f flips 4 times
    current = {**stable, "f": 1.0}
    listed = decide(current, window, POLICY)
    assert listed.flaky == ["f"] and listed.quarantined == [] and listed.n_current == 21
    q = decide(current, window, POLICY.model_copy(update={"quarantine_flaky": True}))
    assert q.quarantined == ["f"] and q.n_current == 20 and q.current_mean == 1.0
    assert "flaky quarantined" in q.reason
    assert count_flips([{"x": 1.0}, {"x": 0.2}, {}, {"x": 0.9}], 0.5) == {"x": 2}


def test_known_bad_controls():
    current, window = _suite(n=20)
    bad_failing = {**current, "neg": 0.1}
    ok = decide(bad_failing, window, POLICY, known_bad={"neg"})
    assert ok.status is not VerdictStatus.SCORER_BROKEN and ok.n_current == 20
    broken = decide({**current, "neg": 0.9}, window, POLICY, known_bad={"neg"})
    assert broken.status is VerdictStatus.SCORER_BROKEN and not broken.is_regression
    assert broken.broken_controls == ["neg"] and "known-bad" in broken.reason


def test_paired_rule_needs_evidence_and_size():
    paired = POLICY.model_copy(update={"rule": "paired", "threshold": 0.2})
    # a real 10 % drop on 100 stable cases: below the ADR threshold, caught by the paired rule
    current, window = _suite(n=100, drop=0.10, sd=0.05, seed=3)
    adr = decide(current, window, POLICY.model_copy(update={"threshold": 0.2}))
    v = decide(current, window, paired)
    assert adr.status is VerdictStatus.STEADY
    assert v.status is VerdictStatus.REGRESSED and v.is_regression and v.rule == "paired"
    assert v.paired_drop == pytest.approx(0.10, abs=0.03)
    # significant but smaller than the minimum effect (a third of 20 %): steady
    current, window = _suite(n=200, drop=0.03, sd=0.02, seed=4)
    small = decide(current, window, paired)
    assert small.p_value < 0.05 and small.status is VerdictStatus.STEADY
    # past the threshold without evidence: reported, but not a regression
    noisy = decide({"a": 0.2, "b": 0.9, "c": 0.8}, [{"a": 0.9, "b": 0.8, "c": 0.9}], paired)
    assert noisy.status is VerdictStatus.REGRESSED_NS and not noisy.is_regression
    rise = decide(*_suite(n=60, drop=-0.15, seed=5), paired)
    assert rise.status is VerdictStatus.IMPROVED


def test_policy_validation_and_defaults():
    p = VerdictPolicy(threshold=0.15)
    assert p.rule == "threshold" and p.alpha == 0.05 and p.permutations == 10_000
    assert p.effective_min_effect == pytest.approx(0.05)
    with pytest.raises(ValidationError):
        VerdictPolicy(threshold=0)
