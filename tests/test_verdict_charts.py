"""The nightly limits as state machines (issue #36): Hypothesis drives random nights through the
drop chart and the floor chart and checks each step against a small reference model of the
rules in :mod:`evalloop.verdicts.sequential` and :mod:`evalloop.verdicts.floors`."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from evalloop.verdicts import floors, sequential

nights = st.lists(st.floats(min_value=-4.0, max_value=8.0, allow_nan=False), min_size=1, max_size=40)
deltas = st.floats(min_value=0.5, max_value=25.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(zs=nights, bad=st.lists(st.booleans(), min_size=40, max_size=40),
       holds=st.lists(st.booleans(), min_size=40, max_size=40), delta=deltas,
       budget=st.sampled_from([0.01, 0.05, 0.2]))
def test_the_drop_chart_against_its_model(zs, bad, holds, delta, budget):
    """Model: the chart accumulates ``z − k`` from zero; it turns red when the sum passes ``h``
    or on a bad night; once red it stays red while each night drops by at least ``release(k)``,
    and the first night that does not ends the alarm and restarts the sum from zero. A night
    whose drop does not hold against a sound baseline is never red and restarts the sum."""
    k, h = sequential.design(0.2, 0.75, 0.75 * 0.2 / delta, budget, 1)
    chart = None
    total, red = 0.0, False
    for z, b, sound in zip(zs, bad[:len(zs)], holds[:len(zs)], strict=True):
        released = red and (z < sequential.release(k) or not sound)
        if released or not sound:
            total = 0.0
        total = max(0.0, total + z - k) if sound else 0.0
        red = sound and (total > h or (red and not released) or b)
        chart = sequential.step(chart, z, k, h, bad=b, holds=sound)
        assert chart.red == red
        assert math.isclose(chart.upper, total, abs_tol=1e-9)


@settings(max_examples=200, deadline=None)
@given(delta=deltas, budget=st.sampled_from([0.01, 0.05, 0.2]), scorers=st.integers(1, 5))
def test_the_design_stays_inside_its_bounds(delta, budget, scorers):
    """``k`` is never under 0.5 and never over the midpoint between half and the whole
    threshold (or the classic 1.5); a smaller budget never lowers ``h``."""
    k, h = sequential.design(0.2, 0.75, 0.75 * 0.2 / delta, budget, scorers)
    assert 0.5 - 1e-9 <= k <= max(1.5, 0.75 * delta) + 0.05  # δ and k are rounded for the cache
    _, h_small = sequential.design(0.2, 0.75, 0.75 * 0.2 / delta, budget / 2, scorers)
    assert h_small >= h - 1e-9


def test_the_design_grows_with_the_evidence():
    """More standard errors in the threshold never make the chart more sensitive."""
    ks = [sequential.design(0.2, 0.75, 0.75 * 0.2 / d, 0.05, 1)[0] for d in [x / 4 for x in range(4, 100)]]
    assert all(b >= a - 1e-9 for a, b in zip(ks, ks[1:], strict=False)), ks


def test_the_budget_splits_into_its_shares():
    whole = sequential.shares(0.05, 3, floor=True)
    per_scorer = 1 - 0.95 ** (1 / 3)
    assert math.isclose(whole.drop_chart + whole.drop_night + whole.floor_chart + whole.floor_night, per_scorer)
    off = sequential.shares(0.05, 3, floor=False)
    assert off.floor_chart == off.floor_night == 0 and math.isclose(off.drop_chart + off.drop_night, per_scorer)


def test_each_chart_is_set_for_its_own_measured_margin():
    """The drop chart's limit is set for its share of the budget divided by its own margin (1.5:
    600 unchanged months at each of two designs, bench/alarms.py), the floor chart's by its own
    (2): one margin for both would spend the floor's budget on the drop chart's evidence. The
    chart's run length is Siegmund's, so the limit is the one whose run length that gives."""
    share = sequential.shares(0.05, 1, floor=True)
    k, h = sequential.design(0.2, 0.75, 0.75 * 0.2 / 4.0, 0.05, 1, floor=True)
    nights = 30 / -math.log1p(-share.drop_chart / sequential.DROP_MARGIN)
    assert math.isclose(sequential.arl(k, h), nights, rel_tol=0.02)
    found = floors.check(0.69, 0.70, 0.01, 0.05, 1)
    assert found is not None
    chart = floors.step(None, found, 0.05, 1)
    floor_nights = 30 / -math.log1p(-share.floor_chart / sequential.FLOOR_MARGIN)
    assert math.isclose(sequential.arl(chart.k, chart.h), floor_nights, rel_tol=0.02)
    assert sequential.DROP_MARGIN < sequential.FLOOR_MARGIN  # measured apart: not one constant


means = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
ses = st.one_of(st.none(), st.just(0.0), st.floats(min_value=1e-4, max_value=0.3, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(mean=means, floor=st.floats(min_value=0.05, max_value=1.0), se=ses)
def test_a_floor_check_against_its_model(mean, floor, se):
    """Above when the mean reaches the floor; below only when under it by more than the
    budgeted reach in standard errors (any amount when there is no noise, or none measured);
    near otherwise."""
    found = floors.check(mean, floor, se, 0.05, 1)
    assert found is not None
    if mean >= floor - 1e-9:
        assert found.state == "above"
    elif not se:
        assert found.state == "below"
    else:
        assert found.state == ("below" if (floor - mean) / se > found.reach else "near")
    assert floors.check(mean, 0.0, se, 0.05, 1) is None  # a floor of 0 is off


@settings(max_examples=200, deadline=None)
@given(ws=st.lists(st.floats(min_value=-5.0, max_value=8.0, allow_nan=False), min_size=1, max_size=30))
def test_the_floor_chart_against_its_model(ws):
    """Model: deficits beyond ``FLOOR_K`` add up; red past the limit or on a night shown under
    the floor; lasting while the deficit stays at least half ``FLOOR_K``."""
    chart = None
    total, red = 0.0, False
    reach = floors.check(0.5, 0.6, 0.01, 0.05, 1).reach
    for w in ws:
        found = floors.FloorCheck(state="below" if w > reach else "near" if w > 0 else "above", w=w, reach=reach)
        released = red and w < floors.FLOOR_K / 2
        if released:
            total = 0.0
        total = max(0.0, total + w - floors.FLOOR_K)
        chart = floors.step(chart, found, 0.05, 1)
        red = total > chart.h or (red and not released) or found.below
        assert chart.alarm == red
