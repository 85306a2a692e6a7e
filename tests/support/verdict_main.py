"""``decide_aligned`` as main 29a4c0c had it (one 170-line function filling a 40-key dict), kept
only as the reference that tests/test_verdict_split.py compares the split one with. Not evalloop
code: nothing else may import it."""

# ruff: noqa
from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from evalloop.policy import TOLERANCE, VerdictPolicy
from evalloop.score import passes_many
from evalloop.scoring import scorevec
from evalloop.verdicts import floors, stats
from evalloop.verdicts.drop import (
    by_scope_power,
    cluster_se,
    drop_bounds,
    mean_interval,
    minimal_detectable_drop,
    scope_groups,
    standardized_drop,
)
from evalloop.verdicts.runlabel import run_label_permutation_test
from evalloop.verdicts.verdict import Verdict, VerdictStatus


def _mean(values: Collection[float] | np.ndarray) -> float | None:
    return math.fsum(values) / len(values) if len(values) else None


def _pct(x: float) -> str:
    """A share as a percentage with the digits it has: 10%, 12.73%, 99.99% (never 100.0% for 99.99%)."""
    return f"{100 * x:.4g}%"


def _relative(baseline: float | None, delta: float | None) -> float | None:
    if baseline is None or delta is None or not math.isfinite(baseline) or baseline <= 0:
        return None
    return delta / baseline


_BLOCK_ROWS = 8192  # rows of a window handled at once (flips, row means, noise estimate)


def _row_means(window: np.ndarray) -> np.ndarray:
    """Each row's mean over its non-NaN cells (every row has one), in blocks of rows: no
    whole-window copy, as ``np.nanmean`` of the whole makes."""
    out = np.empty(window.shape[0])
    for lo in range(0, window.shape[0], _BLOCK_ROWS):
        block = window[lo:lo + _BLOCK_ROWS]
        graded = ~np.isnan(block)
        out[lo:lo + _BLOCK_ROWS] = np.where(graded, block, 0.0).sum(axis=1) / graded.sum(axis=1)
    return out


def window_noise(window: np.ndarray) -> float | None:
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


def noise_var(x: np.ndarray, window: np.ndarray) -> float:
    """One case's run-to-run variance: the window's (:func:`window_noise`), else half the
    variance of this run's paired differences (one earlier run)."""
    measured = window_noise(window)
    if measured is not None:
        return measured
    d = x - _row_means(window)
    return float(d.var(ddof=1)) / 2 if d.size > 1 else 0.0


def _zero_one(values: np.ndarray) -> bool:
    """Whether every present (non-NaN) value is 0 or 1 (checked in blocks of rows)."""
    return all(bool(np.all(np.isnan(b) | (b == 0.0) | (b == 1.0)))
               for b in (values[lo:lo + _BLOCK_ROWS] for lo in range(0, values.shape[0], _BLOCK_ROWS)))


def _any_graded(window: np.ndarray, axis: int) -> np.ndarray:
    """Per column (``axis=0``) or per row (``axis=1``), whether any cell is graded (not NaN);
    a column at a time, so no whole-window boolean copy."""
    if axis == 0:
        return np.array([not np.isnan(window[:, j]).all() for j in range(window.shape[1])], dtype=bool)
    found = np.zeros(window.shape[0], dtype=bool)
    for j in range(window.shape[1]):
        found |= ~np.isnan(window[:, j])
    return found


def _flips(runs: np.ndarray, current: np.ndarray, pass_mark: float) -> np.ndarray:
    """Per row, how often the pass/fail state changes across the window's columns and then this
    run's (absent cells skipped); in blocks of rows, so no whole-window temporaries."""
    flips = np.zeros(runs.shape[0], dtype=np.int64)
    for lo in range(0, runs.shape[0], _BLOCK_ROWS):
        block, now = runs[lo:lo + _BLOCK_ROWS], current[lo:lo + _BLOCK_ROWS]
        out = flips[lo:lo + _BLOCK_ROWS]
        last = np.full(block.shape[0], np.nan)
        for col in (*(block[:, j] for j in range(block.shape[1])), now):
            present = ~np.isnan(col)
            state = np.where(present, passes_many(col, pass_mark).astype(np.float64), np.nan)
            out += present & ~np.isnan(last) & (state != last)
            last = np.where(present, state, last)
    return flips


