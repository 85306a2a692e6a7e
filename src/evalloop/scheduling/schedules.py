"""The schedules as ``evalloop schedule`` changes them: added (its suites checked now, not at
3 a.m.), listed with each one's last fire, removed, paused and resumed — by id or a unique prefix."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from pydantic import BaseModel

from evalloop.config import Settings
from evalloop.errors import EvalloopError, StoreAccessError
from evalloop.scheduling import ledger
from evalloop.scheduling.jobstore import JOB_FUNC, admin_scheduler
from evalloop.scheduling.triggers import describe, make_trigger
from evalloop.suites.lookup import find_suite


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
    with admin_scheduler(settings) as scheduler:
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
    with admin_scheduler(settings, readonly=readonly) as scheduler:
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
    with admin_scheduler(settings) as scheduler:
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

