"""The foreground scheduler (``evalloop scheduler start``): :func:`serve` runs the schedules on the
history database's job store until a signal, records fires past their misfire grace, and stops
gracefully (the runs in progress finish, or are interrupted on a second signal or a timeout).

Two schedulers on one database never both take one fire (fire claims:
:mod:`evalloop.scheduling.executor`); missed fires coalesce into one run if the latest is within
the grace time. A fire itself is :mod:`evalloop.scheduling.job`; the job store
:mod:`evalloop.scheduling.jobstore`; the schedules as the CLI changes them
:mod:`evalloop.scheduling.schedules`. This module also names what scheduling offers in one place,
and it must keep ``run_scheduled_job``: stored jobs name it here (:data:`JOB_FUNC`).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from apscheduler.events import EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler

from evalloop.config import Settings
from evalloop.history.locks import claim_fire
from evalloop.history.store import HistoryStore
from evalloop.redact import redact_url
from evalloop.scheduling import ledger
from evalloop.scheduling.control import CONTROL
from evalloop.scheduling.executor import ClaimingExecutor
from evalloop.scheduling.job import FIRE_DB_RETRIES, run_scheduled_job
from evalloop.scheduling.jobstore import JOB_FUNC, JOBS_TABLE, OLD_JOB_FUNCS, admin_scheduler, make_scheduler
from evalloop.scheduling.schedules import (
    ScheduleError,
    ScheduleInfo,
    add_schedule,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
)
from evalloop.scheduling.worker import alarm

__all__ = [
    "CONTROL", "FIRE_DB_RETRIES", "JOBS_TABLE", "JOB_FUNC", "OLD_JOB_FUNCS", "ClaimingExecutor",
    "ScheduleError", "ScheduleInfo", "add_schedule", "admin_scheduler", "list_schedules", "make_scheduler",
    "pause_schedule", "remove_schedule", "resume_schedule", "run_scheduled_job", "serve",
]

log = logging.getLogger("evalloop.scheduler")


def serve(settings: Settings, *, stop: threading.Event | None = None,
          poll_seconds: float | None = None, on_ready: Callable[[], None] | None = None,
          stop_timeout: float | None = None) -> int:
    """Run the scheduler until SIGINT/SIGTERM (or ``stop``); 0 on a clean stop.

    The first signal stops new fires and waits for runs in progress to finish, at most
    ``stop_timeout`` seconds (setting ``scheduler_stop_seconds``; None waits for them); a second
    signal, or the timeout, interrupts them: the cases that finished are written, the run is
    marked ``interrupted`` and the exit code is 143 when SIGTERM asked for it (128 + 15, as a
    supervisor expects), else 130.
    """
    CONTROL.reset()
    CONTROL.url = settings.database_url
    try:
        return _serve(settings, stop or threading.Event(), poll_seconds, on_ready, stop_timeout)
    finally:
        CONTROL.reset()  # this process may schedule (or run fires) again, after a failure too


def _missed(settings: Settings, scheduler: BackgroundScheduler, event: JobExecutionEvent) -> None:
    """A fire past its misfire grace when a scheduler could take it (downtime, a database
    outage): a ``missed`` ledger row per suite and an alarm, said once (the fire is claimed)."""
    url = settings.database_url
    try:
        if not claim_fire(url, event.job_id, event.scheduled_run_time, CONTROL.owner):
            return
        job = scheduler.get_job(event.job_id)
        suites = list(job.args[1]) if job is not None else ["?"]
        at = event.scheduled_run_time.isoformat(timespec="seconds")
        detail = f"the fire of {at} was past its misfire grace when a scheduler could take it: not run"
        for suite in suites:
            ledger.start(url, job_id=event.job_id, fire_id="missed", suite=suite, owner=CONTROL.owner,
                         status="missed", detail=detail)
            log.warning("%s: %s: %s", event.job_id, suite, detail)
            alarm(settings, event.job_id, suite, "missed", detail)
    except Exception as exc:  # noqa: BLE001 - a listener must never stop the scheduler
        log.error("%s: a missed fire could not be recorded: %s", event.job_id, exc)


def _serve(settings: Settings, stop: threading.Event, poll_seconds: float | None,
           on_ready: Callable[[], None] | None, stop_timeout: float | None) -> int:
    """:func:`serve`'s loop, with :data:`CONTROL` set for this scheduler."""
    poll = poll_seconds or settings.scheduler_poll_seconds
    patience = stop_timeout if stop_timeout is not None else settings.scheduler_stop_seconds
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        if len(received) == 1:
            log.warning("stopping: finishing the run in progress (signal again to interrupt it%s)",
                        f"; interrupted after {patience:g} s" if patience is not None else "")
        else:
            log.warning("interrupting the run in progress")

    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    executor = ClaimingExecutor(settings.database_url, CONTROL.owner, project_dir=settings.project_dir)
    scheduler = make_scheduler(settings, executor=executor, worker=True)
    history = HistoryStore(settings.database_url)
    history.lease_seconds, history.beat_seconds = settings.lease_seconds, settings.heartbeat_seconds
    reaped = history.reap_dead_runs()
    if reaped:
        log.warning("marked %d run(s) of dead processes failed: %s", len(reaped), ", ".join(reaped))
    scheduler.add_listener(lambda event: _missed(settings, scheduler, event), EVENT_JOB_MISSED)
    try:
        scheduler.start()
        log.info("scheduler started: %d schedule(s) on %s", len(scheduler.get_jobs()),
                 redact_url(settings.database_url))
        if on_ready is not None:
            on_ready()
        last_poll = time.monotonic()
        while not (stop.is_set() or received):
            time.sleep(0.05)
            if time.monotonic() - last_poll >= poll:  # notice jobs other processes added
                scheduler.wakeup()
                last_poll = time.monotonic()
        scheduler.pause()
        CONTROL.stopping.set()
        stopping_since = time.monotonic()
        while executor.in_flight():
            overdue = patience is not None and time.monotonic() - stopping_since >= patience
            if (len(received) > 1 or overdue) and not CONTROL.hard.is_set():
                if overdue:
                    log.warning("the run in progress outlasted scheduler_stop_seconds (%g s): interrupting it",
                                patience)
                CONTROL.cancel_all()
            time.sleep(0.05)
        scheduler.shutdown(wait=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    code = 0
    if CONTROL.interrupted:
        code = 128 + signal.SIGTERM if signal.SIGTERM in received else 128 + signal.SIGINT
    log.info("scheduler stopped")
    return code
