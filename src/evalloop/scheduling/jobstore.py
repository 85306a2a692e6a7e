"""The job store: APScheduler's ``SQLAlchemyJobStore`` on the history database URL (so jobs survive
restarts and any process on that database can list or change them), a scheduler on it
(:func:`make_scheduler`), one that only edits or reads it (:func:`admin_scheduler`), and jobs
stored under an older path of the job function moved to :data:`JOB_FUNC`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.engine import make_url

from evalloop.config import Settings
from evalloop.history.engine import get_engine
from evalloop.history.schema import ensure_job_store
from evalloop.scheduling.control import CONTROL
from evalloop.scheduling.executor import ClaimingExecutor
from evalloop.scheduling.triggers import resolve_timezone
from evalloop.scheduling.worker import WorkerJobStore, cannot_run, cannot_run_why

#: the job function every stored job names. Its path is stored in the job store, which schedulers
#: of older and newer versions share: it stays ``scheduler:run_scheduled_job`` (re-exported there from
#: :mod:`evalloop.scheduling.job`), so that no version drops another's jobs as unimportable.
JOB_FUNC = "evalloop.scheduling.scheduler:run_scheduled_job"
#: where the job function lived before (jobs stored then name it; see :func:`_move_old_jobs`)
OLD_JOB_FUNCS = (b"evalloop.scheduler:run_scheduled_job",)
JOBS_TABLE = "evalloop_jobs"


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
def admin_scheduler(settings: Settings, readonly: bool = False) -> Iterator[BackgroundScheduler]:
    """A paused scheduler for changing jobs in the store without running any (``readonly``:
    for reading them only)."""
    scheduler = make_scheduler(settings, admin=True, readonly=readonly)
    scheduler.start(paused=True)
    try:
        yield scheduler
    finally:
        scheduler.shutdown(wait=False)

