"""Scheduled runs: APScheduler jobs persisted beside the history, and the foreground scheduler.

Jobs live in an APScheduler ``SQLAlchemyJobStore`` on the history database URL, so they
survive restarts and any process on that database can list or change them. A fire runs each
of its suites in a fresh ``evalloop run`` process (:mod:`evalloop.scheduling.fire`: today's
code, a crash or hang contained), each under a database lock (one run per suite at a time,
across processes), records the outcome in the schedule ledger; the run sends regressions to
the configured sinks. Two schedulers on one
database never both take one fire (fire claims); missed fires coalesce into one run if the
latest is within the grace time.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apscheduler.events import EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.executors.base import MaxInstancesReachedError
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.job import Job
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from pydantic import BaseModel
from sqlalchemy.engine import make_url

from evalloop.config import Settings, load_settings
from evalloop.errors import EvalloopError, StoreAccessError, UnknownSuiteError
from evalloop.history.engine import get_engine
from evalloop.history.leases import interrupt_fire_runs
from evalloop.history.locks import DatabaseLock, claim_fire
from evalloop.history.outage import outlast
from evalloop.history.schema import ensure_job_store
from evalloop.history.store import FIRE_ENV, HistoryStore
from evalloop.redact import redact_url
from evalloop.scheduling import ledger
from evalloop.scheduling.control import CONTROL
from evalloop.scheduling.fire import FireResult, fire_line, run_fire
from evalloop.scheduling.triggers import describe, make_trigger, resolve_timezone
from evalloop.scheduling.worker import (
    WorkerJobStore,
    acquire_within,
    alarm,
    cannot_run,
    cannot_run_why,
    close_dead_fires,
    one_line,
    until_due,
)
from evalloop.suites.lookup import find_suite

if TYPE_CHECKING:
    from evalloop.loop.pipeline import RunReport

log = logging.getLogger("evalloop.scheduler")

JOB_FUNC = "evalloop.scheduling.scheduler:run_scheduled_job"
#: where the job function lived before (jobs stored then name it; see :func:`_move_old_jobs`)
OLD_JOB_FUNCS = (b"evalloop.scheduler:run_scheduled_job",)
JOBS_TABLE = "evalloop_jobs"
#: times a fire whose process could not reach the history database is run again (2 s, 4 s, 8 s later)
FIRE_DB_RETRIES = 3


class ScheduleError(EvalloopError):
    """An unknown schedule id, or a schedule that cannot be added."""


class ScheduleInfo(BaseModel):
    """One schedule as ``evalloop schedule list`` shows it."""

    id: str
    suites: list[str]
    trigger: str
    paused: bool
    next_run: datetime | None
    last_run: datetime | None = None
    last_verdict: str | None = None
    last_runs: list[str] = []
    project_dir: str
    misfire_grace_seconds: int | None = None
    options: dict[str, Any] = {}  # the runs' batch / max_cost


# -- the job ------------------------------------------------------------------------------
def run_scheduled_job(project_dir: str, suites: list[str], job_id: str = "adhoc",
                      grace_seconds: float | None = None, options: dict[str, Any] | None = None) -> list[str]:
    """One fire of a schedule: run each suite under its lock, each in a fresh process (today's
    code), record it, and let the run notify the sinks. Run ids back. ``options``: the
    schedule's run options (``batch``, ``max_cost``).

    ``project_dir`` is where the suites run, always: a worker's scheduler passes its own checkout
    (``scheduler start -C DIR``: :class:`ClaimingExecutor`), not the path of the host that added
    the schedule; no process-wide state overrides it. A suite that is busy elsewhere is waited for within the
    fire's misfire grace, else recorded as skipped; a suite whose holder's heartbeat stopped is
    taken over, and the dead fire's run and ledger row are closed as interrupted.
    """
    started = time.monotonic()
    fire_id = uuid.uuid4().hex[:12]
    fire_time = CONTROL.claims.get(job_id) or datetime.now(UTC)  # its place in a busy suite's queue
    try:
        settings = load_settings(Path(project_dir))
    except EvalloopError as exc:
        if CONTROL.url is None:
            raise
        cannot_run(CONTROL.url, job_id, fire_id, suites, one_line(exc))
        return []
    url = settings.database_url
    grace = grace_seconds if grace_seconds is not None else settings.misfire_grace_seconds
    if job_id in CONTROL.claims:  # a claimed fire starts by the database's clock, not this host's
        until_due(url, fire_time)
        started = time.monotonic()
    run_ids: list[str] = []
    for suite in suites:
        base = {"job_id": job_id, "fire_id": fire_id, "suite": suite, "owner": CONTROL.owner}
        if CONTROL.stopping.is_set():
            ledger.start(url, **base, status="skipped", detail="scheduler stopping")
            continue
        try:
            find_suite(suite, settings.project_dir)
        except UnknownSuiteError as exc:  # not in this worker's checkout: another worker may have it
            cannot_run(url, job_id, fire_id, [suite], one_line(exc), settings)
            continue
        except EvalloopError as exc:  # here but broken: the fire is spent, and says so loudly
            detail = f"suite broken: {one_line(exc)}"
            log.error("%s: %s: %s", job_id, suite, detail)
            ledger.start(url, **base, status="error", detail=detail)
            alarm(settings, job_id, suite, "error", detail)
            continue
        lock = outlast(functools.partial(DatabaseLock, url, f"suite:{suite}", stale_seconds=settings.lease_seconds,
                                         beat_seconds=settings.heartbeat_seconds, owner=CONTROL.owner))
        if not acquire_within(lock, started + grace, settings.heartbeat_seconds, fire_time):
            try:
                holder = lock.holder()
            except Exception:  # noqa: BLE001 - the database is still away: the holder is unknown
                holder = None
            detail = (f"suite busy: running elsewhere ({holder.owner if holder else 'unknown'})"
                      + ("; scheduler stopping" if CONTROL.stopping.is_set()
                         else f" for the whole misfire grace ({grace:g} s)"))
            log.warning("%s: skipped %s: %s", job_id, suite, detail)
            ledger.start(url, **base, status="skipped", detail=detail)
            alarm(settings, job_id, suite, "skipped", detail)
            continue
        if lock.taken_from is not None:
            close_dead_fires(settings, job_id, suite, lock.taken_from)
        entry = ledger.start(url, **base)
        try:
            if CONTROL.hard.is_set():
                result = FireResult("interrupted", detail="scheduler stopped mid-run")
            else:
                from evalloop.run.batchmode import unfinished

                resume = unfinished(HistoryStore(url), suite)  # a batch run a killed fire left behind
                if resume:
                    log.info("%s: %s: resuming batch run %s", job_id, suite, resume)
                for attempt in range(FIRE_DB_RETRIES + 1):  # a fire the database failed is run again
                    result = run_fire(str(settings.project_dir), suite, timeout=settings.fire_timeout_seconds,
                                      processes=CONTROL.processes, stop_requested=CONTROL.hard.is_set,
                                      options={**(options or {}), **({"resume": resume} if resume else {})},
                                      env={FIRE_ENV: str(entry)})
                    if (result.status != "error" or "cannot reach the history database" not in (result.detail or "")
                            or attempt == FIRE_DB_RETRIES or CONTROL.stopping.wait(2.0 * 2 ** attempt)):
                        break
                    log.warning("%s: %s: the history database was away (%s): running the fire again",
                                job_id, suite, result.detail)
        finally:
            lock.release()
        if result.status == "interrupted":
            CONTROL.interrupted += 1
            # the fire's process marks its own run interrupted; one it could not (killed before
            # its handler ran) is closed here, so a stopped fire never leaves a run 'running'.
            # The process has been reaped by now, so its lease is lapsed: nothing to wait for.
            interrupt_fire_runs(HistoryStore(url), suite, str(entry), "its fire was stopped mid-run")
            ledger.finish(url, entry, status="interrupted", detail=result.detail)
            log.warning("%s: run of %s interrupted and marked so", job_id, suite)
            break
        log.log(*fire_line(job_id, suite, result))
        if result.status != "completed":
            ledger.finish(url, entry, status="error", detail=result.detail, run_id=result.run_id)
            alarm(settings, job_id, suite, "error", result.detail or "the fire did not complete")
            continue
        ledger.finish(url, entry, status="completed", verdict=result.verdict, run_id=result.run_id)
        if result.run_id:
            run_ids.append(result.run_id)
    return run_ids


def verdict_of(report: RunReport) -> str:
    """One word for a run: its outcome as the fire's ledger records it."""
    from evalloop.report.summary import run_summary

    return run_summary(report).outcome


