"""One fire of a schedule (:func:`run_scheduled_job`, the function every stored job names): each
suite under its database lock (one run per suite at a time, across processes), in a fresh
``evalloop run`` process (:mod:`evalloop.scheduling.fire`: today's code, a crash or hang
contained), recorded in the schedule ledger; the run notifies the sinks. A busy suite is waited
for within the misfire grace, a dead holder's fire closed, a fire the database failed run again."""

from __future__ import annotations

import functools
import logging
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalloop.config import load_settings
from evalloop.errors import EvalloopError, UnknownSuiteError
from evalloop.history.leases import interrupt_fire_runs
from evalloop.history.locks import DatabaseLock
from evalloop.history.outage import outlast
from evalloop.history.store import FIRE_ENV, HistoryStore
from evalloop.scheduling import ledger
from evalloop.scheduling.control import CONTROL
from evalloop.scheduling.fire import FireResult, fire_line, run_fire
from evalloop.scheduling.worker import acquire_within, alarm, cannot_run, close_dead_fires, one_line, until_due
from evalloop.suites.lookup import find_suite

log = logging.getLogger("evalloop.scheduler")

#: times a fire whose process could not reach the history database is run again (2 s, 4 s, 8 s later)
FIRE_DB_RETRIES = 3


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

