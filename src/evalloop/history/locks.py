"""Locks in the history database: one run per suite at a time, across processes and hosts.

A lock is a lease: a row (name, owner, expiry, last heartbeat). Taking it is an INSERT (or an
UPDATE of a stale row); the holder refreshes it from a heartbeat thread, so only a holder that
died leaves a lock behind. Every time on a lock row is the **database's** clock (:func:`db_now`),
never a host's: hosts whose clocks disagree by minutes still agree on whose heartbeat is late.
A lock is taken over at once when the holder was a process of this host *and PID namespace*
that no longer exists (containers sharing a hostname do not share pids: the owner carries a
namespace key), else when it is stale: past the expiry the holder wrote, or without a heartbeat
for the taker's ``stale_seconds`` (never less than three of the holder's heartbeats). Fire claims
record which scheduler process took one scheduled fire time of a job, so two schedulers sharing
a job store never both run it.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType

from sqlalchemy import Float, cast, delete, func, insert, literal, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement

from evalloop.errors import EvalloopError
from evalloop.history.engine import get_engine, verified
from evalloop.history.models import LOCK_TABLES, StoredRow, metadata
from evalloop.history.schema import ensure_tables

log = logging.getLogger("evalloop.locks")

#: the lock tables (declared with the history's models)
LOCKS, FIRE_CLAIMS = LOCK_TABLES
CLAIM_RETENTION_SECONDS = 7 * 24 * 3600
MAX_BEAT_SECONDS = 10.0
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


@functools.cache
def namespace_key() -> str:
    """This process's PID namespace on this boot (Linux), or '' where that cannot be known.

    Two containers may share a hostname but not a PID namespace: a pid is only meaningful
    to a process of the same namespace, so liveness by pid is checked only when keys match.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip().replace("-", "")[:8]
        inode = os.readlink("/proc/self/ns/pid").rpartition("[")[2].rstrip("]")
    except OSError:
        return ""
    return f"{boot}.{inode}" if boot and inode.isdigit() else ""


def process_owner() -> str:
    """An owner name unique to this process: host, pid, a random lease token and (after '~')
    the PID namespace key that makes the pid meaningful."""
    key = namespace_key()
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}{'~' + key if key else ''}"


def engine_for(url_or_engine: str | Engine) -> Engine:
    """The engine for a database URL, with the lock tables created once."""
    engine = get_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
    if id(engine) not in _READY and not verified(engine):
        with _READY_LOCK:
            ensure_tables(engine, metadata, tables=LOCK_TABLES, store="lock tables")
            _READY.add(id(engine))
    return engine


def owner_process(owner: str) -> tuple[str, int] | None:
    """(host, pid) of an owner made by :func:`process_owner`, else None."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


def same_pid_namespace(owner: str) -> bool:
    """Whether the owner's pid means the same process here: same host, boot and PID namespace.

    Owners without a namespace key (older evalloops, other systems) never qualify: their
    liveness is their lease alone.
    """
    found = owner_process(owner)
    key = namespace_key()
    return (found is not None and found[0] == socket.gethostname() and bool(key)
            and owner.rpartition("~")[2] == key and "~" in owner)


def holder_is_dead(owner: str) -> bool:
    """True when the owner is a process of this host and PID namespace that no longer exists
    (a lease of another container, even one with the same hostname, is left to expire)."""
    found = owner_process(owner)
    return found is not None and same_pid_namespace(owner) and not pid_alive(found[1])


def db_now(engine: Engine) -> ColumnElement[float]:
    """The database server's clock as Unix seconds, in SQL: the one clock every host's lease is
    written and judged by (SQLite's is the one host's, since every writer is on it)."""
    name = engine.dialect.name
    if name == "postgresql":
        return cast(func.extract("epoch", func.clock_timestamp()), Float)
    if name == "sqlite":
        return (func.julianday("now") - 2440587.5) * 86400.0
    if name in ("mysql", "mariadb"):
        return cast(func.unix_timestamp(func.now(6)), Float)
    return literal(time.time(), Float)  # another database: this host's clock, as before


def db_started(engine: Engine) -> ColumnElement[float]:
    """When the database server last started, as Unix seconds in SQL (0 where it cannot say): a
    heartbeat missed while the server was down is not counted against its holder."""
    if engine.dialect.name == "postgresql":
        return cast(func.extract("epoch", func.pg_postmaster_start_time()), Float)
    return literal(0.0, Float)


def clock(engine: Engine) -> tuple[ColumnElement[float], ColumnElement[float]]:
    """The columns a lock row is judged by: the database's ``now`` and its ``db_started``."""
    return db_now(engine).label("now"), db_started(engine).label("db_started")


def database_time(engine: Engine) -> float:
    """The database's clock now, in Unix seconds."""
    with engine.connect() as conn:
        return float(conn.execute(select(db_now(engine))).scalar_one())


def beat_interval(stale_seconds: float) -> float:
    """How often a holder refreshes its lock: a third of its stale time, at most 10 s."""
    return min(max(stale_seconds / 3.0, 0.05), MAX_BEAT_SECONDS)


