"""A run in batch mode: its batches recorded in the history as they go out, and resuming a run
that was killed while it waited on them.

In batch mode (``run --batch``, ``batch: true`` in a suite) the run's clients are
:class:`~evalloop.llm.batching.BatchingClient` s and every case is kept in flight (up to
:data:`BATCH_IN_FLIGHT`), so a batch carries a whole stage of the run. Each batch is recorded
(:mod:`evalloop.history.batches`) before it goes out, and given its id as soon as it has one.
``evalloop run --resume RUN`` runs RUN's suite again as a new run whose clients know RUN's
batches — and look up at the provider a batch RUN was killed before learning the id of: a
request that went out in one is collected from it, nothing is submitted twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from evalloop.errors import EvalloopError, FixtureError
from evalloop.history.locks import DatabaseLock
from evalloop.history.models import Run, RunStatus
from evalloop.history.store import HistoryStore
from evalloop.run.context import Services
from evalloop.run.runner import PreparedRun

if TYPE_CHECKING:
    from evalloop.llm.batching import BatchingClient

BATCH_IN_FLIGHT = 10_000
"""Cases in flight at once in batch mode (each waits on its batch; a waiting case costs little)."""


def batching_clients(services: Services) -> list[BatchingClient]:
    """The run's clients in batch mode (under the response cache, when there is one)."""
    if services.llm is None and services.judge is None:  # no LLM: the batch clients stay unloaded
        return []
    from evalloop.llm.batching import BatchingClient

    found: list[BatchingClient] = []
    for client in (services.llm, services.judge):
        inner = getattr(client, "inner", None) if not isinstance(client, BatchingClient) else client
        if isinstance(inner, BatchingClient) and all(inner is not f for f in found):
            found.append(inner)
    return found


def wire(services: Services, store: HistoryStore, resume: str | None) -> Callable[[Run], None] | None:
    """Seed the batch clients with ``resume``'s batches; the callback that, once the run exists,
    records each batch the clients submit (and ``resume``'s batches again, under the new run, so
    a resumed run killed in turn can be resumed). ``None`` when the run is not in batch mode."""
    clients = batching_clients(services)
    if not clients:
        return None
    from evalloop.history.batches import batch_rows, known_batch_ids, pending_rows, record_batch, record_intent
    from evalloop.llm.batching import LostSubmission

    inherited = batch_rows(store, resume) if resume else []
    pending = pending_rows(store, resume) if resume else []
    for client in clients:
        for _, batch_id, ids in inherited:
            client.known.update(dict.fromkeys(ids, batch_id))
        lost = [LostSubmission(ids, since) for provider, ids, since in pending if provider == client.backend.name]
        if lost:
            client.lost = lost
            client.exclude = known_batch_ids(store, client.backend.name)

    def begin(run: Run) -> None:
        for provider, batch_id, ids in inherited:
            record_batch(store, run.id, provider, batch_id, ids)
        for client in clients:
            for lost in client.lost:  # still lost if this run is killed before finding it
                lost.token = record_intent(store, run.id, client.backend.name, lost.custom_ids)
            client.on_submit = partial(record_batch, store, run.id)
            client.on_intent = partial(record_intent, store, run.id)

    return begin


def without_deadline(prepared: PreparedRun) -> list[str]:
    """A batch run's cases wait for their batches (minutes to hours): the suite's per-case
    ``timeout`` and the scorers' deadlines are not applied, and the run says so (a notice, or
    none). With every case in flight, a sync target stays in place unless the suite asks for
    threads (not one per case)."""
    timeout = prepared.suite.timeout
    update: dict[str, Any] = {"timeout": None}
    if prepared.suite.target_threads is None:
        update["target_threads"] = False
    prepared.suite = prepared.suite.model_copy(update=update)
    graded = [b.timeout for b in prepared.scorers if b.timeout is not None]
    prepared.scorers = [dataclasses.replace(b, timeout=None) for b in prepared.scorers]
    if timeout is None and not graded:
        return []
    what = f"the suite's timeout ({timeout:g} s)" if timeout is not None else "the scorers' timeouts"
    return [f"batch mode: {what} is not applied; a case waits for its batch"]


