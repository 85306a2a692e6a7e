"""The incident lifecycle: one failure memory per regression of a (suite, scorer), as a state machine.

An **incident** is a failure memory (text from :mod:`evalloop.learning.feedback`; tags ``eval-failure``,
``suite:<name>``, ``scorer:<name>``, ``status:<state>``; run ids, case ids and counts in metadata,
never in the text). This module is the one place that moves incidents between states; every
reader (injection, ``learn check``, ``memories list``, the pipeline's baseline eligibility) reads
the state it stored. Only valid runs move an incident (an invalid run, a skipped or broken scorer
changes nothing). Words: *failing* = graded (not errored, not skipped) and below the suite's pass
mark; *newly failing* = failing now and passing in the baseline's last run (the verdict's list);
*chronic* = failing now and failing in the baseline's last run too; *remembered* = the incident's
``failing_cases``.

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
open          :func:`accept_incidents` (``evalloop accept``): the failure is the     accepted
              intended new normal
any           anything else (a partial or errored run without a failing              unchanged
              remembered case, a chronic failure alone, ...)
============  =====================================================================  ============

Open incidents are injected into the next prompts (:mod:`evalloop.learning.injection`, newest first,
by metadata); resolved and accepted ones are kept for history and never injected. While an incident
is open, the pipeline keeps the run out of the baseline (``eligible`` false), so a lasting
regression is not absorbed. One learning step at a time per suite (:func:`step_lock`): a lease
``learn:<suite>`` in the history database, beside the run leases, because that database is the
one place every process of a suite shares (a memory service may be remote; a file lock beside an
embedded store would not cover it) and its leases already survive a holder that dies.
A failing store never fails the run: it is reported.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from evalloop.errors import ConfigError, EvalloopError
from evalloop.learning import feedback
from evalloop.learning.heldout import without_held_out
from evalloop.verdicts.baseline import Comparison, ScorerComparison
from evalloop.verdicts.verdict import VerdictStatus

KIND = "eval-failure"
MAX_IDS = 50
MAX_RUNS = 20
LOCK_WAIT_SECONDS = 60.0


class State(StrEnum):
    """The stored states of an incident (*none* is the absence of a record)."""

    OPEN = "open"
    RESOLVED = "resolved"
    ACCEPTED = "accepted"


class Learned(BaseModel):
    """What the learning step did for one scorer: ``opened``, ``reopened``, ``updated``,
    ``resolved`` (or ``failed``, with the error)."""

    scorer: str
    action: str = "opened"
    memory_id: str | None = None
    error: str | None = None
    chronic: list[str] = []


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
        return {c for c, v in self.scores.items() if v < self.pass_mark}

    def passed(self, case: str) -> bool:
        value = self.scores.get(case)
        return value is not None and value >= self.pass_mark

    @functools.cached_property
    def chronic(self) -> list[str]:
        """Failing now and failing in the baseline's last run too: not part of any regression."""
        return sorted(c for c in self.failing if c in self.baseline and self.baseline[c] < self.pass_mark)


def transition(state: State | None, remembered: Sequence[str], seen: Seen) -> str | None:
    """The table above: ``open`` (a new or reopened incident), ``update``, ``resolve`` or None."""
    if state is not State.OPEN:
        return "open" if seen.regressed else None
    if seen.regressed or any(c in seen.failing for c in remembered):
        return "update"
    if seen.full and all(seen.passed(c) for c in remembered):
        return "resolve"
    return None


def failure_tags(suite: str, scorer: str, status: str = "open") -> list[str]:
    return [KIND, f"suite:{suite}", f"scorer:{scorer}", f"status:{status}"]


def _meta(record: Any) -> Mapping[str, Any]:
    return getattr(getattr(record, "record", record), "metadata", None) or {}


def incidents(adapter: Any, suite: str, scorer: str | None = None, status: str | None = "open",
              limit: int = 200) -> list[Any]:
    """Failure memories of ``suite`` (and ``scorer``) with ``status`` (None: any), newest first."""
    tags = [KIND, f"suite:{suite}"] + ([f"status:{status}"] if status else [])
    found = []
    for record in adapter.list(tags=tags, limit=limit):
        meta = _meta(record)
        if meta.get("kind") != KIND or meta.get("eval_suite") != suite:
            continue
        if (scorer is not None and meta.get("scorer") != scorer) or (status and meta.get("status") != status):
            continue
        found.append(record)
    return sorted(found, key=lambda r: str(_meta(r).get("last_seen") or ""), reverse=True)


def _now(comparison: Comparison) -> str:
    run = comparison.run
    return (run.ended_at or run.started_at or datetime.now(UTC)).isoformat()


