"""The nightly rule: a scorer's nightly runs judged as one experiment, inside one alarm budget.

A single run is judged alone (:mod:`evalloop.verdicts.verdict`); a nightly check is the same
test repeated every night, so what a team lives with is the false-alarm rate *per month*.
Scheduled fires and ``run --nightly`` judge each scorer with these limits, all inside the
suite's ``alarm_budget`` (the chance of at least one false red night in :data:`NIGHTS`
unchanged nights):

* **the drop chart**, a CUSUM on the standardized drop ``z`` of every night against its
  reference (the rolling baseline of good runs), for lasting shifts::

      S⁺ₜ = max(0, S⁺ₜ₋₁ + zₜ − k)      red (``regressed``) when S⁺ₜ > h

* **one bad night**: a night whose drop is at least the threshold with the budgeted
  confidence is red that night (:func:`bad_night`), however the chart stood;
* **the floor** (:mod:`evalloop.verdicts.floors`): one night under the floor with the budgeted
  confidence, or a floor chart of small lasting deficits.

**The design comes from the scorer's threshold.** ``δ`` is the threshold in standard errors of
one night's drop (from the window's run-to-run noise). A drop :data:`SLACK` standard errors
under the threshold (``δ − 1.645``) cannot be told apart from it by one night (at 95 %), so the
chart is built to catch such a drop within two nights 9 times in 10 (:data:`POWER`), and its
reference value ``k`` is the *largest* that still does, never above the midpoint between half
and the whole threshold (``0.75 δ``): on a suite with the evidence to tell them apart, a drop
far under the threshold stays green. A suite too small for that (``δ`` under ≈ 5, e.g. 50 judged
cases) keeps the classic design for small lasting shifts, ``k = δ / 2`` within [0.5, 1.5].
``h`` gives the chart its share of the budget (Siegmund's approximation of the run length, set
for the share divided by :data:`DROP_MARGIN`).

**The budget is split** evenly across the suite's graded scorers (``1 − (1 − b)^(1/m)`` each);
within a scorer, half goes to the floor when it has one, and within the drop and the floor
limits, :data:`CHART_SHARE` to the chart and the rest to the one-night limit. The rise chart
(``improved``, never red) uses the drop chart's ``k`` and ``h``.

**An alarm lasts while the drop does.** A red chart stays red on every night that still shows
a drop of at least half its reference value (``z ≥ max(0.5, k/2)``); the first night without
one ends the alarm and restarts the chart. **No windup:** a night is red only while its drop also
holds against a sound baseline (the median level of the recent runs, which outvotes a run that scored
high by chance; :func:`evalloop.verdicts.baseline.compare_scorer`), so a lucky baseline run
cannot keep the chart red. ``bench/alarms.py`` measures all of it through real runs.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from pydantic import BaseModel

from evalloop.verdicts.arrays import Floats
from evalloop.verdicts.power import z_quantile
from evalloop.verdicts.stats import smallest_accepted

NIGHTS = 30  # the budget's horizon: P(≥ 1 false red night in this many nights)
#: an unchanged suite's chart alarms more often than Siegmund's estimate for unit-normal steps
#: says (its standard errors are estimated, and its reference follows the good runs), so each
#: chart's limit is set for its share divided by a margin measured through real runs
#: (bench/alarms.py, unchanged 50-judged-case months): the drop chart's red months rise about
#: one for one with its design share and sit about 0.9 points over it (3.2 % [2.0–4.9] of 600
#: at a design of 2.25 %, 5.5 % [3.9–7.6] of 600 at 4.5 %), so a margin of 1.5 spends about 4 %
#: of the default 5 % budget; the floor chart's, 2 (0.02 over its floor: 4.5 % [3–7] of 400)
DROP_MARGIN = 1.5
FLOOR_MARGIN = 2.0
K_MIN, K_CLASSIC = 0.5, 1.5
POWER = 0.9  # a drop one night cannot tell from the threshold is red within two nights this often
SLACK = z_quantile(0.999)  # how far under the threshold (in standard errors) such a drop may be
DELTA_CAP = 50.0  # the largest threshold in standard errors designed for (a drop's z is capped there too)
CHART_SHARE = 0.9  # of the drop's (and the floor's) budget: the chart; the rest: one bad night
FLOOR_SHARE = 0.5  # of a scorer's budget, when the scorer has a floor


class Shares(NamedTuple):
    """One scorer's slices of the suite's alarm budget (each a chance per :data:`NIGHTS`)."""

    drop_chart: float
    drop_night: float
    floor_chart: float
    floor_night: float
    rise: float


def shares(budget: float, scorers: int, *, floor: bool) -> Shares:
    """How one of ``scorers`` graded scorers spends the suite's ``budget``."""
    own = 1.0 - (1.0 - budget) ** (1.0 / max(scorers, 1))
    floor_part = own * FLOOR_SHARE if floor else 0.0
    drop = own - floor_part
    return Shares(drop * CHART_SHARE, drop * (1 - CHART_SHARE), floor_part * CHART_SHARE,
                  floor_part * (1 - CHART_SHARE), own)



