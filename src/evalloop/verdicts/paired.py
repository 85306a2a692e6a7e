"""The paired test of a verdict: this run against its window on the cases both graded.

:func:`overlap` says which cases the two sides share (and how many were added or removed);
:func:`paired_test` measures the drop on the shared cases — the baseline and the run's means, the
run-label permutation test's p-value, the drop's one-sided bounds, its size in standard errors
(``z``), the smallest drop the rule detects (MDD) and the run-to-run noise the floor is judged
with; :func:`rule_call` says whether the policy's rule finds the drop (or rise) big enough, and
in which words. By scope (``scope:<id>`` tags) the evidence counts whole scopes
(:mod:`evalloop.verdicts.drop`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from evalloop.policy import TOLERANCE, VerdictPolicy
from evalloop.scoring import scorevec
from evalloop.verdicts import stats
from evalloop.verdicts.arrays import Floats, Mask
from evalloop.verdicts.drop import (
    by_scope_power,
    cluster_se,
    drop_bounds,
    minimal_detectable_drop,
    scope_groups,
    standardized_drop,
)
from evalloop.verdicts.masks import CaseMasks, any_graded
from evalloop.verdicts.runlabel import run_label_permutation_test

_BLOCK_ROWS = 8192  # rows of a window handled at once (row means, noise estimate)


@dataclass(frozen=True)
class Overlap:
    """The cases this run and its window share, and those only one side has."""

    shared: Mask  # mask: used rows graded in the window too
    n_paired: int
    added: int  # used cases the window never graded
    added_mean: float | None
    removed: int  # cases of the last window run this run did not use
    removed_mean: float | None

    @property
    def n_unpaired(self) -> int:
        return self.added + self.removed


@dataclass(frozen=True)
class PairedTest:
    """The drop on the shared cases and the evidence for it."""

    baseline_mean: float  # the window's mean over the shared cases
    shared_mean: float  # this run's mean over the shared cases
    mean_diff: float  # mean of (this run − window mean) per shared case
    drop: float | None  # relative: (baseline − shared) / baseline (None: the baseline is not positive)
    drop_ci_low: float | None  # one-sided bounds of the drop at the policy's confidence
    drop_ci_high: float | None
    p_value: float
    test: str  # the test's name, "…, two-sided"
    scopes: int | None  # the scopes the test counted (None: cases independent)
    effect_size: float | None
    mdd: float | None
    z: float | None
    floor_se: float | None  # the window's own run-to-run noise of the mean (None: not measured)
    drop_noise_se: float | None
    threshold_met: bool  # the observed drop meets the threshold
    significant: bool  # p < alpha

    @property
    def significant_drop(self) -> bool:
        return self.significant and self.mean_diff < 0

    @property
    def significant_rise(self) -> bool:
        return self.significant and self.mean_diff > 0

    @property
    def stars(self) -> str:
        return stats.stars(self.p_value)


@dataclass(frozen=True)
class RuleCall:
    """What the policy's rule says of the drop's size, and its words for the reason."""

    big_drop: bool  # the drop is big enough to be a regression (when significant)
    big_rise: bool  # the rise is big enough to be an improvement (when significant)
    shown: str  # why a big drop is big
    not_shown: str  # why a drop is not shown to be big


def overlap(masks: CaseMasks, current: Floats) -> Overlap:
    """Which used cases the window graded, and the cases only one side has."""
    runs, used = masks.runs, masks.used
    in_window = any_graded(runs, axis=1)
    shared = used & in_window
    n_added = int(np.count_nonzero(used & ~in_window))
    removed_rows = np.flatnonzero(~np.isnan(runs[:, -1]) & ~used)
    return Overlap(shared=shared, n_paired=int(np.count_nonzero(shared)), added=n_added,
                   added_mean=_mean(current[used & ~in_window]), removed=len(removed_rows),
                   removed_mean=_mean([m for row in runs[removed_rows]
                                       if (m := _mean(row[~np.isnan(row)])) is not None]))


def paired_test(aligned: scorevec.Aligned, masks: CaseMasks, shared: Overlap, policy: VerdictPolicy) -> PairedTest:
    """The run-label permutation test and the drop's size on the shared cases (at least one)."""
    current = aligned.current
    n_shared = shared.n_paired
    # every row shared (the usual rerun of one case list): views, no copy of the window
    x, w = (current, masks.runs) if n_shared == len(current) else (current[shared.shared], masks.runs[shared.shared])
    y = row_means(w)
    baseline_mean = float(y.mean())
    shared_mean = float(x.mean())
    diff = x - y
    drop = _relative(baseline_mean, baseline_mean - shared_mean)
    by_scope = scope_groups(aligned.scopes, masks.used)
    groups = None if by_scope is None else scope_groups(aligned.scopes, shared.shared)
    test = run_label_permutation_test(x, w, permutations=policy.permutations, seed=policy.seed, clusters=groups)
    p = test.p_value
    runs_per_case = float(np.mean(np.sum(~np.isnan(w), axis=1)))
    noise = noise_var(x, w)
    measured = window_noise(w)  # the floor's noise: the window's own, never this run's change
    # what one night's drop may be off by from noise alone (the cases are this suite's, fixed;
    # by scope the scopes' own spread, since a scope's questions move together)
    noise_se = math.sqrt(max(noise, 0.0) * (1.0 + 1.0 / max(runs_per_case, 1.0)) / n_shared) \
        if groups is None else cluster_se(diff, groups)
    # the size: one-sided bounds of the relative drop at ``confidence`` (by scope when scoped)
    drop_low, drop_high = drop_bounds(diff, baseline_mean, policy.confidence, groups)
    return PairedTest(
        baseline_mean=baseline_mean, shared_mean=shared_mean, mean_diff=float(diff.mean()), drop=drop,
        drop_ci_low=drop_low, drop_ci_high=drop_high, p_value=p,
        test="run-label permutation by scope, two-sided" if groups is not None else f"{test.test}, two-sided",
        scopes=None if groups is None else int(np.unique(groups).size),
        effect_size=stats.paired_effect_size(x, y),
        mdd=minimal_detectable_drop(n_shared, baseline_mean, noise, runs_per_case, policy,
                                    binary=masks.binary, **by_scope_power(diff, groups)),
        z=standardized_drop(diff, noise, runs_per_case, groups),
        floor_se=None if measured is None else math.sqrt(max(measured, 0.0) / masks.n),
        drop_noise_se=noise_se / baseline_mean if baseline_mean > 0 else None,
        threshold_met=drop is not None and drop >= policy.threshold - TOLERANCE,
        significant=p < policy.alpha,
    )


