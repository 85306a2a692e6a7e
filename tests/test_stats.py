"""evalloop.verdicts.stats agrees with SciPy within Monte-Carlo tolerance; calibration maths holds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sp

from evalloop.verdicts import power, stats


def _mean_diff(a, b, axis=-1):
    return np.mean(a - b, axis=axis)


def _scipy_perm(x, y, alternative, resamples=10_000):
    return sp.permutation_test(
        (x, y), _mean_diff, permutation_type="samples", vectorized=True,
        alternative=alternative, n_resamples=resamples, random_state=1,
    ).pvalue


@pytest.fixture
def paired() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    base = rng.beta(6, 2, size=60)
    cur = np.clip(base - 0.04 + rng.normal(0, 0.15, size=60), 0, 1)
    return cur, base


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_permutation_matches_scipy_monte_carlo(paired, alternative):
    x, y = paired
    ours = stats.paired_permutation_test(x, y, alternative=alternative, permutations=20_000)
    ref = _scipy_perm(x, y, alternative, 20_000)
    # both are Monte-Carlo estimates: allow 4 standard errors of their difference
    se = math.sqrt(2 * ref * (1 - ref) / 20_000) * (2 if alternative == "two-sided" else 1)
    assert not ours.exact and ours.resamples == 20_000 and ours.n == 60
    assert abs(ours.p_value - ref) <= 4 * se + 1e-3
    assert ours.statistic == pytest.approx(float(np.mean(x - y)))


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_permutation_exact_enumeration_equals_scipy(paired, alternative):
    x, y = paired[0][:11], paired[1][:11]
    ours = stats.paired_permutation_test(x, y, alternative=alternative)
    ref = _scipy_perm(x, y, alternative)  # SciPy enumerates all 2**11 patterns too
    assert ours.exact and ours.resamples == 2**11
    assert ours.p_value == pytest.approx(ref, abs=1e-12)


def test_permutation_exact_ignores_zero_pairs_and_handles_ties():
    x = np.array([1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1] * 3, dtype=float)
    y = np.array([1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0] * 3, dtype=float)
    ours = stats.paired_permutation_test(x, y, alternative="less")
    assert ours.exact and ours.n_nonzero == 12
    b, c = 3, 9  # improved pairs, worsened pairs
    assert ours.p_value == pytest.approx(sp.binomtest(b, b + c, 0.5, alternative="less").pvalue)


def test_permutation_all_equal_gives_p_one_and_seed_is_reproducible(paired):
    x, _ = paired
    assert stats.paired_permutation_test(x, x).p_value == 1.0
    a = stats.paired_permutation_test(*paired, permutations=5_000, seed=9)
    b = stats.paired_permutation_test(*paired, permutations=5_000, seed=9)
    assert a == b


def test_permutation_p_value_is_smoothed_and_detects_a_clear_drop():
    rng = np.random.default_rng(0)
    y = rng.uniform(0.6, 1.0, size=200)
    res = stats.paired_permutation_test(y - 0.3, y + rng.normal(0, 0.01, 200),
                                        alternative="less", permutations=1_000)
    assert res.p_value == pytest.approx(1 / 1001)


def test_permutation_rejects_unpaired_or_nan():
    with pytest.raises(ValueError, match="paired"):
        stats.paired_permutation_test([0.1, 0.2], [0.3])
    with pytest.raises(ValueError, match="NaN"):
        stats.paired_permutation_test([0.1, float("nan")], [0.3, 0.2])


@pytest.mark.parametrize("method", ["BCa", "percentile"])
def test_bootstrap_matches_scipy(method):
    x = np.random.default_rng(5).beta(2, 3, size=40)
    ours = stats.bootstrap_ci(x, method=method, resamples=20_000)
    ref = sp.bootstrap((x,), np.mean, method=method, n_resamples=20_000,
                       random_state=2).confidence_interval
    assert ours is not None and ours.level == 0.95
    width = ref.high - ref.low
    assert abs(ours.low - ref.low) < 0.05 * width
    assert abs(ours.high - ref.high) < 0.05 * width
    assert ours.low < float(x.mean()) < ours.high


@given(st.lists(st.floats(-1e9, 1e9), min_size=1, max_size=300),
       st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4))
def test_the_interval_quantiles_are_numpys_to_the_bit(values, qs):
    """The bootstrap interval's own quantiles (one sort, no numpy.ma import) equal np.quantile's
    default linear method exactly, ties, one value and the ends included."""
    data = np.array(values)
    assert stats.linear_quantiles(data, qs) == tuple(float(x) for x in np.quantile(data, qs))


def test_bootstrap_degenerate_inputs():
    assert stats.bootstrap_ci([0.7]) is None
    ci = stats.bootstrap_ci([1.0, 1.0, 1.0])
    assert ci is not None and ci.low == ci.high == 1.0


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_mcnemar_matches_binomtest(alternative):
    rng = np.random.default_rng(11)
    y = (rng.random(80) < 0.8).astype(float)
    x = np.where(rng.random(80) < 0.15, 1 - y, y)
    x[:6] = 0.0
    b = int(((x == 1) & (y == 0)).sum())
    c = int(((x == 0) & (y == 1)).sum())
    ours = stats.mcnemar_exact(x, y, alternative=alternative)
    ref = sp.binomtest(b, b + c, 0.5, alternative=alternative).pvalue
    assert ours.n_nonzero == b + c and ours.p_value == pytest.approx(ref, rel=1e-12)


def test_mcnemar_without_discordant_pairs_and_bad_values():
    assert stats.mcnemar_exact([1, 0, 1], [1, 0, 1]).p_value == 1.0
    with pytest.raises(ValueError, match="pass/fail"):
        stats.mcnemar_exact([0.5, 1], [1, 1])


def test_effect_size_and_stars():
    assert stats.paired_effect_size([0.5, 0.7, 0.9], [0.6, 0.7, 1.0]) == pytest.approx(
        (-0.2 / 3) / np.std([-0.1, 0.0, -0.1], ddof=1)
    )
    assert stats.paired_effect_size([0.5, 0.6], [0.5, 0.6]) == 0.0
    assert stats.paired_effect_size([0.5, 0.6], [0.4, 0.5]) is None  # constant shift
    assert stats.paired_effect_size([0.5], [0.4]) is None
    assert [stats.stars(p) for p in (0.0005, 0.001, 0.005, 0.04, 0.05, None)] == [
        "***", "**", "**", "*", "", ""
    ]


def test_suggest_threshold_keeps_false_alarms_at_the_rate():
    rng = np.random.default_rng(8)
    n, sd, window, reps = 50, 0.2, 5, 20_000
    q = rng.uniform(0.4, 0.8, size=n)  # far from 0 and 1: no clipping
    thr = power.suggest_threshold(n, sd, float(q.mean()), false_alarm_rate=0.05, window=window)
    runs = q + rng.normal(0, sd, size=(reps, window + 1, n))
    means = runs.mean(axis=2)
    baseline = means[:, :window].mean(axis=1)
    drop = (baseline - means[:, window]) / baseline
    assert 0.04 <= float(np.mean(drop >= thr)) <= 0.06
    assert power.suggest_threshold(50, 0.2, 0.0) is None


def test_minimal_detectable_drop_shrinks_with_size_and_has_exact_floor():
    m20, m50, m200 = (power.minimal_detectable_drop(n, 0.8) for n in (20, 50, 200))
    assert m20 > m50 > m200 > 0
    # a perfectly stable pass/fail suite: at least 6 of 10 cases must flip (two-sided 0.05),
    # and since each case flips at random more are needed for 90 % power
    assert 0.6 <= power.minimal_detectable_drop(10, 1.0) < 1.0
    assert power.minimal_detectable_drop(10, 1.0, power=0.01) == pytest.approx(0.6)
    assert power.minimal_detectable_drop(50, 0.0) is None
    assert power.minimal_detectable_drop(2, 0.5) is None  # hopeless: even a total drop hides
    assert power.minimal_detectable_drop(50, 0.7, case_sd=0.2, min_effect=0.3) > 0.3


def test_calibrate_estimates_noise_and_threshold():
    rng = np.random.default_rng(4)
    q = rng.uniform(0.4, 0.8, size=(40, 1))
    scores = q + rng.normal(0, 0.1, size=(40, 5))
    cal = power.calibrate(scores, false_alarm_rate=0.05)
    assert cal.n_cases == 40 and cal.repeats == 5 and not cal.binary
    assert len(cal.per_case_variance) == 40
    assert cal.noise_sd == pytest.approx(0.1, rel=0.2)
    assert cal.suggested_threshold == pytest.approx(
        power.suggest_threshold(40, cal.noise_sd, cal.mean), rel=1e-12
    )
    assert cal.minimal_detectable_drop is not None and cal.minimal_detectable_drop > 0
    binary = power.calibrate((rng.random((30, 4)) < 0.9).astype(float))
    assert binary.binary and binary.minimal_detectable_drop >= 6 / (30 * binary.mean) - 1e-12
    with pytest.raises(ValueError, match="repeats"):
        power.calibrate([[0.5], [0.6]])


@given(st.floats(0.0, 50.0, exclude_min=True), st.integers(1, 80))
def test_smallest_accepted_brackets_the_point_where_a_monotone_test_turns_true(cut, steps):
    """The one bisection behind the t quantile, the CUSUM limit and the minimal detectable drop:
    the answer is accepted, and within ``50 / 2**steps`` above the point where acceptance starts."""
    calls = []

    def accepts(x: float) -> bool:
        calls.append(x)
        return x >= cut

    found = stats.smallest_accepted(accepts, 0.0, 50.0, steps=steps)
    assert found >= cut
    assert found - cut <= 50.0 / 2**steps + 1e-12
    assert len(calls) == steps


def test_smallest_accepted_stops_early_within_its_tolerance():
    calls = []

    def accepts(x: float) -> bool:
        calls.append(x)
        return x >= 0.3

    found = stats.smallest_accepted(accepts, 0.0, 1.0, steps=200, rel_tol=1e-9)
    assert found == pytest.approx(0.3, abs=1e-9)
    assert len(calls) < 40
