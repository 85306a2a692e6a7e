"""evalloop.verdicts.verdict: one vocabulary, the evidence rule, watches, case sets, baseline 0, controls."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats as sp

from evalloop.verdicts import runlabel
from evalloop.verdicts.verdict import VerdictPolicy, VerdictStatus, count_flips, decide

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


def test_invalid_runs_carry_their_reason():
    current, window = _suite()
    v = decide(current, window, POLICY, valid=False, invalid_reason="judge: 5/10 grades errored")
    assert v.status is VerdictStatus.INVALID and not v.is_regression and v.status.fails
    assert v.reason == "judge: 5/10 grades errored"
    empty = decide({"a": float("nan")}, window, POLICY)
    assert empty.status is VerdictStatus.INVALID and "no scored cases" in empty.reason


def test_one_vocabulary_and_what_fails():
    assert {s.value for s in VerdictStatus} == {
        "improved", "steady", "watch", "regressed", "below floor", "no baseline yet", "invalid run",
        "scorer broken", "skipped"}
    assert {s for s in VerdictStatus if s.fails} == {
        VerdictStatus.REGRESSED, VerdictStatus.SCORER_BROKEN, VerdictStatus.INVALID, VerdictStatus.BELOW_FLOOR}
    assert [s for s in VerdictStatus if s.is_regression] == [VerdictStatus.REGRESSED]
    # verdicts stored by older versions read in the one vocabulary
    assert VerdictStatus.parse("regressed (not significant)") is VerdictStatus.WATCH
    assert VerdictStatus.parse(None) is None


@pytest.mark.parametrize(("base", "cur"), [(0.6, 0.51), (0.3, 0.255), (0.8, 0.68)])
def test_drop_at_threshold_without_evidence_is_a_watch_never_a_regression(base, cur):
    for rule in ("evidence", "threshold", "paired"):
        v = decide({"a": cur}, [{"a": base}], POLICY.model_copy(update={"rule": rule}))
        assert v.drop == pytest.approx(0.15) and v.threshold_met
        assert v.status is VerdictStatus.WATCH and not v.is_regression and not v.status.fails
        assert "not significant" in v.reason


def test_significant_drop_is_regressed_with_stars():
    current, window = _suite(n=40, drop=0.25)
    v = decide(current, window, POLICY)
    assert v.status is VerdictStatus.REGRESSED and v.is_regression
    assert v.drop is not None and v.drop > 0.15
    assert v.p_value is not None and v.p_value < 0.001 and v.stars == "***"
    assert v.n_paired == 40 and v.n_unpaired == 0 and v.window_runs == 5
    assert v.effect_size is not None and v.effect_size < -1
    assert v.test is not None and v.test.startswith("run-label permutation")
    assert v.drop_ci_low < v.drop < v.drop_ci_high
    assert "Significant drop" in v.reason


def test_significant_drop_well_under_the_threshold_is_a_watch():
    # 2,000 cases make a 3 % drop certain, but the data rule out a drop of the threshold's size
    current, window = _suite(n=2000, drop=0.03, sd=0.05, seed=7)
    v = decide(current, window, POLICY.model_copy(update={"permutations": 1000, "resamples": 200}))
    assert v.p_value < 0.01 and v.drop_ci_high < 0.15
    assert v.status is VerdictStatus.WATCH and "not shown to reach the 15% threshold" in v.reason


def test_p_value_is_the_run_label_permutation_test():
    # the verdict's p-value against the test written out from its definition (not the function
    # the verdict calls): per case, which of its k + 1 scores is "current" is a random label.
    # Pass/fail cases with skewed pass rates, where the run-label test and a sign flip of
    # x - ȳ disagree (0.28 against 0.14 here), and a one-sided test would give 0.95.
    rng = np.random.default_rng(2)
    q = rng.beta(4, 1, size=30)
    window = [_cases((rng.uniform(size=30) < q).astype(float)) for _ in range(5)]
    current = _cases((rng.uniform(size=30) < q * 0.85).astype(float))
    v = decide(current, window, POLICY.model_copy(update={"permutations": 40_000}))
    ids = sorted(current)
    scores = np.array([[current[c], *(run[c] for run in window)] for c in ids])  # cases × (1 + k)
    n, k = scores.shape[0], scores.shape[1] - 1
    total = scores.sum(axis=1)

    def statistic(chosen: np.ndarray) -> np.ndarray:  # mean over cases of the chosen score minus the others' mean
        return np.mean(chosen - (total - chosen) / k, axis=-1)

    observed = statistic(scores[:, 0])
    labels = np.random.default_rng(12345).integers(0, k + 1, size=(40_000, n))
    null = statistic(scores[np.arange(n), labels])
    reference = min(1.0, 2 * min(np.mean(null <= observed + 1e-9), np.mean(null >= observed - 1e-9)))
    assert 0.2 < reference < 0.4  # the data are the ones described above
    assert v.p_value == pytest.approx(reference, abs=0.02)


def test_run_label_test_with_one_earlier_run_is_the_sign_flip_test():
    rng = np.random.default_rng(2)
    x, y = rng.uniform(size=30), rng.uniform(size=30)
    a = runlabel.run_label_permutation_test(x, y[:, None], permutations=20_000, seed=1)
    ref = sp.permutation_test(
        (x, y), lambda u, v, axis: np.mean(u - v, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=20_000, random_state=0).pvalue
    assert abs(a.p_value - ref) < 0.02


def test_run_label_test_keeps_its_level_on_skewed_pass_fail_cases():
    """Sign flips of x − ȳ are not symmetric for Beta(4,1) pass rates over 5 runs; the run-label
    permutation is exact: its rejection rate stays under alpha."""
    rng = np.random.default_rng(0)
    rejections = 0
    trials = 300
    for t in range(trials):
        p = rng.beta(4, 1, size=20)
        w = (rng.random((20, 5)) < p[:, None]).astype(float)
        x = (rng.random(20) < p).astype(float)
        rejections += runlabel.run_label_permutation_test(x, w, permutations=1000, seed=t).p_value < 0.05
    assert rejections / trials <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / trials)


def test_rise_is_improved_and_small_change_is_steady():
    current, window = _suite(n=30, drop=-0.2)
    assert decide(current, window, POLICY).status is VerdictStatus.IMPROVED
    current, window = _suite(n=30, drop=0.0)
    steady = decide(current, window, POLICY)
    assert steady.status is VerdictStatus.STEADY and not steady.threshold_met


def test_baseline_zero():
    flat = decide({"a": 0.0, "b": 0.0}, [{"a": 0.0, "b": 0.0}, {"a": 0.0}], POLICY)
    assert flat.status is VerdictStatus.STEADY and flat.drop is None and flat.baseline_mean == 0.0
    # 0 → 0.9 on 20 cases is a real, significant rise: improved, never "steady"
    rise = decide(_cases([0.9] * 20), [_cases([0.0] * 20)] * 3, POLICY)
    assert rise.p_value < 0.001 and rise.status is VerdictStatus.IMPROVED
    # a baseline of 0.01 then 0/20: a 100 % relative drop of one case, not significant
    tiny = decide(_cases([0.0] * 20), [_cases([0.2] + [0.0] * 19)], POLICY)
    assert tiny.drop == pytest.approx(1.0) and tiny.p_value == 1.0
    assert tiny.status is VerdictStatus.WATCH and not tiny.is_regression


def test_added_cases_are_reported_apart_and_never_look_like_a_drop():
    old = _cases([1.0] * 10)
    harder = {f"hard{i}": 0.0 for i in range(10)}
    v = decide({**old, **harder}, [old] * 5, POLICY)
    assert v.status is VerdictStatus.STEADY and v.drop == 0.0
    assert v.current_mean == pytest.approx(0.5) and v.shared_mean == 1.0 and v.baseline_mean == 1.0
    assert (v.added, v.added_mean, v.removed) == (10, 0.0, 0)
    assert v.n_paired == 10 and "10 added" in v.reason


def test_replaced_cases_compare_on_the_shared_ones():
    window = [{**_cases([1.0] * 15), **{f"old{i}": 1.0 for i in range(5)}}] * 3
    current = {**_cases([1.0] * 15), **{f"new{i}": 0.0 for i in range(5)}}
    v = decide(current, window, POLICY)
    assert v.status is VerdictStatus.STEADY and v.n_paired == 15
    assert (v.added, v.added_mean, v.removed, v.removed_mean) == (5, 0.0, 5, 1.0)
    none_shared = decide({"x": 1.0}, [{"y": 1.0}], POLICY)
    assert none_shared.status is VerdictStatus.NO_BASELINE and "new cases" in none_shared.reason


def test_window_means_are_taken_per_shared_case():
    current = {"a": 0.5, "b": 0.6, "new": 0.9}
    window = [{}, {"a": 0.7, "b": 0.8, "gone": 0.1}, {"a": 0.7, "b": 0.6, "gone": 0.3}]
    v = decide(current, window, POLICY)
    assert v.window_runs == 2 and v.n_paired == 2 and (v.added, v.removed) == (1, 1)
    assert v.baseline_mean == pytest.approx(np.mean([0.7, 0.7]))
    assert v.shared_mean == pytest.approx(0.55)


def test_pass_fail_flipped_cases_are_listed():
    base = [1.0] * 30 + [0.0] * 10
    cur = [0.0] * 9 + [1.0] * 21 + [1.0] + [0.0] * 9  # 9 newly failing, 1 newly passing
    v = decide(_cases(cur), [_cases(base)] * 3, POLICY.model_copy(update={"threshold": 0.1}))
    assert v.binary
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
    ok = decide({**current, "neg": 0.1}, window, POLICY, known_bad={"neg"})
    assert ok.status is not VerdictStatus.SCORER_BROKEN and ok.n_current == 20
    broken = decide({**current, "neg": 0.9}, window, POLICY, known_bad={"neg"})
    assert broken.status is VerdictStatus.SCORER_BROKEN and broken.status.fails
    assert broken.broken_controls == ["neg"] and "known-bad" in broken.reason


def test_rules_differ_in_how_big_a_significant_drop_must_be():
    current, window = _suite(n=100, drop=0.10, sd=0.05, seed=3)
    evidence = decide(current, window, POLICY.model_copy(update={"threshold": 0.2}))
    adr = decide(current, window, POLICY.model_copy(update={"threshold": 0.2, "rule": "threshold"}))
    paired = decide(current, window, POLICY.model_copy(update={"threshold": 0.2, "rule": "paired"}))
    assert adr.p_value < 0.001 and adr.drop == pytest.approx(0.10, abs=0.03)
    assert adr.status is VerdictStatus.WATCH  # significant, but under the ADR's 20 %
    assert paired.status is VerdictStatus.REGRESSED  # at least a third of 20 %
    # the evidence rule: 100 stable cases pin the drop near 10 %, well short of 20 %
    assert evidence.drop_ci_high < 0.2 and evidence.status is VerdictStatus.WATCH


def test_minimal_detectable_drop_is_reported_and_includes_the_rule_floor():
    current, window = _suite(n=50, sd=0.2, seed=11)
    v = decide(current, window, POLICY.model_copy(update={"threshold": 0.2}))
    assert v.mdd is not None and 0 < v.mdd < 1
    big = decide(*_suite(n=2000, sd=0.2, seed=11), POLICY.model_copy(
        update={"threshold": 0.2, "permutations": 500, "resamples": 200}))
    paired = decide(*_suite(n=2000, sd=0.2, seed=11), POLICY.model_copy(
        update={"threshold": 0.2, "rule": "paired", "permutations": 500, "resamples": 200}))
    # never below what the rule itself asks for: the evidence rule needs the drop to be at least
    # the threshold with 95 % confidence, so its MDD is above the threshold and nears it as n grows
    assert 0.2 < big.mdd < v.mdd
    assert 0.2 / 3 <= paired.mdd < v.mdd


def test_policy_validation_and_defaults():
    p = VerdictPolicy(threshold=0.15)
    assert p.rule == "evidence" and p.alpha == 0.05 and p.permutations == 10_000
    assert p.effective_min_effect == pytest.approx(0.05)
    with pytest.raises(ValidationError):
        VerdictPolicy(threshold=0)
    with pytest.raises(ValidationError, match="require_significance is retired"):
        VerdictPolicy(threshold=0.1, require_significance=True)
