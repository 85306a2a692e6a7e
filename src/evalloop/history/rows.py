"""The history tables as Core handles, and model objects from Core rows: what the store's
reads and writes that bypass the ORM (the ones every run makes) share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar, overload

from sqlalchemy import insert
from sqlalchemy import select as core_select  # of whole tables (sqlmodel's select takes models)
from sqlalchemy.engine import Connection

from evalloop.history.models import CaseResult, CaseScore, Run, ScorerSummary, ScoreVector, StoredRow, TableModel

RUNS, SUMMARIES, RESULTS, SCORES, VECTORS = (Run.__table__, ScorerSummary.__table__, CaseResult.__table__,
                                             CaseScore.__table__, ScoreVector.__table__)


def run_by_id(conn: Connection, run_id: str) -> Run | None:
    """The run with this exact id, read through Core."""
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


def insert_all(conn: Connection, records: Sequence[TableModel]) -> None:
    """Insert models of one kind in one statement (their keys assigned by the database)."""
    if records:
        conn.execute(insert(type(records[0]).__table__), [record.model_dump(exclude={"id"}) for record in records])

