"""``decide_aligned`` in its parts (masks, the paired test, the rule, the reasons) judges exactly as
the one 170-line function it replaced: every field of the verdict, on random aligned score arrays
— pass/fail and graded scores, missing grades, known-bad controls, flaky cases, scopes, the three
rules, invalid runs — against that function as main 29a4c0c had it (tests/support/verdict_main.py)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evalloop.policy import VerdictPolicy
from evalloop.scoring.scorevec import Aligned
from evalloop.verdicts.verdict import Verdict, VerdictStatus, decide_aligned
from support import verdict_main


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@st.composite
def cases(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 40))
    runs = draw(st.integers(0, 5))
    binary = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2, size=n).astype(float) if binary else rng.uniform(0, 1, size=n).round(2)
    drop = draw(st.sampled_from([0.0, 0.1, 0.3, 0.6]))
    window = np.column_stack([base] * runs) if runs else np.empty((n, 0))
    if runs and not binary:
        window = np.clip(window + rng.normal(0, 0.05, size=window.shape), 0, 1)
    current = base.copy()
    flip = rng.uniform(size=n) < drop
    if draw(st.booleans()):  # a drop
        current[flip] = 0.0 if binary else np.clip(current[flip] - 0.5, 0, 1)
    else:  # a rise
        current[flip] = 1.0 if binary else np.clip(current[flip] + 0.5, 0, 1)
    missing = draw(st.sampled_from([0.0, 0.1, 0.4]))
    current[rng.uniform(size=n) < missing] = np.nan
    if runs:
        window[rng.uniform(size=window.shape) < missing] = np.nan
    ids = [f"c{i:02d}" for i in range(n)]
    known_bad = [c for c in ids if rng.uniform() < draw(st.sampled_from([0.0, 0.15]))]
    controls = draw(st.sampled_from([None, known_bad[:1], []]))
    scopes = None
    if draw(st.booleans()):
        scopes = rng.integers(0, draw(st.integers(1, 5)), size=n).astype(np.int64)
    policy = VerdictPolicy(threshold=draw(st.sampled_from([0.05, 0.1, 0.25])),
                           rule=draw(st.sampled_from(["evidence", "threshold", "paired"])),
                           pass_mark=draw(st.sampled_from([0.5, 0.9])), permutations=200, resamples=200,
                           flaky_flips=draw(st.integers(0, 2)), quarantine_flaky=draw(st.booleans()),
                           min_score=draw(st.sampled_from([None, 0.3, 0.8])))
    return {"aligned": Aligned(ids, current, window, scopes), "policy": policy, "known_bad": known_bad,
            "scorer_controls": controls, "valid": draw(st.sampled_from([True, True, True, False])),
            "binary": draw(st.sampled_from([None, None, binary])), "scorers": draw(st.integers(1, 3))}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_split_verdict_is_the_one_function_verdict(case):
    new = decide_aligned(**case)
    old = verdict_main.decide_aligned(**case)
    assert isinstance(new, Verdict)
    event(f"{new.status.value} ({new.rule})")  # --hypothesis-show-statistics: every status is drawn
    differs = {k: (getattr(new, k), getattr(old, k)) for k in Verdict.model_fields
               if not same(getattr(new, k), getattr(old, k))}
    assert not differs, differs


def test_every_status_is_reached_by_the_inputs_the_property_draws():
    """The comparison above covers each branch: a steady, a regressed, a broken, a first run, an invalid one."""
    ids = [f"c{i:02d}" for i in range(20)]
    ones, policy = np.ones(20), VerdictPolicy(threshold=0.1, permutations=200, resamples=200)
    window = np.column_stack([ones] * 4)
    seen = {
        decide_aligned(Aligned(ids, ones, window), policy).status,
        decide_aligned(Aligned(ids, np.r_[np.zeros(10), np.ones(10)], window), policy).status,
        decide_aligned(Aligned(ids, ones, window), policy, known_bad=ids[:1]).status,
        decide_aligned(Aligned(ids, ones, np.empty((20, 0))), policy).status,
        decide_aligned(Aligned(ids, ones, window), policy, valid=False).status,
    }
    assert seen == {VerdictStatus.STEADY, VerdictStatus.REGRESSED, VerdictStatus.SCORER_BROKEN,
                    VerdictStatus.NO_BASELINE, VerdictStatus.INVALID}