def decide_aligned(
    aligned: scorevec.Aligned,
    policy: VerdictPolicy,
    *,
    binary: bool | None = None,
    known_bad: Collection[str] = (),
    valid: bool = True,
    invalid_reason: str | None = None,
    scorers: int = 1,
    scorer_controls: Collection[str] | None = None,
) -> Verdict:
    """:func:`decide` on scores lined up by case (see :mod:`evalloop.scoring.scorevec`): no per-case
    dictionaries, so a 100,000-case run is judged in a few arrays. ``known_bad`` cases are kept out
    of the statistics; passing one of ``scorer_controls`` (the known-bad cases with a fixed
    output; None: every known-bad case) makes the scorer broken."""
    ids, current = aligned.ids, aligned.current
    pm = policy.pass_mark
    present_runs = _any_graded(aligned.window, axis=0)  # a run with no finite score is no run
    runs = aligned.window if present_runs.all() else aligned.window[:, present_runs]

    def listed(mask: np.ndarray) -> list[str]:  # rows are in case-id order
        return [ids[int(i)] for i in np.flatnonzero(mask)]

    cm = ~np.isnan(current)
    bad = set(known_bad)
    badm = np.fromiter((c in bad for c in ids), dtype=bool, count=len(ids)) if bad else np.zeros(len(ids), bool)
    tests = bad if scorer_controls is None else bad & set(scorer_controls)  # the controls that test the scorer
    testm = np.fromiter((c in tests for c in ids), dtype=bool, count=len(ids)) if tests else np.zeros(len(ids), bool)
    broken = listed(cm & testm & passes_many(current, pm))
    flips = _flips(runs, current, pm)
    flaky = listed((flips > policy.flaky_flips) & ~badm)
    quarantined = flaky if policy.quarantine_flaky else []
    outm = badm.copy()
    if quarantined:
        held = set(quarantined)
        outm |= np.fromiter((c in held for c in ids), dtype=bool, count=len(ids))
    usedm = cm & ~outm
    kept = runs
    if outm.any():
        kept = runs.copy()
        kept[outm] = np.nan
    filled = _any_graded(kept, axis=0)
    used_runs = kept if filled.all() else kept[:, filled]
    used_values = current[usedm]
    is_binary = (_zero_one(used_values) and _zero_one(used_runs)) if binary is None else binary

    current_mean = _mean(used_values)
    resamples = min(policy.resamples, max(2_000, stats_budget() // max(len(used_values), 1)))
    by_scope = scope_groups(aligned.scopes, usedm)  # the suite has scopes: they are the evidence
    ci = mean_interval(used_values, by_scope, level=policy.ci_level, resamples=resamples, seed=policy.seed)
    newly_failing: list[str] = []
    newly_passing: list[str] = []
    if used_runs.shape[1]:
        last = used_runs[:, -1]
        both = usedm & ~np.isnan(last)
        before = passes_many(last, pm)
        now = passes_many(current, pm)
        newly_failing = listed(both & before & ~now)
        newly_passing = listed(both & now & ~before)
    used_n = len(used_values)
    window_count = used_runs.shape[1]
    fields: dict = {
        "rule": policy.rule, "binary": is_binary, "current_mean": current_mean,
        "baseline_mean": None, "drop": None, "threshold": policy.threshold,
        "threshold_met": False, "ci_low": ci.low if ci else None,
        "ci_high": ci.high if ci else None, "ci_method": ci.method if ci else None,
        "scopes": None if by_scope is None else int(np.unique(by_scope).size), "p_value": None,
        "stars": "", "test": None,
        "effect_size": None, "n_current": used_n, "n_paired": 0, "n_unpaired": 0,
        "window_runs": window_count, "newly_failing": newly_failing,
        "newly_passing": newly_passing, "flaky": flaky, "quarantined": quarantined,
        "broken_controls": broken, "pass_mark": pm, "min_score": policy.min_score,
    }

    def verdict(status: VerdictStatus, reason: str) -> Verdict:
        return _floor(Verdict(status=status, reason=reason, **fields), policy, scorers)

    if not valid:
        return Verdict(status=VerdictStatus.INVALID, reason=invalid_reason or "The run was marked invalid, "
                       "so it is not judged.", **fields)
    if not used_n:
        return Verdict(status=VerdictStatus.INVALID, reason="The run has no scored cases to judge.", **fields)
    if broken:
        return Verdict(
            status=VerdictStatus.SCORER_BROKEN,
            reason=f"The scorer passed {len(broken)} known-bad control case(s) "
                   f"({', '.join(broken[:3])}), so its scores cannot be trusted.", **fields)
    if not window_count:
        return verdict(
            VerdictStatus.NO_BASELINE,
            f"No earlier valid run to compare with; mean {current_mean:.3f} is the first point.",
        )

    in_window = _any_graded(used_runs, axis=1)
    shared = usedm & in_window
    shared_rows = np.flatnonzero(shared)
    n_added = int(np.count_nonzero(usedm & ~in_window))
    removed_rows = np.flatnonzero(~np.isnan(used_runs[:, -1]) & ~usedm)
    fields.update(
        n_paired=len(shared_rows), n_unpaired=n_added + len(removed_rows), added=n_added,
        added_mean=_mean(current[usedm & ~in_window]), removed=len(removed_rows),
        removed_mean=_mean([m for row in used_runs[removed_rows] if (m := _mean(row[~np.isnan(row)])) is not None]),
    )
    if not len(shared_rows):
        return verdict(
            VerdictStatus.NO_BASELINE,
            f"No case of this run was graded in the {window_count}-run window "
            f"({n_added} new cases); mean {current_mean:.3f} starts a new baseline.",
        )
    # every row shared (the usual rerun of one case list): views, no copy of the window
    x, w = (current, used_runs) if len(shared_rows) == len(current) else (current[shared], used_runs[shared])
    y = _row_means(w)
    baseline_mean = float(y.mean())
    shared_mean = float(x.mean())
    diff = x - y
    drop = _relative(baseline_mean, baseline_mean - shared_mean)
    groups = None if by_scope is None else scope_groups(aligned.scopes, shared)
    test = run_label_permutation_test(x, w, permutations=policy.permutations, seed=policy.seed,
                                      clusters=groups)
    p = test.p_value
    mean_diff = float(diff.mean())
    runs_per_case = float(np.mean(np.sum(~np.isnan(w), axis=1)))
    noise = noise_var(x, w)
    measured = window_noise(w)  # the floor's noise: the window's own, never this run's change
    fields["floor_se"] = None if measured is None else math.sqrt(max(measured, 0.0) / used_n)
    # what one night's drop may be off by from noise alone (the cases are this suite's, fixed;
    # by scope the scopes' own spread, since a scope's questions move together)
    noise_se = math.sqrt(max(noise, 0.0) * (1.0 + 1.0 / max(runs_per_case, 1.0)) / len(shared_rows)) \
        if groups is None else cluster_se(diff, groups)
    fields["drop_noise_se"] = noise_se / baseline_mean if baseline_mean > 0 else None
    # the size: one-sided bounds of the relative drop at ``confidence`` (by scope when scoped)
    drop_low, drop_high = drop_bounds(diff, baseline_mean, policy.confidence, groups)
    falls = drop is not None and drop >= policy.threshold - TOLERANCE
    fields.update(
        baseline_mean=baseline_mean, shared_mean=shared_mean, drop=drop,
        drop_ci_low=drop_low, drop_ci_high=drop_high,
        paired_drop=drop, threshold_met=falls, p_value=p, stars=stats.stars(p),
        test="run-label permutation by scope, two-sided" if groups is not None else f"{test.test}, two-sided",
        effect_size=stats.paired_effect_size(x, y),
        mdd=minimal_detectable_drop(len(shared_rows), baseline_mean, noise, runs_per_case, policy,
                                    binary=is_binary, **by_scope_power(diff, groups)),
        z=standardized_drop(diff, noise, runs_per_case, groups),
    )
    significant = p < policy.alpha
    sig_drop, sig_rise = significant and mean_diff < 0, significant and mean_diff > 0
    fields["significant_drop"] = sig_drop
    ctx = _context(baseline_mean, shared_mean, drop, window_count, p, fields,
                   None if groups is None else int(np.unique(groups).size))
    thr = policy.threshold
    if policy.rule == "evidence":
        low = fields["drop_ci_low"]
        rise_low = None if drop_high is None else -drop_high
        big_drop = low is not None and low >= thr - TOLERANCE
        big_rise = baseline_mean <= 0 or (rise_low is not None and rise_low >= thr - TOLERANCE)
        conf = _pct(policy.confidence)
        shown = (f"the drop is at least {_pct(thr)} with {conf} confidence"
                 f" (lower bound {_pct(low)})" if low is not None else f"the drop reaches {_pct(thr)}")
        not_shown = (f"it is not shown to reach the {_pct(thr)} threshold (at least "
                     f"{_pct(max(low, 0.0))} with {conf} confidence)" if low is not None
                     else f"it is not shown to reach the {_pct(thr)} threshold")
    elif policy.rule == "threshold":
        big_drop = falls
        big_rise = baseline_mean <= 0 or (drop is not None and -drop >= thr - TOLERANCE)
        shown = f"the observed drop meets the {_pct(thr)} threshold"
        not_shown = f"the observed drop is under the {_pct(thr)} threshold"
    else:
        m = policy.effective_min_effect
        big_drop = drop is not None and drop >= m - TOLERANCE
        big_rise = baseline_mean <= 0 or (drop is not None and -drop >= m - TOLERANCE)
        shown = f"the observed drop is at least {_pct(m)}"
        not_shown = f"the observed drop is under {_pct(m)}"

    if sig_drop and big_drop:
        return verdict(VerdictStatus.REGRESSED, f"Significant drop, and {shown}: {ctx}.")
    if sig_drop:
        return verdict(VerdictStatus.WATCH, f"Significant drop, but {not_shown}: {ctx}.")
    if falls:
        return verdict(VerdictStatus.WATCH,
                       f"Drop meets the {_pct(thr)} threshold but is not significant "
                       f"(p ≥ {policy.alpha}): watch the next runs: {ctx}.")
    if sig_rise and big_rise:
        return verdict(VerdictStatus.IMPROVED, f"Significant rise: {ctx}.")
    return verdict(VerdictStatus.STEADY, f"No significant change: {ctx}.")


def _floor(v: Verdict, policy: VerdictPolicy, scorers: int) -> Verdict:
    """The verdict with its floor judged (:mod:`evalloop.verdicts.floors`): under it with the
    budgeted confidence fails as ``below floor``, unless it already fails as a regression (which
    says more; the reason says both); under it within the noise is a ``watch`` "near its floor"
    (a first run keeps ``no baseline yet`` and says it)."""
    if v.current_mean is None or v.min_score is None:
        return v
    found = floors.check(v.current_mean, v.min_score, v.floor_se, policy.alarm_budget, scorers)
    if found is None:
        return v
    update: dict = {"floor_state": found.state, "floor_w": found.w}
    if found.state != "above":
        said = floors.sentence(v.current_mean, v.min_score, found)
        if found.below and v.status is not VerdictStatus.REGRESSED:
            update.update(status=VerdictStatus.BELOW_FLOOR, reason=f"{said} {v.reason}")
        elif not found.below and v.status in (VerdictStatus.STEADY, VerdictStatus.IMPROVED):
            update.update(status=VerdictStatus.WATCH, reason=f"{said} {v.reason}")
        else:
            update["reason"] = f"{v.reason} {said}"
    return v.model_copy(update=update)


def stats_budget() -> int:
    """Bootstrap draws per CI at most (10,000 resamples up to 2,000 cases, never fewer than 2,000)."""
    return 20_000_000


def _context(baseline: float, current: float, drop: float | None, runs: int, p: float,
             fields: dict, scopes: int | None) -> str:
    """A short clause with the numbers behind a verdict."""
    change = "n/a" if drop is None else f"{'-' if drop >= 0 else '+'}{_pct(abs(drop))}"
    text = (f"{baseline:.3f} → {current:.3f} ({change}) vs {runs}-run baseline, "
            f"p={p:.3g}{fields['stars']} ({(fields['test'] or 'test').split(',')[0]}) "
            f"on {fields['n_paired']} shared cases")
    if scopes:
        text += f" in {scopes} scopes"
    if fields["added"] or fields["removed"]:
        text += f"; {fields['added']} added, {fields['removed']} removed"
    if fields["quarantined"]:
        text += f", {len(fields['quarantined'])} flaky quarantined"
    return text
