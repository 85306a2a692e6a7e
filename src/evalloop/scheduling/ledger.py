"""The schedule ledger: what each scheduled fire did (per suite: run, skip, error) and its verdict."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from pydantic import BaseModel
from sqlalchemy import insert, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from evalloop.history.engine import get_engine
from evalloop.history.models import LedgerEntry, metadata
from evalloop.history.schema import ensure_tables

ENTRIES = LedgerEntry.__table__
_READY: set[int] = set()
_LOCK = threading.Lock()

#: statuses: running → completed | interrupted | error; skipped (suite locked elsewhere)
#: least to most severe: the run outcome's one order (evalloop.verdicts.outcome.ORDER), then a fire that
#: did not finish, then an invalid run (as Comparison.worst ranks it)
SEVERITY = ["ok", "no scorers", "skipped", "no baseline yet", "steady", "improved", "watch", "below floor",
            "regressed", "scorer broken", "interrupted", "error", "invalid run"]


class LastFire(BaseModel):
    """The latest fire of a job: when, its worst verdict across suites, and its runs."""

    at: float
    verdict: str
    runs: list[str]
    entries: list[LedgerEntry]


def _engine(url: str) -> Engine:
    engine = get_engine(url)
    if id(engine) not in _READY:
        with _LOCK:
            ensure_tables(engine, metadata, tables=[ENTRIES], store="schedule ledger")
            _READY.add(id(engine))
    return engine


def start(url: str, *, job_id: str, fire_id: str, suite: str, owner: str,
          status: str = "running", detail: str | None = None) -> int:
    """Record the start of one suite of a fire (or a skip); returns the entry id."""
    now = time.time()
    with _engine(url).begin() as conn:
        result = conn.execute(insert(ENTRIES).values(
            job_id=job_id, fire_id=fire_id, suite=suite, owner=owner, status=status,
            detail=(detail or "")[:1000] or None, started_at=now,
            ended_at=None if status == "running" else now))
        return int(result.inserted_primary_key[0])


def finish(url: str, entry_id: int, *, status: str, verdict: str | None = None,
           run_id: str | None = None, detail: str | None = None) -> None:
    with _engine(url).begin() as conn:
        conn.execute(update(ENTRIES).where(ENTRIES.c.id == entry_id).values(
            status=status, verdict=verdict, run_id=run_id,
            detail=(detail or "")[:1000] or None, ended_at=time.time()))


def reap_stale(url: str) -> int:
    """Close the ``running`` entries whose scheduler died: a fire holds its suite's lock from
    before its entry starts until it ends, so a running entry whose owner no longer holds a
    live lease on that lock was left behind. Returns how many were closed."""
    from evalloop.history.locks import current_holder

    engine = _engine(url)
    with engine.connect() as conn:
        rows = conn.execute(select(ENTRIES.c.id, ENTRIES.c.suite, ENTRIES.c.owner)
                            .where(ENTRIES.c.status == "running")).all()
    closed = 0
    for entry_id, suite, owner in rows:
        holder = current_holder(engine, f"suite:{suite}")
        if holder is not None and holder.owner == owner:
            continue
        with engine.begin() as conn:
            done = conn.execute(update(ENTRIES).where(ENTRIES.c.id == entry_id, ENTRIES.c.status == "running")
                                .values(status="error", ended_at=time.time(),
                                        detail=f"scheduler {owner} stopped mid-run (its lease on the suite lapsed)"))
        closed += done.rowcount
    return closed


def entries(url: str, job_id: str | None = None, limit: int = 200) -> list[LedgerEntry]:
    """Newest first (entries of schedulers that died mid-run are closed first)."""
    reap_stale(url)
    query = select(LedgerEntry).order_by(col(LedgerEntry.id).desc()).limit(limit)
    if job_id is not None:
        query = query.where(LedgerEntry.job_id == job_id)
    with Session(_engine(url), expire_on_commit=False) as session:
        return list(session.exec(query))


def last_fires(url: str, job_ids: list[str]) -> dict[str, LastFire]:
    """The latest fire of each job that has one."""
    out: dict[str, LastFire] = {}
    for job_id in job_ids:
        recent = entries(url, job_id, limit=50)
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
    ranked = defaultdict(lambda: -1, {name: i for i, name in enumerate(SEVERITY)})
    return max(outcomes, key=lambda o: ranked[o]) if outcomes else "—"
