"""The schedule ledger: what each scheduled fire did (per suite: run, skip, error) and its verdict."""

from __future__ import annotations

import functools
import threading
import time

from pydantic import BaseModel
from sqlalchemy import insert, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalloop.history.engine import get_engine, verified
from evalloop.history.models import LedgerEntry, metadata
from evalloop.history.outage import outlast
from evalloop.history.schema import ensure_tables

ENTRIES = LedgerEntry.__table__
_READY: set[int] = set()
_LOCK = threading.Lock()

#: statuses: running → completed | interrupted | error; skipped (suite busy for the whole misfire
#: grace, or the scheduler stopping); cannot run (this worker could not run it: another may);
#: coalesced (a late fire run as one with the fires after it); missed (past its misfire grace)
#: what a fire's outcome is when it has no verdict to rank (see :func:`severity`)
NO_VERDICT = ("ok", "no scorers")


@functools.cache
def severity() -> tuple[str, ...]:
    """Fire outcomes from least to most severe: the run outcome's one order
    (:data:`evalloop.verdicts.outcome.ORDER`, read backwards), with a fire this worker could not
    run beside a skipped one and a fire that did not finish just under an invalid run. Read on
    first use: the verdicts' module (and numpy) is imported only when a fire is ranked."""
    from evalloop.verdicts.outcome import ORDER
    from evalloop.verdicts.verdict import VerdictStatus

    ranked = list(NO_VERDICT)
    for status in reversed(ORDER):
        if status is VerdictStatus.INVALID:
            ranked += ["interrupted", "error"]
        ranked.append(status.value)
        if status is VerdictStatus.SKIPPED:
            ranked += ["cannot run", "coalesced", "missed"]
    return tuple(ranked)


class LastFire(BaseModel):
    """The latest fire of a job: when, its worst verdict across suites, and its runs."""

    at: float
    verdict: str
    runs: list[str]
    entries: list[LedgerEntry]


def _engine(url: str) -> Engine:
    engine = get_engine(url)
    if id(engine) not in _READY and not verified(engine):
        with _LOCK:
            ensure_tables(engine, metadata, tables=[ENTRIES], store="schedule ledger")
            _READY.add(id(engine))
    return engine


def start(url: str, *, job_id: str, fire_id: str, suite: str, owner: str,
          status: str = "running", detail: str | None = None) -> int:
    """Record the start of one suite of a fire (or a skip); returns the entry id."""
    def write() -> int:
        now = time.time()
        with _engine(url).begin() as conn:
            result = conn.execute(insert(ENTRIES).values(
                job_id=job_id, fire_id=fire_id, suite=suite, owner=owner, status=status,
                detail=(detail or "")[:1000] or None, started_at=now,
                ended_at=None if status == "running" else now))
            key = result.inserted_primary_key
            assert key is not None  # SQLAlchemy types it Optional; an INSERT of one row has one
            return int(key[0])

    return outlast(write)  # a database that is away for a moment loses no fire's record


def finish(url: str, entry_id: int, *, status: str, verdict: str | None = None,
           run_id: str | None = None, detail: str | None = None) -> None:
    def write() -> None:
        with _engine(url).begin() as conn:
            conn.execute(update(ENTRIES).where(ENTRIES.c.id == entry_id).values(
                status=status, verdict=verdict, run_id=run_id,
                detail=(detail or "")[:1000] or None, ended_at=time.time()))

    outlast(write)


