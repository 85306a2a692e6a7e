"""Verdicts: one scorer's result in one run, judged against its rolling window, with certainty.

``decide`` takes the run's per-case scores and those of up to N earlier valid runs (oldest
first) and returns a :class:`Verdict`: ``improved``, ``steady``, ``regressed``, ``regressed (not
significant)``, ``no baseline yet``, ``invalid run`` or ``scorer broken``.

Two rules, chosen by ``VerdictPolicy.rule``:

* ``"threshold"`` (the ADR rule): the baseline is the mean of the window's run means and
  ``drop = (baseline - current) / baseline``; ``drop >= threshold`` is a regression. A two-sided
  paired test on per-case scores is reported beside it: significant (``p < alpha``) gives
  ``regressed``, otherwise ``regressed (not significant)``, which still counts as a regression
  unless ``require_significance``. A rise of at least the threshold is ``improved``.
* ``"paired"`` (evalloop's rule): each case's score is paired with its own mean over the window.
  A regression needs both evidence and size: the two-sided paired test (sign-flip permutation,
  or McNemar's exact test for pass/fail scores against a stable pass/fail baseline) gives
  ``p < alpha`` for a drop, *and* the paired mean dropped by at least ``min_effect`` (default:
  a third of the threshold). A drop past the ADR threshold without that evidence is ``regressed
  (not significant)`` and not a regression. A significant rise of at least ``min_effect`` is
  ``improved``. The test is two-sided (a one-sided test at ``alpha / 2``): scores clipped at 1
  skew the paired differences, and the margin keeps false alarms under ``alpha``
  (``bench/verdicts.py``: at most 2.3 % at a 5 % alpha, 92.6 % detection of a true 15 % drop
  on 50 judge cases with noise sd 0.2).

Only cases present in both the run and the window are paired; the rest are counted as unpaired.
Known-bad control cases (``known_bad``) are kept out of the statistics; if the scorer passes one,
the verdict is ``scorer broken``. Flaky cases (pass/fail flipping more than ``flaky_flips`` times
over the window and this run) are listed, and with ``quarantine_flaky`` kept out of the decision.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from enum import StrEnum
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evalloop import stats

TOLERANCE = 1e-9  # a drop computed as 0.1499999999 meets a 0.15 threshold
BOOTSTRAP_BUDGET = 20_000_000  # draws per CI at most (see decide)
MIN_EFFECT_SHARE = 1 / 3  # rule="paired": default minimum effect as a share of the threshold


class VerdictStatus(StrEnum):
    """The outcome of one scorer in one run."""

    IMPROVED = "improved"
    STEADY = "steady"
    REGRESSED = "regressed"
    REGRESSED_NS = "regressed (not significant)"
    NO_BASELINE = "no baseline yet"
    INVALID = "invalid run"
    SCORER_BROKEN = "scorer broken"


class VerdictPolicy(BaseModel):
    """How a verdict is reached: threshold, rule, significance and flaky-case handling."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(gt=0)
    rule: Literal["threshold", "paired"] = "threshold"
    require_significance: bool = False
    alpha: float = Field(0.05, gt=0, lt=1)
    min_effect: float | None = Field(None, ge=0)  # rule="paired"; None = threshold / 3
    pass_mark: float = 0.5
    flaky_flips: int = Field(2, ge=0)
    quarantine_flaky: bool = False
    permutations: int = Field(10_000, ge=1)
    resamples: int = Field(10_000, ge=100)  # bootstrap resamples for the CI
    ci_level: float = Field(0.95, gt=0, lt=1)
    seed: int = 0

    @property
    def effective_min_effect(self) -> float:
        """The minimum relative drop the paired rule asks for."""
        return self.threshold * MIN_EFFECT_SHARE if self.min_effect is None else self.min_effect


class Verdict(BaseModel):
    """One scorer's verdict for one run, with the evidence behind it."""

    status: VerdictStatus
    is_regression: bool
    rule: str = "threshold"
    binary: bool = False
    current_mean: float | None
    baseline_mean: float | None
    drop: float | None
    paired_drop: float | None = None
    threshold: float
    threshold_met: bool
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    stars: str
    test: str | None
    effect_size: float | None
    n_current: int
    n_paired: int
    n_unpaired: int
    window_runs: int
    newly_failing: list[str]
    newly_passing: list[str]
    flaky: list[str]
    quarantined: list[str]
    broken_controls: list[str]
    reason: str


