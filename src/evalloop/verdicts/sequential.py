"""The nightly rule: a scorer's nightly runs judged as one experiment, with a false-alarm budget.

A single run is judged alone (:mod:`evalloop.verdict`); a nightly check is the same test
repeated every night, so what a team lives with is the false-alarm rate *per month*. Scheduled
fires and ``run --nightly`` therefore judge each scorer with a two-sided CUSUM chart on the
standardized drop ``z`` of every night against its reference (the rolling baseline of good
runs, frozen while a regression is open: :mod:`evalloop.history.eligibility`):

    S⁺ₜ = max(0, S⁺ₜ₋₁ + zₜ − k)      red (``regressed``) when S⁺ₜ > h
    S⁻ₜ = max(0, S⁻ₜ₋₁ − zₜ − k)      ``improved`` when S⁻ₜ > h

``k`` is half the scorer's threshold in standard errors (the drop the chart is designed to
catch), kept within [0.5, 1.5]; ``h`` is chosen so that an unchanged suite's average run length
to a false alarm gives at most ``alarm_budget`` chance of one false red night in 30 nights for
the whole suite: the budget is split evenly across the suite's scorers (``1 − (1 − b)^(1/m)``
each), so more scorers do not mean more false alarms. The run length comes from Siegmund's
approximation for a CUSUM of unit-normal steps. While the chart is red it stays red as long as
the nights keep dropping (``zₜ ≥ k``); a night without such a drop ends the alarm and restarts
the chart. ``bench/alarms.py`` measures the rule through real runs beside the single-run rule.
"""

from __future__ import annotations

import math
from functools import lru_cache

from pydantic import BaseModel

from evalloop.verdicts.stats import smallest_accepted

NIGHTS = 30  # the budget's horizon: P(≥ 1 false red night in this many nights)
#: measured through real runs (bench/alarms.py: 8 % [4–15] of 100 unchanged 50-judged-case
#: months at margin 1), an unchanged suite's chart alarms about twice as often as Siegmund's
#: estimate for unit-normal steps says (its standard errors are estimated, and its reference
#: follows the good runs): the limit is set for the budget divided by this margin
MARGIN = 2.0
K_MIN, K_MAX = 0.5, 1.5


class Chart(BaseModel):
    """One scorer's CUSUM state after one night (stored with the run's summary)."""

    z: float
    k: float
    h: float
    upper: float = 0.0  # S⁺: accumulated evidence of a drop
    lower: float = 0.0  # S⁻: accumulated evidence of a rise

    @property
    def red(self) -> bool:
        return self.upper > self.h

    @property
    def green(self) -> bool:
        return self.lower > self.h

    def sentence(self, budget: float) -> str:
        """What the chart showed, in one sentence (printed with the verdict)."""
        side = "drops" if self.upper >= self.lower else "rises"
        value = max(self.upper, self.lower)
        verb = "passed" if value > self.h else "stays under"
        return (f"nightly CUSUM of standardized {side} {value:.2f} {verb} its limit {self.h:.2f} "
                f"(this night z={self.z:+.2f}; budget {budget:.0%} chance of a false red night in {NIGHTS})")


def arl(k: float, h: float) -> float:
    """Siegmund's approximation of a one-sided CUSUM's average run length on N(0, 1) steps."""
    b = h + 1.166
    x = 2.0 * k * b
    return (math.exp(x) - x - 1.0) / (2.0 * k * k)


@lru_cache(maxsize=256)
def limit(k: float, nights_per_alarm: float) -> float:
    """The decision interval ``h`` whose in-control run length is ``nights_per_alarm``."""
    return smallest_accepted(lambda h: arl(k, h) >= nights_per_alarm, 0.0, 50.0, steps=60)


def nights_per_false_alarm(budget: float, scorers: int) -> float:
    """The in-control run length each of ``scorers`` charts needs for the suite's budget."""
    share = 1.0 - (1.0 - budget) ** (1.0 / max(scorers, 1))
    # two one-sided charts per scorer (drops and rises) share it; alarms are ~geometric in time
    return NIGHTS / -math.log1p(-share / 2.0 / MARGIN)


def design(threshold: float, baseline: float | None, se: float | None, budget: float,
           scorers: int) -> tuple[float, float]:
    """``(k, h)`` for one scorer: ``k`` half the threshold in standard errors, within bounds."""
    if baseline is None or se is None or se <= 0 or not math.isfinite(se) or baseline <= 0:
        k = K_MAX
    else:
        k = min(K_MAX, max(K_MIN, threshold * baseline / se / 2.0))
    k = round(k, 2)  # a stable key for the cached limit
    return k, limit(k, round(nights_per_false_alarm(budget, scorers), 1))


def step(previous: Chart | None, z: float, k: float, h: float) -> Chart:
    """The chart after one more night. A red (or green) chart whose night shows no drop (rise)
    of at least ``k`` ends its alarm and restarts from zero."""
    up = previous.upper if previous is not None else 0.0
    down = previous.lower if previous is not None else 0.0
    if previous is not None and previous.red and z < k:
        up = 0.0
    if previous is not None and previous.green and -z < k:
        down = 0.0
    return Chart(z=z, k=k, h=h, upper=max(0.0, up + z - k), lower=max(0.0, down - z - k))