class DatabaseLock:
    """A named lock in the database, refreshed by a heartbeat while held.

    ``acquire()`` never waits: it returns False when a live holder has it. A lock whose
    holder stopped refreshing it for ``stale_seconds`` is taken over.
    """

    def __init__(self, db: str | Engine, name: str, *, stale_seconds: float = 20.0,
                 beat_seconds: float | None = None, owner: str | None = None, heartbeat: bool = True) -> None:
        self.engine = engine_for(db)
        self.name = name
        self.stale_seconds = stale_seconds
        self.beat_seconds = min(beat_seconds, stale_seconds / 2) if beat_seconds else beat_interval(stale_seconds)
        #: the owner this lock was taken over from (a dead or stale holder), if it was
        self.taken_from: str | None = None
        self.owner = owner or process_owner()
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.held = False

    def acquire(self) -> bool:
        if self.held:
            return True
        now = db_now(self.engine)
        row = {"owner": self.owner, "acquired_at": now, "expires_at": now + self.stale_seconds,
               "refreshed_at": now, "beat_seconds": self.beat_seconds}
        self.taken_from = None
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(LOCKS).values(name=self.name, **row))
            got = True
        except IntegrityError:
            got = self._take_over(row)
        if got:
            self.held = True
            self._start_heartbeat()
        return got

    def _take_over(self, row: dict[str, object]) -> bool:
        """Take the row of a dead or stale holder (compare-and-swap on the holder and the
        heartbeat seen: a holder that beats meanwhile keeps its lock)."""
        with self.engine.connect() as conn:
            current = conn.execute(select(LOCKS, *clock(self.engine))
                                   .where(LOCKS.c.name == self.name)).first()
        if current is None:  # released meanwhile: try a fresh insert once
            try:
                with self.engine.begin() as conn:
                    conn.execute(insert(LOCKS).values(name=self.name, **row))
                return True
            except IntegrityError:
                return False
        why = _stale_reason(current, current.now, self.stale_seconds)
        if why is None:
            return False
        same_beat = (LOCKS.c.refreshed_at.is_(None) if current.refreshed_at is None
                     else LOCKS.c.refreshed_at == current.refreshed_at)
        with self.engine.begin() as conn:
            result = conn.execute(update(LOCKS).where(
                LOCKS.c.name == self.name, LOCKS.c.owner == current.owner,
                LOCKS.c.acquired_at == current.acquired_at,
                LOCKS.c.expires_at == current.expires_at, same_beat).values(**row))
        if result.rowcount == 1:
            log.warning("took over lock %s from %s (%s)", self.name, current.owner, why)
            self.taken_from = current.owner
            return True
        return False

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
        now = db_now(self.engine)
        with self.engine.begin() as conn:
            result = conn.execute(
                update(LOCKS).where(LOCKS.c.name == self.name, LOCKS.c.owner == self.owner)
                .values(expires_at=now + self.stale_seconds, refreshed_at=now))
        return result.rowcount == 1

    def holder(self) -> LockInfo | None:
        return current_holder(self.engine, self.name, self.stale_seconds)

    def _start_heartbeat(self) -> None:
        if not self._heartbeat:
            return
        self._stop.clear()
        interval = self.beat_seconds

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
                           hint="wait for that run to finish (a holder that died on this host "
                                "loses it at once, elsewhere it goes stale after "
                                f"{self.stale_seconds:g} s)")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _stale_reason(row: StoredRow, now: float, stale_seconds: float) -> str | None:
    """Why a lock row may be taken over by a taker with ``stale_seconds``, or None if it may not.

    A row last refreshed before the database server (re)started (``row.db_started``, when the
    query selected it) counts as refreshed at the restart: its holder could not beat while the
    server was down, so a lease survives an outage and lapses only if the holder stays silent
    once the database is back."""
    if holder_is_dead(row.owner):
        return "its process died"
    beat = row.refreshed_at if row.refreshed_at is not None else row.acquired_at
    expires, refreshed = row.expires_at, row.refreshed_at
    started = float(getattr(row, "db_started", 0.0) or 0.0)
    if beat is not None and started > beat:
        expires, refreshed = expires + (started - beat), started
    if expires < now:
        return "expired"
    if refreshed is not None:
        # the taker's own patience, but never less than three of the holder's heartbeats
        patience = max(stale_seconds, 3.0 * (row.beat_seconds or MAX_BEAT_SECONDS))
        if refreshed < now - patience:
            return f"not refreshed for {now - refreshed:.0f} s"
    return None


stale_reason = _stale_reason


def current_holder(db: str | Engine, name: str, stale_seconds: float | None = None) -> LockInfo | None:
    """The live holder of a lock, or None (free, stale, or held by a dead process of this host)."""
    engine = engine_for(db)
    with engine.connect() as conn:
        row = conn.execute(select(LOCKS, *clock(engine)).where(LOCKS.c.name == name)).first()
    if row is None:
        return None
    if _stale_reason(row, row.now, stale_seconds if stale_seconds is not None else math.inf):
        return None
    return LockInfo(row.name, row.owner, row.acquired_at, row.expires_at)


def claim_fire(db: str | Engine, job_id: str, fire_time: datetime, owner: str) -> bool:
    """Claim one scheduled fire time of a job; only the first claimant gets True."""
    engine = engine_for(db)
    key = fire_time.astimezone(UTC).isoformat(timespec="microseconds")
    now = database_time(engine)
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


def release_fire(db: str | Engine, job_id: str, fire_time: datetime, owner: str) -> None:
    """Give back a claimed fire (this scheduler cannot run it): another scheduler may take it."""
    key = fire_time.astimezone(UTC).isoformat(timespec="microseconds")
    with engine_for(db).begin() as conn:
        conn.execute(delete(FIRE_CLAIMS).where(FIRE_CLAIMS.c.job_id == job_id, FIRE_CLAIMS.c.fire_time == key,
                                               FIRE_CLAIMS.c.owner == owner))


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (one owned by another user counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:  # Linux: a zombie (exited, not yet reaped by its parent) is dead too
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[:1] != ["Z"]
    except OSError:
        return True
