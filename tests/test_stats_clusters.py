"""Questions of one conversation are not independent: intervals resample whole conversations and
the paired test flips whole conversations, so 10 conversations are not treated as 200 samples."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sp

from evalloop.verdicts import stats


def clustered(n_clusters: int = 10, per: int = 20, seed: int = 1) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    level = rng.uniform(0.1, 0.9, n_clusters)  # each conversation has its own difficulty
    values = np.concatenate([(rng.random(per) < p).astype(float) for p in level])
    return values, [f"conv-{i}" for i in range(n_clusters) for _ in range(per)]


def test_the_cluster_interval_is_wider_than_the_independent_one_when_clusters_differ():
    values, clusters = clustered()
    iid = stats.bootstrap_ci(values, method="percentile")
    cluster = stats.bootstrap_ci(values, clusters=clusters, method="percentile")
    assert cluster is not None and iid is not None and cluster.method.startswith("cluster")
    assert cluster.low <= values.mean() <= cluster.high
    assert (cluster.high - cluster.low) > 1.5 * (iid.high - iid.low)


def test_one_case_per_cluster_is_the_ordinary_bootstrap():
    values = np.random.default_rng(3).random(40)
    plain = stats.bootstrap_ci(values, method="percentile", seed=7)
    per_case = stats.bootstrap_ci(values, clusters=[str(i) for i in range(40)], method="percentile", seed=7)
    assert per_case.low == pytest.approx(plain.low, abs=0.02) and per_case.high == pytest.approx(plain.high, abs=0.02)


def test_the_cluster_paired_test_flips_whole_conversations_as_scipy_does_on_their_sums():
    x, clusters = clustered(seed=2)
    rng = np.random.default_rng(5)
    y = np.clip(x - (rng.random(x.size) < 0.15), 0, 1)
    result = stats.paired_permutation_test(x, y, clusters=clusters)
    sums_x = np.array([x[i * 20:(i + 1) * 20].sum() for i in range(10)])
    sums_y = np.array([y[i * 20:(i + 1) * 20].sum() for i in range(10)])
    ref = sp.permutation_test((sums_x, sums_y), lambda a, b: np.mean(a - b), permutation_type="samples",
                              n_resamples=np.inf, alternative="two-sided")
    assert result.p_value == pytest.approx(ref.pvalue)
    assert result.test.startswith("cluster") and result.statistic == pytest.approx(float(np.mean(x - y)))
    naive = stats.paired_permutation_test(x, y)
    assert result.p_value > naive.p_value  # 10 conversations carry less evidence than 200 questions
