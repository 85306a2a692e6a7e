"""What the viewer reads, opened read-only: the history (SQLite ``mode=ro``, PostgreSQL in
read-only sessions), the memory store (:class:`~evalloop.memory.store.MemoryReader`, or the memory
service's reads), and the suites' files (for a case's input, expected and held-out part).

A finished run never changes, so its cases — read with the one reader every command uses
(:func:`evalloop.report.cases.load_cases`: the one pass/fail rule, the flips against the run
before) — are kept for the next page of the same run; a run still going is read again each time.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import select

from evalloop.config import Settings
from evalloop.errors import EvalloopError
from evalloop.history.models import Run, RunStatus
from evalloop.history.store import SUMMARIES, HistoryStore
from evalloop.report.cases import CaseView, load_cases, previous_completed
from evalloop.suites.models import Suite

#: finished runs whose cases are kept in memory (a 10k-case run is a few MB); comparisons and trends
KEPT_RUNS = 6
KEPT_PAIRS = 12
#: how long a suite file read is trusted before its file's time is checked again
SUITE_SECONDS = 2.0


class Source:
    """The history, memories and suites of one project, for the viewer's pages (thread-safe)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = HistoryStore(settings.database_url, readonly=True)
        self._lock = threading.Lock()
        self._cases: OrderedDict[str, list[CaseView]] = OrderedDict()
        self._suites: dict[str, tuple[float, Any, Suite | None]] = {}
        self._reading: dict[str, threading.Lock] = {}
        self._kept: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

    # -- runs ----------------------------------------------------------------------------

    def run(self, ref: str) -> Run | None:
        """A run by its id (or a unique prefix of it)."""
        found = self.store.find_runs(ref, limit=2)
        return found[0] if len(found) == 1 else None

    def previous(self, run: Run) -> str | None:
        """The completed, valid run of the suite just before ``run`` (the flips are against it)."""
        return previous_completed(self.store, run.suite, run.id)

    def cases(self, run: Run) -> list[CaseView]:
        """Every case of the run, in run order, with input and expected from the suite's file and
        the flips against the run before (kept once the run is finished; a run being read by
        another request is waited for, not read twice)."""
        finished = run.status != RunStatus.RUNNING
        if not finished:
            return self._load(run)
        with self._lock:
            reading = self._reading.setdefault(run.id, threading.Lock())
        with reading:
            with self._lock:
                if run.id in self._cases:
                    self._cases.move_to_end(run.id)
                    return self._cases[run.id]
            views = self._load(run)
            with self._lock:
                self._cases[run.id] = views
                self._reading.pop(run.id, None)
                while len(self._cases) > KEPT_RUNS:
                    self._cases.popitem(last=False)
            return views

    def _load(self, run: Run) -> list[CaseView]:
        return load_cases(self.store, run.id, suite=self.suite(run.suite), previous_run=self.previous(run))

    def pair(self, a: Run, b: Run, compute: Callable[[], Any]) -> Any:
        """What ``compute`` finds for two runs, kept while both are finished (they never change)."""
        return self.memo(("pair", a.id, b.id), compute, keep=RunStatus.RUNNING not in (a.status, b.status))

    def memo(self, key: tuple[Any, ...], compute: Callable[[], Any], *, keep: bool = True) -> Any:
        """What ``compute`` finds, kept under ``key`` (the last few) when ``keep``: the key must
        name everything the answer depends on."""
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        found = compute()
        if keep:
            with self._lock:
                self._kept[key] = found
                while len(self._kept) > KEPT_PAIRS:
                    self._kept.popitem(last=False)
        return found

    def suite_state(self, name: str, last: int) -> tuple[Any, ...]:
        """What a suite's trend of its ``last`` runs depends on and can change: its runs (a new
        one, one finishing) and their summaries (an acceptance rewrites their details)."""
        runs = self.store.runs(name, limit=last + 1)
        ids = [r.id for r in runs]
        with self.store.engine.connect() as conn:
            rows = conn.execute(select(SUMMARIES.c.run_id, SUMMARIES.c.scorer, SUMMARIES.c.details,
                                       SUMMARIES.c.eligible).where(SUMMARIES.c.run_id.in_(ids))).all()
        digest = hashlib.sha256(repr(sorted(tuple(map(str, row)) for row in rows)).encode()).hexdigest()
        return (name, last, tuple((r.id, r.status, r.valid) for r in runs), digest)

    # -- suites --------------------------------------------------------------------------

    def suite(self, name: str) -> Suite | None:
        """The suite as its file holds it now (None when it is gone or does not load)."""
        now = time.monotonic()
        with self._lock:
            kept = self._suites.get(name)
        if kept is not None and (now - kept[0] < SUITE_SECONDS or (kept[2] is not None and kept[1] == _stamp(kept[2]))):
            return kept[2]
        from evalloop.suites.lookup import find_suite

        try:
            suite: Suite | None = find_suite(name, self.settings.project_dir)
        except EvalloopError:
            suite = None
        with self._lock:
            self._suites[name] = (now, _stamp(suite), suite)
        return suite

    # -- memories ------------------------------------------------------------------------

    @contextlib.contextmanager
    def memories(self) -> Iterator[Any]:
        """The memory store, read-only (None when there is none yet: nothing is created)."""
        settings = self.settings
        if settings.memory_url:
            from evalloop.learning.injection import close_adapter, open_adapter

            adapter = open_adapter(settings)
            try:
                yield adapter
            finally:
                close_adapter(adapter)
            return
        if not settings.memory_file.is_file():
            yield None
            return
        from evalloop.memory.store import MemoryReader

        reader = MemoryReader(settings.memory_file)
        try:
            yield reader
        finally:
            reader.close()


def _stamp(suite: Suite | None) -> Any:
    """What says a suite's file is unchanged: its own and its cases' file times and sizes."""
    if suite is None or suite.path is None:
        return None
    files = [suite.path, *([suite.cases_file] if suite.cases_file is not None else [])]
    try:
        return tuple((f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    except OSError:
        return None
