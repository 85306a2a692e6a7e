"""A run's verdict on a scoped suite (issue #26 item 6): the questions of one conversation are not
independent, so the run's 95 % CI resamples whole scopes, the drop's test moves whole scopes
between runs, and the drop's lower bound and standard error are cluster-robust.

A suite has scopes when every graded case carries a ``scope:<id>`` tag and there are at least two
scopes; otherwise the verdict is as before (cases independent)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from evalloop import load_settings, run_suite
from evalloop.history import HistoryStore
from evalloop.verdicts import stats
from evalloop.verdicts.drop import cluster_se, drop_bounds, t_quantile
from evalloop.verdicts.verdict import VerdictPolicy, VerdictStatus, decide, standardized_drop
from support.project import make_project, write_answers

POLICY = VerdictPolicy(threshold=0.05, permutations=4_000, resamples=2_000)
SCOPES, PER = 6, 20


def scoped_ids() -> tuple[list[str], dict[str, str]]:
    ids = [f"q{k}-{i:02d}" for k in range(SCOPES) for i in range(PER)]
    return ids, {c: f"conv{c[1]}" for c in ids}


def clustered_run(level: np.ndarray, rng: np.random.Generator, scope_sd: float,
                  case_sd: float = 0.01) -> np.ndarray:
    """One run's scores: each scope moves together (its memory was built well or badly this
    run), each case adds a little noise of its own."""
    shift = np.repeat(rng.normal(0.0, scope_sd, SCOPES), PER)
    return np.clip(level + shift + rng.normal(0.0, case_sd, level.size), 0.0, 1.0)


def as_map(ids: list[str], values: np.ndarray) -> dict[str, float]:
    return {c: float(v) for c, v in zip(ids, values, strict=True)}


# -- the run verdict ------------------------------------------------------------------------

# per-scope change of the current run: the mean falls by 3 points, but two of six scopes rose
SHIFTS = np.repeat([-0.12, -0.08, -0.06, 0.05, -0.03, 0.04], PER)


def _planted(seed: int = 0) -> tuple[list[str], dict[str, str], dict[str, float], list[dict[str, float]]]:
    ids, scopes = scoped_ids()
    rng = np.random.default_rng(seed)
    level = np.repeat(rng.uniform(0.5, 0.8, SCOPES), PER) + rng.normal(0, 0.03, SCOPES * PER)
    window = [as_map(ids, np.clip(level + rng.normal(0, 0.01, level.size), 0, 1))]
    current = as_map(ids, np.clip(level + SHIFTS + rng.normal(0, 0.01, level.size), 0, 1))
    return ids, scopes, current, window


def test_a_drop_significant_only_if_cases_were_independent_is_not_significant_by_scope():
    ids, scopes, current, window = _planted()
    iid = decide(current, window, POLICY)
    assert iid.p_value < 0.001 and iid.significant_drop  # 120 "independent" cases
    by_scope = decide(current, window, POLICY, scopes=scopes)
    # six conversations, four down and two up: a sign flip of whole conversations sees 2**6 patterns
    sums = np.array([sum(current[c] - window[0][c] for c in ids if scopes[c] == f"conv{k}")
                     for k in range(SCOPES)])
    ref = sp.permutation_test((sums, np.zeros(SCOPES)), lambda a, b: np.mean(a - b),
                              permutation_type="samples", n_resamples=np.inf, alternative="two-sided")
    assert by_scope.p_value == pytest.approx(ref.pvalue)
    assert by_scope.p_value > 0.05 and not by_scope.significant_drop
    assert by_scope.status is not VerdictStatus.REGRESSED
    assert "by scope" in by_scope.test and "6 scopes" in by_scope.reason
    # the bound of the drop is wider too: cluster-robust, with 5 degrees of freedom
    assert by_scope.drop_ci_low < iid.drop_ci_low and by_scope.drop_ci_high > iid.drop_ci_high
    assert 0 < by_scope.z < iid.z
    assert by_scope.mdd > iid.mdd  # what the run could catch is smaller evidence too


def test_what_a_run_can_catch_needs_enough_scopes():
    from evalloop.verdicts.drop import minimal_detectable_drop

    iid = minimal_detectable_drop(120, 0.7, 0.01, 1.0, POLICY, binary=False)
    assert minimal_detectable_drop(120, 0.7, 0.01, 1.0, POLICY, binary=False, scopes=6) > iid
    assert minimal_detectable_drop(120, 0.7, 0.01, 1.0, POLICY, binary=False, scopes=6,
                                   design_effect=8.0) > minimal_detectable_drop(
        120, 0.7, 0.01, 1.0, POLICY, binary=False, scopes=6)
    # four scopes and one earlier run: 2**4 labellings, the smallest two-sided p is 1/8
    assert minimal_detectable_drop(120, 0.7, 0.01, 1.0, POLICY, binary=False, scopes=4) is None
    assert minimal_detectable_drop(120, 0.7, 0.01, 5.0, POLICY, binary=False, scopes=4) is not None


def test_the_interval_of_the_mean_resamples_scopes():
    ids, scopes, current, window = _planted()
    iid = decide(current, window, POLICY)
    by_scope = decide(current, window, POLICY, scopes=scopes)
    assert iid.ci_method == "BCa" and iid.scopes is None
    assert by_scope.ci_method == "cluster BCa" and by_scope.scopes == SCOPES
    values = np.array(list(current.values()))
    ref = stats.bootstrap_ci(values[np.argsort(ids)], clusters=[scopes[c] for c in sorted(ids)],
                             resamples=2_000, seed=POLICY.seed)
    assert (by_scope.ci_low, by_scope.ci_high) == pytest.approx((ref.low, ref.high))
    assert by_scope.ci_high - by_scope.ci_low > 3 * (iid.ci_high - iid.ci_low)


def test_without_scopes_on_every_case_one_scope_or_a_scope_per_case_nothing_changes():
    ids, scopes, current, window = _planted()
    iid = decide(current, window, POLICY)
    partial = dict(scopes)
    partial.pop(ids[0])
    one = {c: "conv0" for c in ids}
    per_question = {c: c for c in ids}  # LongMemEval: every question its own haystack
    for labels in (partial, one, per_question, {}):
        v = decide(current, window, POLICY, scopes=labels)
        assert (v.p_value, v.ci_low, v.ci_high, v.drop_ci_low, v.z, v.test) == \
               (iid.p_value, iid.ci_low, iid.ci_high, iid.drop_ci_low, iid.z, iid.test)
        assert v.scopes is None


def test_a_drop_every_scope_shares_is_still_a_regression_by_scope():
    ids, scopes = scoped_ids()
    rng = np.random.default_rng(4)
    level = np.repeat(rng.uniform(0.6, 0.8, SCOPES), PER)
    window = [as_map(ids, clustered_run(level, rng, 0.01)) for _ in range(5)]
    current = as_map(ids, clustered_run(level * 0.7, rng, 0.01))
    v = decide(current, window, POLICY, scopes=scopes)
    assert v.status is VerdictStatus.REGRESSED and "by scope" in v.test and v.p_value < 0.01


def test_false_alarms_keep_their_level_when_run_noise_moves_whole_scopes():
    """Nothing changed, but each run builds each conversation's memory anew: whole scopes move
    together from run to run. Cases-as-independent raises false alarms most of the time; by
    scope the test keeps its 5 % level."""
    ids, scopes = scoped_ids()
    rng = np.random.default_rng(11)
    level = np.repeat(rng.uniform(0.5, 0.8, SCOPES), PER)
    policy = VerdictPolicy(threshold=0.05, permutations=1_000, resamples=200)
    iid_alarms = scope_alarms = 0
    sims = 120
    for _ in range(sims):
        window = [as_map(ids, clustered_run(level, rng, 0.05)) for _ in range(2)]
        current = as_map(ids, clustered_run(level, rng, 0.05))
        iid_alarms += decide(current, window, policy).p_value < 0.05
        scope_alarms += decide(current, window, policy, scopes=scopes).p_value < 0.05
    assert iid_alarms / sims > 0.5
    assert scope_alarms / sims < 0.1


def test_the_interval_covers_the_population_mean_by_scope():
    """Conversations of a population with mean 0.65: the interval by scope covers it about as
    often as it says; the one over cases misses most of the time."""
    rng = np.random.default_rng(5)
    ids = [f"q{k}-{i:02d}" for k in range(12) for i in range(PER)]
    scopes = {c: c.split("-")[0] for c in ids}
    policy = VerdictPolicy(threshold=0.05, resamples=500)
    covered = {"iid": 0, "scope": 0}
    sims = 150
    for _ in range(sims):
        values = np.repeat(rng.normal(0.65, 0.12, 12), PER) + rng.normal(0, 0.05, 12 * PER)
        current = as_map(ids, values)
        for name, labels in (("iid", None), ("scope", scopes)):
            v = decide(current, [], policy, scopes=labels)
            covered[name] += v.ci_low <= 0.65 <= v.ci_high
    assert covered["iid"] / sims < 0.6
    assert covered["scope"] / sims > 0.85


# -- one bound of the drop, one standard error ------------------------------------------------

def test_t_quantile_is_students():
    for df in (1, 2, 3, 5, 9, 30):
        for p in (0.9, 0.95, 0.975, 0.995):
            assert t_quantile(p, df) == pytest.approx(sp.t.ppf(p, df), rel=1e-6)


def test_cluster_se_is_cr1_and_equals_the_iid_one_with_one_case_per_cluster():
    rng = np.random.default_rng(2)
    d = rng.normal(0, 1, 30)
    assert cluster_se(d, None) == pytest.approx(float(d.std(ddof=1)) / np.sqrt(d.size))
    assert cluster_se(d, np.arange(30)) == pytest.approx(float(d.std(ddof=1)) / np.sqrt(d.size))
    groups = np.repeat(np.arange(6), 5)
    shifted = d + np.repeat([3.0, -2.0, 1.0, -3.0, 2.5, -1.5], 5)  # scopes that move together
    sums = np.bincount(groups, weights=shifted - shifted.mean())
    assert cluster_se(shifted, groups) == pytest.approx(np.sqrt(6 / 5 * np.sum(sums**2)) / d.size)
    assert cluster_se(shifted, groups) > 1.5 * cluster_se(shifted, None)
    # scopes whose sums agree by chance claim no more precision than independent cases
    balanced = np.tile([1.0, -1.0], 15)
    assert cluster_se(balanced, groups) == pytest.approx(cluster_se(balanced, None))


def test_drop_bounds_iid_is_the_normal_bound_and_by_scope_uses_t():
    rng = np.random.default_rng(3)
    d = rng.normal(-0.05, 0.1, 60)
    low, high = drop_bounds(d, 0.8, 0.95)
    se = float(d.std(ddof=1)) / np.sqrt(60)
    assert low == pytest.approx((-d.mean() - sp.norm.ppf(0.95) * se) / 0.8)
    assert high == pytest.approx((-d.mean() + sp.norm.ppf(0.95) * se) / 0.8)
    groups = np.repeat(np.arange(6), 10)
    low_c, _ = drop_bounds(d, 0.8, 0.95, groups)
    assert low_c == pytest.approx((-d.mean() - sp.t.ppf(0.95, 5) * cluster_se(d, groups)) / 0.8)
    assert drop_bounds(d, 0.0, 0.95) == (None, None)


def test_standardized_drop_uses_the_cluster_se():
    d = np.repeat([-0.1, -0.05, 0.02, -0.08, 0.0, -0.03], 10)
    groups = np.repeat(np.arange(6), 10)
    assert standardized_drop(d, 0.0, 1.0, groups) == pytest.approx(-d.mean() / cluster_se(d, groups))
    iid = standardized_drop(d, 0.0, 1.0)
    assert iid == pytest.approx(-d.mean() / (d.std(ddof=1) / np.sqrt(d.size)))
    assert iid > 2 * standardized_drop(d, 0.0, 1.0, groups)  # 6 scopes are less evidence than 60 cases


# -- through real runs: the scopes come from the stored cases' tags ---------------------------

def scoped_suite(name: str) -> dict:
    ids, scopes = scoped_ids()
    return {"name": name, "target": "sut:controlled", "scorers": ["value"],
            "cases": [{"id": c, "input": {"id": c}, "tags": [f"scope:{scopes[c]}", "qa"]} for c in ids]}


def test_a_scoped_suite_is_judged_by_scope_and_old_runs_still_read(tmp_path, answers):
    root = make_project(tmp_path, {"convs": scoped_suite("convs")})
    ids, scopes, current, window = _planted()
    write_answers(answers, window[0])
    run_suite("convs", settings=load_settings(root))
    write_answers(answers, current)
    report = run_suite("convs", settings=load_settings(root))
    s = report.comparison.scorers[0]
    ev = s.evidence
    assert ev.scopes == SCOPES and ev.ci_method == "cluster BCa" and "by scope" in ev.test
    assert ev.p_value > 0.05 and s.verdict in ("steady", "watch") and not s.fails
    store = HistoryStore(load_settings(root).database_url)
    stored = store.summaries(report.executed.run.id)["value"].details["evidence"]
    assert stored["scopes"] == SCOPES and stored["ci_method"] == "cluster BCa"
    from rich.console import Console

    from evalloop.report.terminal import print_run

    for width in (80, 140):
        console = Console(width=width, record=True, color_system=None)
        print_run(report, console)
        text = console.export_text()
        assert "95% CI and p by scope (6 scopes)" in " ".join(text.split())
        assert max(len(line) for line in text.splitlines()) <= width


# -- the run-label test by scope ------------------------------------------------------------

def test_the_run_label_test_by_scope_enumerates_one_run_per_scope():
    """Three scopes, a window of two runs: 3**3 labellings, each scope's cases moving together."""
    import itertools

    from evalloop.verdicts.runlabel import run_label_permutation_test

    rng = np.random.default_rng(8)
    groups = np.repeat([0, 1, 2], [4, 5, 3])
    scores = rng.random((12, 3))  # column 0: this run
    result = run_label_permutation_test(scores[:, 0], scores[:, 1:], clusters=groups, alternative="less")

    def statistic(labels):  # each case: the labelled run's score minus the mean of its other two
        pick = np.array([labels[g] for g in groups])
        own = scores[np.arange(12), pick]
        return float(np.mean(own - (scores.sum(axis=1) - own) / 2))

    observed = statistic((0, 0, 0))
    null = [statistic(labels) for labels in itertools.product(range(3), repeat=3)]
    assert result.exact and result.resamples == 27
    assert result.statistic == pytest.approx(observed)
    assert result.p_value == pytest.approx(np.mean(np.array(null) <= observed + 1e-12))


