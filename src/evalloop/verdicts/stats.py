"""Statistics for verdicts: bootstrap CIs, paired permutation and McNemar tests, effect sizes.

Everything is vectorised NumPy and seeded (``numpy.random.Generator``), so the same inputs give
the same answer. Monte-Carlo p-values use +1 smoothing, ``(hits + 1) / (resamples + 1)``; exact
enumeration is used when the number of non-zero paired differences is small. What a suite can
detect (thresholds, minimal detectable drops, judge-noise calibration) is :mod:`evalloop.verdicts.power`;
the test of a run against its window is :mod:`evalloop.verdicts.runlabel`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict

Alternative = Literal["two-sided", "less", "greater"]
_NORMAL = NormalDist()
_BLOCK_ROWS = 8192  # rows per block when the test's per-case matrices are built
_CHUNK_CELLS = 500_000  # cells of a resample matrix built at once (4 MB of float64)
EXACT_MAX_NONZERO = 16  # enumerate all 2**k sign patterns up to this many non-zero pairs
EXACT_LIMIT = 22  # never enumerate more than 2**22 patterns


class ConfidenceInterval(BaseModel):
    """A two-sided confidence interval of a mean."""

    model_config = ConfigDict(frozen=True)

    low: float
    high: float
    level: float
    method: str


class TestResult(BaseModel):
    """The outcome of a hypothesis test on paired per-case scores."""

    model_config = ConfigDict(frozen=True)
    __test__ = False  # not a pytest class

    test: str
    alternative: Alternative
    statistic: float
    p_value: float
    n: int
    n_nonzero: int
    exact: bool
    resamples: int


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _vector(values: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def stars(p_value: float | None) -> str:
    """``***`` below 0.001, ``**`` below 0.01, ``*`` below 0.05, else an empty string."""
    if p_value is None or not math.isfinite(p_value):
        return ""
    return "***" if p_value < 0.001 else "**" if p_value < 0.01 else "*" if p_value < 0.05 else ""


def cluster_codes(clusters: Sequence[Hashable] | NDArray[np.int64], n: int) -> NDArray[np.int64]:
    """One code per value, 0 … G − 1 with clusters numbered in first-seen order (labels of any
    hashable kind; an integer array is coded without a Python loop)."""
    if len(clusters) != n:
        raise ValueError(f"one cluster per value: {len(clusters)} clusters for {n} values")
    if isinstance(clusters, np.ndarray):
        _, first, codes = np.unique(clusters, return_index=True, return_inverse=True)
        rank = np.empty(first.size, dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(first.size)
        return rank[codes.ravel()]
    index: dict[Hashable, int] = {}
    return np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.int64, count=n)


def cluster_sums(values: ArrayLike, clusters: Sequence[Hashable] | NDArray[np.int64]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-cluster sums of ``values`` and per-cluster counts, clusters in first-seen order."""
    x = _vector(values, "values")
    codes = cluster_codes(clusters, x.size)
    groups = int(codes.max()) + 1 if codes.size else 0
    sums = np.asarray(np.bincount(codes, weights=x, minlength=groups), dtype=np.float64)
    return sums, np.bincount(codes, minlength=groups).astype(np.float64)


