"""The incident state machine, pure: which transition one valid run makes for one incident.

This module owns the lifecycle's rules and nothing that touches a store: the states
(:class:`State`), what an incident holds (:class:`Incident`: its cause, remembered cases, their
levels before it, its runs since it opened), what one run says about one scorer (:class:`Seen`),
the evidence rules (:func:`back`, :func:`joining`, :func:`keeps_out`) and the table below
(:func:`transition`). :mod:`evalloop.learning.incident_records` writes what an incident says;
:mod:`evalloop.learning.incidents` moves the records in the memory store, reading the runs from
the history (:mod:`evalloop.learning.evidence`); :mod:`evalloop.loop.pipeline` runs the ablations.

Words. *failing*: graded (not errored, not skipped, not a control) and not passing the pass mark
(:func:`evalloop.verdicts.outcome.passes`). *newly failing*: failing now, passing in the
baseline's last run (the verdict's list); *chronic*: failing now and then. *trigger*: the
verdict is ``regressed`` or ``below floor`` (:data:`TRIGGERS`). *remembered*: the incident's
cases — a regression's newly failing cases (chronic ones kept apart), a floor's failing cases —
each with its mean and pass rate in the baseline window before it (:class:`Level`). *with
lesson*: the run's target got the incident's lesson (the fingerprint's ``injected`` memories
name it). *clean*: a full run without the lesson, or an *ablation* (the remembered cases — every
learn case for a floor, or a regression that remembers none — run again with lessons off: a
partial run the pipeline starts after a full run of a held incident, every
``ablation_every``-th, never a baseline). *back* (:func:`back`): the run's verdict is not
``regressed`` and shows no significant drop (an ablation of a regression's cases: not
``regressed``; their shortfall decides), and for a regression (not ``below floor`` either,
unless an ablation: a floor is the whole suite's) the remembered cases' mean shortfall against
their levels, over the last 1, 2 or 3 clean runs (runs with the lesson, for *held*), is at most
half the scorer's threshold of their level, and — to resolve; to hold, the estimate is enough —
its upper bound (:data:`Z_BACK` standard errors; the noise is the baseline window's within-case
spread) under the whole threshold; a case with no level must pass; a run that did not grade
every remembered case is no evidence. For a floor: the scorer's mean is at or above its floor.
*joins* (:func:`joining`): on a full run, a failing case that is neither remembered nor chronic,
whose failures in the incident's last :data:`JOIN_RUNS` full runs are improbable (≤
:data:`JOIN_ALPHA`) at its failure rate before the incident. Only valid runs move an incident;
an ablation moves only the incidents it ran for, and opens none.

===========  ================================================================  ===========
from         transition (the first that applies)                               to
===========  ================================================================  ===========
none,        a trigger (no ablation): a closed incident sharing one of its     open
resolved,    cases reopens, else a new one (``previous_id``: the newest
accepted     closed one)
open, held,  a trigger (no ablation); a floor incident that regresses          open
promoted     remembers the regression's cases too (its cause becomes
             ``regression``)
open, held,  a clean run that is back                                          resolved
promoted
open         a full run with the lesson that is back: the lesson holds the     held
             product, stays injected, and the run is green
held         an ablation that is not back; a full run with the lesson          held
open, held   ``evalloop lessons promote`` (:func:`~evalloop.learning.          promoted
             incidents.promote_incidents`): the lesson is in the prompt now
open, held,  ``evalloop accept``: the failure is the intended normal           accepted
promoted
open, held,  a case joins, or a remembered case is failing (not an ablation)   (updated)
promoted
any          anything else                                                     unchanged
===========  ================================================================  ===========

Open and held incidents are injected (:attr:`State.injected`). An active regression (open,
held, promoted) and any held incident keep their scorer's runs out of the baseline
(:func:`keeps_out`): a lasting regression is not absorbed, and runs a lesson holds are not the
product's normal; a floor incident that no lesson holds does not (below its floor is the
product's normal, only not good enough), so nothing freezes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from evalloop.score import passes
from evalloop.verdicts.baseline import Comparison, ScorerComparison
from evalloop.verdicts.verdict import VerdictStatus

#: clean runs (or runs with the lesson) read as evidence that an incident is back, newest first
BACK_RUNS = 3
#: the standard errors the shortfall's upper bound is taken at (one-sided 90 %)
Z_BACK = 1.2816
#: full runs a case's failures are counted over, and how improbable they must be to join
JOIN_RUNS = 5
JOIN_ALPHA = 0.01


class State(StrEnum):
    """The stored states of an incident (*none* is the absence of a record)."""

    OPEN = "open"
    HELD = "held"
    PROMOTED = "promoted"
    RESOLVED = "resolved"
    ACCEPTED = "accepted"

    @property
    def active(self) -> bool:
        """Open, held or promoted: the incident's runs stay out of the baseline."""
        return self in (State.OPEN, State.HELD, State.PROMOTED)

    @property
    def injected(self) -> bool:
        """Open or held: its lesson enters the suite's prompts."""
        return self in (State.OPEN, State.HELD)

    @property
    def label(self) -> str:
        """How the state is shown."""
        return {State.HELD: "held by lesson", State.PROMOTED: "promoted to the prompt"}.get(self, self.value)


