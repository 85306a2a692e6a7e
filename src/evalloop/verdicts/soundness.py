"""The sound baseline: what a run's drop is judged against before it may keep the run out.

A run that drops against its rolling window is kept out of later baselines only when the drop
also holds against a *sound* baseline (:func:`sound_drop`): the runs that measured the suite
before the current failing streak, each case's mean there moved to the runs' median level
(:func:`sound_centre`), so a run or two that scored high by chance are outvoted and cannot
freeze the window (no windup), and a drop that lasts for weeks is still compared with the runs
before it began. The same robustness guards the window itself: a window run far from the others'
median is set aside (:func:`set_aside`). docs/alarms.md ("A drop must hold against a sound baseline") states the rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from evalloop.history.eligibility import accepted
from evalloop.history.models import Run, ScorerSummary
from evalloop.history.store import HistoryStore
from evalloop.scoring.scorevec import Aligned, Vector, align
from evalloop.verdicts.arrays import Floats, Ints
from evalloop.verdicts.drop import scope_groups, standardized_drop
from evalloop.verdicts.verdict import VerdictStatus, noise_var, window_noise

SOUND_RUNS = 3  # runs a sound median needs: the median of three outvotes one lucky run
OUTLIER_SE = 3.0  # a window run this many standard errors of a run mean from the others' median is set aside


def holds(sound: float | None, bar: float) -> bool:
    """Whether a drop holds against the sound baseline (no sound baseline yet: it is trusted)."""
    return sound is None or sound >= bar


def run_means(w: Floats) -> tuple[Floats, Ints]:
    """Each run's mean over the cases it graded (``w``: cases × runs, NaN: not graded), and how
    many it graded (a run that graded none has mean 0 and count 0)."""
    counts = (~np.isnan(w)).sum(axis=0)
    return np.nansum(w, axis=0) / np.maximum(counts, 1), counts


def sound_centre(w: Floats) -> Floats:
    """Each case's sound baseline over the runs ``w`` (cases × runs, NaN: not graded): its mean
    over the runs, moved by the runs' robust level — the median of the runs' means less their
    mean — so one run that scored high as a whole is outvoted while every case keeps its own
    level. (A per-case median is no sound centre: a bounded judge's grades pile up at 1.0, so
    each case's median sits above its mean, and every ordinary night looks like a drop.)"""
    means, counts = run_means(w)
    levels = means[counts > 0]
    case_means = np.nanmean(w, axis=1)
    if levels.size < 2:
        return case_means
    return case_means + (float(np.median(levels)) - float(levels.mean()))


def _before_the_streak(store: HistoryStore, run: Run, summary: ScorerSummary, n: int,
                       product: str | None) -> list[tuple[Run, ScorerSummary]]:
    """The last ``n`` runs that measured the suite before the current streak of failing verdicts
    (the runs just before ``run`` that were red, none accepted since), oldest first. Anchored
    there, not at the last run admitted to the baseline: a warm-up run kept out for a drop of
    its own is one more run of the median, where anchoring at the last good run took a suite
    with four good runs for young and stood the lasting drop's own nights in for its baseline."""
    reach = n
    while True:
        found = store.baseline_runs(run.suite, summary.scorer, run, reach, product,
                                    measurement=summary.measurement, measured_only=True)
        streak = 0
        for _, earlier in reversed(found):
            if accepted(earlier) is not None or not _failed(earlier.verdict):
                break
            streak += 1
        if len(found) - streak >= n or len(found) < reach:  # n before the streak, or all there are
            return found[: len(found) - streak][-n:]
        reach = streak + n  # the streak took part of the read: reach back past it


def _failed(verdict: str | None) -> bool:
    """Whether a stored verdict failed (an unknown word, of another version: no)."""
    try:
        return verdict is not None and VerdictStatus(verdict).fails
    except ValueError:
        return False


def sound_drop(store: HistoryStore, run: Run, summary: ScorerSummary, current: Vector,
                stored: Callable[[str], Callable[[], Mapping[str, float] | Floats]],
                scopes: Mapping[str, str] | None, window: int, product: str | None) -> float | None:
    """The run's drop in standard errors against a *sound* baseline (:func:`sound_centre`) of the
    last ``2 · window + 1`` runs that measured the suite (whatever their verdicts) before the
    current failing streak began (:func:`_before_the_streak`) — the runs before the current drop,
    where a run or two that scored high by chance are outvoted by the median, and which a drop
    that lasts for weeks never reaches. With fewer than ``window`` of those the baseline is young
    (its few runs may all have scored high, and every run after them been red as a drop from
    them: a windup), and the last runs that measured the suite at all stand in, the current
    streak's included. None with fewer than :data:`SOUND_RUNS` runs at all: the drop is trusted."""
    n = 2 * window + 1
    recent = _before_the_streak(store, run, summary, n, product)
    if len(recent) < window:
        recent = store.baseline_runs(run.suite, summary.scorer, run, n, product,
                                     measurement=summary.measurement, measured_only=True)
    if len(recent) < SOUND_RUNS:
        return None
    aligned = align(current.ids, current.values, [stored(r.id) for r, _ in recent], scopes, order=current.order)
    rows = ~np.isnan(aligned.current) & ~np.all(np.isnan(aligned.window), axis=1)
    if rows.sum() < 2:
        return None
    x, w = aligned.current[rows], aligned.window[rows]
    return standardized_drop(x - sound_centre(w), noise_var(x, w),
                             float(np.mean(np.sum(~np.isnan(w), axis=1))), scope_groups(aligned.scopes, rows))


def set_aside(aligned: Aligned, prior: list[tuple[Run, ScorerSummary]]
               ) -> tuple[Aligned, list[tuple[Run, ScorerSummary]], list[str]]:
    """The window without its outlying runs: a run whose mean over the window's cases is further
    from the median of the window's run means than :data:`OUTLIER_SE` standard errors of a run's
    mean (the window's own run-to-run noise; with none, any difference) is set aside, so one run
    that scored high (or low) by chance does not move the baseline for the next five runs. Only
    a window of :data:`SOUND_RUNS` runs or more has a median to stand on."""
    w = aligned.window
    if w.shape[1] < SOUND_RUNS:
        return aligned, prior, []
    means, counts = run_means(w)
    if not counts.all():
        return aligned, prior, []
    noise = window_noise(w)
    if noise is None:
        return aligned, prior, []
    reach = max(OUTLIER_SE * math.sqrt(max(noise, 0.0) / float(counts.min())), 1e-6)
    out = np.abs(means - float(np.median(means))) > reach
    if not out.any():
        return aligned, prior, []
    keep = ~out
    trimmed = Aligned(ids=aligned.ids, current=aligned.current, window=w[:, keep], scopes=aligned.scopes)
    return trimmed, [p for p, k in zip(prior, keep, strict=True) if k], \
        [p[0].id for p, k in zip(prior, keep, strict=True) if not k]


def aside_sentence(ids: list[str]) -> str:
    runs = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    return (f"Set aside from the baseline as outlying (its mean far from the other window runs'): "
            f"run{'s' if len(ids) > 1 else ''} {runs}.")
