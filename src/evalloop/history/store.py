"""The history store: writing runs as they happen and reading them back for baselines.

SQLite under ``history/`` by default; any SQLAlchemy URL works. Case rows are written in
batches inside the run (so a crash loses at most the batch in flight, and the run row says
``running``/``interrupted``, which keeps it out of every baseline).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import operator
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec, Protocol, TypeVar, cast, overload

from sqlalchemy import Table, func, insert, update
from sqlalchemy import select as core_select  # of whole tables (sqlmodel's select takes models)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from evalloop.environ import variable
from evalloop.errors import EvalloopError, db_message, is_db_error, store_error
from evalloop.history.details import AcceptedRecord, SummaryDetails, json_object, jsonable, summary_details
from evalloop.history.engine import get_engine, recovery_hint, store_where
from evalloop.history.leases import LIVE, reap_dead_runs
from evalloop.history.models import (
    CaseResult,
    CaseRow,
    CaseScore,
    Query,
    Run,
    RunStatus,
    ScorerSummary,
    ScoreVector,
    StoredRow,
    TableModel,
    utcnow,
)
from evalloop.history.models import dumps as dumps  # compact JSON: the package's writers import it from here
from evalloop.history.outage import Backlog, outlast
from evalloop.redact import redact_text

#: how long a run's lease lasts without a heartbeat (settings ``heartbeat_seconds`` ×
#: ``takeover_heartbeats``; its holder refreshes it every ``heartbeat_seconds``)
RUN_LEASE_SECONDS = 20.0
RUN_BEAT_SECONDS = 5.0
#: the environment variable that names a scheduled fire's ledger entry to the run it starts
#: (kept in the run's notes as ``fire``, so a host taking over a dead fire finds its run)
FIRE_ENV = variable("fire_entry")
log = logging.getLogger("evalloop.history")


P = ParamSpec("P")
R = TypeVar("R")


class HasUrl(Protocol):
    """A store: what :func:`mapped` reads of a function's first argument."""

    @property
    def url(self) -> str: ...


S = TypeVar("S", bound=HasUrl)


