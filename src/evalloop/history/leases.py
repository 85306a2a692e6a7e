"""Run leases judged on the database's clock: which ``running`` runs lost their process.

A run holds the lock ``run:<id>`` while its process lives (:meth:`HistoryStore.begin_run`).
A run whose lease lapsed — no heartbeat for the lease time, on the database's clock, or its
process of this host and PID namespace is gone — is closed: ``failed`` when any reader finds it
(:func:`reap_dead_runs`), ``interrupted`` when a scheduler takes over the suite of the dead fire
that started it (:func:`interrupt_fire_runs`, the run's notes name that fire).
"""

from __future__ import annotations

import time
from typing import Protocol

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Engine

from evalloop.history.details import run_notes
from evalloop.history.locks import LOCKS, DatabaseLock, clock, engine_for, owner_process, stale_reason
from evalloop.history.models import Run, RunStatus, StoredRow, utcnow

RUNS = Run.__table__
#: the run leases this process holds, by (database URL, run id): never reaped by this process
LIVE: dict[tuple[str, str], DatabaseLock] = {}


class LeasedStore(Protocol):
    """What the lease functions read of a store (:class:`evalloop.history.store.HistoryStore` is one):
    its database and its lease times."""

    url: str
    engine: Engine
    lease_seconds: float
    beat_seconds: float


def _lapsed(store: LeasedStore, run_ids: list[str]) -> dict[str, tuple[StoredRow, str]]:
    """The runs among ``run_ids`` whose lease lapsed: run id → (lease row, why)."""
    if not run_ids:
        return {}
    engine_for(store.engine)
    with store.engine.connect() as conn:
        leases = {r.name: r for r in conn.execute(  # with the database's clock: no host's
            select(LOCKS, *clock(store.engine))
            .where(LOCKS.c.name.in_([f"run:{run_id}" for run_id in run_ids])))}
    out: dict[str, tuple[StoredRow, str]] = {}
    for run_id in run_ids:
        lease = leases.get(f"run:{run_id}")
        if lease is None or (store.url, run_id) in LIVE:  # no lease: an older evalloop's run
            continue
        why = stale_reason(lease, lease.now, store.lease_seconds)
        if why is not None:
            out[run_id] = (lease, why)
    return out


def _close(store: LeasedStore, run_id: str, lease: StoredRow, status: RunStatus, reason: str) -> bool:
    """Close a run that is still running and drop its lease (no race with its own end)."""
    with store.engine.begin() as conn:
        done = conn.execute(
            update(RUNS).where(RUNS.c.id == run_id, RUNS.c.status == RunStatus.RUNNING)
            .values(status=status, valid=False, ended_at=utcnow(), invalid_reason=reason))
        conn.execute(delete(LOCKS).where(LOCKS.c.name == lease.name, LOCKS.c.owner == lease.owner))
    return bool(done.rowcount == 1)


def _holder(lease: StoredRow, why: str) -> str:
    host, pid = owner_process(lease.owner) or ("?", 0)
    return (f"process {pid} on {host} died" if why == "its process died"
            else f"its lease expired ({why}; holder {host} pid {pid})")


def reap_dead_runs(store: LeasedStore) -> list[str]:
    """Mark ``failed`` the runs still ``running`` whose lease lapsed; their ids back."""
    engine_for(store.engine)  # the lock tables exist from here on
    with store.engine.connect() as conn:
        ids = list(conn.execute(select(RUNS.c.id).where(RUNS.c.status == RunStatus.RUNNING)).scalars())
    return [run_id for run_id, (lease, why) in _lapsed(store, ids).items()
            if _close(store, run_id, lease, RunStatus.FAILED, _holder(lease, why))]


def fire_runs(store: LeasedStore, suite: str, fire: str, *, running: bool = True) -> list[str]:
    """The runs of ``suite`` (still ``running``, unless ``running=False``) that the fire (its
    ledger entry id) started, oldest first."""
    query = select(RUNS.c.id, RUNS.c.notes).where(RUNS.c.suite == suite).order_by(RUNS.c.started_at)
    if running:
        query = query.where(RUNS.c.status == RunStatus.RUNNING)
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    return [run_id for run_id, notes in rows if str(run_notes(notes).fire) == fire]


def interrupt_fire_runs(store: LeasedStore, suite: str, fire: str, why: str, *,
                        wait: float = 0.0) -> list[str]:
    """Mark ``interrupted`` the runs a dead fire started, once their own lease lapsed too
    (waiting for that at most ``wait`` seconds: the run's process died with its scheduler, but
    its last heartbeat may be a beat younger). Their ids back."""
    deadline = time.monotonic() + wait
    closed: list[str] = []
    pending = fire_runs(store, suite, fire)
    while pending:
        for run_id, (lease, lapsed) in _lapsed(store, pending).items():
            if _close(store, run_id, lease, RunStatus.INTERRUPTED, f"{why} ({_holder(lease, lapsed)})"):
                closed.append(run_id)
        pending = [r for r in fire_runs(store, suite, fire) if r not in closed]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(min(0.25, max(store.beat_seconds / 4, 0.05)))
    return closed
