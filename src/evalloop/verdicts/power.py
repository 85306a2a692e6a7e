"""What a suite can detect: the relative-drop threshold that keeps false alarms at a chosen rate,
the minimal drop a paired test catches with a given power, and judge-noise calibration (an LLM
judge's repeated scores of the same outputs turned into a per-case noise estimate, a threshold
and a minimal detectable drop for the suite's size)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict

from evalloop.verdicts.stats import smallest_accepted

_NORMAL = NormalDist()

#: a run whose minimal detectable drop is more than this many thresholds is too coarse to rely on:
#: a drop twice the size worth acting on would be missed more than 10 % of the time
TOO_COARSE = 2.0


def too_coarse(mdd: float | None, threshold: float) -> bool:
    """Whether a run is too small or too noisy to catch a regression of the size that matters:
    its minimal detectable drop (90 % detection) is over :data:`TOO_COARSE` × the threshold, or
    not even a total drop would be caught (``mdd`` None). Under the default rule the minimal
    detectable drop is always somewhat above the threshold (a drop is flagged once it is shown
    to reach it), so only a multiple of it says the suite needs more cases or epochs."""
    return mdd is None or mdd > TOO_COARSE * threshold


class Calibration(BaseModel):
    """What a judge-noise calibration found for one suite and scorer."""

    model_config = ConfigDict(frozen=True)

    n_cases: int
    repeats: int
    binary: bool
    mean: float
    per_case_variance: list[float]
    noise_sd: float
    false_alarm_rate: float
    window: int
    suggested_threshold: float | None
    minimal_detectable_drop: float | None
    power: float


def z_quantile(p: float) -> float:
    """The standard normal quantile at ``p``."""
    return _NORMAL.inv_cdf(p)


def smallest_detectable(detectable: Callable[[float], bool], *, steps: int) -> float | None:
    """The smallest relative drop in (0, 1] that ``detectable`` accepts (it must be monotone),
    found by ``steps`` halvings, from above; None when not even a total drop is."""
    return smallest_accepted(detectable, 0.0, 1.0, steps=steps) if detectable(1.0) else None


def suggest_threshold(
    n_cases: int,
    noise_sd: float,
    baseline_mean: float,
    *,
    false_alarm_rate: float = 0.05,
    window: int = 5,
) -> float | None:
    """Relative drop that an unchanged suite exceeds only ``false_alarm_rate`` of the time.

    The run mean is compared with the mean of ``window`` earlier runs, each over ``n_cases``
    cases whose scores carry noise of sd ``noise_sd``: the drop has sd
    ``noise_sd * sqrt((1 + 1/window) / n_cases)``; the threshold is its one-sided normal quantile
    divided by the baseline. ``None`` when the baseline is zero.
    """
    if n_cases < 1 or baseline_mean <= 0 or not math.isfinite(baseline_mean):
        return None
    se = noise_sd * math.sqrt((1.0 + 1.0 / max(window, 1)) / n_cases)
    return z_quantile(1.0 - false_alarm_rate) * se / baseline_mean


def minimal_detectable_drop(
    n_cases: int,
    baseline_mean: float,
    *,
    case_sd: float | None = None,
    binary: bool | None = None,
    alpha: float = 0.05,
    power: float = 0.9,
    window: int = 5,
    min_effect: float = 0.0,
    two_sided: bool = True,
) -> float | None:
    """Smallest relative drop a paired test at ``alpha`` (two-sided by default) detects with
    ``power``.

    ``case_sd`` is the sd of one run's score of one case (default: a pass/fail coin at
    ``baseline_mean``, sd ``sqrt(p(1-p))``). For pass/fail scores (``binary``, the default when
    ``case_sd`` is None) a drop also adds variance (a passing case now fails with probability
    ``drop``), and enough cases must flip for an exact test to reach ``alpha`` (6 at a
    two-sided 0.05). ``min_effect`` adds the paired rule's practical floor. ``None`` when the
    baseline is zero or even a total drop would go unnoticed.
    """
    p = baseline_mean
    if n_cases < 1 or not math.isfinite(p) or p <= 0:
        return None
    is_binary = case_sd is None if binary is None else binary
    v0 = max(p * (1.0 - p), 0.0) if case_sd is None else case_sd**2
    w = 1.0 / max(window, 1)
    level = alpha / 2 if two_sided else alpha
    za, zb = z_quantile(1.0 - level), z_quantile(power)

    def detectable(drop: float) -> bool:
        # the permutation null is scaled by the observed differences, shift included
        v1 = v0 + (p * drop * (1.0 - drop) if is_binary else 0.0)
        se1 = math.sqrt((v1 + v0 * w) / n_cases)
        se_null = math.sqrt((v1 + v0 * w + (drop * p) ** 2) / n_cases)
        return drop * p >= za * se_null + zb * se1 and drop >= min_effect + zb * se1 / p

    high = smallest_detectable(detectable, steps=50)
    if high is None:
        return None
    floor = math.ceil(math.log2(1.0 / level)) / (n_cases * p) if is_binary else 0.0
    return min(1.0, max(high, floor))


def calibrate(
    scores: ArrayLike | Sequence[Sequence[float]],
    *,
    false_alarm_rate: float = 0.05,
    window: int = 5,
    power: float = 0.9,
    binary: bool | None = None,
    min_effect: float = 0.0,
) -> Calibration:
    """Judge-noise calibration from repeated scores of the same outputs (cases × repeats).

    Estimates each case's variance across repeats and the pooled noise sd, suggests a relative
    threshold keeping false alarms at ``false_alarm_rate`` for this many cases, and gives the
    minimal detectable drop at ``power``. Only judge noise is measured: a target whose own
    outputs vary from run to run needs a wider threshold.
    """
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 2:
        raise ValueError("calibration needs a cases × repeats array with at least 2 repeats")
    if not np.all(np.isfinite(arr)):
        raise ValueError("calibration scores contain NaN or infinite values")
    n, r = arr.shape
    is_binary = bool(np.isin(arr, (0.0, 1.0)).all()) if binary is None else binary
    var = arr.var(axis=1, ddof=1)
    noise_sd = float(math.sqrt(var.mean()))
    mean = float(arr.mean())
    threshold = suggest_threshold(
        n, noise_sd, mean, false_alarm_rate=false_alarm_rate, window=window
    )
    mdd = minimal_detectable_drop(
        n, mean, case_sd=noise_sd, binary=is_binary,
        alpha=false_alarm_rate, power=power, window=window, min_effect=min_effect,
    )
    return Calibration(
        n_cases=n, repeats=r, binary=is_binary, mean=mean,
        per_case_variance=[float(v) for v in var], noise_sd=noise_sd,
        false_alarm_rate=false_alarm_rate, window=window, suggested_threshold=threshold,
        minimal_detectable_drop=mdd, power=power,
    )
