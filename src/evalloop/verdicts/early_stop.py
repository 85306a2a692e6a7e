"""Judge calls saved by sequential sampling: group-sequential boundaries and the rule at each look.

A suite with ``early_stop: true`` has its ``llm_judge`` scorers grade the cases in random batches
(``looks``, 4 by default; known-bad controls first) and stop once the scorer's verdict is
*settled* (the runner's side: :mod:`evalloop.run.judging`). At look ``k`` of ``K`` — a fraction
``t = k / K`` of the cases judged — the paired drop against the rolling window is standardized,
``Z = mean(d) / se`` (``d`` the window's per-case mean minus this run's score), and:

* **a settled regression** — ``Z ≥ e_k`` and the drop's lower bound at that level still reaches
  the threshold (``(mean(d) − e_k·se) / baseline ≥ threshold``): the verdict can only be
  ``regressed``. The bounds ``e_k`` spend the suite's ``alpha`` (two-sided: ``α/2`` a side) over the
  looks with a Lan–DeMets spending function, O'Brien–Fleming type (``a(t) = 2 − 2Φ(z₁₋ₐ/₂ / √t)``
  for a side's level ``a``: strict early, nearly the fixed test at the end; 4 looks at α = 0.05:
  4.33, 2.96, 2.36, 2.01) or Pocock type (``a·ln(1 + (e − 1)t)``: 2.36, 2.35, 2.34, 2.33).
* **no change worth an alarm** — ``|Z| ≤ f_k``: a drop (or rise) of the threshold's size is
  excluded. The bounds ``f_k`` spend a small share ``power_loss`` (default 0.02) of the power to
  see a drop of exactly the threshold, with the same spending shape, computed for the drift that
  drop has at full size (``θ = threshold · baseline / se_full``). So a real drop of the
  threshold's size is stopped this way at most ``power_loss`` of the time, a larger one less.

Either stop also needs the absolute floor settled (the mean's distance to ``min_score`` at least
``e_k`` standard errors). Anything else goes on to the next look; the last look is the full suite.
The run's verdict is then reached as always (:mod:`evalloop.verdicts.verdict`), on the cases
judged: a futility stop cannot make a regression (a false alarm is no likelier than with every
case judged), and an efficacy stop is one. A run without a baseline yet judges every case.
``bench/early_stop.py`` measures false alarms, detection and calls by simulation.

The boundaries come from the recursive integration of Armitage, McPherson and Rowe on the score
scale (``S_k = Z_k √t_k``, independent normal increments), on a lattice, with the normal CDF of
Numerical Recipes' ``erfc`` (relative error < 1.2e-7).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np

from evalloop.history.models import Run
from evalloop.history.store import HistoryStore
from evalloop.policy import VerdictPolicy
from evalloop.verdicts.arrays import Floats, Mask

__all__ = ["Look", "SequentialStop", "efficacy_bounds", "futility_bounds", "look", "spent"]

Spending = Literal["obrien-fleming", "pocock"]
H = 0.01          # lattice step on the score scale
MIN_CASES = 10    # paired cases a look needs before it may stop
_N01 = NormalDist()


def spent(kind: Spending, level: float, t: float) -> float:
    """The part of a one-sided ``level`` spent by information fraction ``t`` (Lan–DeMets); a
    two-sided test spends ``level / 2`` on each side."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    if kind == "pocock":
        return level * math.log(1.0 + (math.e - 1.0) * t)
    return min(level, 2.0 * (1.0 - _N01.cdf(_N01.inv_cdf(1.0 - level / 2.0) / math.sqrt(t))))


