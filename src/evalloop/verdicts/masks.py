"""Which cases a verdict reads: row masks over a run's scores lined up with its window's.

:func:`case_masks` answers, once per verdict, every question about single cases before any
statistics: which known-bad controls the scorer passed (``broken``), which cases flip between
pass and fail (``flaky``, kept out with ``quarantine_flaky``), which cases and window runs the
statistics use, whether the scores are pass/fail, and which cases newly fail or pass against the
last window run. Windows are read in blocks of rows: no whole-window temporaries at 100k cases.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from evalloop.policy import VerdictPolicy
from evalloop.score import passes_many
from evalloop.scoring import scorevec
from evalloop.verdicts.arrays import Floats, Ints, Mask

_BLOCK_ROWS = 8192  # rows of a window handled at once (flips, graded columns, 0/1 checks)


@dataclass(frozen=True)
class CaseMasks:
    """The cases and window runs a verdict's statistics use, and what single cases say."""

    used: Mask  # rows graded in this run that are neither controls nor quarantined
    runs: Floats  # the window's runs with a graded used cell (controls and quarantined blanked)
    values: Floats  # this run's scores of the used rows
    binary: bool  # every used score (this run's and the window's) is 0 or 1
    broken: list[str]  # known-bad controls that test the scorer and passed
    flaky: list[str]  # cases whose pass/fail state flipped more than the policy allows
    quarantined: list[str]  # the flaky cases kept out (``quarantine_flaky``)
    newly_failing: list[str]  # passed in the last window run, fail now
    newly_passing: list[str]  # failed in the last window run, pass now

    @property
    def n(self) -> int:
        """The cases the statistics use."""
        return len(self.values)

    @property
    def window_runs(self) -> int:
        return int(self.runs.shape[1])


def case_masks(aligned: scorevec.Aligned, policy: VerdictPolicy, *, binary: bool | None = None,
               known_bad: Collection[str] = (), scorer_controls: Collection[str] | None = None) -> CaseMasks:
    """The masks of one verdict: ``known_bad`` cases are kept out of the statistics, and those of
    them in ``scorer_controls`` (None: all of them) test the scorer; ``binary`` (None: from the
    scores) says whether the scores are pass/fail."""
    ids, current = aligned.ids, aligned.current
    pm = policy.pass_mark
    present_runs = any_graded(aligned.window, axis=0)  # a run with no finite score is no run
    runs = aligned.window if present_runs.all() else aligned.window[:, present_runs]
    bad = set(known_bad)
    badm = _member(ids, bad)
    tests = bad if scorer_controls is None else bad & set(scorer_controls)  # the controls that test the scorer
    graded = ~np.isnan(current)
    broken = _listed(ids, graded & _member(ids, tests) & passes_many(current, pm))
    changes = flips(runs, current, pm)
    flaky = _listed(ids, (changes > policy.flaky_flips) & ~badm)
    quarantined = flaky if policy.quarantine_flaky else []
    outm = badm | _member(ids, set(quarantined)) if quarantined else badm
    used = graded & ~outm
    kept = runs
    if outm.any():
        kept = runs.copy()
        kept[outm] = np.nan
    filled = any_graded(kept, axis=0)
    used_runs = kept if filled.all() else kept[:, filled]
    values = current[used]
    is_binary = (zero_one(values) and zero_one(used_runs)) if binary is None else binary
    newly_failing: list[str] = []
    newly_passing: list[str] = []
    if used_runs.shape[1]:
        last = used_runs[:, -1]
        both = used & ~np.isnan(last)
        before = passes_many(last, pm)
        now = passes_many(current, pm)
        newly_failing = _listed(ids, both & before & ~now)
        newly_passing = _listed(ids, both & now & ~before)
    return CaseMasks(used=used, runs=used_runs, values=values, binary=is_binary, broken=broken, flaky=flaky,
                     quarantined=quarantined, newly_failing=newly_failing, newly_passing=newly_passing)


def _member(ids: Sequence[str], wanted: set[str]) -> Mask:
    """Per row, whether its case id is in ``wanted``."""
    if not wanted:
        return np.zeros(len(ids), bool)
    return np.fromiter((c in wanted for c in ids), dtype=bool, count=len(ids))


def _listed(ids: Sequence[str], mask: Mask) -> list[str]:
    """The case ids of a mask's rows (rows are in case-id order)."""
    return [ids[int(i)] for i in np.flatnonzero(mask)]


def zero_one(values: Floats) -> bool:
    """Whether every present (non-NaN) value is 0 or 1 (checked in blocks of rows)."""
    return all(bool(np.all(np.isnan(b) | (b == 0.0) | (b == 1.0)))
               for b in (values[lo:lo + _BLOCK_ROWS] for lo in range(0, values.shape[0], _BLOCK_ROWS)))


def any_graded(window: Floats, axis: int) -> Mask:
    """Per column (``axis=0``) or per row (``axis=1``), whether any cell is graded (not NaN);
    a column at a time, so no whole-window boolean copy."""
    if axis == 0:
        return np.array([not np.isnan(window[:, j]).all() for j in range(window.shape[1])], dtype=bool)
    found = np.zeros(window.shape[0], dtype=bool)
    for j in range(window.shape[1]):
        found |= ~np.isnan(window[:, j])
    return found


def flips(runs: Floats, current: Floats, pass_mark: float) -> Ints:
    """Per row, how often the pass/fail state changes across the window's columns and then this
    run's (absent cells skipped); in blocks of rows, so no whole-window temporaries."""
    out_all = np.zeros(runs.shape[0], dtype=np.int64)
    for lo in range(0, runs.shape[0], _BLOCK_ROWS):
        block, now = runs[lo:lo + _BLOCK_ROWS], current[lo:lo + _BLOCK_ROWS]
        out = out_all[lo:lo + _BLOCK_ROWS]
        last = np.full(block.shape[0], np.nan)
        for col in (*(block[:, j] for j in range(block.shape[1])), now):
            present = ~np.isnan(col)
            state = np.where(present, passes_many(col, pass_mark).astype(np.float64), np.nan)
            out += present & ~np.isnan(last) & (state != last)
            last = np.where(present, state, last)
    return out_all
