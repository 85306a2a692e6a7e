"""Locks in the history database: one run per suite at a time, across processes and hosts.

A lock is a row (name, owner, expiry). Taking it is an INSERT (or an UPDATE of an expired
row); the holder refreshes the expiry from a heartbeat thread, so only a holder that died
leaves a lock behind, and that one goes stale after ``stale_seconds``. Fire claims record
which scheduler process took one scheduled fire time of a job, so two schedulers sharing a
job store never both run it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType

from sqlalchemy import Column, Float, MetaData, String, Table, delete, insert, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from evalloop.errors import EvalloopError
from evalloop.history.store import get_engine

log = logging.getLogger("evalloop.locks")

_META = MetaData()
LOCKS = Table(
    "evalloop_locks", _META,
    Column("name", String(191), primary_key=True),
    Column("owner", String(191), nullable=False),
    Column("acquired_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)
FIRE_CLAIMS = Table(
    "evalloop_fire_claims", _META,
    Column("job_id", String(191), primary_key=True),
    Column("fire_time", String(40), primary_key=True),
    Column("owner", String(191), nullable=False),
    Column("claimed_at", Float, nullable=False),
)
CLAIM_RETENTION_SECONDS = 7 * 24 * 3600
_READY: set[int] = set()
_READY_LOCK = threading.Lock()


class LockBusy(EvalloopError):
    """A lock that another live process holds."""

    exit_code = 1


@dataclass(frozen=True)
class LockInfo:
    """Who holds a lock, since when, and until when it stays valid without a heartbeat."""

    name: str
    owner: str
    acquired_at: float
    expires_at: float


def process_owner() -> str:
    """An owner name unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def engine_for(url_or_engine: str | Engine) -> Engine:
    """The engine for a database URL, with the lock tables created once."""
    engine = get_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
    if id(engine) not in _READY:
        with _READY_LOCK:
            _META.create_all(engine)
            _READY.add(id(engine))
    return engine


class DatabaseLock:
    """A named lock in the database, refreshed by a heartbeat while held.

    ``acquire()`` never waits: it returns False when a live holder has it. A lock whose
    holder stopped refreshing it for ``stale_seconds`` is taken over.
    """

    def __init__(self, db: str | Engine, name: str, *, stale_seconds: float = 600.0,
                 owner: str | None = None, heartbeat: bool = True) -> None:
        self.engine = engine_for(db)
        self.name = name
        self.stale_seconds = stale_seconds
        self.owner = owner or process_owner()
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.held = False

    def acquire(self) -> bool:
        now = time.time()
        row = {"owner": self.owner, "acquired_at": now, "expires_at": now + self.stale_seconds}
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(LOCKS).values(name=self.name, **row))
            got = True
        except IntegrityError:
            with self.engine.begin() as conn:
                result = conn.execute(
                    update(LOCKS)
                    .where(LOCKS.c.name == self.name,
                           or_(LOCKS.c.expires_at < now, LOCKS.c.owner == self.owner))
                    .values(**row))
            got = result.rowcount == 1
            if got:
                log.warning("took over stale lock %s", self.name)
        if got:
            self.held = True
            self._start_heartbeat()
        return got

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.held:
            with self.engine.begin() as conn:
                conn.execute(delete(LOCKS).where(LOCKS.c.name == self.name,
                                                 LOCKS.c.owner == self.owner))
            self.held = False

    def refresh(self) -> bool:
        """Push the expiry forward; False when the lock was lost (taken over as stale)."""
        with self.engine.begin() as conn:
            result = conn.execute(
                update(LOCKS).where(LOCKS.c.name == self.name, LOCKS.c.owner == self.owner)
                .values(expires_at=time.time() + self.stale_seconds))
        return result.rowcount == 1

    def holder(self) -> LockInfo | None:
        return current_holder(self.engine, self.name)

    def _start_heartbeat(self) -> None:
        if not self._heartbeat:
            return
        self._stop.clear()
        interval = max(self.stale_seconds / 3.0, 0.05)

        def beat() -> None:
            while not self._stop.wait(interval):
                try:
                    if not self.refresh():
                        log.error("lock %s was lost (taken over as stale)", self.name)
                        return
                except Exception as exc:  # the database hiccuped: try again next beat
                    log.warning("heartbeat of lock %s failed: %s", self.name, exc)

        self._thread = threading.Thread(target=beat, name=f"lock-{self.name}", daemon=True)
        self._thread.start()

    def __enter__(self) -> DatabaseLock:
        if not self.acquire():
            info = self.holder()
            raise LockBusy(f"lock '{self.name}' is held by {info.owner if info else 'another process'}",
                           hint="wait for that run to finish (a dead holder's lock goes stale "
                                f"after {self.stale_seconds:g} s)")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def current_holder(db: str | Engine, name: str) -> LockInfo | None:
    """The live holder of a lock, or None (free or stale)."""
    engine = engine_for(db)
    with engine.connect() as conn:
        row = conn.execute(select(LOCKS).where(LOCKS.c.name == name)).first()
    if row is None or row.expires_at < time.time():
        return None
    return LockInfo(row.name, row.owner, row.acquired_at, row.expires_at)


def claim_fire(db: str | Engine, job_id: str, fire_time: datetime, owner: str) -> bool:
    """Claim one scheduled fire time of a job; only the first claimant gets True."""
    engine = engine_for(db)
    key = fire_time.astimezone(UTC).isoformat(timespec="microseconds")
    now = time.time()
    try:
        with engine.begin() as conn:
            conn.execute(insert(FIRE_CLAIMS).values(job_id=job_id, fire_time=key, owner=owner,
                                                    claimed_at=now))
    except IntegrityError:
        return False
    with engine.begin() as conn:
        conn.execute(delete(FIRE_CLAIMS).where(FIRE_CLAIMS.c.job_id == job_id,
                                               FIRE_CLAIMS.c.claimed_at < now - CLAIM_RETENTION_SECONDS))
    return True