def _cdf(x: Floats) -> Floats:
    """Φ(x), elementwise (Numerical Recipes' erfcc: relative error < 1.2e-7)."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    erfc = t * np.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
    return np.where(x >= 0, 1.0 - 0.5 * erfc, 0.5 * erfc)


def _pdf(x: Floats) -> Floats:
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _solve(f: Callable[[float], float], target: float, lo: float, hi: float, increasing: bool) -> float:
    """The x in [lo, hi] where the monotone ``f(x) = target`` (bisection)."""
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _advance(lattice: Floats | None, density: Floats | None, sd: float, drift: float,
             keep: Callable[[Floats], Mask]) -> tuple[Floats, Floats]:
    """The density of the next look's score on the lattice points ``keep`` accepts (sub-density:
    the paths still going), from this look's (None: the start, a point mass at 0)."""
    if lattice is None or density is None:
        reach = 8.0 * sd + abs(drift)
        points = np.arange(-math.ceil(reach / H), math.ceil(reach / H) + 1, dtype=np.float64) * H
        return points[keep(points)], _pdf((points[keep(points)] - drift) / sd) / sd
    span = math.ceil((8.0 * sd + abs(drift)) / H)
    offsets = np.arange(-span, span + 1, dtype=np.float64) * H
    kernel = _pdf((offsets - drift) / sd) / sd * H
    values = np.convolve(density, kernel)
    points = lattice[0] + offsets[0] + np.arange(values.size, dtype=np.float64) * H
    chosen = keep(points)
    return points[chosen], values[chosen]


def _stop_mass(bound: float, t: float, sd: float, step: float, lattice: Floats | None,
               density: Floats | None, two_sided: bool) -> float:
    """The chance a path still going reaches the stop region at this look: ``|Z| ≥ bound``
    (``two_sided``) or ``Z ≤ bound``; the score's step since the last look is N(step, sd²)."""
    s = bound * math.sqrt(t)
    if lattice is None or density is None:  # the first look: from 0
        lattice, density = np.zeros(1), np.ones(1)
    if two_sided:
        p = 1.0 - _cdf((s - lattice - step) / sd) + _cdf((-s - lattice - step) / sd)
    else:
        p = _cdf((s - lattice - step) / sd)
    return float(np.sum(density * p))


def _bounds(looks: int, spend: Callable[[float], float], drift: float, two_sided: bool) -> tuple[float, ...]:
    """The bound of each of ``looks`` equal looks whose stop region takes ``spend(t) − spend(t⁻)``
    of the paths (``spend``: the cumulative chance to stop by fraction ``t``) under ``drift``."""
    lattice: Floats | None = None
    density: Floats | None = None
    bounds: list[float] = []
    before = 0.0
    for k in range(looks):
        t = (k + 1) / looks
        target = spend(t) - spend(before)
        sd, step = math.sqrt(t - before), drift * (t - before)

        def mass(b: float, t: float = t, sd: float = sd, step: float = step, lattice: Floats | None = lattice,
                 density: Floats | None = density) -> float:
            return _stop_mass(b, t, sd, step, lattice, density, two_sided)

        if two_sided:
            b = _solve(mass, target, 0.0, 12.0, increasing=False) if target > 0 else math.inf
            edge = b * math.sqrt(t)
            keep = lambda x, e=edge: np.abs(x) < e  # noqa: E731
        else:
            centre = drift * math.sqrt(t)
            b = _solve(mass, target, centre - 12.0, centre + 12.0, increasing=True) if target > 0 else -math.inf
            edge = b * math.sqrt(t)
            keep = lambda x, e=edge: x > e  # noqa: E731
        bounds.append(b)
        lattice, density = _advance(lattice, density, sd, step, keep)
        if k == 0:
            density = density * H  # a density at the points, to the chance of each point
        before = t
    return tuple(bounds)


@lru_cache(maxsize=64)
def efficacy_bounds(looks: int, alpha: float, kind: Spending = "obrien-fleming") -> tuple[float, ...]:
    """Two-sided bounds on ``|Z|`` at looks ``1..looks`` (equal steps), spending ``alpha`` (α/2 a side)."""
    return _bounds(looks, lambda t: 2.0 * spent(kind, alpha / 2.0, t), 0.0, two_sided=True)


@lru_cache(maxsize=1024)
def futility_bounds(looks: int, beta: float, drift: float, kind: Spending = "obrien-fleming") -> tuple[float, ...]:
    """Lower bounds on ``Z`` at looks ``1..looks`` under a drift of ``drift`` (``Z``'s mean at full
    information), spending ``beta``: a path below one stops for futility (non-binding)."""
    return _bounds(looks, lambda t: spent(kind, beta, t), drift, two_sided=False)