def _shown(seen: Seen, remembered: Sequence[str]) -> list[str]:
    """The incident's cases failing in this run: newly failing first, never a chronic one."""
    failing, chronic = seen.failing, set(seen.chronic)
    newly = [c for c in seen.newly_failing if c in failing and c not in chronic]
    return newly + sorted(c for c in remembered if c in failing and c not in newly)


def _text(comparison: Comparison, s: ScorerComparison, seen: Seen, shown: list[str],
          details: _Details) -> str:
    every = feedback.failing_cases(shown[:MAX_IDS], details.cases, details.outputs,
                                   details.reasons.get(s.scorer, {}))
    ev = s.evidence
    return feedback.information(feedback.Incident(
        suite=comparison.run.suite, scorer=s.scorer, kind=s.kind, current=s.current, baseline=s.baseline,
        window_runs=s.window_runs, drop=s.drop, p_value=ev.p_value if ev else None,
        n_paired=ev.n_paired if ev else None, graded=len(seen.scores),
        passed=len(seen.scores) - len(seen.failing), newly_failing=len(s.newly_failing),
        newly_passing=len(s.newly_passing), failing=every[: feedback.MAX_CASES], failing_total=len(shown),
        patterns=feedback.common_patterns(every)))


def _metadata(comparison: Comparison, s: ScorerComparison, seen: Seen, remembered: list[str],
              chronic: list[str], before: Mapping[str, Any] | None, details: _Details) -> dict[str, Any]:
    run, now = comparison.run, _now(comparison)
    before = before or {}
    runs = [*(before.get("eval_run_ids") or []), run.id][-MAX_RUNS:]
    still = [c for c in remembered if c in seen.failing]
    return {
        **{k: v for k, v in before.items() if k not in ("resolved_run_id", "resolved_at", "accepted_run_id",
                                                         "accepted_reason", "accepted_at")},
        "kind": KIND, "eval_name": run.suite, "eval_suite": run.suite, "scorer": s.scorer, "status": State.OPEN.value,
        # the numbers the memory's text says (set again only when the text is written again)
        "baseline_score": before.get("baseline_score", s.baseline),
        "current_score": before.get("current_score", s.current),
        "drop_percentage": before.get("drop_percentage", s.drop),
        "latest_score": s.current, "latest_drop": s.drop,  # this run's, whatever the text says
        "eval_run_id": before.get("eval_run_id", run.id), "last_run_id": run.id, "eval_run_ids": runs,
        "runs_seen": int(before.get("runs_seen") or 0) + 1, "code_version": run.code_version,
        "first_seen": before.get("first_seen", now), "last_seen": now, "timestamp": now,
        "pass_mark": seen.pass_mark, "failing_cases": remembered[:MAX_IDS], "failing_count": len(still),
        "chronic_cases": chronic[:MAX_IDS],
        "corrections": feedback.corrections(still[:MAX_IDS], details.cases) or list(before.get("corrections") or []),
    }


@dataclass
class _Details:
    cases: Mapping[str, Any] = field(default_factory=dict)
    outputs: Mapping[str, str | None] = field(default_factory=dict)
    scores: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    reasons: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    baseline: Callable[[ScorerComparison], Mapping[str, float]] | None = None
    held_out: frozenset[str] = frozenset()


def seen_in(comparison: Comparison, s: ScorerComparison, scores: Mapping[str, float],
            baseline: Mapping[str, float] | None = None, held_out: Collection[str] = ()) -> Seen:
    """The lifecycle's view of one scorer of one run (held-out cases are not in it)."""
    return Seen(run_id=comparison.run.id, full=not comparison.run.partial, regressed=s.is_regression,
                pass_mark=s.pass_mark, graded=scores,
                newly_failing=[c for c, _ in s.newly_failing if c not in held_out], baseline=baseline or {})


def _learn_only(details: _Details) -> _Details:
    """The details without any held-out case: no held-out case is remembered, shown or corrected."""
    held = details.held_out
    if not held:
        return details

    def keep(m: Mapping[str, Any]) -> dict[str, Any]:
        return {c: v for c, v in m.items() if c not in held}

    return _Details(keep(details.cases), keep(details.outputs), {s: keep(m) for s, m in details.scores.items()},
                    {s: keep(m) for s, m in details.reasons.items()}, details.baseline, held)


