"""The size of a paired drop, one way for every verdict: its standard error, its one-sided bounds
at a confidence, and the drop in standard errors.

A run's per-case paired differences ``d`` (this run minus the baseline) are either independent
cases or grouped by scope (``scope:<id>`` tags: the conversation, user or session a question
comes from). Questions of one conversation move together from run to run (one memory built per
conversation and run), so with scopes the standard error of ``mean(d)`` is cluster-robust (CR1,
from the per-scope sums of ``d − mean(d)``) and a bound reaches ``t`` with ``G − 1`` degrees of
freedom (``G`` scopes), not the normal quantile. With one case per scope both are the i.i.d.
formulas. :func:`scope_groups` is the one rule for when a suite has scopes. What drop a run
could catch (:func:`minimal_detectable_drop`) follows the same standard error.
"""

from __future__ import annotations

import math
from typing import TypedDict

import numpy as np

from evalloop.policy import VerdictPolicy
from evalloop.verdicts.arrays import Floats, Ints, Mask
from evalloop.verdicts.power import smallest_detectable, z_quantile
from evalloop.verdicts.stats import ConfidenceInterval, bootstrap_ci, smallest_accepted


class ScopePower(TypedDict, total=False):
    """What :func:`minimal_detectable_drop` takes for a scoped suite (nothing for independent cases)."""

    scopes: int
    design_effect: float


Z_CAP = 50.0  # a drop with no noise at all (every case deterministic) counts as this many standard errors


def scope_groups(codes: Ints | None, rows: Mask | Ints) -> Ints | None:
    """The scope codes of ``rows`` (a mask or an index) when every one of them has a scope (code
    ≥ 0), there are at least two scopes and some scope holds two cases or more; ``None``
    otherwise: the cases count as independent (a scope per question, as LongMemEval's, is that)."""
    if codes is None:
        return None
    picked = codes[rows]
    if not picked.size or picked.min() < 0 or picked.min() == picked.max():
        return None
    if np.unique(picked).size == picked.size:
        return None
    return picked


def mean_interval(values: Floats, groups: Ints | None, *, level: float, resamples: int,
                  seed: int) -> ConfidenceInterval | None:
    """The BCa bootstrap CI of the mean of ``values``; by scope (``groups``) whole scopes are
    resampled (:func:`evalloop.verdicts.stats.bootstrap_ci` with clusters), and the interval is
    widened to at least the one over independent cases, as :func:`cluster_se` is: scopes whose
    means agree by chance (or by a generator's balanced design) claim no more precision than
    independent cases would give."""
    iid = bootstrap_ci(values, level=level, resamples=resamples, seed=seed)
    if groups is None or iid is None:
        return iid
    scoped = bootstrap_ci(values, level=level, resamples=resamples, seed=seed, clusters=groups)
    if scoped is None:
        return iid
    return scoped.model_copy(update={"low": min(scoped.low, iid.low), "high": max(scoped.high, iid.high)})


def _group_count(groups: Ints) -> int:
    return int(np.unique(groups).size)


def cluster_se(diff: Floats, groups: Ints | None) -> float:
    """The standard error of ``mean(diff)``: ``sd / sqrt(n)`` for independent cases; with
    ``groups`` (one code per case) the CR1 cluster-robust one,
    ``sqrt(G / (G − 1) · Σ_g (Σ_{c∈g} (d_c − d̄))²) / n``, but never under the independent one:
    from a few scopes the robust estimate is itself noisy, and a few scope sums that happen to
    agree must not claim more precision than independent cases would give. 0 for fewer than two
    cases."""
    n = diff.size
    if n < 2:
        return 0.0
    iid = float(diff.std(ddof=1)) / math.sqrt(n)
    if groups is None:
        return iid
    _, codes = np.unique(groups, return_inverse=True)
    sums = np.bincount(codes, weights=diff - diff.mean())
    g = sums.size
    if g < 2:
        return iid
    return max(iid, math.sqrt(g / (g - 1) * float(np.sum(sums**2))) / n)