def close_dead(url: str, entry_id: int, suite: str, detail: str, *, wait: float = 0.0,
               lease_seconds: float | None = None) -> tuple[bool, str | None]:
    """Close the ``running`` entry of a fire whose scheduler died: the run that fire started
    (its notes name the entry) is marked ``interrupted`` once its own lease lapsed (waiting for
    that at most ``wait`` seconds), and the entry is closed ``interrupted`` with that run's id.
    (closed?, the run id) back: an entry whose run still holds a live lease stays open."""
    from evalloop.history.leases import fire_runs, interrupt_fire_runs
    from evalloop.history.store import HistoryStore

    store = HistoryStore(url)
    if lease_seconds is not None:
        store.lease_seconds = lease_seconds
    runs = interrupt_fire_runs(store, suite, str(entry_id), detail, wait=wait)
    if fire_runs(store, suite, str(entry_id)):  # its run lives on (its lease is fresh): not dead yet
        return False, None
    ended = fire_runs(store, suite, str(entry_id), running=False)  # it may have closed itself
    run_id = runs[0] if runs else (ended[-1] if ended else None)
    with _engine(url).begin() as conn:
        done = conn.execute(update(ENTRIES).where(ENTRIES.c.id == entry_id, ENTRIES.c.status == "running").values(
            status="interrupted", run_id=run_id, detail=detail[:1000], ended_at=time.time()))
    return done.rowcount == 1, run_id


def running_entries(url: str, suite: str | None = None, owner: str | None = None) -> list[tuple[int, str, str]]:
    """(entry id, suite, owner) of the entries still ``running`` (of one suite, of one owner)."""
    query = select(ENTRIES.c.id, ENTRIES.c.suite, ENTRIES.c.owner).where(ENTRIES.c.status == "running")
    if suite is not None:
        query = query.where(ENTRIES.c.suite == suite)
    if owner is not None:
        query = query.where(ENTRIES.c.owner == owner)
    with _engine(url).connect() as conn:
        return [(int(i), s, o) for i, s, o in conn.execute(query).all()]


def reap_stale(url: str) -> int:
    """Close the ``running`` entries whose scheduler died: a fire holds its suite's lock from
    before its entry starts until it ends, so a running entry whose owner no longer holds a
    live lease on that lock was left behind (:func:`close_dead`). Returns how many were closed."""
    from evalloop.history.locks import current_holder

    closed = 0
    for entry_id, suite, owner in running_entries(url):
        holder = current_holder(_engine(url), f"suite:{suite}")
        if holder is not None and holder.owner == owner:
            continue
        done, _ = close_dead(url, entry_id, suite, f"scheduler {owner} stopped mid-run (its lease on the suite lapsed)")
        closed += done
    return closed


def entries(url: str, job_id: str | None = None, limit: int = 200, *, readonly: bool = False) -> list[LedgerEntry]:
    """Newest first (entries of schedulers that died mid-run are closed first, unless
    ``readonly``: a history this user may not write is only read)."""
    if readonly:
        from evalloop.history.readonly import readonly_engine

        engine = readonly_engine(url)
    else:
        reap_stale(url)
        engine = _engine(url)
    query = select(LedgerEntry).order_by(col(LedgerEntry.id).desc()).limit(limit)
    if job_id is not None:
        query = query.where(LedgerEntry.job_id == job_id)
    with Session(engine, expire_on_commit=False) as session:
        return list(session.exec(query))


def last_fires(url: str, job_ids: list[str], *, readonly: bool = False) -> dict[str, LastFire]:
    """The latest fire of each job that has one."""
    out: dict[str, LastFire] = {}
    for job_id in job_ids:
        recent = entries(url, job_id, limit=50, readonly=readonly)
        if not recent:
            continue
        fire = recent[0].fire_id
        rows = [e for e in recent if e.fire_id == fire]
        out[job_id] = LastFire(at=min(e.started_at for e in rows), verdict=worst(rows),
                               runs=[e.run_id for e in rows if e.run_id], entries=rows)
    return out


def worst(rows: list[LedgerEntry]) -> str:
    """The most severe outcome among the suites of one fire."""
    outcomes = [e.verdict or e.status for e in rows]
    ranked = {name: i for i, name in enumerate(severity())}
    return max(outcomes, key=lambda o: ranked.get(o, -1)) if outcomes else "—"