def learn(comparison: Comparison, adapter: Any, *, cases: Mapping[str, Any] | None = None,
          outputs: Mapping[str, str | None] | None = None,
          scores: Mapping[str, Mapping[str, float]] | None = None,
          reasons: Mapping[str, Mapping[str, str]] | None = None,
          baseline: Callable[[ScorerComparison], Mapping[str, float]] | None = None,
          held_out: Collection[str] = ()) -> list[Learned]:
    """Move this run's incidents through the table above; failures are returned, not raised.

    ``held_out`` cases (the suite's held-out part) never enter an incident: not remembered, not
    shown in its text, not among its corrections; the lifecycle reads the learn cases alone.

    ``scores`` (scorer → case → graded score) is what every transition reads; ``cases`` (id →
    case), ``outputs`` (id → output text) and ``reasons`` (scorer → id → message) give the failing
    cases their details; ``baseline(s)`` gives the baseline's last run's graded scores (for chronic
    cases). Call it under :func:`step_lock`.
    """
    if comparison.invalid:
        return []
    details = _learn_only(_Details(cases or {}, outputs or {}, scores or {}, reasons or {}, baseline,
                                   frozenset(held_out)))
    results = []
    for s in comparison.scorers:
        if s.status in (VerdictStatus.SKIPPED, VerdictStatus.INVALID, VerdictStatus.SCORER_BROKEN):
            continue
        try:
            item = _learn_one(comparison, s, adapter, details)
        except Exception as exc:  # noqa: BLE001 - a memory service failure never fails the run
            text = exc.one_line() if isinstance(exc, EvalloopError) else f"{type(exc).__name__}: {exc}"
            item = Learned(scorer=s.scorer, action="failed", error=text)
        if item is not None:
            results.append(item)
    return results


def _learn_one(comparison: Comparison, s: ScorerComparison, adapter: Any, details: _Details) -> Learned | None:
    suite = comparison.run.suite
    records = [without_held_out(getattr(r, "record", r), details.held_out)
               for r in incidents(adapter, suite, s.scorer, status=None)]
    current = next((r for r in records if r.metadata.get("status") == State.OPEN), None)
    remembered = list(current.metadata.get("failing_cases") or []) if current is not None else []
    scores = details.scores.get(s.scorer, {})
    quick = seen_in(comparison, s, scores, held_out=details.held_out)
    action = transition(State.OPEN if current is not None else None, remembered, quick)
    if action is None:
        return None
    if current is not None and action == "resolve":
        meta = {**current.metadata, "status": State.RESOLVED.value, "resolved_run_id": comparison.run.id,
                "resolved_at": _now(comparison)}
        adapter.update(current.id, current.information, tags=failure_tags(suite, s.scorer, State.RESOLVED),
                       metadata=meta)
        return Learned(scorer=s.scorer, action="resolved", memory_id=current.id)
    wanted = quick.failing and s.previous_run is not None and details.baseline is not None
    seen = seen_in(comparison, s, scores, details.baseline(s) if wanted and details.baseline else None,
                   details.held_out)
    if current is not None:
        return _update(comparison, s, seen, adapter, current, details)
    return _open(comparison, s, seen, adapter, records, details)


def _update(comparison: Comparison, s: ScorerComparison, seen: Seen, adapter: Any, record: Any,
            details: _Details, action: str = "updated") -> Learned:
    before = dict(record.metadata)
    rewrite = bool(before.pop("rewrite", False))
    old = list(before.get("failing_cases") or [])
    chronic_now = set(seen.chronic)
    remembered = old + [c for c in seen.newly_failing if c not in old and c not in chronic_now]
    chronic = sorted((set(before.get("chronic_cases") or []) | chronic_now) - set(remembered))
    shown = _shown(seen, remembered)
    unchanged = action == "updated" and not rewrite and \
        (not shown or sorted(shown) == sorted(before.get("still_failing", old)))
    text = record.information if unchanged else _text(comparison, s, seen, shown, details)
    meta = {**_metadata(comparison, s, seen, remembered, chronic, before, details), "still_failing": shown[:MAX_IDS]}
    if not unchanged:  # the text says this run's numbers: so does the metadata
        meta.update(baseline_score=s.baseline, current_score=s.current, drop_percentage=s.drop)
    if action == "reopened":
        closed = f"{before.get('status')}:{before.get('resolved_run_id') or before.get('accepted_run_id') or '?'}"
        meta.update(reopened=int(before.get("reopened") or 0) + 1, reopened_run_id=comparison.run.id,
                    reopened_at=_now(comparison), closed=[*(before.get("closed") or []), closed][-MAX_RUNS:])
    _write(adapter, record, text, failure_tags(comparison.run.suite, s.scorer), meta)
    return Learned(scorer=s.scorer, action=action, memory_id=record.id, chronic=chronic)


def _write(adapter: Any, record: Any, text: str, tags: list[str], meta: dict[str, Any]) -> None:
    """Update a record; a text another memory already holds keeps the record's own text."""
    try:
        adapter.update(record.id, text, tags=tags, metadata=meta)
    except ConfigError:
        if text == record.information:
            raise
        adapter.update(record.id, record.information, tags=tags, metadata=meta)


