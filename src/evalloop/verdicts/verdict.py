"""Verdicts: one scorer's result in one run, judged against its rolling window, with certainty.

``decide`` takes the run's per-case scores and those of up to N earlier valid runs (oldest
first) and returns a :class:`Verdict`. One vocabulary serves every output (terminal, JSON,
JUnit, Markdown, HTML, the pytest plugin, webhooks, exit codes): see :class:`VerdictStatus`.

The comparison is made on the cases both sides share, so a changed case set never looks like
a drop: cases only in this run (*added*) and only in the window (*removed*) are counted and
given their own means. Per shared case ``c``, ``x_c`` is this run's score and ``ȳ_c`` its mean
over the window; the baseline is ``mean(ȳ)``, the drop ``(mean(ȳ) − mean(x)) / mean(ȳ)``.
Evidence comes from a run-label permutation test (:func:`evalloop.verdicts.runlabel.run_label_permutation_test`),
exact under "nothing changed" for any score distribution and window length.

When the suite has scopes (every graded case tagged ``scope:<id>``, at least two scopes: the
conversations of LoCoMo, LongMemEval, retrieval-conversations) the questions of one scope are not
independent evidence: the run's CI resamples whole scopes, the test draws one run label per
scope, and the drop's bound and standard error are cluster-robust (:mod:`evalloop.verdicts.drop`).

A drop that is not significant is a ``watch``, never a regression, under every rule:

* ``"evidence"`` (default): a regression is a significant drop (two-sided ``p < alpha``) that is
  at least the threshold with ``confidence`` (default 95 %): the one-sided lower bound of the
  relative drop reaches the ADR's threshold. The threshold is the smallest drop worth acting on,
  and the verdict says so in one sentence ("the drop is at least 10.0 % with 95 % confidence").
  A significant drop not shown to be that large is a ``watch``.
* ``"threshold"`` (the ADR rule with evidence): the observed drop meets the threshold *and* is
  significant.
* ``"paired"``: a significant drop of at least ``min_effect`` (default a third of the threshold).

Known-bad control cases are kept out of the statistics; passing one with a fixed output makes the
verdict ``scorer broken``. Flaky cases are listed, and with ``quarantine_flaky`` kept out. A mean
under the scorer's absolute floor (``min_score``; by default the kind's target, 95 / 80 / 70 %)
with the budgeted confidence is ``below floor`` whatever the baseline says; under it within the
noise it is a ``watch`` "near its floor" (:mod:`evalloop.verdicts.floors`). Every verdict also
carries ``z``, the drop in standard errors, which the nightly rule
(:mod:`evalloop.verdicts.sequential`) accumulates across nights.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from pydantic import BaseModel

from evalloop.policy import TOLERANCE, VerdictPolicy
from evalloop.score import passes
from evalloop.scoring import scorevec
from evalloop.verdicts import floors
from evalloop.verdicts.arrays import Floats
from evalloop.verdicts.drop import Z_CAP, mean_interval, minimal_detectable_drop, scope_groups, standardized_drop
from evalloop.verdicts.masks import CaseMasks, case_masks
from evalloop.verdicts.paired import (
    Overlap,
    PairedTest,
    RuleCall,
    noise_var,
    overlap,
    paired_test,
    pct,
    rule_call,
    window_noise,
)
from evalloop.verdicts.stats import ConfidenceInterval

__all__ = ["TOLERANCE", "Z_CAP", "Verdict", "VerdictPolicy", "VerdictStatus", "decide", "decide_aligned",
           "count_flips", "minimal_detectable_drop", "noise_var", "standardized_drop", "window_noise"]


class VerdictStatus(StrEnum):
    """The outcome of one scorer in one run — the one vocabulary every output uses."""

    IMPROVED = "improved"
    STEADY = "steady"
    WATCH = "watch"
    REGRESSED = "regressed"
    BELOW_FLOOR = "below floor"
    NO_BASELINE = "no baseline yet"
    INVALID = "invalid run"
    SCORER_BROKEN = "scorer broken"
    SKIPPED = "skipped"

    @property
    def fails(self) -> bool:
        """Whether this verdict fails CI (exit 1): a regression, a broken scorer, an invalid run."""
        return self in _FAILING

    @property
    def is_regression(self) -> bool:
        return self is VerdictStatus.REGRESSED

    @classmethod
    def parse(cls, text: str | None) -> VerdictStatus | None:
        """A stored verdict string, including those written by older versions."""
        if not text:
            return None
        return _LEGACY.get(text) or cls(text)


_FAILING = frozenset({VerdictStatus.REGRESSED, VerdictStatus.SCORER_BROKEN, VerdictStatus.INVALID,
                      VerdictStatus.BELOW_FLOOR})
_LEGACY = {"regressed (not significant)": VerdictStatus.WATCH}


class Verdict(BaseModel):
    """One scorer's verdict for one run, with the evidence behind it."""

    status: VerdictStatus
    rule: str = "evidence"
    binary: bool = False
    current_mean: float | None  # over every scored case of this run (controls left out)
    baseline_mean: float | None  # the window's mean over the shared cases
    shared_mean: float | None = None  # this run's mean over the shared cases
    drop: float | None  # relative, on the shared cases
    drop_ci_low: float | None = None
    drop_ci_high: float | None = None
    paired_drop: float | None = None
    threshold: float
    threshold_met: bool
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None = None  # "BCa", or "cluster BCa" when whole scopes were resampled
    scopes: int | None = None  # the scopes the CI resampled (None: cases independent); the test names its own
    p_value: float | None
    stars: str
    test: str | None
    effect_size: float | None
    mdd: float | None = None  # relative drop detected 90 % of the time under this rule
    significant_drop: bool = False  # p < alpha and lower, whatever the size
    keeps_out: bool = False  # a significant drop that holds against a sound baseline: no later baseline
    set_aside: list[str] = []  # window runs set aside as outlying (their means far from the others')
    drop_noise_se: float | None = None  # the relative drop's standard error from run-to-run noise alone
    z: float | None = None  # the drop in standard errors of the paired difference (> 0: lower)
    pass_mark: float = 0.5
    min_score: float | None = None
    floor_se: float | None = None  # the run-to-run noise of the mean the floor is judged with (None: not measured)
    floor_state: str | None = None  # "above", "near" or "below" its floor (None: no floor)
    floor_w: float | None = None  # how far under its floor, in ``floor_se``
    mode: str = "single run"  # or "nightly": which rule labelled it (see evalloop.verdicts.sequential)
    n_current: int
    n_paired: int
    n_unpaired: int
    added: int = 0
    added_mean: float | None = None
    removed: int = 0
    removed_mean: float | None = None
    window_runs: int
    newly_failing: list[str]
    newly_passing: list[str]
    flaky: list[str]
    quarantined: list[str]
    broken_controls: list[str]
    reason: str

    @property
    def is_regression(self) -> bool:
        return self.status.is_regression