def rule_call(policy: VerdictPolicy, test: PairedTest) -> RuleCall:
    """Whether the drop (or rise) is big enough under the policy's rule, and the words for it:
    ``evidence``: its lower bound at ``confidence`` reaches the threshold; ``threshold``: the
    observed drop meets it; ``paired``: the observed drop is at least ``min_effect``."""
    thr, drop, baseline = policy.threshold, test.drop, test.baseline_mean
    if policy.rule == "evidence":
        low = test.drop_ci_low
        rise_low = None if test.drop_ci_high is None else -test.drop_ci_high
        conf = pct(policy.confidence)
        return RuleCall(
            big_drop=low is not None and low >= thr - TOLERANCE,
            big_rise=baseline <= 0 or (rise_low is not None and rise_low >= thr - TOLERANCE),
            shown=(f"the drop is at least {pct(thr)} with {conf} confidence (lower bound {pct(low)})"
                   if low is not None else f"the drop reaches {pct(thr)}"),
            not_shown=(f"it is not shown to reach the {pct(thr)} threshold (at least "
                       f"{pct(max(low, 0.0))} with {conf} confidence)" if low is not None
                       else f"it is not shown to reach the {pct(thr)} threshold"))
    if policy.rule == "threshold":
        return RuleCall(
            big_drop=test.threshold_met,
            big_rise=baseline <= 0 or (drop is not None and -drop >= thr - TOLERANCE),
            shown=f"the observed drop meets the {pct(thr)} threshold",
            not_shown=f"the observed drop is under the {pct(thr)} threshold")
    m = policy.effective_min_effect
    return RuleCall(
        big_drop=drop is not None and drop >= m - TOLERANCE,
        big_rise=baseline <= 0 or (drop is not None and -drop >= m - TOLERANCE),
        shown=f"the observed drop is at least {pct(m)}",
        not_shown=f"the observed drop is under {pct(m)}")


def pct(x: float) -> str:
    """A share as a percentage with the digits it has: 10%, 12.73%, 99.99% (never 100.0% for 99.99%)."""
    return f"{100 * x:.4g}%"


def _mean(values: Collection[float] | Floats) -> float | None:
    return math.fsum(values) / len(values) if len(values) else None


def _relative(baseline: float | None, delta: float | None) -> float | None:
    if baseline is None or delta is None or not math.isfinite(baseline) or baseline <= 0:
        return None
    return delta / baseline


def row_means(window: Floats) -> Floats:
    """Each row's mean over its non-NaN cells (every row has one), in blocks of rows: no
    whole-window copy, as ``np.nanmean`` of the whole makes."""
    out = np.empty(window.shape[0])
    for lo in range(0, window.shape[0], _BLOCK_ROWS):
        block = window[lo:lo + _BLOCK_ROWS]
        graded = ~np.isnan(block)
        out[lo:lo + _BLOCK_ROWS] = np.where(graded, block, 0.0).sum(axis=1) / graded.sum(axis=1)
    return out


def window_noise(window: Floats) -> float | None:
    """One case's run-to-run variance measured by the window alone: pooled over its cases graded
    twice or more (None when no case was). In blocks of rows: no whole-window copies at 100k cases."""
    total, multi = 0.0, 0
    for lo in range(0, window.shape[0], _BLOCK_ROWS):
        block = window[lo:lo + _BLOCK_ROWS]
        rows = block[np.sum(~np.isnan(block), axis=1) >= 2]
        if rows.size:
            total += float(np.nanvar(rows, axis=1, ddof=1).sum())
            multi += rows.shape[0]
    return total / multi if multi else None


def noise_var(x: Floats, window: Floats) -> float:
    """One case's run-to-run variance: the window's (:func:`window_noise`), else half the
    variance of this run's paired differences (one earlier run)."""
    measured = window_noise(window)
    if measured is not None:
        return measured
    d = x - row_means(window)
    return float(d.var(ddof=1)) / 2 if d.size > 1 else 0.0