def test_a_case_missing_from_one_window_run_keeps_the_p_value_honest():
    """A case not graded in one run of the window (an errored grade) is no evidence of a change:
    the p-value stays what it is with that cell filled (it was 0.0002 whatever the scores)."""
    from evalloop.verdicts.runlabel import run_label_permutation_test

    rng = np.random.default_rng(0)
    x, w = rng.random(50), rng.random((50, 3))
    full = run_label_permutation_test(x, w).p_value
    w[0, 1] = np.nan
    assert full > 0.2 and run_label_permutation_test(x, w).p_value > 0.2
    groups = np.repeat(np.arange(5), 10)
    assert run_label_permutation_test(x, w, clusters=groups).p_value > 0.2


@pytest.mark.parametrize("scoped", [False, True])
def test_a_slow_drift_is_judged_with_the_same_bound_and_test(tmp_path, answers, scoped):
    """Nights that each drop 1 %: against the reference of the first good runs the drop adds up.
    Cases as independent, night 14 shows it (as before); by scope, six scopes with noise of their
    own cases only do not show it yet (t with 5 degrees of freedom, one run label per scope)."""
    ids, scopes = scoped_ids()
    suite = {"name": "d", "target": "sut:controlled", "scorers": [{"name": "value", "threshold": 0.08}],
             "cases": [{"id": c, "input": {"id": c}, **({"tags": [f"scope:{scopes[c]}"]} if scoped else {})}
                       for c in ids]}
    root = make_project(tmp_path, {"d": suite})
    rng = np.random.default_rng(2)
    level = rng.uniform(0.5, 0.8, len(ids))
    reasons = []
    for night in range(15):
        values = np.clip(level * (1.0 if night < 5 else 1 - 0.01 * (night - 4)) + rng.normal(0, 0.08, len(ids)), 0, 1)
        write_answers(answers, as_map(ids, values))
        reasons.append(run_suite("d", settings=load_settings(root)).comparison.scorers[0].reason)
    drifted = [n for n, r in enumerate(reasons) if r.startswith("Slow drift")]
    assert drifted == ([] if scoped else [14])


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_the_run_label_test_by_scope_is_exact_enumeration_of_scope_labels(data):
    """Any small suite: scopes of any sizes, windows of 1–3 runs with missing cells: the p-value is
    the share of labellings (one run per scope, among the runs that graded all its cases) whose
    statistic is at most the observed one."""
    import itertools

    from evalloop.verdicts.runlabel import run_label_permutation_test

    n_scopes = data.draw(st.integers(2, 4))
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=n_scopes, max_size=n_scopes))
    runs = data.draw(st.integers(1, 3))
    groups = np.repeat(np.arange(n_scopes), sizes)
    n = groups.size
    cell = st.sampled_from([0.0, 0.25, 0.5, 1.0])
    x = np.array(data.draw(st.lists(cell, min_size=n, max_size=n)))
    w = np.array(data.draw(st.lists(st.lists(st.one_of(cell, st.just(np.nan)), min_size=runs, max_size=runs),
                                    min_size=n, max_size=n)))
    w[np.isnan(w).all(axis=1), 0] = 0.5  # every case graded at least once in the window
    result = run_label_permutation_test(x, w, clusters=groups, alternative="less", permutations=10_000)
    scores = np.concatenate([x[:, None], w], axis=1)
    graded = ~np.isnan(scores)
    k = graded.sum(axis=1) - 1

    def statistic(labels) -> float:
        pick = np.array([labels[g] for g in groups])
        own = scores[np.arange(n), pick]
        rest = np.where(graded, scores, 0.0).sum(axis=1) - own
        return float(np.mean(own - rest / k))

    choices = [[j for j in range(runs + 1) if graded[groups == g, j].all()] for g in range(n_scopes)]
    null = np.array([statistic(labels) for labels in itertools.product(*choices)])
    observed = statistic((0,) * n_scopes)
    assert result.statistic == pytest.approx(observed)
    assert result.p_value == pytest.approx(float(np.mean(null <= observed + 1e-9)))


def test_one_errored_grade_in_the_window_does_not_make_every_change_significant(tmp_path, answers):
    """A case whose grade errored in one earlier run leaves a hole in the window. The test read
    the hole as a NaN tolerance: p = 0.0002 for any change, so a 2 % dip was a `watch` (and kept
    out of later baselines)."""
    suite = {"name": "s", "target": "sut:controlled", "scorers": ["value"],
             "cases": [{"id": f"c{i}", "input": {"id": f"c{i}"}} for i in range(20)]}
    root = make_project(tmp_path, {"s": suite})
    rng = np.random.default_rng(0)
    level = rng.uniform(0.6, 0.9, 20)
    verdicts = []
    for night in range(4):
        values: dict = {f"c{i}": float(v) for i, v in enumerate(np.clip(level + rng.normal(0, 0.05, 20), 0, 1))}
        if night == 1:
            values["c0"] = "not a number"  # the scorer raises: an errored grade
        write_answers(answers, values)
        verdicts.append(run_suite("s", settings=load_settings(root)).comparison.scorers[0])
    assert verdicts[1].errored == 1
    assert [v.verdict for v in verdicts[2:]] == ["steady", "steady"]
    assert all(v.evidence.p_value > 0.2 for v in verdicts[2:])
