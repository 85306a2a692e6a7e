"""Speed of evalloop.verdicts.stats beside SciPy on the same data, measured side by side in one run.

Target: a paired permutation test with 10,000 permutations over 1,000 cases in under 0.5 s.
Usage: ``python bench/stats_bench.py [--cases 1000] [--permutations 10000] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy import stats as sp

from evalloop.verdicts import stats


def _best(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _mean_diff(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(a - b, axis=axis)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    a = parser.parse_args()
    rng = np.random.default_rng(42)
    base = rng.beta(6, 2, size=a.cases)
    cur = base - 0.01 + rng.normal(0, 0.2, size=a.cases)  # a small drop: p near 0.1
    n, r = a.cases, a.repeats

    rows = []
    t_ours, ours = _best(
        lambda: stats.paired_permutation_test(cur, base, permutations=a.permutations), r
    )
    t_sp, ref = _best(
        lambda: sp.permutation_test(
            (cur, base), _mean_diff, permutation_type="samples", vectorized=True,
            n_resamples=a.permutations, random_state=0,
        ), r,
    )
    rows.append(("paired permutation", t_ours, t_sp, ours.p_value, ref.pvalue))

    t_ours, ci = _best(lambda: stats.bootstrap_ci(cur, resamples=a.permutations), r)
    t_sp, ref_ci = _best(
        lambda: sp.bootstrap((cur,), np.mean, n_resamples=a.permutations, random_state=0), r
    )
    rows.append(("bootstrap CI (BCa)", t_ours, t_sp, ci.low if ci else None,
                 ref_ci.confidence_interval.low))

    x = (rng.random(n) < 0.8).astype(float)
    y = np.where(rng.random(n) < 0.03, 1 - x, x)
    b = int(((x == 1) & (y == 0)).sum())
    c = int(((x == 0) & (y == 1)).sum())
    t_ours, mc = _best(lambda: stats.mcnemar_exact(x, y), r)
    t_sp, ref_mc = _best(lambda: sp.binomtest(b, b + c, 0.5), r)
    rows.append(("McNemar exact", t_ours, t_sp, mc.p_value, ref_mc.pvalue))

    print(f"{n} cases, {a.permutations} permutations/resamples, best of {r} runs")
    print(f"{'what':<20} {'evalloop s':>11} {'scipy s':>9} {'scipy/ours':>11} "
          f"{'evalloop':>10} {'scipy':>10}")
    for name, t1, t2, v1, v2 in rows:
        print(f"{name:<20} {t1:11.4f} {t2:9.4f} {t2 / t1:10.1f}x {v1:10.4g} {v2:10.4g}")
    perm = rows[0][1]
    verdict = "meets" if perm < 0.5 else "misses"
    print(f"permutation test: {perm:.3f} s ({verdict} the 0.5 s target)")


if __name__ == "__main__":
    main()
