"""Writing a run as it happens: begin it (holding its lease), append its case rows in batches,
finish it with its summaries and score vectors, or mark it as not completed.

Case rows are written in batches inside the run (so a crash loses at most the batch in flight,
and the run row says ``running``/``interrupted``, which keeps it out of every baseline).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import operator
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from sqlalchemy import insert, update
from sqlalchemy.exc import SQLAlchemyError

from evalloop.errors import db_message, is_db_error
from evalloop.history.details import json_object, jsonable
from evalloop.history.leases import LIVE, reap_dead_runs
from evalloop.history.models import CaseRow, Run, RunStatus, ScorerSummary, ScoreVector
from evalloop.history.outage import outlast
from evalloop.history.rows import RESULTS, RUNS, SCORES, SUMMARIES, insert_all, run_by_id
from evalloop.history.storebase import StoreBase
from evalloop.redact import redact_text

#: how long a run's lease lasts without a heartbeat (settings ``heartbeat_seconds`` ×
#: ``takeover_heartbeats``; its holder refreshes it every ``heartbeat_seconds``)
RUN_LEASE_SECONDS = 20.0
RUN_BEAT_SECONDS = 5.0
log = logging.getLogger("evalloop.history")


class RunWrites(StoreBase):
    """The store's writes of a run, from its start to its end."""

    #: a run's lease: taken over (the run reaped) after this long without a heartbeat ...
    lease_seconds: float = RUN_LEASE_SECONDS
    #: ... and refreshed this often by the process running it
    beat_seconds: float = RUN_BEAT_SECONDS

    def begin_run(self, run: Run) -> Run:
        """Store a new run and hold its lease (a heartbeat keeps it while this process lives)."""
        from evalloop.history.locks import process_owner

        owner = process_owner()
        run.started_at = self.now(run.started_at)
        # as their JSON columns will hold them (a value JSON has no type for: its text)
        run.fingerprint, run.notes = jsonable(run.fingerprint), jsonable({**json_object(run.notes), "lease": owner})
        # The lease first, then the run: a run seen 'running' always has a lease to judge it by,
        # even when its process is killed between the two writes.
        self._take_lease(run.id, owner)
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(RUNS), run.model_dump())
        except BaseException:
            self._end_lease(run.id)
            raise
        return run

    def _take_lease(self, run_id: str, owner: str) -> None:
        from evalloop.history.locks import DatabaseLock

        try:
            lease = DatabaseLock(self.engine, f"run:{run_id}", stale_seconds=self.lease_seconds,
                                 beat_seconds=self.beat_seconds, owner=owner)
            if lease.acquire():
                LIVE[(self.url, run_id)] = lease
        except Exception as exc:  # noqa: BLE001 - without a lease the run is only never reaped
            log.warning("run %s has no lease (%s): if its process dies it stays 'running'", run_id,
                        db_message(exc) if is_db_error(exc) else exc)

    def _end_lease(self, run_id: str) -> None:
        lease = LIVE.pop((self.url, run_id), None)
        if lease is not None:
            with contextlib.suppress(Exception):
                lease.release()

    def add_results(self, cases: Sequence[CaseRow],
                    scores: Sequence[CaseRow]) -> None:
        """Append a batch of case results and scores in one transaction.

        A row is a mapping of column names, or — as the runner writes them, one tuple per row
        and no dict — a tuple of every column in :data:`CASE_RESULT_COLUMNS` /
        :data:`CASE_SCORE_COLUMNS` order; the rows of one list are all of one kind."""
        if not cases and not scores:
            return
        cases, scores = _redacted(cases, "error", CASE_RESULT_COLUMNS), _redacted(scores, "message", CASE_SCORE_COLUMNS)
        self.backlog.push(functools.partial(self._insert_results, cases, scores))

    def _insert_results(self, cases: Sequence[CaseRow], scores: Sequence[CaseRow]) -> None:
        with self.engine.begin() as conn:
            if self.engine.dialect.name == "sqlite":
                # The DB-API is several times faster than Core's parameter handling for these
                # flat rows; other databases take the portable path.
                driver = cast(sqlite3.Connection, conn.connection.driver_connection)
                cursor = driver.cursor()
                for table, rows, columns in ((RESULTS, cases, CASE_RESULT_COLUMNS),
                                             (SCORES, scores, CASE_SCORE_COLUMNS)):
                    if not rows:
                        continue
                    values: Sequence[Sequence[object]]
                    first = rows[0]
                    if isinstance(first, tuple):
                        names, values = list(columns), cast(Sequence[tuple[object, ...]], rows)
                    else:
                        names = [c for c in first if c != "id"]
                        row_of = operator.itemgetter(*names)  # one C call per row
                        values = list(map(row_of, rows)) if len(names) > 1 else [(row_of(r),) for r in rows]
                    _insert_many(cursor, table.name, names, values)
                cursor.close()
                return
            if cases:
                conn.execute(insert(RESULTS), _as_dicts(cases, CASE_RESULT_COLUMNS))
            if scores:
                conn.execute(insert(SCORES), _as_dicts(scores, CASE_SCORE_COLUMNS))

    def finish_run(self, run_id: str, summaries: Iterable[ScorerSummary],
                   vectors: Iterable[ScoreVector] = (), **fields: object) -> Run:
        """Write the summaries, score vectors and the run's final fields in one transaction,
        after the case results kept while the database was away; an outage is waited out."""
        self.backlog.drain()
        summaries, vectors = list(summaries), list(vectors)

        def write() -> Run:
            with self.engine.begin() as conn:
                run = run_by_id(conn, run_id)
                assert run is not None, run_id
                for key, value in fields.items():
                    setattr(run, key, _redacted_field(value))
                run.ended_at = self.now(run.ended_at)
                insert_all(conn, vectors)
                insert_all(conn, summaries)
                changed = {key: getattr(run, key) for key in (*fields, "ended_at")}
                conn.execute(update(RUNS).where(RUNS.c.id == run_id).values(**changed))
            return run

        run = outlast(write, self.backlog.seconds)
        self._end_lease(run_id)
        return run

    def mark(self, run_id: str, status: RunStatus, reason: str | None = None) -> None:
        """Close a run that did not complete; it is kept for inspection, never as a baseline."""
        try:
            with self.engine.begin() as conn:
                done = conn.execute(update(RUNS).where(RUNS.c.id == run_id).values(
                    status=status, valid=False, invalid_reason=redact_text(reason or status.value),
                    ended_at=self.now()))
            if done.rowcount == 0:
                return
        except SQLAlchemyError:  # the database went away: the lease lapses and a reaper marks it
            return
        self._end_lease(run_id)

    def update_summaries(self, run_id: str, updates: Mapping[str, Mapping[str, object]]) -> None:
        """Set fields of this run's scorer summaries (``scorer → {field: value}``), in one transaction."""
        with self.engine.begin() as conn:
            for scorer, values in updates.items():
                if values:
                    conn.execute(update(SUMMARIES).where(SUMMARIES.c.run_id == run_id, SUMMARIES.c.scorer == scorer)
                                 .values(**values))

    def reap_dead_runs(self) -> list[str]:
        """Mark ``failed`` the runs still ``running`` whose lease lapsed: its holder stopped its
        heartbeat (for the lease time, on the database's clock), or was a process of this host
        and PID namespace that died.

        Liveness is the lease, never hostname + pid alone: two containers sharing a hostname
        keep each other's live runs. Runs of older evalloops (no lease) are left alone.
        Returns the run ids.
        """
        return reap_dead_runs(self)


