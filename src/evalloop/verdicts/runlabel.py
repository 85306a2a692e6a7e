"""The run-label permutation test: a run against the runs before it, case by case or scope by scope.

Under "nothing changed" the runs of a suite are exchangeable, so which of a case's k + 1 scores
is this run's is a random label. The test draws that label per case; with clusters (the
``scope:<id>`` a question comes from) it draws one label per scope for all its cases at once,
since run-to-run noise moves a conversation's questions together (one memory built per
conversation and run). Exact enumeration when the labellings are few, else Monte-Carlo with
+1 smoothing. Helpers shared with the other tests are in :mod:`evalloop.verdicts.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from evalloop.verdicts.arrays import Floats, Ints, Mask
from evalloop.verdicts.stats import (
    _BLOCK_ROWS,
    _CHUNK_CELLS,
    EXACT_LIMIT,
    Alternative,
    TestResult,
    _p_values,
    _pick,
    _rng,
    _vector,
    cluster_codes,
)


def _active(candidates: Floats, valid: Mask) -> tuple[float, Floats, Ints]:
    """Rows whose valid candidates differ (the others carry no information: their term is
    fixed), each row's valid candidates first, and how many each has: (fixed sum, rows, counts)."""
    masked = np.where(valid, candidates, np.nan)
    active = (np.nanmax(masked, axis=1) - np.nanmin(masked, axis=1)) > 1e-12
    fixed = float(candidates[~active, 0].sum())
    ok = valid[active]
    order = np.argsort(~ok, axis=1, kind="stable")
    rows = np.take_along_axis(np.where(valid, candidates, 0.0)[active], order, axis=1)
    return fixed, rows, ok.sum(axis=1)