# -- the scheduler ------------------------------------------------------------------------
class ClaimingExecutor(ThreadPoolExecutor):
    """A thread pool that first claims each fire in the database, so one scheduler runs it.

    ``project_dir``: this worker's checkout, passed to the job as the directory its suites run in
    (a stored job names the adding host's path, which may exist on no worker)."""

    def __init__(self, url: str, owner: str, max_workers: int = 4, project_dir: Path | None = None) -> None:
        super().__init__(max_workers)
        self.url, self.owner, self.project_dir = url, owner, project_dir

    def submit_job(self, job: Job, run_times: list[datetime]) -> None:
        if CONTROL.stopping.is_set():  # shutting down: leave the fire to a scheduler that stays
            self._logger.info("not taking %s of %s: scheduler stopping", run_times[-1], job.id)
            return
        fire = job.next_run_time or run_times[0]
        assert self._lock is not None
        with self._lock:  # still running its last fire here: leave this one to another scheduler
            if self._instances[job.id] >= job.max_instances:
                raise MaxInstancesReachedError(job)
        if not claim_fire(self.url, job.id, fire, self.owner):
            self._logger.info("fire %s of %s was taken by another scheduler", fire, job.id)
            return
        CONTROL.claims[job.id] = fire
        last = run_times[-1].isoformat(timespec="seconds")
        grace = job.misfire_grace_time
        lost = grace is not None and (datetime.now(run_times[-1].tzinfo) - run_times[-1]).total_seconds() > grace
        for late in _coalesced(job, run_times[-1]):  # late fires run as one: each still says so
            at = late.isoformat(timespec="seconds")
            status, detail = (("missed", f"the fire of {at} was past its misfire grace when a scheduler could "
                                         "take it: not run") if lost else
                              ("coalesced", f"the fire of {at} was late and ran as one with {last}"))
            for suite in job.args[1]:
                ledger.start(self.url, job_id=job.id, fire_id=status, suite=suite, owner=self.owner,
                             status=status, detail=detail)
        super().submit_job(self.in_checkout(job), run_times)

    def in_checkout(self, job: Job) -> Job:
        """The job as this worker runs it: its first argument (the project directory) is this
        worker's checkout; the stored job is not changed."""
        if self.project_dir is None or not job.args or job.args[0] == str(self.project_dir):
            return job
        local = copy.copy(job)  # the job's state (its pickled form), then what the scheduler set on it
        local._scheduler, local._jobstore_alias = job._scheduler, job._jobstore_alias
        local.args = (str(self.project_dir), *job.args[1:])
        return local

    def in_flight(self) -> int:
        assert self._lock is not None
        with self._lock:
            return sum(self._instances.values())