def _t_cdf(t: float, df: int) -> float:
    """Student's t distribution function for an integer ``df`` (closed form, Abramowitz &
    Stegun 26.7.3–4)."""
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:
        term, total = 1.0, 0.0
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        a = 2.0 / math.pi * (theta + s * math.cos(theta) * total) if df > 1 else 2.0 * theta / math.pi
    else:
        term, total = 1.0, 0.0
        for k in range(1, df // 2 + 1):
            total += term
            term *= c2 * (2 * k - 1) / (2 * k)
        a = s * total
    return 0.5 * (1.0 + a)


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile at ``p`` with ``df`` (≥ 1) degrees of freedom (bisection on the
    closed-form distribution function; the normal quantile above 1,000)."""
    if df > 1000:
        return z_quantile(p)
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:
        low, high = high, 2.0 * high
    return smallest_accepted(lambda t: _t_cdf(t, df) >= p, low, high, steps=200, rel_tol=1e-12)


def reach(confidence: float, groups: Ints | None) -> float:
    """How many standard errors a one-sided bound at ``confidence`` reaches: the normal
    quantile for independent cases, Student's ``t`` with ``G − 1`` degrees of freedom by scope."""
    if groups is None:
        return z_quantile(confidence)
    return t_quantile(confidence, max(_group_count(groups) - 1, 1))


def drop_bounds(diff: Floats, baseline: float, confidence: float,
                groups: Ints | None = None) -> tuple[float | None, float | None]:
    """One-sided bounds at ``confidence`` of the relative drop ``−mean(diff) / baseline``: the
    drop is at least the first (and at most the second) with that confidence. ``(None, None)``
    when the baseline is not positive."""
    if not math.isfinite(baseline) or baseline <= 0 or not diff.size:
        return None, None
    mean = float(diff.mean())
    half = reach(confidence, groups) * cluster_se(diff, groups)
    return (-(mean + half) / baseline, -(mean - half) / baseline)


def standardized_drop(diff: Floats, noise_var: float, runs_per_case: float,
                      groups: Ints | None = None) -> float:
    """The mean paired drop in standard errors (> 0: this run is lower).

    The standard error is the larger of the observed one (:func:`cluster_se`: by scope when
    ``groups`` is given) and what the window's run-to-run noise predicts (``noise · (1 + 1/runs)``
    per case), so a run whose cases happen to agree cannot make a small drop look large. No
    noise and no drop is 0.
    """
    n = diff.size
    if not n:
        return 0.0
    observed = cluster_se(diff, groups) ** 2
    predicted = max(noise_var, 0.0) * (1.0 + 1.0 / max(runs_per_case, 1.0)) / n
    se = math.sqrt(max(observed, predicted))
    drop = -float(diff.mean())
    if se <= 0.0 or not math.isfinite(se):
        return 0.0 if abs(drop) < 1e-12 else math.copysign(Z_CAP, drop)
    return max(-Z_CAP, min(Z_CAP, drop / se))


def minimal_detectable_drop(n: int, baseline: float, noise_var: float, window: float,
                            policy: VerdictPolicy, *, binary: bool, scopes: int | None = None,
                            design_effect: float = 1.0) -> float | None:
    """The relative drop this rule catches 90 % of the time at this size and noise.

    ``noise_var`` is one case's run-to-run score variance, ``window`` the runs per case in the
    baseline. The observed paired drop ``D̂`` is roughly normal around the true drop ``D`` with
    ``se = sqrt((v1 + v0 / window) / n)`` (a pass/fail drop adds variance ``B·δ(1 − δ)``); the
    rule flags it when ``D̂`` clears both the test's critical value and the rule's floor (for
    ``evidence`` the threshold less the confidence reach), so 90 % detection needs
    ``D ≥ max(z_(1−α/2)·se, floor) + z_0.9·se``. Pass/fail suites also need enough flipped
    cases for the permutation test to reach ``alpha``. ``None`` when even a total drop would
    go unnoticed or the baseline is 0.

    By scope (``scopes`` of them) the cases count as ``n / design_effect`` (the cluster-robust
    variance over the independent one), the bound reaches Student's ``t`` with ``scopes − 1``
    degrees of freedom, and the test needs enough scopes: one run label per scope gives at
    best ``p = 2 / (window + 1)^scopes``.
    """
    if n < 1 or not math.isfinite(baseline) or baseline <= 0:
        return None
    if scopes is not None and 2.0 / (max(window, 1.0) + 1.0) ** scopes > policy.alpha:
        return None
    effective = n / max(design_effect, 1.0)  # cases as independent evidence
    v0 = max(noise_var, 0.0)
    za, zb = z_quantile(1.0 - policy.alpha / 2), z_quantile(0.9)
    zr = z_quantile(policy.confidence) if scopes is None else t_quantile(policy.confidence, scopes - 1)

    def detectable(delta: float) -> bool:
        d = delta * baseline
        v1 = v0 + (baseline * delta * (1.0 - delta) if binary else 0.0)
        se = math.sqrt((v1 + v0 / max(window, 1.0)) / effective)
        se_null = math.sqrt((v1 + v0 / max(window, 1.0) + d * d) / effective)
        if policy.rule == "evidence":
            floor = policy.threshold * baseline + zr * se
        elif policy.rule == "threshold":
            floor = policy.threshold * baseline
        else:
            floor = policy.effective_min_effect * baseline
        return d >= max(za * se_null, floor) + zb * se

    high = smallest_detectable(detectable, steps=40)
    if high is None:
        return None
    if binary:  # a pass/fail test needs some cases to flip before any p-value can reach alpha:
        # f flipped cases, each "current" in 1 of window + 1 equally likely runs, give p ≈ 2/(w+1)^f
        flips = math.ceil(math.log(2.0 / policy.alpha) / math.log(max(window, 1.0) + 1.0) - 1e-9)
        high = max(high, flips / (n * baseline))
    return min(1.0, high)


def by_scope_power(diff: Floats, groups: Ints | None) -> ScopePower:
    """The scope count and design effect (cluster-robust over independent variance, at least 1)
    :func:`minimal_detectable_drop` needs for a scoped suite; nothing for independent cases."""
    if groups is None:
        return {}
    iid = cluster_se(diff, None)
    deff = (cluster_se(diff, groups) / iid) ** 2 if iid > 0 else 1.0
    return {"scopes": int(np.unique(groups).size), "design_effect": max(deff, 1.0)}
