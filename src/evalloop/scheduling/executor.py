"""The executor that claims each fire in the database before running it, so of the schedulers on
one database exactly one runs a fire; late fires folded into one are each recorded; a job runs in
this worker's checkout."""

from __future__ import annotations

import copy
from datetime import datetime
from pathlib import Path

from apscheduler.executors.base import MaxInstancesReachedError
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.job import Job

from evalloop.history.locks import claim_fire
from evalloop.scheduling import ledger
from evalloop.scheduling.control import CONTROL


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

