"""Incidents in the memory store: one failure memory per regression of a (suite, scorer).

This module owns the store side of the lifecycle: it finds a suite's incidents (:func:`incidents`,
by tags and metadata), moves them through the table of :mod:`evalloop.learning.incident_machine`
for each scorer of a judged run (:func:`learn`: open, reopen, update, resolve) and on
``evalloop accept`` (:func:`accept_incidents`), writing the text and metadata of
:mod:`evalloop.learning.incident_records`. It is the one place that writes an incident's state;
every reader (injection, ``learn check``, ``memories list``, the pipeline's baseline eligibility)
reads the state it stored.

Open incidents are injected into the next prompts (:mod:`evalloop.learning.injection`); resolved
and accepted ones are kept for history, never injected. While an incident is open, the pipeline
keeps the run out of the baseline, so a lasting regression is not absorbed. One learning step at
a time per suite (:func:`step_lock`): a lease ``learn:<suite>`` in the history database, the one
place every process of a suite shares (a memory service may be remote), whose leases survive a
holder that dies. A failing store never fails the run: it is reported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel

from evalloop.errors import ConfigError, EvalloopError
from evalloop.learning.evidence import History, ablation_ids, injected_ids
from evalloop.learning.heldout import without_held_out
from evalloop.learning.incident_machine import (
    ACTIVE,
    INJECTED,
    Cause,
    Incident,
    Level,
    Seen,
    State,
    ablation_cases,
    keeps_out,
    levels,
    noise,
    seen_in,
    shown_cases,
    transition,
)
from evalloop.learning.incident_records import (
    KIND,
    MAX_RUNS,
    Details,
    IncidentMeta,
    describe,
    failure_tags,
    learn_only,
    meta,
    now_of,
    record_metadata,
    record_text,
    since_run,
    text_scores,
    view,
)
from evalloop.memory.records import MemoryRecord
from evalloop.verdicts.baseline import Comparison, ScorerComparison
from evalloop.verdicts.verdict import VerdictStatus

if TYPE_CHECKING:  # annotations only: the HTTP adapter's module loads httpx
    from sqlalchemy.engine import Engine

    from evalloop.history.models import Run
    from evalloop.memory.adapters import MemoryAdapter
    from evalloop.suites.models import Case

#: the names this module has always offered (the machine's and the records' included)
__all__ = ["ACTIVE", "INJECTED", "KIND", "LOCK_WAIT_SECONDS", "Learned", "Seen", "State", "accept_incidents",
           "active_scorers", "describe", "failure_tags", "incidents", "kept_out_scorers", "learn",
           "promote_incidents", "seen_in", "step_lock", "transition"]

LOCK_WAIT_SECONDS = 60.0


class Learned(BaseModel):
    """What the learning step did for one scorer (``action``: opened, reopened, updated, held,
    released, resolved, ablated or failed), the incident's ``state`` after it, and the cases to
    run again without lessons (``ablate``) when an ablation is due."""

    scorer: str
    action: str = "opened"
    memory_id: str | None = None
    error: str | None = None
    chronic: list[str] = []
    state: str = State.OPEN.value
    ablate: list[str] = []


@runtime_checkable
class Fetches(Protocol):
    """A memory adapter that fetches a record by id (the embedded store does; a service may not)."""

    def get(self, id: str) -> MemoryRecord | None: ...


class Fresh(TypedDict, total=False):
    """What a new or reopened incident starts from besides its cases (:func:`_opening`): fields of
    :class:`~evalloop.learning.incident_records.IncidentMeta`."""

    noise: float
    baseline_run_ids: list[str]
    cause: str
    since_run_id: str
    levels_before: dict[str, list[float]]


def incidents(adapter: MemoryAdapter, suite: str, scorer: str | None = None,
              status: str | Collection[str] | None = INJECTED, limit: int = 200) -> list[MemoryRecord]:
    """Failure memories of ``suite`` (and ``scorer``) in ``status`` (one state, several, or None:
    any; by default those whose lesson is injected: open and held), newest first."""
    wanted = None if status is None else ({str(status)} if isinstance(status, str) else {str(x) for x in status})
    found = []
    for tag in [None] if wanted is None else sorted(wanted):
        tags = [KIND, f"suite:{suite}"] + ([f"status:{tag}"] if tag else [])
        for record in adapter.list(tags=tags, limit=limit):
            m = meta(record)
            if m is None or m.eval_suite != suite:
                continue
            if (scorer is not None and m.scorer != scorer) or (wanted and m.status not in wanted):
                continue
            found.append((m.last_seen or "", record))
    return [r for _, r in sorted(found, key=lambda x: x[0], reverse=True)]


def learn(comparison: Comparison, adapter: MemoryAdapter, *, cases: Mapping[str, Case] | None = None,
          outputs: Mapping[str, str | None] | None = None,
          scores: Mapping[str, Mapping[str, float]] | None = None,
          reasons: Mapping[str, Mapping[str, str]] | None = None,
          baseline: Callable[[ScorerComparison], Mapping[str, float]] | None = None,
          held_out: Collection[str] = (), redact: Callable[[str | None], str | None] | None = None,
          history: History | None = None, ablation_every: int = 1,
          ran: Collection[str] | None = None) -> list[Learned]:
    """Move this run's incidents through the table of :mod:`~evalloop.learning.incident_machine`;
    failures are returned, not raised.

    ``held_out`` cases (the suite's held-out part) never enter an incident: not remembered, not
    shown in its text, not among its corrections; the lifecycle reads the learn cases alone.
    ``redact`` removes what a learn case's output or reason quotes of a held-out case
    (:class:`evalloop.learning.heldout.Redactor`).

    ``scores`` (scorer → case → graded score) is what every transition reads; ``cases`` (id →
    case), ``outputs`` (id → output text) and ``reasons`` (scorer → id → message) give the failing
    cases their details; ``baseline(s)`` gives the baseline's last run's graded scores (for chronic
    cases); ``history`` the incident's earlier runs and the baseline window's scores (without it,
    this run is the only evidence); ``ran`` every case id of the run (a remembered case the suite
    no longer has is not waited for). A held incident asks for an ablation (``Learned.ablate``) after
    every ``ablation_every``-th full run with its lesson (0: never). Call it under :func:`step_lock`.
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
            item = _learn_one(comparison, s, adapter, details, history, ablation_every,
                              None if ran is None else frozenset(ran))
        except Exception as exc:  # noqa: BLE001 - a memory service failure never fails the run
            text = exc.one_line() if isinstance(exc, EvalloopError) else f"{type(exc).__name__}: {exc}"
            item = Learned(scorer=s.scorer, action="failed", error=text)
        if item is not None:
            results.append(item)
    return results


def _learn_one(comparison: Comparison, s: ScorerComparison, adapter: MemoryAdapter, details: Details,
               history: History | None, ablation_every: int, ran: frozenset[str] | None) -> Learned | None:
    run, suite = comparison.run, comparison.run.suite
    records = [without_held_out(r, details.held_out) for r in incidents(adapter, suite, s.scorer, status=None)]
    current = next((r for r in records if _meta(r).status in ACTIVE), None)
    ablation = ablation_ids(run)
    if ablation and (current is None or current.id not in ablation):
        return None  # an ablation moves only the incidents it was run for
    scores = details.scores.get(s.scorer, {})
    lesson = current is not None and current.id in injected_ids(run)
    quick = seen_in(comparison, s, scores, held_out=details.held_out, lesson=lesson, ablation=bool(ablation),
                    ran=ran)
    wanted = quick.failing and s.previous_run is not None and details.baseline is not None
    seen = seen_in(comparison, s, scores, details.baseline(s) if wanted and details.baseline else None,
                   details.held_out, lesson=lesson, ablation=bool(ablation), ran=ran) if wanted else quick
    incident = _read(current, seen, s, history, run) if current is not None else None
    step = transition(incident, seen)
    if step.action is None:
        return None
    if current is None or step.action == "open":
        return _open(comparison, s, seen, adapter, records, details, history)
    if step.action == "resolve":
        done = _meta(current).model_copy(update={"status": State.RESOLVED.value, "resolved_run_id": run.id,
                                                 "resolved_at": now_of(comparison)})
        adapter.update(current.id, current.information, tags=failure_tags(suite, s.scorer, State.RESOLVED),
                       metadata=done.dump())
        return Learned(scorer=s.scorer, action="resolved", memory_id=current.id, state=State.RESOLVED.value)
    assert incident is not None and step.state is not None
    if step.action in ("ablated", "keep"):
        item = Learned(scorer=s.scorer, action=step.action, memory_id=current.id, state=step.state.value)
    else:
        joined = {c: incident.window[c] for c in step.joined if c in incident.window}
        cases: list[str] = list(step.joined)
        fresh: Fresh | None = None
        if step.escalate:  # a floor incident that regresses remembers the regression as one would
            _, newly, _, found, fresh = _opening(comparison, s, seen, history)
            del fresh["since_run_id"]
            joined.update(found)
            cases += [c for c in newly if c not in cases]
        item = _update(comparison, s, seen, adapter, current, details, action=_ACTIONS[step.action],
                       state=step.state, joined=cases, levels_joined=joined, fresh=fresh)
    item.ablate = ablation_cases(incident, seen, step, ablation_every)
    return item


def _read(current: MemoryRecord, seen: Seen, s: ScorerComparison, history: History | None, run: Run) -> Incident:
    """The machine's view of the active incident: its record, its runs since it opened, and the
    levels before it of the cases that may join (read only when some may)."""
    incident = view(current)
    past = history.since(run.suite, since_run(current) or "", s.scorer, current.id, run) if history else []
    window: dict[str, Level] = {}
    candidates = sorted(seen.failing - set(incident.remembered) - set(incident.chronic))
    ids = _meta(current).baseline_run_ids
    if history is not None and candidates and ids and seen.full and not seen.ablation and len(past) >= 2:
        window = levels(history.scores(ids, s.scorer), candidates, s.pass_mark)
    return dataclasses.replace(incident, past=past, window=window)


_ACTIONS = {"update": "updated", "release": "released", "hold": "held"}


def _update(comparison: Comparison, s: ScorerComparison, seen: Seen, adapter: MemoryAdapter,
            record: MemoryRecord, details: Details, action: str = "updated", state: State = State.OPEN,
            joined: Sequence[str] = (), levels_joined: Mapping[str, Level] | None = None,
            fresh: Fresh | None = None, before: IncidentMeta | None = None) -> Learned:
    before = before or _meta(record)
    old = list(before.failing_cases)
    remembered = old + [c for c in joined if c not in old]
    cause = fresh.get("cause", before.cause) if fresh else before.cause
    chronic_now = set(seen.chronic) if cause != Cause.FLOOR else set()  # a floor remembers every failing case
    chronic = sorted((set(before.chronic_cases) | chronic_now) - set(remembered))
    shown = shown_cases(seen, remembered)
    shown_before = before.still_failing if before.still_failing is not None else old
    unchanged = action not in ("reopened", "opened") and not before.rewrite and \
        (not shown or sorted(shown) == sorted(shown_before))
    text = record.information if unchanged else record_text(comparison, s, seen, shown, details)
    after = record_metadata(comparison, s, seen, remembered, chronic, before, details, shown, state=state)
    update: dict[str, object] = dict(fresh or {})
    if not unchanged:  # the text says this run's numbers: so does the metadata
        update.update(baseline_score=s.baseline, current_score=s.current, drop_percentage=s.drop,
                      text_scores=text_scores(seen))
    added = {c: v for c, v in (levels_joined or {}).items() if c in remembered and c not in old}
    if added:  # a case that joins brings its level before the incident
        update["levels_before"] = after.model_copy(update=update).with_levels(added)
    if action == "held":
        update.update(held_run_id=comparison.run.id, held_at=now_of(comparison))
    if action == "reopened":
        closed = f"{before.status}:{before.resolved_run_id or before.accepted_run_id or '?'}"
        update.update(reopened=before.reopened + 1, reopened_run_id=comparison.run.id,
                      reopened_at=now_of(comparison), closed=[*before.closed, closed][-MAX_RUNS:])
    _write(adapter, record, text, failure_tags(comparison.run.suite, s.scorer, state), after.model_copy(update=update))
    return Learned(scorer=s.scorer, action=action, memory_id=record.id, chronic=chronic, state=state.value)


def _meta(record: MemoryRecord) -> IncidentMeta:
    """A listed incident's metadata (:func:`incidents` lists incidents only)."""
    found = meta(record)
    assert found is not None, "incidents() lists incident records only"
    return found


def _write(adapter: MemoryAdapter, record: MemoryRecord, text: str, tags: list[str], after: IncidentMeta) -> None:
    """Update a record; a text another memory already holds keeps the record's own text."""
    data = after.dump()
    try:
        adapter.update(record.id, text, tags=tags, metadata=data)
    except ConfigError:
        if text == record.information:
            raise
        adapter.update(record.id, record.information, tags=tags, metadata=data)


def _opening(comparison: Comparison, s: ScorerComparison, seen: Seen, history: History | None,
             ) -> tuple[Cause, list[str], list[str], dict[str, Level], Fresh]:
    """What a new (or reopened) incident remembers: its cause, its cases, the chronic ones kept
    apart, its cases' levels before it (from the verdict's baseline window) and the other fields
    that go with them (the window's runs and noise, the cause, the run it starts from)."""
    if seen.regressed:
        cause, chronic = Cause.REGRESSION, list(seen.chronic)
        cases = [c for c in seen.newly_failing if c in seen.failing and c not in chronic]
    else:  # below the floor: every failing case is what the scorer is short of
        cause, chronic, cases = Cause.FLOOR, [], sorted(seen.failing)
    window = list(s.window)
    runs = history.scores(window, s.scorer) if history is not None and window else []
    return cause, cases, chronic, levels(runs, cases, seen.pass_mark), \
        Fresh(noise=round(noise(runs, sorted(seen.scores)), 6), baseline_run_ids=window, cause=cause.value,
              since_run_id=comparison.run.id)


def _open(comparison: Comparison, s: ScorerComparison, seen: Seen, adapter: MemoryAdapter,
          records: list[MemoryRecord], details: Details, history: History | None) -> Learned:
    """A trigger with no active incident: reopen the closed one it recurs from, else a new one."""
    cause, cases, chronic, found, fresh = _opening(comparison, s, seen, history)
    fresh["levels_before"] = IncidentMeta().with_levels(found)
    closed = [r for r in records if _meta(r).status in (State.RESOLVED, State.ACCEPTED)]
    again = next((r for r in closed if set(_meta(r).failing_cases) & set(cases)), None)
    if again is not None:
        return _reopen(comparison, s, seen, adapter, again, details, cases, chronic, fresh)
    shown = shown_cases(seen, cases)
    new = record_metadata(comparison, s, seen, cases, chronic, None, details, shown).model_copy(
        update={**fresh, "previous_id": closed[0].id if closed else None})
    memory_id = adapter.store(record_text(comparison, s, seen, shown, details),
                              tags=failure_tags(comparison.run.suite, s.scorer), metadata=new.dump())
    known = next((r for r in records if r.id == memory_id), None)
    if known is None and isinstance(adapter, Fetches):
        got = adapter.get(memory_id)
        other = meta(got) if got is not None else None
        known = got if other is not None and other.last_run_id != comparison.run.id else None
    if known is not None:  # the store de-duplicated the text onto an existing record: open that one
        return _reopen(comparison, s, seen, adapter, known, details, cases, chronic, fresh)
    return Learned(scorer=s.scorer, action="opened", memory_id=memory_id, chronic=list(chronic))


def _reopen(comparison: Comparison, s: ScorerComparison, seen: Seen, adapter: MemoryAdapter,
            record: MemoryRecord, details: Details, cases: list[str], chronic: list[str], fresh: Fresh) -> Learned:
    """A closed incident recurs: the same record, open again, remembering this trigger's cases."""
    blank = _meta(record).model_copy(update={"failing_cases": [], "chronic_cases": chronic, "still_failing": None,
                                             "levels_before": {}})
    return _update(comparison, s, seen, adapter, record, details, action="reopened", joined=cases, fresh=fresh,
                   before=blank)


def _close(adapter: MemoryAdapter, suite: str, scorer: str | None, states: Collection[str], state: State,
           fields: Mapping[str, str | None]) -> list[str]:
    """Move the suite's incidents in ``states`` (of ``scorer``, or all) to ``state``."""
    done = []
    for record in incidents(adapter, suite, scorer, status=states):
        after = _meta(record).model_copy(update={"status": state.value, **fields})
        adapter.update(record.id, record.information, tags=failure_tags(suite, str(after.scorer), state),
                       metadata=after.dump())
        done.append(record.id)
    return done


def accept_incidents(adapter: MemoryAdapter, suite: str, scorer: str | None, reason: str,
                     run_id: str | None) -> list[str]:
    """Close the suite's active incidents (open, held or promoted; of ``scorer``, or all) as
    ``accepted``: the failure is the intended new normal. They are kept for history, never
    injected; a later regression of the same cases reopens them. Returns their ids. Call it
    under :func:`step_lock`."""
    return _close(adapter, suite, scorer, ACTIVE, State.ACCEPTED,
                  {"accepted_reason": reason, "accepted_run_id": run_id, "accepted_at": datetime.now(UTC).isoformat()})


def promote_incidents(adapter: MemoryAdapter, suite: str, scorer: str | None = None, reason: str = "") -> list[str]:
    """Mark the suite's injected incidents (open or held; of ``scorer``, or all) ``promoted``: the
    lesson is in the prompt now, never injected; the next full run without it resolves them when
    back, or opens them again. Returns their ids. Call it under :func:`step_lock`."""
    return _close(adapter, suite, scorer, INJECTED, State.PROMOTED,
                  {"promoted_reason": reason, "promoted_at": datetime.now(UTC).isoformat()})


def active_scorers(adapter: MemoryAdapter, suite: str) -> set[str]:
    """The scorers of ``suite`` with an active incident (open, held or promoted)."""
    return {str(_meta(r).scorer) for r in incidents(adapter, suite, status=ACTIVE)}


def kept_out_scorers(adapter: MemoryAdapter, suite: str) -> set[str]:
    """The scorers of ``suite`` whose runs stay out of the baseline now
    (:func:`~evalloop.learning.incident_machine.keeps_out`)."""
    return {str(_meta(r).scorer) for r in incidents(adapter, suite, status=ACTIVE) if keeps_out(view(r))}


@contextlib.contextmanager
def step_lock(db: str | Engine, suite: str, wait: float | None = None) -> Iterator[None]:
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
