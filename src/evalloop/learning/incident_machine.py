"""The incident state machine, pure: which transition one valid run makes for one scorer.

This module owns the lifecycle's rules and nothing that touches a store: the states
(:class:`State`), what one run says about one scorer (:class:`Seen`: graded, failing, newly
failing, chronic) and the table below (:func:`transition`). :mod:`evalloop.learning.incident_records`
writes what an incident says; :mod:`evalloop.learning.incidents` reads and writes the records in
the memory store. Words: *failing* = graded (not errored, not skipped) and below the suite's pass
mark; *newly failing* = failing now and passing in the baseline's last run (the verdict's list);
*chronic* = failing now and failing in the baseline's last run too; *remembered* = the incident's
``failing_cases``. Only valid runs move an incident (an invalid run, a skipped or broken scorer
changes nothing).

============  =====================================================================  ============
state         transition (checked in this order, for each scorer of a valid run)     next state
============  =====================================================================  ============
none          the scorer regressed: a new incident remembers the newly failing       open
              cases; the chronic ones go to ``chronic_cases``, never into it
resolved /    the scorer regressed and a closed incident shares a newly failing      open
accepted      case (or the store hands back its id for the same text): that record   (reopened)
              is opened again, ``reopened`` + 1, ``reopened_run_id``; otherwise a
              new incident links the newest closed one as ``previous_id``
open          the scorer regressed, or a remembered case is graded and failing:      open
              updated (runs seen, last run; newly failing cases join the remembered  (updated)
              ones, chronic ones join ``chronic_cases``; the text only changes when
              the failing cases do)
open          a full run (not ``--limit``/``-k``/``--tag``/``select``) that is not   resolved
              a regression, in which every remembered case was graded (none
              errored) and passed
open          ``accept_incidents`` (``evalloop accept``): the failure is the        accepted
              intended new normal
any           anything else (a partial or errored run without a failing              unchanged
              remembered case, a chronic failure alone, ...)
============  =====================================================================  ============
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from evalloop.score import passes
from evalloop.verdicts.baseline import Comparison, ScorerComparison


class State(StrEnum):
    """The stored states of an incident (*none* is the absence of a record)."""

    OPEN = "open"
    RESOLVED = "resolved"
    ACCEPTED = "accepted"


@dataclass(frozen=True)
class Seen:
    """What one valid run says about one scorer, as the lifecycle reads it."""

    run_id: str
    full: bool
    regressed: bool
    pass_mark: float
    graded: Mapping[str, float]  # case → score; errored and skipped cases are absent
    newly_failing: Sequence[str] = ()
    baseline: Mapping[str, float] = field(default_factory=dict)  # the baseline's last run, graded cases

    @functools.cached_property
    def scores(self) -> dict[str, float]:
        """``graded`` as a dict, read once (the runner's view is built for iteration)."""
        return dict(self.graded.items())

    @functools.cached_property
    def failing(self) -> set[str]:
        return {c for c, v in self.scores.items() if not passes(v, self.pass_mark)}

    def passed(self, case: str) -> bool:
        value = self.scores.get(case)
        return value is not None and passes(value, self.pass_mark)

    @functools.cached_property
    def chronic(self) -> list[str]:
        """Failing now and failing in the baseline's last run too: not part of any regression."""
        return sorted(c for c in self.failing if c in self.baseline and not passes(self.baseline[c], self.pass_mark))


def transition(state: State | None, remembered: Sequence[str], seen: Seen) -> str | None:
    """The table above: ``open`` (a new or reopened incident), ``update``, ``resolve`` or None."""
    if state is not State.OPEN:
        return "open" if seen.regressed else None
    if seen.regressed or any(c in seen.failing for c in remembered):
        return "update"
    if seen.full and all(seen.passed(c) for c in remembered):
        return "resolve"
    return None


def seen_in(comparison: Comparison, s: ScorerComparison, scores: Mapping[str, float],
            baseline: Mapping[str, float] | None = None, held_out: Collection[str] = ()) -> Seen:
    """The lifecycle's view of one scorer of one run (held-out cases are not in it)."""
    return Seen(run_id=comparison.run.id, full=not comparison.run.partial, regressed=s.is_regression,
                pass_mark=s.pass_mark, graded=scores,
                newly_failing=[c for c, _ in s.newly_failing if c not in held_out], baseline=baseline or {})


def shown_cases(seen: Seen, remembered: Sequence[str]) -> list[str]:
    """The incident's cases failing in this run: newly failing first, never a chronic one."""
    failing, chronic = seen.failing, set(seen.chronic)
    newly = [c for c in seen.newly_failing if c in failing and c not in chronic]
    return newly + sorted(c for c in remembered if c in failing and c not in newly)