def _open(comparison: Comparison, s: ScorerComparison, seen: Seen, adapter: Any, records: list[Any],
          details: _Details) -> Learned:
    """A regression with no open incident: reopen the closed one it recurs from, else a new one."""
    chronic = seen.chronic
    newly = [c for c in seen.newly_failing if c not in chronic]
    closed = [r for r in records if r.metadata.get("status") in (State.RESOLVED, State.ACCEPTED)]
    again = next((r for r in closed if set(r.metadata.get("failing_cases") or []) & set(newly)), None)
    if again is not None:
        return _reopen(comparison, s, seen, adapter, again, details)
    shown = _shown(seen, newly)
    meta = {**_metadata(comparison, s, seen, newly, list(chronic), None, details), "still_failing": shown[:MAX_IDS]}
    if closed:
        meta["previous_id"] = closed[0].id
    memory_id = adapter.store(_text(comparison, s, seen, shown, details),
                              tags=failure_tags(comparison.run.suite, s.scorer), metadata=meta)
    known = next((r for r in records if r.id == memory_id), None)
    if known is None and callable(getattr(adapter, "get", None)):
        got = adapter.get(memory_id)
        known = got if got is not None and _meta(got).get("kind") == KIND \
            and _meta(got).get("last_run_id") != comparison.run.id else None
    if known is not None:  # the store de-duplicated the text onto an existing record: open that one
        return _reopen(comparison, s, seen, adapter, known, details)
    return Learned(scorer=s.scorer, action="opened", memory_id=memory_id, chronic=list(chronic))


def _reopen(comparison: Comparison, s: ScorerComparison, seen: Seen, adapter: Any, record: Any,
            details: _Details) -> Learned:
    """A closed incident recurs: the same record, open again, remembering this regression's cases."""
    fresh = record.model_copy(update={"metadata": {**record.metadata, "failing_cases": [], "chronic_cases": [],
                                                   "still_failing": None}})
    return _update(comparison, s, seen, adapter, fresh, details, action="reopened")


def accept_incidents(adapter: Any, suite: str, scorer: str | None, reason: str, run_id: str | None) -> list[str]:
    """Close the suite's open incidents (of ``scorer``, or all) as ``accepted``: the failure is the
    intended new normal. They are kept for history, never injected; a later regression of the
    same cases reopens them. Returns their ids. Call it under :func:`step_lock`."""
    now = datetime.now(UTC).isoformat()
    done = []
    for found in incidents(adapter, suite, scorer):
        record = getattr(found, "record", found)
        meta = {**record.metadata, "status": State.ACCEPTED.value, "accepted_reason": reason,
                "accepted_run_id": run_id, "accepted_at": now}
        adapter.update(record.id, record.information, tags=failure_tags(suite, meta["scorer"], State.ACCEPTED),
                       metadata=meta)
        done.append(record.id)
    return done


def describe(record: Any) -> str | None:
    """One line for an incident (None for any other memory): scorer, state, its cases, its chronic
    cases kept apart, how often it came back."""
    meta = _meta(record)
    if meta.get("kind") != KIND:
        return None

    def listed(ids: Sequence[str]) -> str:
        return f"({len(ids)}) {', '.join(ids[:8])}{f' and {len(ids) - 8} more' if len(ids) > 8 else ''}" \
            if ids else "(0)"

    line = (f"{meta.get('scorer')}: {meta.get('status')}, runs seen {meta.get('runs_seen', 1)}; "
            f"regression cases {listed(list(meta.get('failing_cases') or []))}")
    if meta.get("chronic_cases"):
        line += f"; chronic, failing before it too {listed(list(meta['chronic_cases']))}"
    if meta.get("reopened"):
        line += f"; reopened {meta['reopened']}×"
    return line


def open_scorers(adapter: Any, suite: str) -> set[str]:
    """The scorers of ``suite`` that have an open incident."""
    return {str(_meta(r).get("scorer")) for r in incidents(adapter, suite)}


@contextlib.contextmanager
def step_lock(db: Any, suite: str, wait: float | None = None) -> Iterator[None]:
    """Hold the suite's learning lease (``learn:<suite>`` in the history database) for one step,
    waiting up to ``wait`` seconds (default :data:`LOCK_WAIT_SECONDS`) for another process's step
    to end, then :class:`~evalloop.history.locks.LockBusy`."""
    from evalloop.history.locks import DatabaseLock, LockBusy

    wait = LOCK_WAIT_SECONDS if wait is None else wait
    lock = DatabaseLock(db, f"learn:{suite}", stale_seconds=max(wait, 30.0))
    deadline = time.monotonic() + wait
    while not lock.acquire():
        if time.monotonic() >= deadline:
            info = lock.holder()
            raise LockBusy(f"the learning step of suite '{suite}' is held by "
                           f"{info.owner if info else 'another process'}",
                           hint="its failure memories are updated by that run; run again to update them here")
        time.sleep(0.05)
    try:
        yield
    finally:
        lock.release()