def bootstrap_ci(
    values: ArrayLike,
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    method: Literal["BCa", "percentile"] = "BCa",
    seed: int | np.random.Generator = 0,
    clusters: Sequence[Hashable] | NDArray[np.int64] | None = None,
) -> ConfidenceInterval | None:
    """Bootstrap CI of the mean of ``values`` (BCa by default, as ``scipy.stats.bootstrap``).

    With ``clusters`` (one label per value: the conversation a question comes from) whole
    clusters are resampled and the mean is the ratio of resampled sums to resampled counts (the
    cluster bootstrap; its BCa acceleration comes from leaving one cluster out), so questions of
    one conversation are not counted as independent evidence. Returns ``None`` for fewer than
    two values (or clusters); a constant sample gives a zero-width interval.
    """
    x = _vector(values, "values")
    if clusters is not None:
        sums, counts = cluster_sums(x, clusters)
    else:
        sums, counts = x, np.ones_like(x)
    n = sums.size
    if n < 2:
        return None
    theta = float(x.mean())
    label = f"cluster {method}" if clusters is not None else method
    if np.ptp(x) == 0:
        return ConfidenceInterval(low=theta, high=theta, level=level, method=label)
    rng = _rng(seed)
    boot = np.empty(resamples)
    rows = max(1, _CHUNK_CELLS // n)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        idx = rng.integers(0, n, size=(stop - start, n))
        boot[start:stop] = (x[idx].mean(axis=1) if clusters is None
                            else sums[idx].sum(axis=1) / counts[idx].sum(axis=1))
    low, high = _interval(boot, theta, (sums.sum() - sums) / (counts.sum() - counts), level, method)
    return ConfidenceInterval(low=low, high=high, level=level, method=label)


def _interval(boot: NDArray[np.float64], theta: float, jack: NDArray[np.float64], level: float,
              method: str) -> tuple[float, float]:
    """Percentile or BCa bounds from bootstrap means and leave-one-out (jackknife) means."""
    resamples = boot.size
    tail = (1.0 - level) / 2.0
    if method == "percentile":
        qs = (tail, 1.0 - tail)
    else:
        share = float(np.count_nonzero(boot < theta) + np.count_nonzero(boot <= theta)) / (2 * resamples)
        share = min(max(share, 0.5 / resamples), 1.0 - 0.5 / resamples)
        z0 = _NORMAL.inv_cdf(share)
        dev = jack.mean() - jack
        den = 6.0 * float(np.sum(dev**2)) ** 1.5
        accel = float(np.sum(dev**3)) / den if den > 0 else 0.0
        qs_list = []
        for q in (tail, 1.0 - tail):
            zq = z0 + _NORMAL.inv_cdf(q)
            qs_list.append(_NORMAL.cdf(z0 + zq / (1.0 - accel * zq)))
        qs = (qs_list[0], qs_list[1])
    low, high = linear_quantiles(boot, qs)
    return low, high


def smallest_accepted(accepts: Callable[[float], bool], low: float, high: float, *, steps: int,
                      rel_tol: float = 0.0) -> float:
    """The smallest ``x`` in ``(low, high]`` that ``accepts`` takes, by bisection: ``accepts`` must
    be monotone (false below some point, true from it on) and true at ``high``. ``steps`` halvings
    of the interval, fewer once it is within ``rel_tol`` of ``max(1, x)``; the answer is the upper
    end, a value ``accepts`` takes (or ``high`` itself)."""
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (low, mid) if accepts(mid) else (mid, high)
        if high - low <= rel_tol * max(1.0, high):
            break
    return high


def linear_quantiles(values: NDArray[np.float64], qs: Sequence[float]) -> tuple[float, ...]:
    """``np.quantile(values, qs)`` with its default (linear) method, to the bit, from one sort.

    NumPy's own path finds its interpolation indexes with ``np.unique``, which imports
    ``numpy.ma`` (≈ 5 ms of every run's first interval) for two numbers."""
    ordered = np.sort(values, axis=None)
    last = ordered.size - 1
    out = []
    for q in qs:
        at = last * q
        below = min(max(math.floor(at), 0), last)
        a, b = float(ordered[below]), float(ordered[min(below + 1, last)])
        t = at - below
        # NumPy's _lerp: from the nearer end, so t = 1 gives b exactly
        out.append(b - (b - a) * (1.0 - t) if t >= 0.5 else a + (b - a) * t)
    return tuple(out)


def _sign_flip_sums(
    nonzero: NDArray[np.float64], resamples: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Sums of ``nonzero`` under ``resamples`` random sign patterns (bit-packed, chunked)."""
    k = nonzero.size
    total = float(nonzero.sum())
    out = np.empty(resamples)
    rows = max(1, _CHUNK_CELLS // k)
    nbytes = (k + 7) // 8
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        packed = rng.integers(0, 256, size=(stop - start, nbytes), dtype=np.uint8)
        flips = np.unpackbits(packed, axis=1, count=k).astype(np.float64)
        out[start:stop] = total - 2.0 * (flips @ nonzero)
    return out


def _exact_sign_flip_sums(nonzero: NDArray[np.float64]) -> NDArray[np.float64]:
    """Sums of ``nonzero`` under every one of the 2**k sign patterns."""
    k = nonzero.size
    total, count = float(nonzero.sum()), 2**k
    out = np.empty(count)
    rows = max(1, _CHUNK_CELLS // k)
    shifts = np.arange(k, dtype=np.int64)
    for start in range(0, count, rows):
        stop = min(count, start + rows)
        flips = (np.arange(start, stop, dtype=np.int64)[:, None] >> shifts) & 1
        out[start:stop] = total - 2.0 * (flips.astype(np.float64) @ nonzero)
    return out


def _p_values(null: NDArray[np.float64], observed: float, tol: float, smooth: bool) -> tuple:
    add = 1 if smooth else 0
    denom = null.size + add
    p_less = (np.count_nonzero(null <= observed + tol) + add) / denom
    p_greater = (np.count_nonzero(null >= observed - tol) + add) / denom
    return float(p_less), float(p_greater)


def _pick(alternative: Alternative, p_less: float, p_greater: float) -> float:
    if alternative == "less":
        return p_less
    if alternative == "greater":
        return p_greater
    return min(1.0, 2.0 * min(p_less, p_greater))


def paired_permutation_test(
    x: ArrayLike,
    y: ArrayLike,
    *,
    alternative: Alternative = "two-sided",
    permutations: int = 10_000,
    exact_max_nonzero: int = EXACT_MAX_NONZERO,
    seed: int | np.random.Generator = 0,
    clusters: Sequence[Hashable] | NDArray[np.int64] | None = None,
) -> TestResult:
    """Paired sign-flip permutation test of ``mean(x - y)`` (``x`` = current, ``y`` = baseline).

    ``alternative="less"`` asks whether ``x`` is lower than ``y``. Equivalent to SciPy's
    ``permutation_test(..., permutation_type="samples")``. Exact when at most
    ``exact_max_nonzero`` differences are non-zero (or 2**k ≤ ``permutations``), otherwise
    Monte-Carlo with +1 smoothing. With ``clusters`` (one label per pair) the signs of whole
    clusters' summed differences are flipped (a cluster-level paired test: the evidence is as
    many pairs as there are clusters); the statistic stays the mean difference per pair.
    """
    a, b = _vector(x, "x"), _vector(y, "y")
    if a.size != b.size:
        raise ValueError(f"x and y must be paired: {a.size} != {b.size} values")
    if clusters is not None:
        sums, _ = cluster_sums(a - b, clusters)
        flat = paired_permutation_test(sums, np.zeros_like(sums), alternative=alternative,
                                       permutations=permutations, exact_max_nonzero=exact_max_nonzero,
                                       seed=seed)
        return flat.model_copy(update={"test": f"cluster {flat.test}", "n": a.size,
                                       "statistic": float((a - b).mean()) if a.size else 0.0})
    d = a - b
    n = d.size
    observed = float(d.sum())
    statistic = observed / n if n else 0.0
    nonzero = d[d != 0]
    k = nonzero.size
    if k == 0:
        return TestResult(
            test="paired permutation", alternative=alternative, statistic=statistic,
            p_value=1.0, n=n, n_nonzero=0, exact=True, resamples=1,
        )
    tol = 1e-9 * (1.0 + float(np.abs(nonzero).sum()))
    exact = k <= min(exact_max_nonzero, EXACT_LIMIT) or 2**k <= min(permutations, 2**EXACT_LIMIT)
    rng = _rng(seed)
    null = _exact_sign_flip_sums(nonzero) if exact else _sign_flip_sums(nonzero, permutations, rng)
    p_less, p_greater = _p_values(null, observed, tol, smooth=not exact)
    return TestResult(
        test="paired permutation (exact)" if exact else "paired permutation",
        alternative=alternative, statistic=statistic, p_value=_pick(alternative, p_less, p_greater),
        n=n, n_nonzero=k, exact=exact, resamples=int(null.size),
    )


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X ≤ k) for X ~ Binomial(n, 1/2), exact in integers."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def mcnemar_exact(
    x: ArrayLike, y: ArrayLike, *, alternative: Alternative = "two-sided"
) -> TestResult:
    """McNemar's exact test on paired pass/fail outcomes (``x`` = current, ``y`` = baseline).

    Counts ``b`` = pairs passing now and failing before, ``c`` = failing now and passing before;
    the p-value is the binomial test of ``b`` out of ``b + c`` at 1/2 (``scipy.stats.binomtest``).
    ``alternative="less"`` asks whether ``x`` passes less often than ``y``.
    """
    a, b_ = _vector(x, "x"), _vector(y, "y")
    if a.size != b_.size:
        raise ValueError(f"x and y must be paired: {a.size} != {b_.size} values")
    if not (np.isin(a, (0.0, 1.0)).all() and np.isin(b_, (0.0, 1.0)).all()):
        raise ValueError("McNemar's test needs pass/fail values (0 or 1)")
    b = int(np.count_nonzero((a == 1) & (b_ == 0)))
    c = int(np.count_nonzero((a == 0) & (b_ == 1)))
    m = b + c
    p_less = _binom_cdf_half(b, m)
    p_greater = 1.0 - _binom_cdf_half(b - 1, m)
    if alternative == "two-sided":
        p = 1.0 if m == 0 else min(1.0, 2.0 * min(p_less, p_greater))
    else:
        p = p_less if alternative == "less" else p_greater
    return TestResult(
        test="McNemar exact", alternative=alternative, statistic=float(b - c) / max(a.size, 1),
        p_value=p, n=int(a.size), n_nonzero=m, exact=True, resamples=0,
    )


def paired_effect_size(x: ArrayLike, y: ArrayLike) -> float | None:
    """Cohen's d_z of paired scores: mean(x − y) / sd(x − y); ``None`` when undefined."""
    d = _vector(x, "x") - _vector(y, "y")
    if d.size < 2:
        return None
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return 0.0 if float(d.mean()) == 0.0 else None
    return float(d.mean()) / sd