def _coalesced(job: Job, last: datetime, limit: int = 1000) -> list[datetime]:
    """The fire times APScheduler folds into the fire at ``last`` (it passes only the last one):
    from the job's due fire time up to ``last``, by its trigger."""
    times: list[datetime] = []
    at = job.next_run_time
    while at is not None and at < last and len(times) < limit:
        times.append(at)
        at = job.trigger.get_next_fire_time(at, last)
    return times


def make_scheduler(settings: Settings, *, executor: ClaimingExecutor | None = None,
                   admin: bool = False, worker: bool = False, readonly: bool = False) -> BackgroundScheduler:
    """A scheduler on the history database's job store (not started); a ``worker`` sees only
    the schedules whose suites its own checkout has (:mod:`evalloop.scheduling.worker`).
    ``readonly`` (an admin scheduler that only lists): the job store is read through a read-only
    engine, and nothing is created or moved."""
    url = settings.database_url
    if readonly:
        from evalloop.history.readonly import readonly_engine

        return _AdminScheduler(jobstores={"default": SQLAlchemyJobStore(engine=readonly_engine(url),
                                                                        tablename=JOBS_TABLE)},
                               timezone=resolve_timezone(settings.timezone))
    get_engine(url)  # creates the folder and the history tables
    options = {"connect_args": {"timeout": 30}} if make_url(url).get_backend_name() == "sqlite" else {}
    store = (WorkerJobStore(url=url, tablename=JOBS_TABLE, engine_options=options,
                            can_run=lambda job: cannot_run_why(settings, job),
                            on_cannot=lambda job, why: cannot_run(url, job.id, "-", list(job.args[1]), why, settings))
             if worker else SQLAlchemyJobStore(url=url, tablename=JOBS_TABLE, engine_options=options))
    ensure_job_store(store)  # its table, created race-free (many schedulers may start at once)
    _move_old_jobs(store)
    return (_AdminScheduler if admin else BackgroundScheduler)(
        jobstores={"default": store},
        executors={"default": executor or ClaimingExecutor(url, CONTROL.owner)},
        job_defaults={"coalesce": True, "max_instances": 1,
                      "misfire_grace_time": settings.misfire_grace_seconds},
        timezone=resolve_timezone(settings.timezone),
    )


