"""Absolute floors judged with the noise: one rule for a one-off run and for one night, and the
floor chart that adds up small lasting deficits over nights.

A scorer's floor (``min_score``; by default its kind's success target) is compared with its mean
over one run, and that mean is a noisy measurement: a suite that sits at its floor would be
``below floor`` on every other run if the two were compared bare. So a mean is ``below floor``
only when it is under the floor *with the budgeted confidence*::

    mean + c · se < floor

``se`` is the run-to-run noise of the mean: the per-case variance the window measured
(:func:`evalloop.verdicts.verdict.window_noise`, over its cases graded twice or more) over the
run's cases. Until the window holds two runs the noise is not measured, and the mean is
compared with the floor as it is (the sentence says so). A deterministic suite has no noise, so
any mean under its floor is under it. ``c`` reaches the floor's one-night share
of the suite's ``alarm_budget`` (:func:`evalloop.verdicts.sequential.shares`), in a one-off run
as at night, so one night says the same in both. A mean under the floor by less than that is a
``watch`` that says it is *near its floor*.

At night the floor also has a chart: a one-sided CUSUM of the standardized deficit
``w = (floor − mean) / se`` with reference value :data:`FLOOR_K`, its limit from the floor's
chart share of the budget, lasting while ``w`` is at least :func:`evalloop.verdicts.sequential.release`
of it (the drop chart's rule: half a standard error).
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from evalloop.policy import TOLERANCE
from evalloop.verdicts import sequential
from evalloop.verdicts.drop import Z_CAP

FLOOR_K = 1.0  # the floor chart looks for means one to two standard errors under the floor


class FloorCheck(BaseModel):
    """One mean against its floor: ``above``, ``near`` (under it, not shown) or ``below``."""

    state: str
    w: float  # the deficit in standard errors (> 0: under the floor)
    reach: float
    measured: bool = True  # whether the noise was measured (else the mean is compared as it is)

    @property
    def below(self) -> bool:
        return self.state == "below"


def active(min_score: float | None) -> bool:
    """Whether a scorer has a floor (0 or none turns it off)."""
    return min_score is not None and min_score > 0


def deficit(mean: float, floor: float, se: float | None) -> float:
    """``(floor − mean) / se``, capped at :data:`~evalloop.verdicts.drop.Z_CAP` (no noise, or none
    measured: the sign)."""
    gap = floor - mean
    if se is None or se <= 0 or not math.isfinite(se):
        return 0.0 if abs(gap) <= TOLERANCE else math.copysign(Z_CAP, gap)
    return max(-Z_CAP, min(Z_CAP, gap / se))


def check(mean: float | None, floor: float | None, se: float | None, budget: float,
          scorers: int) -> FloorCheck | None:
    """Where ``mean`` stands against ``floor`` with the budgeted confidence (None: no floor)."""
    if mean is None or not active(floor) or not math.isfinite(mean):
        return None
    assert floor is not None
    reach = sequential.night_reach(sequential.shares(budget, scorers, floor=True).floor_night)
    w = deficit(mean, floor, se)
    state = "above" if mean >= floor - TOLERANCE else "below" if w > reach else "near"
    return FloorCheck(state=state, w=w, reach=reach, measured=se is not None)


def sentence(mean: float, floor: float, found: FloorCheck) -> str:
    """What the check showed, in one sentence."""
    if found.below and not found.measured:
        return (f"Mean {mean:.3f} is under the absolute floor {floor:.2f} (its run-to-run noise is not "
                f"measured yet: fewer than two earlier runs).")
    if found.below and found.w >= Z_CAP:
        return f"Mean {mean:.3f} is under the absolute floor {floor:.2f} (the scores do not vary from run to run)."
    if found.below:
        return (f"Mean {mean:.3f} is under the absolute floor {floor:.2f} with the budgeted confidence "
                f"({found.w:.1f} standard errors under it; {found.reach:.1f} needed).")
    return (f"Mean {mean:.3f} is near its floor {floor:.2f}: under it by {found.w:.1f} standard errors, "
            f"within the run-to-run noise ({found.reach:.1f} needed to fail).")


def step(previous: sequential.FloorChart | None, found: FloorCheck, budget: float,
         scorers: int) -> sequential.FloorChart:
    """The floor chart after one more night; red on the chart or on the night's own check."""
    nights = round(sequential.nights_per_alarm(sequential.shares(budget, scorers, floor=True).floor_chart,
                                                  sequential.FLOOR_MARGIN), 1)
    h = sequential.limit(FLOOR_K, nights)
    total = previous.total if previous is not None else 0.0
    was = previous is not None and previous.alarm
    released = was and found.w < sequential.release(FLOOR_K)
    if released:
        total = 0.0
    total = max(0.0, total + found.w - FLOOR_K)
    alarm = total > h or (was and not released) or found.below
    return sequential.FloorChart(w=found.w, k=FLOOR_K, h=h, total=total, alarm=alarm,
                                 bad_night=found.below and total <= h and not was)