def _clean(scores: Mapping[str, float]) -> dict[str, float]:
    """Per-case scores without NaN or infinite values."""
    return {str(k): float(v) for k, v in scores.items() if v is not None and math.isfinite(v)}


def _mean(values: Collection[float]) -> float | None:
    return float(np.mean(list(values))) if values else None


def _fmean(values: list[float]) -> float:
    """The mean of a short list (per case over the window): plain Python beats NumPy here."""
    return math.fsum(values) / len(values)


def count_flips(runs: Sequence[Mapping[str, float]], pass_mark: float) -> dict[str, int]:
    """How often each case's pass/fail state changes across ``runs`` (oldest first)."""
    last: dict[str, bool] = {}
    flips: dict[str, int] = {}
    for run in runs:
        for case, score in run.items():
            passed = score >= pass_mark
            flips.setdefault(case, 0)
            if case in last and last[case] != passed:
                flips[case] += 1
            last[case] = passed
    return flips


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _relative_drop(baseline: float | None, current: float | None) -> float | None:
    if baseline is None or current is None or not math.isfinite(baseline) or baseline <= 0:
        return None
    return (baseline - current) / baseline


def decide(
    current: Mapping[str, float],
    window: Sequence[Mapping[str, float]],
    policy: VerdictPolicy,
    *,
    binary: bool | None = None,
    known_bad: Collection[str] = (),
    valid: bool = True,
) -> Verdict:
    """Judge ``current`` (case id → score) against ``window`` (earlier runs, oldest first)."""
    cur = _clean(current)
    runs = [r for r in (_clean(w) for w in window) if r]
    bad = set(known_bad)
    broken = sorted(c for c, s in cur.items() if c in bad and s >= policy.pass_mark)
    flips = count_flips([*runs, cur], policy.pass_mark)
    flaky = sorted(c for c, f in flips.items() if f > policy.flaky_flips and c not in bad)
    quarantined = flaky if policy.quarantine_flaky else []
    out = bad | set(quarantined)
    used = {c: s for c, s in cur.items() if c not in out}
    used_runs = [r for r in ({c: s for c, s in run.items() if c not in out} for run in runs) if r]
    values = [*used.values(), *(s for r in used_runs for s in r.values())]
    is_binary = all(s in (0.0, 1.0) for s in values) if binary is None else binary

    current_mean = _mean(used.values())
    # Large suites: the CI of a mean needs fewer resamples to be stable; bound the work to
    # ~20 million draws (10,000 resamples up to 2,000 cases, never fewer than 2,000).
    resamples = min(policy.resamples, max(2_000, BOOTSTRAP_BUDGET // max(len(used), 1)))
    ci = stats.bootstrap_ci(list(used.values()), level=policy.ci_level, resamples=resamples, seed=policy.seed)
    newly_failing: list[str] = []
    newly_passing: list[str] = []
    if runs:
        last = runs[-1]
        for case in sorted(set(cur) & set(last) - bad):
            before, now = last[case] >= policy.pass_mark, cur[case] >= policy.pass_mark
            if before and not now:
                newly_failing.append(case)
            elif now and not before:
                newly_passing.append(case)

    fields: dict = {
        "rule": policy.rule, "binary": is_binary, "current_mean": current_mean,
        "baseline_mean": None, "drop": None, "threshold": policy.threshold,
        "threshold_met": False, "ci_low": ci.low if ci else None,
        "ci_high": ci.high if ci else None, "p_value": None, "stars": "", "test": None,
        "effect_size": None, "n_current": len(used), "n_paired": 0, "n_unpaired": 0,
        "window_runs": len(used_runs), "newly_failing": newly_failing,
        "newly_passing": newly_passing, "flaky": flaky, "quarantined": quarantined,
        "broken_controls": broken,
    }

    def verdict(status: VerdictStatus, reason: str, regression: bool = False) -> Verdict:
        return Verdict(status=status, is_regression=regression, reason=reason, **fields)

    if not valid:
        return verdict(VerdictStatus.INVALID, "The run was marked invalid, so it is not judged.")
    if not used:
        return verdict(VerdictStatus.INVALID, "The run has no scored cases to judge.")
    if broken:
        return verdict(
            VerdictStatus.SCORER_BROKEN,
            f"The scorer passed {len(broken)} known-bad control case(s) "
            f"({', '.join(broken[:3])}), so its scores cannot be trusted.",
        )
    if not used_runs:
        return verdict(
            VerdictStatus.NO_BASELINE,
            f"No earlier valid run to compare with; mean {current_mean:.3f} is the first point.",
        )

    if set(used) < set().union(*used_runs):  # a run on a subset of the cases (e.g. --limit)
        used_runs = [r for r in ({c: s for c, s in run.items() if c in used} for run in used_runs) if r] or used_runs
    baseline_mean = _mean([_mean(r.values()) for r in used_runs])
    drop = _relative_drop(baseline_mean, current_mean)
    window_cases = set().union(*used_runs)
    paired = sorted(set(used) & window_cases)
    x = np.array([used[c] for c in paired])
    y = np.array([_fmean([r[c] for r in used_runs if c in r]) for c in paired])
    fields.update(
        baseline_mean=baseline_mean, drop=drop, n_paired=len(paired),
        n_unpaired=len(set(used) ^ window_cases),
    )
    falls = drop is not None and drop >= policy.threshold - TOLERANCE
    rises = drop is not None and -drop >= policy.threshold - TOLERANCE
    fields["threshold_met"] = falls

    p = None
    lower = True
    paired_drop = None
    if paired:
        lower = float(np.mean(x - y)) <= 0
        if is_binary and np.isin(y, (0.0, 1.0)).all() and np.isin(x, (0.0, 1.0)).all():
            result = stats.mcnemar_exact(x, y)
        else:
            result = stats.paired_permutation_test(
                x, y, permutations=policy.permutations, seed=policy.seed
            )
        p = result.p_value
        paired_drop = _relative_drop(float(y.mean()), float(x.mean()))
        fields.update(
            p_value=p, stars=stats.stars(p), paired_drop=paired_drop,
            test=f"{result.test}, two-sided",
            effect_size=stats.paired_effect_size(x, y),
        )
    significant = p is not None and p < policy.alpha
    sig_drop, sig_rise = significant and lower, significant and not lower

    ctx = _context(baseline_mean, current_mean, drop, len(used_runs), p, len(paired), fields)
    if policy.rule == "paired":
        m = policy.effective_min_effect
        big_drop = paired_drop is not None and paired_drop >= m - TOLERANCE
        big_rise = paired_drop is None or -paired_drop >= m - TOLERANCE
        if sig_drop and big_drop:
            return verdict(
                VerdictStatus.REGRESSED,
                f"Significant paired drop of at least {_pct(m)}: {ctx}.", True,
            )
        if falls:
            return verdict(
                VerdictStatus.REGRESSED_NS,
                f"Drop meets the {_pct(policy.threshold)} threshold but the paired evidence "
                f"does not (needs p < {policy.alpha} and a drop ≥ {_pct(m)}): {ctx}.",
            )
        if sig_rise and big_rise:
            return verdict(VerdictStatus.IMPROVED, f"Significant paired rise: {ctx}.")
        return verdict(VerdictStatus.STEADY, f"No significant paired change: {ctx}.")

    if falls:
        if sig_drop:
            return verdict(
                VerdictStatus.REGRESSED,
                f"Drop meets the {_pct(policy.threshold)} threshold and is significant: {ctx}.",
                True,
            )
        return verdict(
            VerdictStatus.REGRESSED_NS,
            f"Drop meets the {_pct(policy.threshold)} threshold but is not significant: {ctx}.",
            not policy.require_significance,
        )
    if rises and (sig_rise or not policy.require_significance):
        return verdict(
            VerdictStatus.IMPROVED, f"Rise meets the {_pct(policy.threshold)} threshold: {ctx}."
        )
    if drop is None:
        return verdict(
            VerdictStatus.STEADY,
            f"Baseline mean is {baseline_mean:.3f}, so a relative drop is undefined: {ctx}.",
        )
    return verdict(VerdictStatus.STEADY, f"Change within the {_pct(policy.threshold)} "
                   f"threshold: {ctx}.")


def _context(
    baseline: float | None,
    current: float | None,
    drop: float | None,
    runs: int,
    p: float | None,
    n_paired: int,
    fields: dict,
) -> str:
    """A short clause with the numbers behind a verdict."""
    change = "n/a" if drop is None else f"{'-' if drop >= 0 else '+'}{_pct(abs(drop))}"
    text = f"{baseline:.3f} → {current:.3f} ({change}) vs {runs}-run baseline"
    if p is None:
        text += ", no paired cases to test"
    else:
        text += f", p={p:.3g}{fields['stars']} on {n_paired} paired cases"
    if fields["n_unpaired"]:
        text += f", {fields['n_unpaired']} unpaired"
    if fields["quarantined"]:
        text += f", {len(fields['quarantined'])} flaky quarantined"
    return text