def _move_old_jobs(store: SQLAlchemyJobStore) -> None:
    """Point jobs stored under an older path of the job function at :data:`JOB_FUNC`: APScheduler
    cannot import a function that moved, and drops its job from the store."""
    import pickle

    from sqlalchemy import select, update

    table = store.jobs_t
    with store.engine.begin() as conn:
        for job_id, blob in conn.execute(select(table.c.id, table.c.job_state)).all():
            if not any(old in blob for old in OLD_JOB_FUNCS):  # cheap: no unpickling of current jobs
                continue
            state = pickle.loads(blob)
            if state.get("func", "").encode() in OLD_JOB_FUNCS:
                state["func"] = JOB_FUNC
                conn.execute(update(table).where(table.c.id == job_id)
                             .values(job_state=pickle.dumps(state, store.pickle_protocol)))


class _AdminScheduler(BackgroundScheduler):
    """A scheduler that only edits the job store: it never processes (so never runs) a job."""

    def _process_jobs(self) -> None:
        return None


@contextlib.contextmanager
def _admin(settings: Settings, readonly: bool = False) -> Iterator[BackgroundScheduler]:
    """A paused scheduler for changing jobs in the store without running any (``readonly``:
    for reading them only)."""
    scheduler = make_scheduler(settings, admin=True, readonly=readonly)
    scheduler.start(paused=True)
    try:
        yield scheduler
    finally:
        scheduler.shutdown(wait=False)