def night_reach(share: float) -> float:
    """How many standard errors a one-night limit with ``share`` of the budget reaches (a false
    red night once in :data:`NIGHTS` nights with that chance)."""
    return z_quantile(1.0 - share / NIGHTS)


def nights_per_alarm(share: float, margin: float) -> float:
    """The in-control run length a chart with ``share`` of the budget needs (alarms are roughly
    geometric in time), set for the share divided by the chart's measured ``margin``."""
    return NIGHTS / -math.log1p(-min(share / margin, 0.999))


class Chart(BaseModel):
    """One scorer's nightly state after one night (stored with the run's summary)."""

    z: float
    k: float
    h: float
    upper: float = 0.0  # S⁺: accumulated evidence of a drop
    lower: float = 0.0  # S⁻: accumulated evidence of a rise
    alarm: bool | None = None  # red, lasting while the drop does (None: a chart of an older version)
    bad_night: bool = False  # red this night on one night's evidence alone
    floor: FloorChart | None = None

    @property
    def red(self) -> bool:
        return self.upper > self.h if self.alarm is None else self.alarm

    @property
    def green(self) -> bool:
        return self.lower > self.h

    def sentence(self, budget: float) -> str:
        """What the chart showed, in one sentence (printed with the verdict)."""
        tail = f"(this night z={self.z:+.2f}; budget {budget:.0%} chance of a false red night in {NIGHTS})"
        if self.bad_night:
            return f"one bad night: the drop is at least the threshold with the budgeted confidence {tail}"
        if self.red and self.upper <= self.h:
            return (f"the nightly alarm lasts: this night still drops by at least {release(self.k):.2f} "
                    f"standard errors {tail}")
        side = "drops" if self.upper >= self.lower else "rises"
        value = max(self.upper, self.lower)
        verb = "passed" if value > self.h else "stays under"
        return f"nightly CUSUM of standardized {side} {value:.2f} {verb} its limit {self.h:.2f} {tail}"


class FloorChart(BaseModel):
    """The floor's nightly state: a CUSUM of the standardized deficit ``w = (floor − mean) / se``."""

    w: float
    k: float
    h: float
    total: float = 0.0
    alarm: bool = False
    bad_night: bool = False


Chart.model_rebuild()


def arl(k: float, h: float) -> float:
    """Siegmund's approximation of a one-sided CUSUM's average run length on N(0, 1) steps."""
    x = 2.0 * k * (h + 1.166)
    return math.inf if x > 700 else (math.exp(x) - x - 1.0) / (2.0 * k * k)


@lru_cache(maxsize=1024)
def limit(k: float, nights: float) -> float:
    """The decision interval ``h`` whose in-control run length is ``nights``."""
    if arl(k, 0.0) >= nights:
        return 0.0
    return smallest_accepted(lambda h: arl(k, h) >= nights, 0.0, 50.0, steps=60)


def _normal_cdf(x: Floats) -> Floats:
    """Φ(x), vectorised (Abramowitz & Stegun 7.1.26 for erf: absolute error under 1.5e-7)."""
    t = np.abs(x) / math.sqrt(2.0)
    u = 1.0 / (1.0 + 0.3275911 * t)
    poly = u * (0.254829592 + u * (-0.284496736 + u * (1.421413741 + u * (-1.453152027 + u * 1.061405429))))
    erf = 1.0 - poly * np.exp(-t * t)
    return 0.5 * (1.0 + np.sign(x) * erf)


