"""A run judged as one night of a series: the single-run verdict re-labelled by the nightly
limits (:mod:`evalloop.verdicts.sequential`: the drop chart, one bad night, the floor's limits),
with the chart carried from the scorer's last nightly night (:func:`last_chart`)."""

from __future__ import annotations

from collections.abc import Callable

from evalloop.history.models import Run, ScorerSummary
from evalloop.history.store import HistoryStore
from evalloop.policy import VerdictPolicy
from evalloop.verdicts import floors, sequential, soundness
from evalloop.verdicts.verdict import Verdict, VerdictStatus


def judge_night(store: HistoryStore, run: Run, summary: ScorerSummary, policy: VerdictPolicy, evidence: Verdict,
                scorers: int, sound: Callable[[], float | None]) -> tuple[Verdict, sequential.Chart]:
    """The single-run verdict re-labelled by the nightly limits (:mod:`evalloop.verdicts.sequential`):
    red when the drop chart is, or on one bad night; ``below floor`` when the floor's limits say so
    (the same check as a one-off run's, and its chart); a one-run ``regressed`` that neither shows
    is a ``watch``."""
    z = float(evidence.z or 0.0)
    budget, floor = policy.alarm_budget, floors.active(evidence.min_score)
    # the threshold in standard errors from the window's noise (steady while the window is), else from z
    drop_abs = (evidence.baseline_mean or 0.0) - (evidence.shared_mean or 0.0)
    se = (evidence.drop_noise_se * (evidence.baseline_mean or 0.0)) if evidence.drop_noise_se \
        else abs(drop_abs / z) if z else None
    k, h = sequential.design(policy.threshold, evidence.baseline_mean, se, budget, scorers, floor=floor)
    bad = evidence.p_value is not None and evidence.p_value < policy.alpha and sequential.bad_night(
        evidence.drop, evidence.drop_noise_se or 0.0, policy.threshold, budget, scorers, floor=floor)
    previous = last_chart(store, run, summary.scorer)
    chart = sequential.step(previous, z, k, h, bad=bad)
    if chart.red:  # red only while the drop holds against a sound baseline (no windup)
        chart = sequential.step(previous, z, k, h, bad=bad, holds=soundness.holds(sound(), sequential.release(k)))
    found = floors.check(evidence.current_mean, evidence.min_score, evidence.floor_se, budget, scorers)
    if found is not None:
        chart.floor = floors.step(previous.floor if previous is not None else None, found, budget, scorers)
    single = evidence.status
    if chart.red:
        status = VerdictStatus.REGRESSED
    elif chart.floor is not None and chart.floor.alarm:
        status = VerdictStatus.BELOW_FLOOR
    elif chart.green:
        status = VerdictStatus.IMPROVED
    elif single in (VerdictStatus.REGRESSED, VerdictStatus.BELOW_FLOOR):
        status = VerdictStatus.WATCH  # one night's drop: the series has not shown it yet
    elif single is VerdictStatus.IMPROVED:
        status = VerdictStatus.STEADY
    else:
        status = single
    shown = chart.sentence(budget)
    reason = f"{shown[0].upper()}{shown[1:]}: {evidence.reason}"
    if status is VerdictStatus.BELOW_FLOOR and found is not None and not found.below:
        assert evidence.current_mean is not None and evidence.min_score is not None and chart.floor is not None
        reason = (f"Nightly floor chart: the mean has stayed under its floor {evidence.min_score:.2f} "
                  f"(deficits {chart.floor.total:.2f} past its limit {chart.floor.h:.2f}, or lasting). {reason}")
    return evidence.model_copy(update={"status": status, "reason": reason, "mode": "nightly"}), chart


def last_chart(store: HistoryStore, run: Run, scorer: str) -> sequential.Chart | None:
    """The chart of this scorer's last nightly night before ``run`` (none before an acceptance)."""
    for details in store.earlier_details(run.suite, scorer, run):
        if details.accepted is not None:
            return None
        if details.chart:
            return sequential.Chart.model_validate(details.chart)
    return None
