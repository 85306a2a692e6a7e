"""Outcomes: the one rule for what a case's grades mean, and for what a judged run means.

Two questions are asked everywhere — the verdict, learning, reports, JUnit, the pytest plugin,
the exit code, the scheduler's ledger and log, the alarm sinks — and each is answered here only:

* :func:`case_outcome`: did one case pass one scorer? Its score is the mean of its graded
  epochs; a case whose every grade errored is ``errored`` (not graded, never a pass or a fail);
  a case whose target failed is a real ``failed``; a known-bad control *fails* when it passes.
  The comparison with the pass mark under it is :func:`passes` (:func:`passes_many` for an array
  of scores), defined in :mod:`evalloop.score` so that the runner and the history, below this
  package, use the same one.
* :func:`run_outcome`: what does the run sum up to? The worst of its scorers' verdicts in one
  order (:data:`ORDER`) and whether it fails: exit 1, a JUnit failure, a red night, and an
  alarm to the sinks — one fact, :attr:`RunOutcome.fails` (a regression, a scorer under its
  floor, a broken scorer, an invalid run). There is no separate "alarm" rule: a run alarms
  exactly when it fails, every time it fails (docs/alarms.md says why). The other alarms are
  fires that produced no run at all (skipped, cannot run, interrupted), which
  :func:`evalloop.scheduling.sinks.alarm` sends as events.

Exit codes are read from :func:`run_outcome` in :mod:`evalloop.loop.exitcodes`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from evalloop.score import fails_many, passes, passes_many
from evalloop.verdicts.verdict import VerdictStatus

__all__ = ["ORDER", "CaseOutcome", "RunOutcome", "case_outcome", "fails_many", "failure_name", "outcome_of_labels",
           "passes", "passes_many", "run_outcome", "worst"]


class _Validity(Protocol):
    """A stored run, as far as its outcome goes: whether it is valid."""

    @property
    def valid(self) -> bool | None: ...


class _Labelled(Protocol):
    """One scorer's verdict, as far as the run's outcome goes: its status."""

    @property
    def status(self) -> VerdictStatus: ...


class Judged(Protocol):
    """What :func:`run_outcome` reads of a judged run (a :class:`~evalloop.verdicts.baseline.Comparison`)."""

    @property
    def run(self) -> _Validity: ...

    @property
    def scorers(self) -> Sequence[_Labelled]: ...

#: worst first: the one order every summary of a run uses
ORDER: tuple[VerdictStatus, ...] = (
    VerdictStatus.INVALID, VerdictStatus.SCORER_BROKEN, VerdictStatus.REGRESSED, VerdictStatus.BELOW_FLOOR,
    VerdictStatus.WATCH, VerdictStatus.IMPROVED, VerdictStatus.STEADY, VerdictStatus.NO_BASELINE,
    VerdictStatus.SKIPPED,
)


def failure_name(status: VerdictStatus) -> str:
    """What a failing status is called in a sentence ("regression in …", "below floor in …")."""
    return "regression" if status is VerdictStatus.REGRESSED else status.value


@dataclass(frozen=True)
class CaseOutcome:
    """One case graded by one scorer: ``passed``, ``failed``, ``errored`` or ``skipped``."""

    state: str
    value: float | None = None  # the mean of the graded epochs

    @property
    def passed(self) -> bool:
        return self.state == "passed"

    @property
    def failed(self) -> bool:
        return self.state == "failed"


def case_outcome(values: Sequence[float], pass_mark: float, *, errored: int = 0,
                 control: bool = False) -> CaseOutcome:
    """One case's outcome for one scorer from its graded epochs' ``values``.

    ``errored`` counts grades that errored (they are left out of the mean); with no graded
    value at all the case is ``errored`` (or ``skipped`` when nothing errored). A target failure
    is graded as a real 0 by the runner, so it fails like any low score. A known-bad ``control``
    case fails when it passes, and passes when it fails.
    """
    if not values:
        return CaseOutcome("errored" if errored else "skipped")
    value = sum(values) / len(values)
    ok = passes(value, pass_mark) != control
    return CaseOutcome("passed" if ok else "failed", value)


@dataclass(frozen=True)
class RunOutcome:
    """What one run sums up to: its worst status and whether it fails (and so alarms)."""

    status: VerdictStatus | None

    @property
    def label(self) -> str:
        """One word for the run (the ledger, the log, webhooks): the worst status's name."""
        return self.status.value if self.status is not None else "no scorers"

    @property
    def fails(self) -> bool:
        """Exit 1, a JUnit failure, a red night, an alarm to the sinks: invalid, broken, regressed
        or below its floor."""
        return self.status is not None and self.status.fails

    @property
    def alarm(self) -> bool:
        """Deprecated: a second name for :attr:`fails` (a run alarms exactly when it fails)."""
        warnings.warn("RunOutcome.alarm is RunOutcome.fails; use fails", DeprecationWarning, stacklevel=2)
        return self.fails

    @property
    def log_level(self) -> int:
        """The level a one-line log of this run is written at."""
        if self.fails:
            return logging.WARNING
        return logging.INFO


def worst(statuses: Iterable[VerdictStatus], *, valid: bool = True) -> VerdictStatus | None:
    """The worst of ``statuses`` in :data:`ORDER` (an invalid run is invalid whatever its scorers say)."""
    if not valid:
        return VerdictStatus.INVALID
    present = set(statuses)
    return next((v for v in ORDER if v in present), None)


def run_outcome(comparison: Judged) -> RunOutcome:
    """The outcome of one judged run."""
    return RunOutcome(worst((s.status for s in comparison.scorers), valid=bool(comparison.run.valid)))


def outcome_of_labels(labels: Iterable[str | None], *, valid: bool = True) -> RunOutcome:
    """The outcome from stored verdict strings (a JSON summary, history rows)."""
    parsed = [VerdictStatus.parse(x) for x in labels]
    return RunOutcome(worst((p for p in parsed if p is not None), valid=valid))