@dataclass
class Look:
    """What one look found: ``stop`` (``"regressed"``, ``"no change"``, or None to go on) and why."""

    stop: str | None
    z: float | None = None
    efficacy: float | None = None
    futility: float | None = None
    reason: str = ""


def look(k: int, looks: int, diffs: Floats, baseline: float, current: Floats, policy: VerdictPolicy,
         *, kind: Spending = "obrien-fleming", power_loss: float = 0.02) -> Look:
    """The rule at look ``k`` of ``looks`` (1-based; see the module docstring). ``diffs``: the window's
    per-case mean minus this run's score, for the cases judged so far that have one; ``current``:
    this run's scores of every case judged so far (controls left out)."""
    if k >= looks or diffs.size < MIN_CASES or not baseline > 0:
        return Look(None, reason="too few cases judged yet" if k < looks else "the last look")
    t, n = k / looks, diffs.size
    mean, sd = float(diffs.mean()), float(diffs.std(ddof=1))
    e = efficacy_bounds(looks, policy.alpha, kind)[k - 1]
    se = sd / math.sqrt(n)
    if se > 0:
        z = mean / se
        drift = policy.threshold * baseline / (se * math.sqrt(t))  # Z's mean at full size for a threshold drop
        f = futility_bounds(looks, power_loss, round(min(drift, 40.0), 2), kind)[k - 1]
    else:  # every judged case moved alike: the drop is known exactly
        z = 0.0 if mean == 0 else math.copysign(math.inf, mean)
        f = math.inf if mean == 0 else -math.inf
    floor = policy.min_score or 0.0
    spread = float(current.std(ddof=1)) / math.sqrt(current.size) if current.size > 1 else math.inf
    floor_settled = floor <= 0 or abs(float(current.mean()) - floor) >= e * spread
    lower = (mean - e * se) / baseline
    if z >= e and lower >= policy.threshold and floor_settled:
        return Look("regressed", z, e, f, f"a drop of at least {policy.threshold:.0%} is shown (Z={z:.2f} ≥ {e:.2f})")
    if abs(z) <= f and floor_settled:
        why = (f"a change of {policy.threshold:.0%} is excluded (|Z|={abs(z):.2f} ≤ {f:.2f})" if se > 0
               else "every case judged so far was graded as in the window")
        return Look("no change", z, e, f, why)
    return Look(None, z, e, f, "not settled")


class SequentialStop:
    """The early-stop rule of one run, for the runner (:class:`evalloop.run.judging.StopRule`): each
    scorer's window is read once, at its first look, from the history."""

    def __init__(self, store: HistoryStore, window: int, *, kind: Spending = "obrien-fleming",
                 power_loss: float = 0.02) -> None:
        self.store, self.window, self.kind, self.power_loss = store, window, kind, power_loss
        self._means: dict[str, dict[str, float]] = {}

    def baseline(self, run: Run, scorer: str) -> dict[str, float]:
        """Each case's mean over the scorer's window (empty: no baseline yet)."""
        if scorer not in self._means:
            prior = self.store.baseline_runs(run.suite, scorer, run, self.window)
            sums: dict[str, list[float]] = {}
            for earlier, _ in prior:
                for case, value in self.store.case_scores(earlier.id, scorer).items():
                    acc = sums.setdefault(case, [0.0, 0.0])
                    acc[0] += value
                    acc[1] += 1
            self._means[scorer] = {case: s / c for case, (s, c) in sums.items()}
        return self._means[scorer]

    def settled(self, run: Run, scorer: str, policy: Mapping[str, object], judged: Mapping[str, float],
                k: int, looks: int) -> Look:
        """The look after batch ``k``: ``judged`` holds this run's scores so far (controls left out)."""
        means = self.baseline(run, scorer)
        if not means:
            return Look(None, reason="no baseline yet: every case is judged")
        shared: Sequence[str] = [c for c in judged if c in means]
        x = np.array([judged[c] for c in shared], dtype=np.float64)
        y = np.array([means[c] for c in shared], dtype=np.float64)
        rules = VerdictPolicy.model_validate(policy)
        return look(k, looks, y - x, float(y.mean()) if y.size else 0.0,
                    np.array(list(judged.values()), dtype=np.float64), rules, kind=self.kind,
                    power_loss=self.power_loss)