def resume_notice(services: Services, resume: str) -> str:
    """What resuming collected, in one line."""
    clients = batching_clients(services)
    collected = sum(c.resumed for c in clients)
    submitted = sum(len(c.submitted) for c in clients)
    return (f"resumed run {resume}: {collected} request(s) collected from its batches"
            + (f", {submitted} new batch(es) submitted for the rest" if submitted else ", nothing submitted again"))


def resumable(store: HistoryStore, ref: str) -> Run:
    """The run ``ref`` names, if it can be resumed: a batch run that did not complete."""
    from evalloop.history.batches import batches_of, pending_rows

    runs = store.find_runs(ref)
    if len(runs) != 1:
        raise FixtureError(f"no run '{ref}'" if not runs else f"'{ref}' names {len(runs)} runs",
                           where="--resume", hint="give a run id from `evalloop history`")
    run = runs[0]
    if run.status == RunStatus.COMPLETED:
        raise FixtureError(f"run {run.id} completed: there is nothing to resume", where="--resume",
                           hint="resume a batch run that was killed or interrupted")
    done = resumed_by(store, run)
    if done is not None:
        raise FixtureError(f"run {run.id} was resumed by run {done}, which completed: there is nothing "
                           "left to resume", where="--resume", hint=f"see `evalloop show {done}`")
    if not batches_of(store, run.id) and not pending_rows(store, run.id):
        raise FixtureError(f"run {run.id} submitted no batch: there is nothing to collect", where="--resume",
                           hint="only a run in batch mode (--batch) that submitted a batch can be resumed")
    return run


class ResumeBusy(EvalloopError):
    """Another process is resuming the run (exit 2): one resumer per run."""


def resumed_by(store: HistoryStore, run: Run) -> str | None:
    """The completed run that resumed ``run`` (its notes say ``resumed_from``), if there is one."""
    from evalloop.history.details import run_notes

    for later in store.runs(run.suite, limit=None, statuses=[RunStatus.COMPLETED.value]):
        if later.started_at < run.started_at:
            break
        if run_notes(later).resumed_from == run.id:
            return later.id
    return None


def claim_resume(store: HistoryStore, run_id: str) -> DatabaseLock:
    """The lease on resuming ``run_id``, held while the resumed run runs (its heartbeat keeps it;
    a resumer that dies loses it after ``lease_seconds``): a second resumer is refused instead of
    submitting — and paying for — the same requests again. Checked again under the lease: a run
    resumed to completion meanwhile is not resumed twice."""
    lock = DatabaseLock(store.engine, f"resume:{run_id}", stale_seconds=store.lease_seconds,
                        beat_seconds=store.beat_seconds)
    if not lock.acquire():
        holder = lock.holder()
        raise ResumeBusy(f"run {run_id} is being resumed by {holder.owner if holder else 'another process'}",
                         where="--resume", hint="one resumer per run: wait for that one to end")
    run = store.get_run(run_id)
    done = resumed_by(store, run) if run is not None else None
    if done is not None:
        lock.release()
        raise ResumeBusy(f"run {run_id} was resumed by run {done}, which completed: there is nothing left "
                         "to resume", where="--resume", hint=f"see `evalloop show {done}`")
    return lock


def unfinished(store: HistoryStore, suite: str) -> str | None:
    """The id of ``suite``'s newest run if it is a batch run that died (or was interrupted) after
    submitting: the next scheduled fire resumes it instead of paying again. ``None`` otherwise."""
    from evalloop.history.batches import batch_rows, pending_rows

    store.reap_dead_runs()  # a run left 'running' by a killed fire is failed now
    newest = store.runs(suite, limit=1)
    if newest and newest[0].status in (RunStatus.FAILED, RunStatus.INTERRUPTED) and (
            batch_rows(store, newest[0].id) or pending_rows(store, newest[0].id)):
        return newest[0].id
    return None


def resume_options(run: Run) -> dict[str, Any]:
    """The options a resumed run repeats: the epochs, and the case count of a partial run."""
    options: dict[str, Any] = {"epochs": run.epochs}
    if run.partial:
        options["limit"] = run.n_cases
    return options
