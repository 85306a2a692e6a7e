"""Incidents and lessons as the viewer shows them: each incident's state and text, the runs it was
seen in, the runs whose prompts it was injected into (a lesson), and what closed it.

Everything is read from the memory store (read-only) and the runs' fingerprints (a run records the
memories injected into it: ``injected.memories``); the state is what
:mod:`evalloop.learning.incidents` stored — nothing here decides a state.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import BaseModel, Field

from evalloop.history.details import run_fingerprint
from evalloop.learning.incident_machine import State
from evalloop.learning.incident_records import IncidentMeta, meta
from evalloop.learning.incidents import KIND, incidents
from evalloop.learning.injection import lesson_records
from evalloop.view.source import Source

#: runs of a suite whose fingerprints are read for the memories injected into them
RUNS_READ = 500
#: failure memories listed to find one by its id
LISTED = 2000


class InjectedRun(BaseModel):
    run_id: str
    started_at: Any


class Incident(BaseModel):
    """One incident (a failure memory): state, text, cases, and its life across runs."""

    id: str
    suite: str
    scorer: str | None
    status: str
    active: bool = True  # open, held or promoted: its runs stay out of the baseline
    text: str
    first_seen: str | None = None
    last_seen: str | None = None
    opened_by: str | None = None  # the run whose regression opened it
    runs_seen: list[str] = Field(default_factory=list)
    failing_cases: list[str] = Field(default_factory=list)
    chronic_cases: list[str] = Field(default_factory=list)
    reopened: int = 0
    closed_by: str | None = None  # the run that resolved it, or the run accepted in its place
    closed_at: str | None = None
    closed_how: str = ""  # "resolved: ..." / "accepted: <reason>"
    injected: list[InjectedRun] = Field(default_factory=list)  # runs whose prompts it was injected into
    lesson_now: bool = False  # the next run's prompts get it
    held_back: bool = False  # open, but it remembers a held-out case: never injected


def _incident(record: Any, suite: str) -> Incident:
    """An incident as the pages show it, read through the one reader of its metadata
    (:func:`evalloop.learning.incident_records.meta`)."""
    m = meta(record) or IncidentMeta()
    state = m.state
    closed_by, closed_at, how = None, None, ""
    if state is State.RESOLVED:
        closed_by, closed_at, how = m.resolved_run_id, m.resolved_at, "resolved: its cases are back at their level"
    elif state is State.ACCEPTED:
        closed_by, closed_at = m.accepted_run_id, m.accepted_at
        how = f"accepted: {m.accepted_reason or 'the new normal'}"
    elif state is State.HELD:
        closed_by, closed_at, how = m.held_run_id, m.held_at, "held: the lesson holds the product (still injected)"
    elif state is State.PROMOTED:
        closed_at, how = m.promoted_at, f"promoted into the prompt: {m.promoted_reason or 'the lesson'}"
    return Incident(
        id=record.id, suite=suite, scorer=m.scorer, status=state.value, active=state.active, text=record.information,
        first_seen=m.first_seen, last_seen=m.last_seen, opened_by=m.eval_run_id, runs_seen=list(m.eval_run_ids),
        failing_cases=list(m.failing_cases), chronic_cases=list(m.chronic_cases), reopened=m.reopened,
        closed_by=closed_by, closed_at=closed_at, closed_how=how)


def injected_into(source: Source, suite: str) -> dict[str, list[InjectedRun]]:
    """Per memory id, the suite's runs (newest first) whose prompts it was injected into."""
    found: dict[str, list[InjectedRun]] = defaultdict(list)
    for run in source.store.runs(suite, limit=RUNS_READ):
        injected = run_fingerprint(run).get("injected")
        memories = injected.get("memories") if isinstance(injected, dict) else None
        for memory_id in memories if isinstance(memories, list) else []:
            found[str(memory_id)].append(InjectedRun(run_id=run.id, started_at=run.started_at))
    return found


def suite_incidents(source: Source, suite: str) -> tuple[list[Incident], str]:
    """The suite's incidents (open first, then newest), and a note when none can be read."""
    with source.memories() as adapter:
        if adapter is None:
            return [], "no memory store yet: no regression has been learned"
        records = incidents(adapter, suite, status=None)
        chosen = source.suite(suite)
        lessons, held = lesson_records(adapter, chosen if chosen is not None else suite,
                                       limit=source.settings.inject_limit)
    injected = injected_into(source, suite)
    lesson_ids = {r.id for r in lessons}
    found = []
    for record in records:
        item = _incident(record, suite)
        item.injected = injected.get(item.id, [])
        item.lesson_now = item.id in lesson_ids
        item.held_back = item.id in held
        found.append(item)
    opened = [i for i in found if i.active]
    rest = sorted((i for i in found if not i.active), key=lambda i: str(i.last_seen or ""), reverse=True)
    return opened + rest, "" if found else "no incidents: no regression of this suite was learned"


def open_counts(source: Source, suites: list[str]) -> dict[str, int]:
    """Open incidents per suite (nothing read when there is no memory store)."""
    with source.memories() as adapter:
        if adapter is None:
            return {}
        return {name: len(incidents(adapter, name)) for name in suites}


def find_incident(source: Source, memory_id: str) -> Incident | None:
    """One incident by its memory id, with its runs (None: no such incident)."""
    with source.memories() as adapter:
        if adapter is None:
            return None
        record = next((r for r in adapter.list(tags=[KIND], limit=LISTED) if r.id == memory_id), None)
    found = meta(record) if record is not None else None
    if record is None or found is None or not found.eval_suite:
        return None
    suite = str(found.eval_suite)
    return next((i for i in suite_incidents(source, suite)[0] if i.id == memory_id), _incident(record, suite))
