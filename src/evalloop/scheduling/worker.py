"""A worker: what it does with a fire that is not simply run — and its view of the job store.

A suite busy elsewhere is waited for (:func:`acquire_within`); a suite taken over from a dead
host gets that host's fire closed (:func:`close_dead_fires`); a fire this worker cannot run is
said once and released (:func:`cannot_run`); these events reach the alarm sinks (:func:`alarm`).

Schedules name suites, not paths: every worker runs a fire in its own checkout
(``scheduler start -C DIR``). A worker whose checkout lacks a schedule's suite never takes
that schedule's fires — it leaves them to a worker that has the suite, and says so once in the
ledger and the log — so a fire is neither used up nor advanced by a worker that cannot run it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from apscheduler.job import Job
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

from evalloop.config import Settings
from evalloop.errors import EvalloopError, UnknownSuiteError
from evalloop.history.locks import DatabaseLock, release_fire
from evalloop.scheduling import ledger
from evalloop.scheduling.control import CONTROL
from evalloop.suites.lookup import find_suite

log = logging.getLogger("evalloop.scheduler")

def acquire_within(lock: DatabaseLock, deadline: float, beat: float, fire_time: datetime | None = None) -> bool:
    """Take the lock, waiting for a busy suite until ``deadline`` (monotonic) or a stop; in line
    behind the fires of earlier fire times that wait for it too (:mod:`evalloop.history.queue`)."""
    from evalloop.history.outage import is_outage
    from evalloop.history.queue import Ticket

    ticket = Ticket(lock, fire_time or datetime.now(UTC))

    away: list[bool] = []

    def attempt() -> bool:
        try:
            return ticket.try_acquire()
        except Exception as exc:  # the database is away: wait for it as for a busy suite
            if not is_outage(exc):
                raise
            if not away:
                away.append(True)
                log.warning("%s: the history database is away: the fire waits for it (within its grace)",
                            lock.name)
            return False

    try:
        while not attempt():
            if time.monotonic() >= deadline or CONTROL.stopping.is_set():
                return False
            CONTROL.stopping.wait(min(beat, max(deadline - time.monotonic(), 0.0)))
        return True
    finally:
        ticket.leave()


#: at most this long a fire waits for the database's clock to reach its fire time
MAX_EARLY_SECONDS = 600.0


def until_due(url: str, fire_time: datetime) -> None:
    """Wait until the database's clock reaches ``fire_time``: a host whose clock runs fast sees
    a fire due early (APScheduler reads the host's clock), but the team's clock is the
    database's, so the fire starts on time wherever it was claimed (bounded; a stop ends it)."""
    from evalloop.history.locks import database_time, engine_for

    engine = engine_for(url)
    deadline = time.monotonic() + MAX_EARLY_SECONDS
    while not CONTROL.stopping.is_set() and time.monotonic() < deadline:
        ahead = fire_time.timestamp() - database_time(engine)
        if ahead <= 0:
            return
        CONTROL.stopping.wait(min(ahead, 5.0))


def close_dead_fires(settings: Settings, job_id: str, suite: str, dead: str) -> None:
    """After taking a suite over from a dead holder: close its fire's ledger rows as interrupted,
    each with the run it started (marked interrupted once that run's own lease lapsed too)."""
    url = settings.database_url
    for entry_id, _, owner in ledger.running_entries(url, suite=suite, owner=dead):
        detail = f"host of scheduler {owner} stopped heartbeating; suite taken over by {CONTROL.owner}"
        _, run_id = ledger.close_dead(url, entry_id, suite, detail, wait=settings.lease_seconds,
                                      lease_seconds=settings.lease_seconds)
        log.warning("%s: %s: %s (its run %s marked interrupted)", job_id, suite, detail, run_id or "—")
        alarm(settings, job_id, suite, "interrupted", f"{detail}; run {run_id or '—'} interrupted")


def cannot_run_why(settings: Settings, job: Job) -> str | None:
    """Why this worker's checkout cannot run the job's suites (one is absent here), or None when
    it can. A suite that is here but broken is runnable: its fire is taken and fails visibly
    (ledger ``error``, an alarm), since every worker on the same commit would fail it alike."""
    for suite in job.args[1]:
        try:
            find_suite(suite, settings.project_dir)
        except UnknownSuiteError as exc:
            return one_line(exc)
        except EvalloopError:
            continue
    return None


def one_line(exc: EvalloopError) -> str:
    return f"{exc.where}: {exc.what}" if exc.where else exc.what


def cannot_run(url: str, job_id: str, fire_id: str, suites: list[str], why: str,
               settings: Settings | None = None) -> None:
    """This worker cannot run the fire: one line per suite in the ledger and the log, an event
    to the alarm sinks (when the settings that name them loaded), and the fire's claim released
    so that another worker may take it."""
    detail = f"worker {CONTROL.owner} cannot run it: {why}"
    for suite in suites:
        ledger.start(url, job_id=job_id, fire_id=fire_id, suite=suite, owner=CONTROL.owner,
                     status="cannot run", detail=detail)
        log.error("%s: %s: %s", job_id, suite, detail)
        if settings is not None:
            alarm(settings, job_id, suite, "cannot run", detail)
    fire = CONTROL.claims.pop(job_id, None)
    if fire is not None:
        release_fire(url, job_id, fire, CONTROL.owner)


def alarm(settings: Settings, job_id: str, suite: str, event: str, detail: str) -> None:
    """A fire's event to the alarm sinks (a sink that fails is logged, never raised)."""
    from evalloop.scheduling import sinks as sink_module

    try:
        sinks = sink_module.build_sinks(settings)
    except EvalloopError as exc:
        log.error("%s: %s: no alarm sent (%s)", job_id, suite, exc)
        return
    sink_module.alarm({"event": event, "schedule": job_id, "suite": suite, "detail": detail}, sinks)


#: why this worker cannot run a job (None: it can)
CanRun = Callable[[Job], "str | None"]


class WorkerJobStore(SQLAlchemyJobStore):
    """The job store as one worker sees it: jobs it cannot run are neither due nor next."""

    def __init__(self, *args: Any, can_run: CanRun, on_cannot: Callable[[Job, str], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._can_run, self._on_cannot = can_run, on_cannot
        self._told: dict[str, str] = {}

    def _runnable(self, jobs: list[Job]) -> list[Job]:
        out = []
        for job in jobs:
            why = self._can_run(job)
            if why is None:
                self._told.pop(job.id, None)
                out.append(job)
            elif self._told.get(job.id) != why:  # once per job and reason, not every poll
                self._told[job.id] = why
                self._on_cannot(job, why)
        return out

    def get_due_jobs(self, now: datetime) -> list[Job]:
        return self._runnable(super().get_due_jobs(now))

    def get_next_run_time(self) -> datetime | None:
        jobs = self._runnable([j for j in self.get_all_jobs() if j.next_run_time is not None])
        return min((j.next_run_time for j in jobs), default=None)