def _null_sums(cand: Floats, choices: Ints, permutations: int,
               rng: np.random.Generator, *, exact: bool) -> tuple[Floats, bool]:
    """The statistic's sum under relabelling: with ``exact``, every labelling when there are at
    most ``permutations`` of them, else ``permutations`` random ones (and ``False``)."""
    m = cand.shape[0]
    idx_rows = np.arange(m)
    total = math.prod(int(c) for c in choices) if exact and m <= 64 else None
    if total is not None and total <= min(permutations, 2**EXACT_LIMIT):
        radix = np.cumprod(np.concatenate([[1], choices[:-1]])).astype(np.int64)
        out = np.empty(total)
        rows = max(1, _CHUNK_CELLS // max(m, 1))
        for start in range(0, total, rows):
            stop = min(total, start + rows)
            pick = (np.arange(start, stop, dtype=np.int64)[:, None] // radix) % choices
            out[start:stop] = cand[idx_rows, pick].sum(axis=1)
        return out, True
    out = np.empty(permutations)
    rows = max(1, _CHUNK_CELLS // m)
    for start in range(0, permutations, rows):
        stop = min(permutations, start + rows)
        pick = (rng.random((stop - start, m)) * choices).astype(np.int64)
        out[start:stop] = cand[idx_rows, pick].sum(axis=1)
    return out, False


def run_label_permutation_test(
    current: ArrayLike,
    window: ArrayLike,
    *,
    alternative: Alternative = "two-sided",
    permutations: int = 10_000,
    seed: int | np.random.Generator = 0,
    budget: int = 20_000_000,
    clusters: Sequence[Hashable] | Ints | None = None,
) -> TestResult:
    """Permutation test of a run against the runs before it, case by case.

    ``current`` holds one score per case; ``window`` is cases × runs, NaN where a run did not
    grade the case (every case needs at least one window score). The statistic is
    ``mean_c(x_c − ȳ_c)``, the current score minus the case's mean over the window. Under the
    null hypothesis (nothing changed) a case's k + 1 scores are exchangeable across runs, so
    the null distribution draws, independently per case, which of its k + 1 runs is "current".
    Unlike a sign flip of ``x − ȳ``, this stays exact when the differences are not symmetric
    (pass/fail cases with skewed pass rates, windows of several runs); with one earlier run it
    *is* the sign-flip test. Monte-Carlo with +1 smoothing; ``budget`` caps cases × permutations.

    With ``clusters`` (one label per case) the draw is one run per cluster, the same for all
    its cases, among the runs that graded every one of them (with one earlier run: the sign flip
    of whole clusters' summed differences). Exact when there are at most ``permutations``
    labellings.
    """
    x = _vector(current, "current")
    w = np.asarray(window, dtype=np.float64)
    if w.ndim == 1:
        w = w[:, None]
    if w.shape[0] != x.size:
        raise ValueError(f"window must have one row per case: {w.shape[0]} != {x.size}")
    n = x.size
    name = "run-label permutation" if clusters is None else "cluster run-label permutation"
    if n == 0:
        return TestResult(test=name, alternative=alternative, statistic=0.0,
                          p_value=1.0, n=0, n_nonzero=0, exact=True, resamples=1)
    codes = None if clusters is None else cluster_codes(clusters, n)
    groups = 0 if codes is None else int(codes.max()) + 1
    sums = np.zeros((groups, w.shape[1] + 1))
    missing = np.zeros((groups, w.shape[1] + 1))
    observed = 0.0
    fixed = 0.0
    blocks: list[Floats] = []
    counts: list[Ints] = []
    # built in blocks of rows, so the whole-run temporaries stay small at 100k cases
    for lo in range(0, n, _BLOCK_ROWS):
        hi = min(n, lo + _BLOCK_ROWS)
        xb, wb = x[lo:hi], w[lo:hi]
        pb = ~np.isnan(wb)
        kb = pb.sum(axis=1)
        if np.any(kb == 0):
            raise ValueError("every case needs at least one score in the window")
        total = np.where(pb, wb, 0.0).sum(axis=1) + xb
        # candidates[c, j]: the statistic's term for case c when run j plays "current" (j = 0 is
        # the actual current run), i.e. s_j − mean(other scores) = ((k + 1)·s_j − total) / k
        scores = np.concatenate([xb[:, None], np.where(pb, wb, 0.0)], axis=1)
        candidates = ((kb[:, None] + 1) * scores - total[:, None]) / kb[:, None]
        valid = np.concatenate([np.ones((hi - lo, 1), dtype=bool), pb], axis=1)
        observed += float(candidates[:, 0].sum())
        if codes is not None:  # a cluster's term for run j: its cases' terms summed
            cb = codes[lo:hi]
            for j in range(valid.shape[1]):
                sums[:, j] += np.bincount(cb, weights=np.where(valid[:, j], candidates[:, j], 0.0),
                                          minlength=groups)
                missing[:, j] += np.bincount(cb, weights=(~valid[:, j]).astype(np.float64), minlength=groups)
            continue
        part, rows, choice = _active(candidates, valid)
        fixed += part
        blocks.append(rows)
        counts.append(choice)
    if codes is not None:
        fixed, cand, choices = _active(sums, missing == 0)
    else:
        cand = np.concatenate(blocks) if blocks else np.empty((0, w.shape[1] + 1))
        choices = np.concatenate(counts) if counts else np.empty(0, dtype=np.int64)
    del blocks, counts
    observed /= n
    if cand.shape[0] == 0:
        return TestResult(test=name, alternative=alternative, statistic=observed, p_value=1.0,
                          n=n, n_nonzero=0, exact=True, resamples=1)
    m = cand.shape[0]
    permutations = max(1, min(permutations, budget // max(m, 1)))
    # by case the test stays Monte-Carlo as it always was; by cluster the labellings are often few
    null, exact = _null_sums(cand, choices, permutations, _rng(seed), exact=codes is not None)
    null = (null + fixed) / n
    tol = 1e-9 * (1.0 + float(np.abs(cand).sum()) / n)
    p_less, p_greater = _p_values(null, observed, tol, smooth=not exact)
    return TestResult(
        test=name, alternative=alternative, statistic=observed,
        p_value=_pick(alternative, p_less, p_greater), n=n, n_nonzero=m, exact=exact,
        resamples=int(null.size),
    )
