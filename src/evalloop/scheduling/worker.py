"""A worker's view of the shared job store: only the schedules this worker can run.

Schedules name suites, not paths: every worker runs a fire in its own checkout
(``scheduler start -C DIR``). A worker whose checkout lacks a schedule's suite never takes
that schedule's fires — it leaves them to a worker that has the suite, and says so once in the
ledger and the log — so a fire is neither used up nor advanced by a worker that cannot run it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from apscheduler.job import Job
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

log = logging.getLogger("evalloop.scheduler")

#: why this worker cannot run a job (None: it can)
CanRun = Callable[[Job], "str | None"]


class WorkerJobStore(SQLAlchemyJobStore):  # type: ignore[misc]
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