#: the states whose lesson is injected, and those that keep runs out of the baseline
INJECTED = tuple(s for s in State if s.injected)
ACTIVE = tuple(s for s in State if s.active)


class Cause(StrEnum):
    """What opened an incident."""

    REGRESSION = "regression"
    FLOOR = "below floor"


#: the verdicts that open (or reopen) an incident
TRIGGERS = frozenset({VerdictStatus.REGRESSED, VerdictStatus.BELOW_FLOOR})


def triggers(comparison: Comparison) -> bool:
    """Whether some scorer of the run has a verdict that opens an incident."""
    return any(s.status in TRIGGERS for s in comparison.scorers)


@dataclass(frozen=True)
class Level:
    """One case before an incident: its mean and pass rate over the baseline window's runs."""

    mean: float
    passed: float
    runs: int


@dataclass(frozen=True)
class Past:
    """One earlier run of an incident (since it opened): a full run or an ablation."""

    run_id: str
    ablation: bool
    lesson: bool
    scores: Mapping[str, float]  # graded cases of the scorer

    @property
    def clean(self) -> bool:
        return self.ablation or not self.lesson


@dataclass(frozen=True)
class Seen:
    """What one valid run says about one scorer, as the lifecycle reads it."""

    run_id: str
    full: bool
    regressed: bool
    pass_mark: float
    graded: Mapping[str, float]  # case → score; errored, skipped and control cases are absent
    newly_failing: Sequence[str] = ()
    baseline: Mapping[str, float] = field(default_factory=dict)  # the baseline's last run, graded cases
    status: VerdictStatus | None = None  # the verdict (None: ``regressed`` decides)
    significant_drop: bool = False
    at_floor: bool = True  # the scorer's mean is at or above its floor (or it has none)
    threshold: float = 0.1
    lesson: bool = False  # this incident's lesson was injected into the run's target
    ablation: bool = False  # an ablation run for this incident
    ran: frozenset[str] | None = None  # every case of the run, graded or not (None: not known)

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

    @property
    def below_floor(self) -> bool:
        return self.status is VerdictStatus.BELOW_FLOOR

    @property
    def trigger(self) -> bool:
        """The verdict opens (or reopens) an incident (:data:`TRIGGERS`)."""
        return self.regressed or self.status in TRIGGERS

    @property
    def fails(self) -> bool:
        return self.regressed or (self.status is not None and self.status.fails)

    @property
    def as_past(self) -> Past:
        return Past(self.run_id, self.ablation, self.lesson, self.scores)


@dataclass(frozen=True)
class Incident:
    """What the machine reads of a stored incident."""

    state: State
    cause: Cause = Cause.REGRESSION
    remembered: Sequence[str] = ()
    chronic: Sequence[str] = ()
    before: Mapping[str, Level] = field(default_factory=dict)  # the remembered cases before it
    noise: float = 0.0  # the within-case standard deviation of one grade in the baseline window
    window_runs: int = 0  # the baseline window's runs the levels come from
    past: Sequence[Past] = ()  # its runs since it (re)opened, newest first, this one excluded
    window: Mapping[str, Level] = field(default_factory=dict)  # cases that may join, before it


@dataclass(frozen=True)
class Step:
    """One transition: ``open``, ``update``, ``hold``, ``release`` (held or promoted → open),
    ``resolve``; ``ablated`` and ``keep`` (an ablation, a full run with the lesson, that left a
    held incident held: nothing to write) or None (nothing at all); the next state and the cases
    that join."""

    action: str | None
    state: State | None
    joined: tuple[str, ...] = ()
    escalate: bool = False  # a floor incident whose scorer regressed: it remembers the regression too