def mapped(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Turn a database error raised inside the function into one StoreError line naming the
    database (its URL redacted: the first argument's ``url``), what is wrong, and how to recover."""

    @functools.wraps(fn)
    def inner(store: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(store, *args, **kwargs)
        except EvalloopError:
            raise
        except Exception as exc:
            if not is_db_error(exc):
                raise
            raise store_error(exc, store="history database", where=store_where(store.url),
                              recover=recovery_hint(store.url)) from None

    return inner


class _MappedErrors(type):
    """Every public method of the class maps database errors to one StoreError line."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, object]) -> type:
        for key, value in list(ns.items()):
            if callable(value) and not key.startswith("_"):
                ns[key] = mapped(value)
        return super().__new__(mcs, name, bases, ns)


class HistoryStore(metaclass=_MappedErrors):
    """Runs, summaries, case results and scores of every suite, in one database.

    A database error in any method comes out as one :class:`~evalloop.errors.StoreError` line.
    """

    #: a run's lease: taken over (the run reaped) after this long without a heartbeat ...
    lease_seconds: float = RUN_LEASE_SECONDS
    #: ... and refreshed this often by the process running it
    beat_seconds: float = RUN_BEAT_SECONDS

    def __init__(self, url: str, *, readonly: bool = False) -> None:
        self.url = url
        self.readonly = readonly
        self.backlog = Backlog()  # case results kept while the database is away (history/outage.py)
        if readonly:
            from evalloop.history.readonly import readonly_engine

            self.engine = readonly_engine(url)
        else:
            self.engine = get_engine(url)

    def _reading(self) -> Session:
        """A session for reads: the models it returns stay readable once it is closed."""
        return Session(self.engine, expire_on_commit=False)

    # -- writing -----------------------------------------------------------------------
    def now(self, default: datetime | None = None) -> datetime:
        """The time a run is stamped with: on a server database (a team's history) the
        database's clock, so that no host's clock orders runs, picks baselines or decides
        which run is the latest; on SQLite (one host writes it) ``default`` or this host's."""
        if self.engine.dialect.name == "sqlite":
            return default or utcnow()
        from evalloop.history.locks import database_time

        return datetime.fromtimestamp(database_time(self.engine), UTC)

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
                run = _run_by_id(conn, run_id)
                assert run is not None, run_id
                for key, value in fields.items():
                    setattr(run, key, _redacted_field(value))
                run.ended_at = self.now(run.ended_at)
                _insert_all(conn, vectors)
                _insert_all(conn, summaries)
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

    # -- reading -----------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run | None:
        """A run by id or unique id prefix."""
        matches = self.find_runs(run_id, limit=2)
        return matches[0] if len(matches) == 1 else None

    def find_runs(self, ref: str, limit: int = 4) -> list[Run]:
        """The run with this exact id, else up to ``limit`` runs whose id starts with ``ref`` (a
        bridge only by its exact id)."""
        with self.engine.connect() as conn:
            exact = _run_by_id(conn, ref)
            if exact is not None:
                return [exact]
            prefixed = conn.execute(core_select(RUNS).where(RUNS.c.id.startswith(ref, autoescape=True),
                                                            RUNS.c.bridge_of.is_(None))
                                    .order_by(RUNS.c.id).limit(limit))
            return [run for run, in as_models(prefixed, Run)]

    def runs(self, suite: str | None = None, limit: int | None = 20,
             statuses: Sequence[str] | None = None, *, bridges: bool = False) -> list[Run]:
        """Newest first; the product's runs only, unless ``bridges`` (re-gradings of earlier runs'
        outputs by a changed measurement, :mod:`evalloop.history.bridges`)."""
        query = select(Run)
        if not bridges:
            query = query.where(col(Run.bridge_of).is_(None))
        if suite:
            query = query.where(Run.suite == suite)
        if statuses:
            query = query.where(col(Run.status).in_(list(statuses)))
        query = query.order_by(col(Run.started_at).desc(), col(Run.id).desc())
        if limit:
            query = query.limit(limit)
        with self._reading() as session:
            return list(session.exec(query))

    def count_runs(self, suite: str | None = None) -> int:
        """How many runs are stored (of one suite; bridges not counted)."""
        query = select(func.count()).select_from(RUNS).where(RUNS.c.bridge_of.is_(None))
        if suite:
            query = query.where(RUNS.c.suite == suite)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def suites(self) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(conn.execute(select(RUNS.c.suite).distinct()).scalars())

    def summaries(self, run_id: str) -> dict[str, ScorerSummary]:
        with self.engine.connect() as conn:
            rows = conn.execute(core_select(SUMMARIES).where(SUMMARIES.c.run_id == run_id).order_by(SUMMARIES.c.id))
            return {summary.scorer: summary for summary, in as_models(rows, ScorerSummary)}

    def baseline_runs(self, suite: str, scorer: str, before: Run, n: int, product: str | None = None, *,
                      measurement: str | None = None, measured_only: bool = False) -> list[tuple[Run, ScorerSummary]]:
        """The last ``n`` runs before ``before`` that may serve as this scorer's baseline: runs
        that had *completed* before it started (a run of another host that was still going
        when this one began is never its baseline, even once it completed).

        Oldest first. Eligibility has one definition (:func:`history.eligibility.baseline_eligible`);
        the query only narrows the candidates. With ``product``, only runs of that product (a
        baseline restarted when the product changed). With ``measurement``, only runs whose scorer
        was measured so: its own runs graded so, and *bridges* (earlier runs' outputs re-graded
        so); without, the product's own runs however measured, and no bridge. ``measured_only``:
        every run that measured the suite so (:func:`history.eligibility.measured`), whatever its
        verdict — the runs a drop's soundness is judged against.
        """
        from evalloop.history.eligibility import accepted, baseline_eligible, measured, of_measurement

        def takes(run: Run, summary: ScorerSummary) -> bool:
            if measured_only:
                return measured(run, summary) and of_measurement(run, summary, measurement)
            return baseline_eligible(run, summary, measurement=measurement)

        query = (
            _measured(_with_summaries(suite, scorer, before), measurement)
            .where((RUNS.c.started_at < before.started_at)
                   | ((RUNS.c.started_at == before.started_at) & (RUNS.c.id < before.id)),
                   RUNS.c.ended_at.is_(None) | (RUNS.c.ended_at <= before.started_at))
            .order_by(RUNS.c.started_at.desc(), RUNS.c.id.desc())
        )
        if product is not None:
            query = query.where(RUNS.c.product_fingerprint == product)
        found: list[tuple[Run, ScorerSummary]] = []
        with self.engine.connect() as conn:
            for run, summary in as_models(conn.execute(query.execution_options(yield_per=64)), Run, ScorerSummary):
                if takes(run, summary):
                    found.append((run, summary))
                    if len(found) >= n or accepted(summary) is not None:
                        break  # an accepted run is the oldest any later baseline reaches back to
                elif accepted(summary) is not None and run.bridge_of is None:
                    break  # ... measured otherwise (and not bridged) too
        return list(reversed(found))

    def reference_runs(self, suite: str, scorer: str, before: Run, n: int, *,
                       measurement: str | None = None) -> list[tuple[Run, ScorerSummary]]:
        """The first ``n`` eligible runs of this scorer since its last acceptance (or ever), oldest
        first: the reference a slow drift is measured from (see :mod:`evalloop.verdicts.baseline`);
        with ``measurement``, of the runs measured so (bridges included), as :meth:`baseline_runs`.

        Two short reads, whatever the length of the history: the last acceptance (a summary whose
        details carry one), then forward from it until ``n`` eligible runs are found."""
        from evalloop.history.eligibility import accepted, baseline_eligible

        candidates = _with_summaries(suite, scorer, before).where(RUNS.c.started_at <= before.started_at)
        query = _measured(candidates, measurement)
        found: list[tuple[Run, ScorerSummary]] = []
        with self.engine.connect() as conn:
            start: Run | None = None  # the last acceptance, however its run was measured
            marked = (_measured(candidates, None).where(SUMMARIES.c.accepted.is_(True))
                      .order_by(RUNS.c.started_at.desc(), RUNS.c.id.desc()))
            for run, summary in as_models(conn.execute(marked.execution_options(yield_per=16)), Run, ScorerSummary):
                if accepted(summary) is not None:  # completed and accepted: eligible, the first
                    start = run
                    break
            forward = query.order_by(RUNS.c.started_at, RUNS.c.id)
            if start is not None:
                forward = forward.where((RUNS.c.started_at > start.started_at)
                                        | ((RUNS.c.started_at == start.started_at) & (RUNS.c.id >= start.id)))
            rows = conn.execute(forward.execution_options(yield_per=max(n, 1)))
            for run, summary in as_models(rows, Run, ScorerSummary):
                if baseline_eligible(run, summary, measurement=measurement):
                    found.append((run, summary))
                    if len(found) >= n:
                        break
        return found

    def earlier_details(self, suite: str, scorer: str, before: Run, limit: int = 200) -> Iterator[SummaryDetails]:
        """The details of this scorer's summaries in the runs before ``before``, newest first, read
        one by one as the caller goes on (bridges left out: they are re-gradings, not nights); an
        accepted summary's (its ``accepted`` column) always holds its acceptance record."""
        query = (select(SUMMARIES.c.details, SUMMARIES.c.accepted).join(RUNS, SUMMARIES.c.run_id == RUNS.c.id)
                 .where(RUNS.c.suite == suite, SUMMARIES.c.scorer == scorer, RUNS.c.id != before.id,
                        RUNS.c.started_at <= before.started_at, RUNS.c.bridge_of.is_(None))
                 .order_by(RUNS.c.started_at.desc(), RUNS.c.id.desc()).limit(limit))
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        for details, was_accepted in rows:
            found = summary_details(details)
            if was_accepted and found.accepted is None:
                found.accepted = AcceptedRecord()
            yield found

    def case_scopes(self, run_id: str) -> dict[str, str]:
        """``case id → scope`` of a stored run's cases tagged ``scope:<id>`` (the first such tag):
        the clusters the run's verdict resamples. Empty when no case has a scope."""
        from evalloop.suites.models import SCOPE_TAG, scope_of

        query = (select(RESULTS.c.case_id, RESULTS.c.tags).distinct()
                 .where(RESULTS.c.run_id == run_id, RESULTS.c.tags.like(f"%{SCOPE_TAG}%")))
        out: dict[str, str] = {}
        with self.engine.connect() as conn:
            for case_id, tag_text in conn.execute(query):
                scope = scope_of((tag_text or "").split(","))
                if scope is not None:
                    out.setdefault(str(case_id), scope)
        return out

    def case_scores(self, run_id: str, scorer: str) -> dict[str, float]:
        """Per-case score of one scorer in one run: epochs averaged, errored/skipped left out."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(SCORES.c.case_id, SCORES.c.value)
                .where(SCORES.c.run_id == run_id, SCORES.c.scorer == scorer,
                       SCORES.c.errored.is_(False), SCORES.c.skipped.is_(False))
            ).all()
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for case_id, value in rows:
            acc = sums[case_id]
            acc[0] += value
            acc[1] += 1
        return {case_id: total / count for case_id, (total, count) in sums.items()}

    def score_vector(self, run_id: str, scorer: str, digest: str) -> bytes | None:
        """A run's stored score vector of one scorer for the case list ``digest``, if it has one."""
        with self.engine.connect() as conn:
            found = conn.execute(select(VECTORS.c.data).where(
                VECTORS.c.run_id == run_id, VECTORS.c.scorer == scorer, VECTORS.c.digest == digest).limit(1)).first()
        return None if found is None else bytes(found[0])

    def case_messages(self, run_id: str, scorer: str, case_ids: Iterable[str]) -> dict[str, str]:
        wanted = list(case_ids)
        if not wanted:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(SCORES.c.case_id, SCORES.c.message)
                .where(SCORES.c.run_id == run_id, SCORES.c.scorer == scorer, SCORES.c.case_id.in_(wanted))
            ).all()
        return {case_id: message for case_id, message in rows}

    def case_results(self, run_id: str) -> list[CaseResult]:
        """Every case result of a run (each epoch), in the order they were written."""
        with self._reading() as session:
            return list(session.exec(select(CaseResult).where(CaseResult.run_id == run_id)
                                     .order_by(col(CaseResult.id))))

    def score_rows(self, run_id: str) -> list[CaseScore]:
        """Every score of a run (each scorer and epoch), in the order they were written."""
        with self._reading() as session:
            return list(session.exec(select(CaseScore).where(CaseScore.run_id == run_id)
                                     .order_by(col(CaseScore.id))))

    def case_errors(self, run_id: str) -> dict[str, str]:
        """The cases of a run whose target call failed: case id → error (the last epoch's)."""
        with self.engine.connect() as conn:
            return dict(conn.execute(select(RESULTS.c.case_id, RESULTS.c.error).where(
                RESULTS.c.run_id == run_id, RESULTS.c.error.is_not(None)).order_by(RESULTS.c.id)).all())

    def count(self, table: type[TableModel] | Table) -> int:  # type: ignore[explicit-any]  # SQLAlchemy 2.1's Table defaults its columns to Column[Any]
        """How many rows a history table holds."""
        target = table if isinstance(table, Table) else table.__table__
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(target)).scalar_one())


RUNS, SUMMARIES, RESULTS, SCORES, VECTORS = (Run.__table__, ScorerSummary.__table__, CaseResult.__table__,
                                             CaseScore.__table__, ScoreVector.__table__)


def _with_summaries(suite: str, scorer: str, before: Run) -> Query:
    """The completed runs of ``suite`` other than ``before``, each with its ``scorer`` summary."""
    return (core_select(RUNS, SUMMARIES).join(SUMMARIES, SUMMARIES.c.run_id == RUNS.c.id)
            .where(RUNS.c.suite == suite, SUMMARIES.c.scorer == scorer,
                   RUNS.c.status == RunStatus.COMPLETED, RUNS.c.id != before.id))


def _measured(query: Query, measurement: str | None) -> Query:
    """Runs whose scorer was measured as ``measurement`` says (unknown counts as the same), bridges
    included, and the product's accepted runs however measured (an acceptance bounds every
    window); without a measurement, the product's own runs (no bridge)."""
    if measurement is None:
        return query.where(RUNS.c.bridge_of.is_(None))
    return query.where(SUMMARIES.c.measurement.is_(None) | (SUMMARIES.c.measurement == measurement)
                       | (RUNS.c.bridge_of.is_(None) & SUMMARIES.c.accepted.is_(True)))


def _run_by_id(conn: Connection, run_id: str) -> Run | None:
    found = next(as_models(conn.execute(core_select(RUNS).where(RUNS.c.id == run_id)), Run), None)
    return None if found is None else found[0]


A = TypeVar("A", bound=TableModel)
B = TypeVar("B", bound=TableModel)


@overload
def as_models(rows: Iterable[StoredRow], first: type[A], /) -> Iterator[tuple[A]]: ...
@overload
def as_models(rows: Iterable[StoredRow], first: type[A], second: type[B], /) -> Iterator[tuple[A, B]]: ...
def as_models(rows: Iterable[StoredRow], *models: type[TableModel]) -> Iterator[tuple[TableModel, ...]]:
    """The rows of a Core select over ``models``' tables (all columns of each, in that order) as
    model objects, one tuple per row: what a session would return, without the ORM's loading
    (the reads every run makes, and finding a run by its id; the other reads go through a session)."""
    spans: list[tuple[type[TableModel], int, int, list[str]]] = []
    at = 0
    for model in models:
        keys = list(model.__table__.columns.keys())
        spans.append((model, at, at + len(keys), keys))
        at += len(keys)
    for row in rows:
        yield tuple(model(**dict(zip(keys, row[start:end], strict=True))) for model, start, end, keys in spans)


def _insert_all(conn: Connection, records: Sequence[TableModel]) -> None:
    """Insert models of one kind in one statement (their keys assigned by the database)."""
    if records:
        conn.execute(insert(type(records[0]).__table__), [record.model_dump(exclude={"id"}) for record in records])


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