def count_flips(runs: Sequence[Mapping[str, float]], pass_mark: float) -> dict[str, int]:
    """How often each case's pass/fail state changes across ``runs`` (oldest first)."""
    last: dict[str, bool] = {}
    flips: dict[str, int] = {}
    for run in runs:
        for case, score in run.items():
            passed = passes(score, pass_mark)
            flips.setdefault(case, 0)
            if case in last and last[case] != passed:
                flips[case] += 1
            last[case] = passed
    return flips


def decide(
    current: Mapping[str, float],
    window: Sequence[Mapping[str, float]],
    policy: VerdictPolicy,
    *,
    binary: bool | None = None,
    known_bad: Collection[str] = (),
    valid: bool = True,
    invalid_reason: str | None = None,
    scopes: Mapping[str, str] | None = None,
    scorers: int = 1,
    scorer_controls: Collection[str] | None = None,
) -> Verdict:
    """Judge ``current`` (case id → score) against ``window`` (earlier runs, oldest first);
    ``scopes`` (case id → its ``scope:<id>``) makes the statistics count whole scopes;
    ``scorers`` (the suite's graded scorers) split the alarm budget the floor is judged in."""
    ids, values = scorevec.from_mapping(current)
    return decide_aligned(scorevec.align(ids, values, window, scopes), policy, binary=binary,
                          known_bad=known_bad, valid=valid, invalid_reason=invalid_reason,
                          scorer_controls=scorer_controls, scorers=scorers)


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
    output; None: every known-bad case) makes the scorer broken.

    In four parts: the cases it reads (:func:`~evalloop.verdicts.masks.case_masks`), the paired
    test on the cases shared with the window (:mod:`evalloop.verdicts.paired`), the policy's rule
    (:func:`~evalloop.verdicts.paired.rule_call`), and the status with its reason (:func:`_judged`)."""
    masks = case_masks(aligned, policy, binary=binary, known_bad=known_bad, scorer_controls=scorer_controls)
    alone = _run_alone(aligned, masks, policy)
    if not valid:
        reason = invalid_reason or "The run was marked invalid, so it is not judged."
        return _verdict(VerdictStatus.INVALID, reason, policy, masks, alone)
    if not masks.n:
        return _verdict(VerdictStatus.INVALID, "The run has no scored cases to judge.", policy, masks, alone)
    if masks.broken:
        return _verdict(VerdictStatus.SCORER_BROKEN,
                        f"The scorer passed {len(masks.broken)} known-bad control case(s) "
                        f"({', '.join(masks.broken[:3])}), so its scores cannot be trusted.", policy, masks, alone)
    if not masks.window_runs:
        reason = f"No earlier valid run to compare with; mean {alone.mean:.3f} is the first point."
        return _floor(_verdict(VerdictStatus.NO_BASELINE, reason, policy, masks, alone), policy, scorers)
    shared = overlap(masks, aligned.current)
    if not shared.n_paired:
        reason = (f"No case of this run was graded in the {masks.window_runs}-run window "
                  f"({shared.added} new cases); mean {alone.mean:.3f} starts a new baseline.")
        return _floor(_verdict(VerdictStatus.NO_BASELINE, reason, policy, masks, alone, shared), policy, scorers)
    test = paired_test(aligned, masks, shared, policy)
    status, reason = _judged(policy, test, rule_call(policy, test), _context(test, shared, masks))
    return _floor(_verdict(status, reason, policy, masks, alone, shared, test), policy, scorers)


@dataclass(frozen=True)
class _RunAlone:
    """What the run says alone, before any comparison: its mean and its CI."""

    mean: float  # over the used cases (0.0 when there is none: such a run is judged invalid)
    ci: ConfidenceInterval | None
    scopes: int | None  # the scopes the CI resampled (None: cases independent)


def _run_alone(aligned: scorevec.Aligned, masks: CaseMasks, policy: VerdictPolicy) -> _RunAlone:
    values = masks.values
    resamples = min(policy.resamples, max(2_000, stats_budget() // max(len(values), 1)))
    by_scope = scope_groups(aligned.scopes, masks.used)  # the suite has scopes: they are the evidence
    ci = mean_interval(values, by_scope, level=policy.ci_level, resamples=resamples, seed=policy.seed)
    return _RunAlone(mean=_mean(values) or 0.0, ci=ci,
                     scopes=None if by_scope is None else int(np.unique(by_scope).size))


def _verdict(status: VerdictStatus, reason: str, policy: VerdictPolicy, masks: CaseMasks, alone: _RunAlone,
             shared: Overlap | None = None, test: PairedTest | None = None) -> Verdict:
    """The verdict from its parts: the cases it read, the run alone, and (when there is a window)
    the overlap with it and (when they share cases) the paired test."""
    ci = alone.ci
    return Verdict(
        status=status, reason=reason, rule=policy.rule, binary=masks.binary,
        current_mean=alone.mean if masks.n else None, threshold=policy.threshold,
        ci_low=ci.low if ci else None, ci_high=ci.high if ci else None, ci_method=ci.method if ci else None,
        scopes=alone.scopes, n_current=masks.n, window_runs=masks.window_runs, newly_failing=masks.newly_failing,
        newly_passing=masks.newly_passing, flaky=masks.flaky, quarantined=masks.quarantined,
        broken_controls=masks.broken, pass_mark=policy.pass_mark, min_score=policy.min_score,
        n_paired=shared.n_paired if shared else 0, n_unpaired=shared.n_unpaired if shared else 0,
        added=shared.added if shared else 0, added_mean=shared.added_mean if shared else None,
        removed=shared.removed if shared else 0, removed_mean=shared.removed_mean if shared else None,
        baseline_mean=test.baseline_mean if test else None, shared_mean=test.shared_mean if test else None,
        drop=test.drop if test else None, paired_drop=test.drop if test else None,
        drop_ci_low=test.drop_ci_low if test else None, drop_ci_high=test.drop_ci_high if test else None,
        threshold_met=test.threshold_met if test else False, p_value=test.p_value if test else None,
        stars=test.stars if test else "", test=test.test if test else None,
        effect_size=test.effect_size if test else None, mdd=test.mdd if test else None, z=test.z if test else None,
        floor_se=test.floor_se if test else None, drop_noise_se=test.drop_noise_se if test else None,
        significant_drop=test.significant_drop if test else False,
    )


def _judged(policy: VerdictPolicy, test: PairedTest, rule: RuleCall, ctx: str) -> tuple[VerdictStatus, str]:
    """The status of a run compared with its window, and the reason in one sentence: a regression
    is a significant drop the rule finds big enough; a drop that is not both is a ``watch``."""
    if test.significant_drop and rule.big_drop:
        return VerdictStatus.REGRESSED, f"Significant drop, and {rule.shown}: {ctx}."
    if test.significant_drop:
        return VerdictStatus.WATCH, f"Significant drop, but {rule.not_shown}: {ctx}."
    if test.threshold_met:
        return VerdictStatus.WATCH, (f"Drop meets the {pct(policy.threshold)} threshold but is not significant "
                                     f"(p ≥ {policy.alpha}): watch the next runs: {ctx}.")
    if test.significant_rise and rule.big_rise:
        return VerdictStatus.IMPROVED, f"Significant rise: {ctx}."
    return VerdictStatus.STEADY, f"No significant change: {ctx}."


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
    update: dict[str, object] = {"floor_state": found.state, "floor_w": found.w}
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


def _context(test: PairedTest, shared: Overlap, masks: CaseMasks) -> str:
    """A short clause with the numbers behind a verdict."""
    drop = test.drop
    change = "n/a" if drop is None else f"{'-' if drop >= 0 else '+'}{pct(abs(drop))}"
    text = (f"{test.baseline_mean:.3f} → {test.shared_mean:.3f} ({change}) vs {masks.window_runs}-run baseline, "
            f"p={test.p_value:.3g}{test.stars} ({test.test.split(',')[0]}) "
            f"on {shared.n_paired} shared cases")
    if test.scopes:
        text += f" in {test.scopes} scopes"
    if shared.added or shared.removed:
        text += f"; {shared.added} added, {shared.removed} removed"
    if masks.quarantined:
        text += f", {len(masks.quarantined)} flaky quarantined"
    return text


def _mean(values: Collection[float] | Floats) -> float | None:
    return math.fsum(values) / len(values) if len(values) else None