def keeps_out(incident: Incident) -> bool:
    """Whether the incident keeps its scorer's runs out of the baseline: an active regression (so
    it is not absorbed), or a held lesson (runs it holds are not the product's normal). A scorer
    below its floor with no lesson holding it is the product's normal, only not good enough."""
    return incident.state is State.HELD or (incident.state.active and incident.cause is Cause.REGRESSION)


def shortfall(before: Mapping[str, Level], runs: Sequence[Mapping[str, float]]) -> float:
    """The remembered cases' mean shortfall in ``runs`` against their mean before the incident."""
    diffs = [level.mean - run[c] for run in runs for c, level in before.items()]
    return sum(diffs) / len(diffs)


def back(incident: Incident, seen: Seen, *, lesson: bool = False) -> bool:
    """Whether the product is at its level before the incident, with evidence (the module's
    definition): on clean runs, or with ``lesson`` on the runs that had the lesson — where the
    shortfall's point estimate is enough (holding retires nothing; resolving needs the bound
    too). An ablation of a regression's cases is not held to the scorer's floor (a floor is the
    whole suite's)."""
    if incident.cause is Cause.FLOOR:  # the scorer's whole: a full run, or an ablation of every learn case
        return not seen.regressed and not seen.significant_drop and seen.at_floor and not seen.below_floor
    if seen.regressed or (seen.significant_drop and not seen.ablation):  # an ablation's verdict covers
        return False  # only the remembered cases, against a window they were picked from: the shortfall decides
    if seen.below_floor and not seen.ablation:
        return False
    cases = [c for c in incident.remembered if seen.ran is None or c in seen.ran]  # not a case gone from the suite
    if any(c not in seen.scores for c in cases):
        return False  # a remembered case errored: this run is no evidence
    before = {c: incident.before[c] for c in cases if c in incident.before}
    if any(not seen.passed(c) for c in cases if c not in before):
        return False  # no level before the incident (an older record, a new case): it must pass
    if not before:
        return True
    same = [p for p in incident.past if (not p.clean if lesson else p.clean) and all(c in p.scores for c in before)]
    delta = seen.threshold * sum(x.mean for x in before.values()) / len(before)  # the drop the scorer calls
    for gap, bound in evidence(incident, before, [seen.scores, *(p.scores for p in same)]):  # worth acting on
        if gap <= delta / 2 and (lesson or bound <= delta):  # holding retires nothing: its estimate suffices
            return True
    return False


def evidence(incident: Incident, before: Mapping[str, Level], runs: Sequence[Mapping[str, float]],
             ) -> list[tuple[float, float]]:
    """The remembered cases' mean shortfall against their levels over the newest 1, 2, …
    :data:`BACK_RUNS` of ``runs`` (newest first), each with its upper bound (:data:`Z_BACK`
    standard errors; one grade's noise over the cases and runs, and over the baseline window's
    runs the levels are the means of)."""
    n, w = len(before), max(incident.window_runs, 1)
    out = []
    for j in range(1, min(len(runs), BACK_RUNS) + 1):
        gap = shortfall(before, runs[:j])
        out.append((gap, gap + Z_BACK * incident.noise * math.sqrt(1 / (n * j) + 1 / (n * w))))
    return out


def binomial_tail(k: int, m: int, p: float) -> float:
    """P(at least ``k`` of ``m``) for a case that fails with probability ``p`` each run."""
    return sum(math.comb(m, i) * p ** i * (1 - p) ** (m - i) for i in range(k, m + 1))


def joining(incident: Incident, seen: Seen) -> list[str]:
    """The cases that join the incident on this full run: failing now, neither remembered nor
    chronic, and failing in its last :data:`JOIN_RUNS` full runs so often that their failure
    rate before the incident (Laplace-smoothed; no runs before: as if passing once) makes it
    improbable (≤ :data:`JOIN_ALPHA`)."""
    if not seen.full or seen.ablation:
        return []
    known = set(incident.remembered) | set(incident.chronic) | set(seen.chronic)
    fulls = [seen.scores, *(p.scores for p in incident.past if not p.ablation)][:JOIN_RUNS]
    out = []
    for case in sorted(seen.failing - known):
        level = incident.window.get(case)
        runs, passed = (level.runs, level.passed) if level is not None else (1, 1.0)
        rate = (runs * (1 - passed) + 1) / (runs + 2)
        fails = sum(1 for run in fulls if case in run and not passes(run[case], seen.pass_mark))
        if binomial_tail(fails, len(fulls), rate) <= JOIN_ALPHA:
            out.append(case)
    return out