def add_schedule(settings: Settings, suites: list[str], *, cron: str | None = None,
                 every: str | None = None, tz: str | None = None, job_id: str | None = None,
                 grace_seconds: int | None = None, first_run: datetime | None = None,
                 batch: bool = False, max_cost: float | None = None) -> ScheduleInfo:
    """Persist a schedule for the given suites; ``first_run`` overrides the first fire time.
    ``batch`` and ``max_cost`` are its runs' ``--batch`` and ``--max-cost``."""
    if not suites:
        raise ScheduleError("no suite given", hint="use --suite NAME (repeat for several)")
    for name in suites:
        find_suite(name, settings.project_dir)  # an unknown suite fails now, not at 3 a.m.
    trigger = make_trigger(cron=cron, every=every, tz=tz or settings.timezone)
    job_id = job_id or uuid.uuid4().hex[:8]
    extra: dict[str, Any] = {} if first_run is None else {"next_run_time": first_run}
    with _admin(settings) as scheduler:
        if scheduler.get_job(job_id) is not None:
            raise ScheduleError(f"schedule '{job_id}' exists", hint="pick another --id or remove it")
        grace = grace_seconds or settings.misfire_grace_seconds
        options = {**({"batch": True} if batch else {}), **({"max_cost": max_cost} if max_cost is not None else {})}
        kwargs: dict[str, Any] = {"job_id": job_id, "grace_seconds": grace, **({"options": options} if options else {})}
        scheduler.add_job(JOB_FUNC, trigger, args=[str(settings.project_dir), list(suites)],
                          kwargs=kwargs, id=job_id, name=",".join(suites),
                          misfire_grace_time=grace,
                          **extra)
    return next(s for s in list_schedules(settings) if s.id == job_id)


def list_schedules(settings: Settings) -> list[ScheduleInfo]:
    """Every schedule in the job store with its next fire and its last fire's verdict; read
    only when this user may not write the history (a read-only mount, another user's file).

    Writability is learnt by trying, not by :func:`evalloop.access.diagnose`: opening and closing
    the database file in a process with live SQLite connections drops their POSIX locks."""
    try:
        return _schedules(settings, readonly=False)
    except StoreAccessError:
        return _schedules(settings, readonly=True)


def _schedules(settings: Settings, *, readonly: bool) -> list[ScheduleInfo]:
    with _admin(settings, readonly=readonly) as scheduler:
        jobs = scheduler.get_jobs()
    last = ledger.last_fires(settings.database_url, [j.id for j in jobs], readonly=readonly)
    out = []
    for job in jobs:
        fire = last.get(job.id)
        out.append(ScheduleInfo(
            id=job.id, suites=list(job.args[1]), trigger=describe(job.trigger),
            paused=job.next_run_time is None, next_run=job.next_run_time,
            last_run=datetime.fromtimestamp(fire.at).astimezone() if fire else None,
            last_verdict=fire.verdict if fire else None, last_runs=fire.runs if fire else [],
            project_dir=str(job.args[0]), misfire_grace_seconds=job.misfire_grace_time,
            options=dict(job.kwargs.get("options") or {})))
    return out


def _change(settings: Settings, job_id: str, action: Callable[[BackgroundScheduler, str], Any]) -> str:
    with _admin(settings) as scheduler:
        ids = [j.id for j in scheduler.get_jobs()]
        matches = [i for i in ids if i == job_id] or [i for i in ids if i.startswith(job_id)]
        if len(matches) != 1:
            raise ScheduleError(f"no schedule '{job_id}'" if not matches
                                else f"'{job_id}' matches {len(matches)} schedules",
                                where=settings.database_url, hint="see `evalloop schedule list`")
        try:
            action(scheduler, matches[0])
        except JobLookupError:  # removed by another process meanwhile
            raise ScheduleError(f"no schedule '{job_id}'", where=settings.database_url) from None
    return matches[0]


def remove_schedule(settings: Settings, job_id: str) -> str:
    return _change(settings, job_id, lambda s, i: s.remove_job(i))


def pause_schedule(settings: Settings, job_id: str) -> str:
    return _change(settings, job_id, lambda s, i: s.pause_job(i))


def resume_schedule(settings: Settings, job_id: str) -> str:
    return _change(settings, job_id, lambda s, i: s.resume_job(i))


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
