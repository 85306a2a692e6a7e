"""The sound baseline: what a run's drop is judged against before it may keep the run out.

A run that drops against its rolling window is kept out of later baselines only when the drop
also holds against a *sound* baseline (:func:`sound_drop`): the runs that measured the suite
up to its last good run, each case's mean there moved to the runs' median level
(:func:`sound_centre`), so a run that scored high by chance is outvoted and cannot
freeze the window (no windup), and a drop that lasts for weeks is still compared with the runs
before it began. The same robustness guards the window itself: a window run far from the others'
median is set aside (:func:`set_aside`). docs/alarms.md ("A drop must hold against a sound
baseline") states the rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from evalloop.history.models import Run, ScorerSummary
from evalloop.history.store import HistoryStore
from evalloop.scoring.scorevec import Aligned, Vector, align
from evalloop.verdicts.arrays import Floats, Ints
from evalloop.verdicts.drop import scope_groups, standardized_drop
from evalloop.verdicts.verdict import noise_var, window_noise

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


def sound_drop(store: HistoryStore, run: Run, summary: ScorerSummary, current: Vector,
               stored: Callable[[str], Callable[[], Mapping[str, float] | Floats]],
               scopes: Mapping[str, str] | None, window: int, product: str | None,
               last_good: tuple[Run, ScorerSummary] | None) -> float | None:
    """The run's drop in standard errors against a *sound* baseline (:func:`sound_centre`) of the
    last ``2 · window + 1`` runs that measured the suite (whatever their verdicts) up to its last
    good run — the runs before the current drop began, where one run that scored high by chance
    is outvoted. With fewer than ``window`` of those the baseline is young (its few good runs
    may all have scored high, and every run after them been kept out as a drop from them: a
    windup), and the last runs that measured the suite at all stand in, the current drop's
    included, so a young suite's long red streak ends once its nights outnumber the runs before
    it. (That also ends a lasting drop's alarm in a suite with fewer than ``window`` good runs
    before it, after five or six nights; anchoring before the red streak instead kept that alarm
    and let one lucky start stay red for twelve nights: docs/alarms.md.) None with fewer than
    :data:`SOUND_RUNS` runs at all: the drop is trusted."""
    n = 2 * window + 1
    recent = None
    if last_good is not None:  # the runs up to the last good one (a long drop may reach back far)
        upto = [*store.baseline_runs(run.suite, summary.scorer, last_good[0], n - 1, product,
                                     measurement=summary.measurement, measured_only=True), last_good]
        recent = upto if len(upto) >= window else None
    if recent is None:
        recent = store.baseline_runs(run.suite, summary.scorer, run, n, product,
                                     measurement=summary.measurement, measured_only=True)
    if len(recent) < SOUND_RUNS:
        return None
    aligned = align(current.ids, current.values, [stored(r.id) for r, _ in recent], scopes, order=current.order)
    rows = aligned.compared
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