_GRID = np.linspace(-7.0, 7.0, 561)
_WEIGHTS = np.exp(-_GRID**2 / 2) / math.sqrt(2 * math.pi) * (_GRID[1] - _GRID[0])


def caught_within_two(shift: float, k: float, h: float) -> float:
    """P(red on the first or the second night) for a chart (``k``, ``h``) starting at 0 when
    every night's ``z`` is N(``shift``, 1)."""
    z1 = _GRID + shift
    quiet = z1 <= k + h  # not red on the first night
    carried = np.maximum(0.0, z1[quiet] - k)
    still_quiet = _normal_cdf(k + h - carried - shift)
    return 1.0 - float(np.sum(_WEIGHTS[quiet] * still_quiet))


@lru_cache(maxsize=1024)
def reference_value(delta: float, nights: float) -> float:
    """``k`` for a threshold of ``delta`` standard errors (see the module docstring)."""
    classic = min(K_CLASSIC, max(K_MIN, delta / 2.0))
    target, top = delta - SLACK, 0.75 * delta
    if target <= 0 or top <= classic:
        return classic

    def catches(k: float) -> bool:
        return caught_within_two(target, k, limit(round(k, 3), nights)) >= POWER

    # the largest k that catches it, from the top down (49 steps: within 2 % of the range)
    return next((float(k) for k in np.linspace(top, classic, 49) if catches(float(k))), classic)


def design(threshold: float, baseline: float | None, se: float | None, budget: float,
           scorers: int, *, floor: bool = False) -> tuple[float, float]:
    """``(k, h)`` of one scorer's drop chart: the threshold in standard errors sets ``k`` (see
    the module docstring), the budget's share for the chart sets ``h``."""
    nights = round(nights_per_alarm(shares(budget, scorers, floor=floor).drop_chart, DROP_MARGIN), 1)
    if baseline is None or se is None or se <= 0 or not math.isfinite(se) or baseline <= 0:
        delta = 2.0 * K_CLASSIC
    else:
        # a suite without noise (a deterministic scorer: se ≈ 0) is designed at the cap of z, so
        # the chart's reference value stays within reach of the z its drops show
        delta = min(threshold * baseline / se, DELTA_CAP)
    k = round(reference_value(round(delta, 1), nights), 2)  # stable keys for the cached limits
    return k, limit(k, nights)


def release(k: float) -> float:
    """The smallest ``z`` that keeps a red chart red: a night that still drops by half ``k``."""
    return max(K_MIN, k / 2.0)


def bad_night(drop: float | None, se: float, threshold: float, budget: float, scorers: int, *,
              floor: bool = False) -> bool:
    """Whether one night's relative ``drop`` is at least ``threshold`` with the budgeted
    confidence (``se``: its standard error from the run-to-run noise, relative)."""
    if drop is None or not math.isfinite(drop):
        return False
    reach = night_reach(shares(budget, scorers, floor=floor).drop_night)
    return drop - reach * max(se, 0.0) >= threshold - 1e-9


def step(previous: Chart | None, z: float, k: float, h: float, *, bad: bool = False, holds: bool = True) -> Chart:
    """The chart after one more night. A red chart stays red while the nights keep dropping by
    at least :func:`release`; the first night that does not ends the alarm and restarts the
    chart. A ``bad`` night (:func:`bad_night`) is red whatever the chart says. A night whose drop
    does not ``hold`` against a sound baseline (the window holds a run that scored high by
    chance: :func:`evalloop.verdicts.baseline.compare_scorer`) is never red and restarts the chart."""
    up = previous.upper if previous is not None else 0.0
    down = previous.lower if previous is not None else 0.0
    was = previous is not None and previous.red
    released = was and (z < release(k) or not holds)
    if released or not holds:
        up = 0.0
    if previous is not None and previous.green and -z < k:
        down = 0.0
    up, down = max(0.0, up + z - k) if holds else 0.0, max(0.0, down - z - k)
    alarm = holds and (up > h or (was and not released) or bad)
    return Chart(z=z, k=k, h=h, upper=up, lower=down, alarm=alarm,
                 bad_night=alarm and bad and up <= h and not was)
