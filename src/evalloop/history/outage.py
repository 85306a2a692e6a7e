"""A run's writes outlast a short database outage (a PostgreSQL restart, a failover).

While the database is away a run goes on: each batch of case results it cannot write is kept,
in order, in a :class:`Backlog` (bounded: past :data:`MAX_KEPT_BATCHES` batches the run waits
instead), and written as soon as the database answers again; the run's final write waits for
it with exponential backoff (tenacity), for at most ``outage_seconds``, before the run fails
as it did before. Only an outage waits — a refused write, a full disk, a damaged file fail at
once. Leases outlast it too (:func:`evalloop.history.locks._stale_reason`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from evalloop.errors import StoreError, is_db_error, store_error

log = logging.getLogger("evalloop.history")
T = TypeVar("T")

#: how long a run's writes wait for a database that went away (seconds)
OUTAGE_SECONDS = 120.0
#: batches of case results kept while the database is away, before the run waits for it
MAX_KEPT_BATCHES = 1000


def is_outage(exc: BaseException) -> bool:
    """Whether a database error means the server is away (unreachable, restarting, connection
    lost), not that it refused the write."""
    if isinstance(exc, StoreError):
        what = exc.what.lower()
        return what.startswith("cannot reach")
    if not is_db_error(exc):
        return False
    error = store_error(exc, store="database", where=None)
    what = error.what.lower()
    return what.startswith("cannot reach") or any(
        m in what for m in ("terminating connection", "server closed the connection", "shutting down",
                            "starting up", "connection", "the database system is"))


def outlast(write: Callable[[], T], seconds: float = OUTAGE_SECONDS) -> T:
    """``write()``, tried again with backoff while the database is away (at most ``seconds``)."""
    try:
        return write()  # the usual case: no outage, no retry machinery imported
    except Exception as exc:
        if not is_outage(exc):
            raise
    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

    log.warning("the history database is away: waiting for it (at most %g s)", seconds)
    retrying = Retrying(retry=retry_if_exception(is_outage), stop=stop_after_delay(seconds),
                        wait=wait_exponential(multiplier=0.2, max=5.0), reraise=True)
    return retrying(write)


class Backlog:
    """The writes a run could not make while the database was away, in order."""

    def __init__(self, seconds: float = OUTAGE_SECONDS) -> None:
        self.seconds = seconds
        self.kept: list[Callable[[], None]] = []
        self.outages = 0  # writes that found the database away (for the run's notice, and tests)
        self._lock = threading.Lock()

    def push(self, write: Callable[[], None]) -> None:
        """Make ``write`` after every kept one; keep it when the database is away."""
        with self._lock:
            self.kept.append(write)
            self._drain(wait=len(self.kept) > MAX_KEPT_BATCHES)

    def drain(self) -> None:
        """Write everything kept, waiting for the database (at most ``seconds``)."""
        with self._lock:
            self._drain(wait=True)

    def _drain(self, wait: bool) -> None:
        while self.kept:
            try:
                if wait:
                    outlast(self.kept[0], self.seconds)
                else:
                    self.kept[0]()
            except Exception as exc:
                if wait or not is_outage(exc):
                    raise
                self.outages += 1
                if self.outages == 1:
                    log.warning("the history database is away: keeping the run's results to write when it "
                                "returns (%s)", str(exc).splitlines()[0][:200])
                return
            self.kept.pop(0)
