"""What the viewer reads, opened read-only: the history (SQLite ``mode=ro``, PostgreSQL in
read-only sessions), the memory store (:class:`~evalloop.memory.store.MemoryReader`, or the memory
service's reads), and the suites' files (for a case's input, expected and held-out part).

A finished run never changes, so its cases' facts — read with the one reader every command uses
(:func:`evalloop.report.cases.case_facts`: the one pass/fail rule, the flips against the run
before) — are kept for the next page of the same run; a run still going is read again each time.
A page reads the full rows (output, messages) of only the cases it shows
(:func:`evalloop.report.cases.case_views`).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import select

from evalloop.config import Settings
from evalloop.errors import EvalloopError
from evalloop.history.models import Run, RunStatus
from evalloop.history.store import SUMMARIES, HistoryStore
from evalloop.report.cases import CaseFacts, CaseView, case_facts, case_views, previous_completed, with_changes
from evalloop.report.diff import bootstrap_interval
from evalloop.suites.models import Suite

#: finished runs whose case facts are kept in memory (a 10k-case run's are about 5 MB), with and
#: without their flips; comparisons and trends
KEPT_RUNS = 12
KEPT_PAIRS = 12
#: how long a suite that was not found is not looked for again (a found one is checked each time:
#: its files' size and time, two stat calls)
SUITE_SECONDS = 2.0


class Source:
    """The history, memories and suites of one project, for the viewer's pages (thread-safe)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = HistoryStore(settings.database_url, readonly=True)
        self._lock = threading.Lock()
        self._cases: OrderedDict[tuple[str, ...], list[CaseFacts]] = OrderedDict()
        self._suites: dict[str, tuple[float, Any, Suite | None]] = {}
        self._reading: dict[tuple[Any, ...], threading.Lock] = {}
        self._kept: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

    # -- runs ----------------------------------------------------------------------------

    def run(self, ref: str) -> Run | None:
        """A run by its id (or a unique prefix of it)."""
        found = self.store.find_runs(ref, limit=2)
        return found[0] if len(found) == 1 else None

    def previous(self, run: Run) -> str | None:
        """The completed, valid run of the suite just before ``run`` (the flips are against it)."""
        return previous_completed(self.store, run.suite, run.id)

    def facts(self, run: Run, *, changes: bool = True) -> list[CaseFacts]:
        """Every case of the run in run order, graded, with (``changes``) the flips against the
        run before (:func:`~evalloop.report.cases.case_facts`: a few columns per case, no output),
        kept once the run and the run before are finished."""
        found = self._facts(run)
        previous = self.previous(run) if changes else None
        if previous is None:
            return found
        before = self.store.get_run(previous)
        if before is None:
            return found
        return self._kept_run(("changes", run.id, previous, *self.fixture_state(run)), _finished(run, before),
                              lambda: with_changes(found, self._facts(before)))

    def views(self, run: Run, facts: Sequence[CaseFacts]) -> list[CaseView]:
        """The full views (output, messages, input and expected) of the cases ``facts`` names:
        one page's rows read, never the run's."""
        return case_views(self.store, run.id, facts, suite=self.suite(run.suite))

    def _facts(self, run: Run) -> list[CaseFacts]:
        return self._kept_run(("facts", run.id, *self.fixture_state(run)), _finished(run),
                              lambda: case_facts(self.store, run.id, suite=self.suite(run.suite)))

    def fixture_state(self, run: Run) -> tuple[str, ...]:
        """What a run's facts take from its suite's file (controls, the held-out part) depend on:
        the file's size and time (an edited suite is read again, and so are the facts)."""
        return (repr(_stamp(self.suite(run.suite))),)

    def _kept_run(self, key: tuple[str, ...], keep: bool, compute: Callable[[], list[CaseFacts]]) -> list[CaseFacts]:
        """What ``compute`` finds for finished runs, kept (the last :data:`KEPT_RUNS`)."""
        found: list[CaseFacts] = self._once(self._cases, KEPT_RUNS, key, compute, keep=keep)
        return found

    def _once(self, kept: OrderedDict[Any, Any], limit: int, key: tuple[Any, ...], compute: Callable[[], Any], *,
              keep: bool) -> Any:
        """What ``compute`` finds, kept in ``kept`` (the last ``limit``) when ``keep``; a key another
        request (or the start-up reading) is computing is waited for, not computed twice."""
        if not keep:
            return compute()
        with self._lock:
            if key in kept:
                kept.move_to_end(key)
                return kept[key]
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:
            with self._lock:
                if key in kept:
                    kept.move_to_end(key)
                    return kept[key]
            try:
                found = compute()
                with self._lock:
                    kept[key] = found
                    while len(kept) > limit:
                        kept.popitem(last=False)
            finally:
                with self._lock:
                    self._reading.pop(key, None)
            return found

    def pair(self, a: Run, b: Run, compute: Callable[[], Any]) -> Any:
        """What ``compute`` finds for two runs, kept while both are finished (they never change) and
        their suites' files are unchanged."""
        return self.memo(("pair", a.id, b.id, *self.fixture_state(a), *self.fixture_state(b)), compute,
                         keep=_finished(a, b))

    def interval(self, run: Run, scorer: str, scores: dict[str, float]) -> tuple[float, float] | None:
        """A run's bootstrap interval of one scorer's mean (:func:`~evalloop.report.diff.bootstrap_interval`,
        what ``evalloop compare`` shows), kept for a finished run: it depends on that run's scores
        alone, so comparing it with another run does not draw its 10,000 resamples again."""
        key = ("interval", run.id, scorer, len(scores), hash(tuple(scores)))
        found: tuple[float, float] | None = self.memo(key, lambda: bootstrap_interval(run, scorer, scores),
                                                      keep=_finished(run))
        return found

    def memo(self, key: tuple[Any, ...], compute: Callable[[], Any], *, keep: bool = True) -> Any:
        """What ``compute`` finds, kept under ``key`` (the last few) when ``keep``: the key must
        name everything the answer depends on (one being computed is waited for)."""
        return self._once(self._kept, KEPT_PAIRS, key, compute, keep=keep)

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
        """The suite as its file holds it now (None when it is gone or does not load): read again
        when its file or its cases' file changed size or time (a suite another request is reading
        is waited for, not read twice)."""
        with self._lock:
            reading = self._reading.setdefault(("suite", name), threading.Lock())
        with reading:
            now = time.monotonic()
            with self._lock:
                kept = self._suites.get(name)
            if kept is not None and (kept[1] == _stamp(kept[2]) if kept[2] is not None
                                     else now - kept[0] < SUITE_SECONDS):
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


def _finished(*runs: Run) -> bool:
    return all(r.status != RunStatus.RUNNING for r in runs)


def _stamp(suite: Suite | None) -> Any:
    """What says a suite's file is unchanged: its own and its cases' file times and sizes."""
    if suite is None or suite.path is None:
        return None
    files = [suite.path, *([suite.cases_file] if suite.cases_file is not None else [])]
    try:
        return tuple((f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    except OSError:
        return None
