"""Fires waiting for a busy suite, served in the order of their fire times — never starved.

A suite runs under one lock (``suite:NAME``) across every host. Taking it was a free-for-all: a
fire that waited (polling once a heartbeat) could watch later fires of other hosts take the
suite each time it came free, until its misfire grace ran out. Now a fire that finds its suite
busy queues a ticket — a lock row ``queue:suite:NAME:<fire time>:<owner>``, kept alive by its
heartbeat like any lock, so a waiter that dies drops out — and a fire may take the suite only
when no live ticket of an earlier fire time (then owner) waits before its own. Whichever host
the earliest waiter is on runs next; the rest wait their turn.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Engine

from evalloop.history.locks import LOCKS, DatabaseLock, clock, engine_for, stale_reason

PREFIX = "queue:"


def ticket_name(lock_name: str, fire_time: datetime, owner: str) -> str:
    """The queue row of one fire: sorts by fire time (UTC, to the microsecond), then owner."""
    return f"{PREFIX}{lock_name}:{fire_time.timestamp():020.6f}:{owner}"


def first_in_line(engine: Engine, lock_name: str, mine: str) -> bool:
    """Whether ``mine`` is the earliest live ticket waiting for ``lock_name``."""
    with engine.connect() as conn:
        rows = conn.execute(select(LOCKS, *clock(engine)).where(
            LOCKS.c.name.like(f"{PREFIX}{lock_name}:%"), LOCKS.c.name < mine)).all()
    return not any(stale_reason(row, row.now, float("inf")) is None for row in rows)


class Ticket:
    """One fire's place in the queue of a suite's lock (taken on the first busy try)."""

    def __init__(self, lock: DatabaseLock, fire_time: datetime) -> None:
        self.lock = lock
        self.name = ticket_name(lock.name, fire_time, lock.owner)
        self.row = DatabaseLock(engine_for(lock.engine), self.name, stale_seconds=lock.stale_seconds,
                                beat_seconds=lock.beat_seconds, owner=lock.owner)

    def try_acquire(self) -> bool:
        """Take the suite's lock if no earlier fire waits for it; else queue (once) and wait."""
        if first_in_line(self.lock.engine, self.lock.name, self.name) and self.lock.acquire():
            return True
        if not self.row.held:
            self.row.acquire()
        return False

    def leave(self) -> None:
        """Out of the queue (the fire runs, gives up, or stops)."""
        self.row.release()