def transition(incident: Incident | None, seen: Seen) -> Step:
    """The table above, for one incident (None: no record) and one valid run."""
    state = incident.state if incident is not None else None
    if state is None or not state.active:
        if seen.trigger and not seen.ablation:
            return Step("open", State.OPEN)
        return Step(None, state)
    assert incident is not None
    if seen.trigger and not seen.ablation:
        escalate = seen.regressed and incident.cause is Cause.FLOOR
        return Step("release" if state is not State.OPEN else "update", State.OPEN, tuple(joining(incident, seen)),
                    escalate=escalate)
    clean = seen.ablation or not seen.lesson
    if clean and (seen.full or seen.ablation) and back(incident, seen):
        return Step("resolve", State.RESOLVED)
    if state is State.OPEN and seen.full and seen.lesson and back(incident, seen, lesson=True):
        return Step("hold", State.HELD, tuple(joining(incident, seen)))
    joined = tuple(joining(incident, seen))
    if joined or (not seen.ablation and any(c in seen.failing for c in incident.remembered)):
        return Step("update", state, joined)
    if seen.ablation:
        return Step("ablated", state)
    if state is State.HELD and seen.full:
        return Step("keep", state)  # nothing to write; the lesson still holds the product
    return Step(None, state)


def ablation_cases(incident: Incident, seen: Seen, step: Step, every: int) -> list[str]:
    """The cases to run again without lessons after this run (none: no ablation now): after a
    full run that leaves the incident held, when ``every`` (≥ 1) full runs passed since its last
    ablation. Its remembered cases; every learn case of the run for a floor incident (a floor is
    the whole scorer's), or a regression that remembers none."""
    if step.state is not State.HELD or not seen.full or seen.ablation or every <= 0:
        return []
    since = next((i for i, p in enumerate(incident.past) if p.ablation), len(incident.past))
    if since + 1 < every:
        return []
    cases = {*incident.remembered, *step.joined}
    return sorted(seen.scores) if incident.cause is Cause.FLOOR or not cases else sorted(cases)


def levels(window: Sequence[Mapping[str, float]], cases: Sequence[str], pass_mark: float) -> dict[str, Level]:
    """Each case's mean and pass rate over the baseline window's runs (graded runs only)."""
    out = {}
    for case in cases:
        values = [run[case] for run in window if case in run]
        if values:
            out[case] = Level(sum(values) / len(values), sum(passes(v, pass_mark) for v in values) / len(values),
                              len(values))
    return out


def noise(window: Sequence[Mapping[str, float]], cases: Sequence[str]) -> float:
    """The pooled within-case standard deviation of one grade over the window's runs."""
    total, dof = 0.0, 0
    for case in cases:
        values = [run[case] for run in window if case in run and math.isfinite(run[case])]
        if len(values) >= 2:
            mean = sum(values) / len(values)
            total += sum((v - mean) ** 2 for v in values)
            dof += len(values) - 1
    return math.sqrt(total / dof) if dof else 0.0


def shown_cases(seen: Seen, remembered: Sequence[str]) -> list[str]:
    """The remembered cases failing in this run (newly failing first): what the text shows."""
    failing, chronic, kept = seen.failing, set(seen.chronic), set(remembered)
    newly = [c for c in seen.newly_failing if c in failing and c in kept and c not in chronic]
    return newly + sorted(c for c in remembered if c in failing and c not in newly)


def seen_in(comparison: Comparison, s: ScorerComparison, scores: Mapping[str, float],
            baseline: Mapping[str, float] | None = None, held_out: Collection[str] = (), *,
            lesson: bool = False, ablation: bool = False, ran: Collection[str] | None = None) -> Seen:
    """The lifecycle's view of one scorer of one run (held-out cases are not in it). Whether the
    scorer is at its floor is the verdict's own test (its ``floor_state``, :mod:`evalloop.verdicts.floors`):
    a mean at or above the floor, not merely within the noise of it."""
    ev = s.evidence
    return Seen(run_id=comparison.run.id, full=not comparison.run.partial, regressed=s.is_regression,
                pass_mark=s.pass_mark, graded=scores,
                newly_failing=[c for c, _ in s.newly_failing if c not in held_out], baseline=baseline or {},
                status=s.status, significant_drop=bool(ev is not None and ev.significant_drop),
                at_floor=ev is None or ev.floor_state in (None, "above"), threshold=s.threshold,
                lesson=lesson, ablation=ablation, ran=None if ran is None else frozenset(ran))