#: the columns of a case result and of a case score, in the order a tuple row gives them
CASE_RESULT_COLUMNS = ("run_id", "case_id", "epoch", "tags", "output", "error", "failure", "latency_ms",
                       "cost_usd", "input_tokens", "output_tokens", "traceback", "output_bytes", "output_sha256")
CASE_SCORE_COLUMNS = ("run_id", "case_id", "epoch", "scorer", "value", "errored", "skipped", "message", "meta")


def _as_dicts(rows: Sequence[CaseRow], columns: tuple[str, ...]) -> list[dict[str, object]]:
    return [dict(zip(columns, r, strict=True)) if isinstance(r, tuple) else dict(r) for r in rows]


#: host parameters one SQLite statement may take (SQLITE_MAX_VARIABLE_NUMBER before 3.32)
SQLITE_MAX_PARAMS = 999


def _insert_many(cursor: sqlite3.Cursor, table: str, names: list[str], rows: Sequence[Sequence[object]]) -> None:
    """Insert rows (tuples in ``names`` order) with a sqlite3 cursor, as many rows to a statement as
    SQLite's parameter limit allows, in order: a row's step costs SQLite less inside a statement of
    many rows than as a statement of its own (20,000 case rows: ≈ 53 ms against ≈ 66 ms with
    ``executemany``, ``bench/insert_rows.py``)."""
    head = f"INSERT INTO {table} ({', '.join(names)}) VALUES "
    one = f"({', '.join('?' * len(names))})"
    per = max(1, SQLITE_MAX_PARAMS // len(names))
    full = head + ", ".join([one] * per)
    flat = itertools.chain.from_iterable
    start = 0
    while len(rows) - start >= per:
        cursor.execute(full, list(flat(rows[start:start + per])))
        start += per
    if start < len(rows):
        rest = rows[start:]
        cursor.execute(head + ", ".join([one] * len(rest)), list(flat(rest)))


def _redacted_field(value: object) -> object:
    """A run field as it may be stored: text redacted, and every text in a JSON object (its notes)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redacted_field(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted_field(v) for v in value]
    return value


def _redacted(rows: Sequence[CaseRow], key: str, columns: tuple[str, ...]) -> Sequence[CaseRow]:
    """The rows with credentials in URLs of their ``key`` text masked (a last barrier: the
    runner redacts what it builds, but a scorer's own message may quote a URL)."""
    if not rows:
        return rows
    index = columns.index(key)
    texts = [r[index] if isinstance(r, tuple) else r.get(key) for r in rows]
    # one C search per batch; the NUL between texts keeps a "://" from spanning two of them
    if "://" not in "\0".join([t for t in texts if type(t) is str]):
        return rows
    out = []
    for r, text in zip(rows, texts, strict=True):
        if not isinstance(text, str):
            out.append(r)
        elif isinstance(r, tuple):
            out.append((*r[:index], redact_text(text), *r[index + 1:]))
        else:
            out.append({**r, key: redact_text(text)})
    return out


