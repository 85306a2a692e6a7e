"""Incidents in the memory store: one failure memory per regression of a (suite, scorer).

This module owns the store side of the lifecycle: it finds a suite's incidents (:func:`incidents`,
by tags and metadata), moves them through the table of :mod:`evalloop.learning.incident_machine`
for each scorer of a judged run (:func:`learn`: open, reopen, update, resolve) and on
``evalloop accept`` (:func:`accept_incidents`), writing the text and metadata of
:mod:`evalloop.learning.incident_records`. It is the one place that writes an incident's state;
every reader (injection, ``learn check``, ``memories list``, the pipeline's baseline eligibility)
reads the state it stored.

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
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from evalloop.errors import ConfigError, EvalloopError
from evalloop.learning.heldout import without_held_out
from evalloop.learning.incident_machine import Seen, State, seen_in, shown_cases, transition
from evalloop.learning.incident_records import (
    KIND,
    MAX_RUNS,
    Details,
    describe,
    failure_tags,
    learn_only,
    meta_of,
    now_of,
    record_metadata,
    record_text,
    text_scores,
)
from evalloop.verdicts.baseline import Comparison, ScorerComparison
from evalloop.verdicts.verdict import VerdictStatus

#: the names this module has always offered (the machine's and the records' included)
__all__ = ["KIND", "LOCK_WAIT_SECONDS", "Learned", "Seen", "State", "accept_incidents", "describe",
           "failure_tags", "incidents", "learn", "open_scorers", "seen_in", "step_lock", "transition"]

LOCK_WAIT_SECONDS = 60.0


class Learned(BaseModel):
    """What the learning step did for one scorer: ``opened``, ``reopened``, ``updated``,
    ``resolved`` (or ``failed``, with the error)."""

    scorer: str
    action: str = "opened"
    memory_id: str | None = None
    error: str | None = None
    chronic: list[str] = []


def incidents(adapter: Any, suite: str, scorer: str | None = None, status: str | None = "open",
              limit: int = 200) -> list[Any]:
    """Failure memories of ``suite`` (and ``scorer``) with ``status`` (None: any), newest first."""
    tags = [KIND, f"suite:{suite}"] + ([f"status:{status}"] if status else [])
    found = []
    for record in adapter.list(tags=tags, limit=limit):
        meta = meta_of(record)
        if meta.get("kind") != KIND or meta.get("eval_suite") != suite:
            continue
        if (scorer is not None and meta.get("scorer") != scorer) or (status and meta.get("status") != status):
            continue
        found.append(record)
    return sorted(found, key=lambda r: str(meta_of(r).get("last_seen") or ""), reverse=True)


def learn(comparison: Comparison, adapter: Any, *, cases: Mapping[str, Any] | None = None,
          outputs: Mapping[str, str | None] | None = None,
          scores: Mapping[str, Mapping[str, float]] | None = None,
          reasons: Mapping[str, Mapping[str, str]] | None = None,
          baseline: Callable[[ScorerComparison], Mapping[str, float]] | None = None,
          held_out: Collection[str] = (), redact: Callable[[str | None], str | None] | None = None,
          ) -> list[Learned]:
    """Move this run's incidents through the table above; failures are returned, not raised.

    ``held_out`` cases (the suite's held-out part) never enter an incident: not remembered, not
    shown in its text, not among its corrections; the lifecycle reads the learn cases alone.
    ``redact`` removes what a learn case's output or reason quotes of a held-out case
    (:class:`evalloop.learning.heldout.Redactor`).

    ``scores`` (scorer → case → graded score) is what every transition reads; ``cases`` (id →
    case), ``outputs`` (id → output text) and ``reasons`` (scorer → id → message) give the failing
    cases their details; ``baseline(s)`` gives the baseline's last run's graded scores (for chronic
    cases). Call it under :func:`step_lock`.
    """
    if comparison.invalid:
        return []
    details = learn_only(Details(cases or {}, outputs or {}, scores or {}, reasons or {}, baseline,
                                   frozenset(held_out), redact))
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


def _learn_one(comparison: Comparison, s: ScorerComparison, adapter: Any, details: Details) -> Learned | None:
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
                "resolved_at": now_of(comparison)}
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
            details: Details, action: str = "updated") -> Learned:
    before = dict(record.metadata)
    rewrite = bool(before.pop("rewrite", False))
    old = list(before.get("failing_cases") or [])
    chronic_now = set(seen.chronic)
    remembered = old + [c for c in seen.newly_failing if c not in old and c not in chronic_now]
    chronic = sorted((set(before.get("chronic_cases") or []) | chronic_now) - set(remembered))
    shown = shown_cases(seen, remembered)
    unchanged = action == "updated" and not rewrite and \
        (not shown or sorted(shown) == sorted(before.get("still_failing", old)))
    text = record.information if unchanged else record_text(comparison, s, seen, shown, details)
    meta = record_metadata(comparison, s, seen, remembered, chronic, before, details, shown)
    if not unchanged:  # the text says this run's numbers: so does the metadata
        meta.update(baseline_score=s.baseline, current_score=s.current, drop_percentage=s.drop,
                    text_scores=text_scores(seen))
    if action == "reopened":
        closed = f"{before.get('status')}:{before.get('resolved_run_id') or before.get('accepted_run_id') or '?'}"
        meta.update(reopened=int(before.get("reopened") or 0) + 1, reopened_run_id=comparison.run.id,
                    reopened_at=now_of(comparison), closed=[*(before.get("closed") or []), closed][-MAX_RUNS:])
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
          details: Details) -> Learned:
    """A regression with no open incident: reopen the closed one it recurs from, else a new one."""
    chronic = seen.chronic
    newly = [c for c in seen.newly_failing if c not in chronic]
    closed = [r for r in records if r.metadata.get("status") in (State.RESOLVED, State.ACCEPTED)]
    again = next((r for r in closed if set(r.metadata.get("failing_cases") or []) & set(newly)), None)
    if again is not None:
        return _reopen(comparison, s, seen, adapter, again, details)
    shown = shown_cases(seen, newly)
    meta = record_metadata(comparison, s, seen, newly, list(chronic), None, details, shown)
    if closed:
        meta["previous_id"] = closed[0].id
    memory_id = adapter.store(record_text(comparison, s, seen, shown, details),
                              tags=failure_tags(comparison.run.suite, s.scorer), metadata=meta)
    known = next((r for r in records if r.id == memory_id), None)
    if known is None and callable(getattr(adapter, "get", None)):
        got = adapter.get(memory_id)
        known = got if got is not None and meta_of(got).get("kind") == KIND \
            and meta_of(got).get("last_run_id") != comparison.run.id else None
    if known is not None:  # the store de-duplicated the text onto an existing record: open that one
        return _reopen(comparison, s, seen, adapter, known, details)
    return Learned(scorer=s.scorer, action="opened", memory_id=memory_id, chronic=list(chronic))


def _reopen(comparison: Comparison, s: ScorerComparison, seen: Seen, adapter: Any, record: Any,
            details: Details) -> Learned:
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


def open_scorers(adapter: Any, suite: str) -> set[str]:
    """The scorers of ``suite`` that have an open incident."""
    return {str(meta_of(r).get("scorer")) for r in incidents(adapter, suite)}


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
