"""The stored history: its records (runs, per-scorer summaries, case results and scores, score
vectors, calibrations) and the SQLAlchemy Core tables that hold them.

Each record is a pydantic model, and its table is built from its fields (:func:`_table`), so
a column is declared once. The store reads and writes them with SQLAlchemy Core: no ORM
session, identity map or unit of work is involved, and importing the history costs neither the
ORM nor SQLModel (≈ 145 ms of every ``evalloop`` process, issue #16). Rows read back are trusted
and skip validation (:meth:`Record.from_row`).
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Self, Union, get_args, get_origin

from pydantic import BaseModel, Field
from pydantic_core import PydanticUndefined
from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    TypeDecorator,
)

#: every history table (created and migrated together, see :mod:`evalloop.history.engine`)
metadata = MetaData()


class UTCDateTime(TypeDecorator[datetime]):
    """A point in time, stored in UTC and read back aware (``TIMESTAMP WITH TIME ZONE`` where the
    database has it; SQLite keeps the UTC text). A naive value is taken to be UTC already."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None or value.tzinfo is None:
            return value
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_SQL_TYPES: dict[type, Any] = {str: String, int: Integer, float: Float, bool: Boolean, datetime: UTCDateTime,
                               bytes: LargeBinary}


def utcnow() -> datetime:
    return datetime.now(UTC)


class Record(BaseModel):
    """One row of a history table; ``__table__`` is built from the fields."""

    __table__: ClassVar[Table]

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | Any) -> Self:
        """A record of a row read back from its table (trusted: no validation)."""
        return cls.model_construct(**(row if isinstance(row, Mapping) else row._mapping))

    @classmethod
    def from_values(cls, values: Iterable[Any]) -> Self:
        """A record of the values of every column, in table order."""
        return cls.model_construct(**dict(zip(cls.model_fields, values, strict=True)))  # fields = columns

    def row(self, *, with_key: bool = True) -> dict[str, Any]:
        """The column values to write (an unset integer key left out, for the database to assign)."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        if not with_key or values.get("id", "") is None:
            values.pop("id", None)
        return values


def _column_type(annotation: Any) -> tuple[type, bool]:
    """The SQL type of a field's annotation, and whether it may be NULL."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return _SQL_TYPES[args[0]], True
    return _SQL_TYPES[annotation], False


def _table(name: str, *, indexed: tuple[str, ...] = (), refs: Mapping[str, str] | None = None,
           extra: tuple[Index, ...] = ()) -> Any:
    """Class decorator: build the record's table from its fields (``id`` is the primary key)."""

    def build(cls: type[Record]) -> type[Record]:
        columns = []
        for field, info in cls.model_fields.items():
            sql_type, nullable = _column_type(info.annotation)
            ref = (refs or {}).get(field)
            default = info.default_factory or (None if info.default is PydanticUndefined else info.default)
            columns.append(Column(field, sql_type(), *([ForeignKey(ref)] if ref else []),
                                  primary_key=field == "id", nullable=nullable and field != "id",
                                  index=True if field in indexed else None, default=default))
        cls.__table__ = Table(name, metadata, *columns, *extra)
        return cls

    return build


class RunStatus(StrEnum):
    """Where a run ended. Only ``completed`` runs that are also valid feed baselines."""

    RUNNING = "running"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


@_table("runs", indexed=("suite", "status", "started_at"))
class Run(Record):
    """One execution of one suite."""

    id: str
    suite: str
    status: str = RunStatus.RUNNING
    valid: bool = True
    invalid_reason: str | None = None
    partial: bool = False  # run on a subset (--limit): compared, but never a baseline
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None
    code_version: str | None = None
    fingerprint: str = "{}"
    fingerprint_hash: str = ""
    # the fingerprint without what changes on its own (injected failure memories, case files):
    # a change here is a change of the system under test, and the baseline says so
    base_fingerprint: str | None = None
    n_cases: int = 0
    epochs: int = 1
    case_errors: int = 0
    target_failures: int | None = None  # case results the target failed (None: older evalloop)
    infra_failures: int | None = None   # case results lost to API/network faults (errored)
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    llm_calls: int = 0
    cache_hits: int = 0
    llm_retries: int = 0
    notes: str = "{}"
    origin: str = "local"

    @property
    def system_fingerprint(self) -> str:
        """The fingerprint a run reports (``--json``, JUnit): the system under test, without
        injected failure memories and case files (a run of an older evalloop: the full hash)."""
        return self.base_fingerprint or self.fingerprint_hash


@_table("scorer_summaries", indexed=("run_id", "scorer"), refs={"run_id": "runs.id"})
class ScorerSummary(Record):
    """Per run and scorer: the mean over non-errored cases, counts, and the verdict."""

    id: int | None = None
    run_id: str
    scorer: str
    kind: str
    mean: float | None = None
    n: int = 0
    errored: int = 0
    skipped: bool = False
    threshold: float = 0.1
    verdict: str | None = None
    baseline: float | None = None
    drop: float | None = None
    p_value: float | None = None
    mdd: float | None = None  # the relative drop this run's verdict would catch 90 % of the time
    # whether this scorer of this run may serve as a baseline (set once, when the run is judged;
    # see evalloop.history.eligibility): completed, valid, complete, graded, scorer not broken
    eligible: bool | None = None
    details: str = "{}"


@_table("case_results", refs={"run_id": "runs.id"},
        extra=(Index("ix_case_results_run_case", "run_id", "case_id", "epoch"),))
class CaseResult(Record):
    """One case's output (or error) in one epoch of a run."""

    id: int | None = None
    run_id: str  # indexed first by ix_case_results_run_case
    case_id: str
    epoch: int = 0
    tags: str | None = None
    output: str | None = None
    error: str | None = None
    failure: str | None = None  # "target" (a real 0) or "infra" (errored); see evalloop.run.failures
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    traceback: str | None = None  # the target's exception: its own frames (evalloop's left out)


@_table("case_scores", refs={"run_id": "runs.id"},
        extra=(Index("ix_case_scores_run_scorer", "run_id", "scorer", "case_id"),))
class CaseScore(Record):
    """One scorer's grade of one case's output in one epoch."""

    id: int | None = None
    run_id: str  # indexed first by ix_case_scores_run_scorer
    case_id: str
    epoch: int = 0
    scorer: str
    value: float
    errored: bool = False
    skipped: bool = False
    message: str = ""
    meta: str | None = None


@_table("score_vectors", refs={"run_id": "runs.id"},
        extra=(Index("ix_score_vectors_run_scorer", "run_id", "scorer"),))
class ScoreVector(Record):
    """One scorer's per-case scores of one run, compact: float64 per case in case order (NaN
    where a case has no grade), for the case list named by ``digest``
    (:func:`evalloop.scoring.scorevec.ids_digest`). Baselines read it instead of the run's score rows
    when the case list is the same; the rows stay the record."""

    id: int | None = None
    run_id: str
    scorer: str
    digest: str
    n: int
    data: bytes


@_table("calibrations", indexed=("suite",))
class CalibrationRecord(Record):
    """What ``evalloop calibrate`` measured for one suite and scorer."""

    id: int | None = None
    suite: str
    scorer: str
    kind: str
    created_at: datetime = Field(default_factory=utcnow)
    repeats: int
    n_cases: int
    mean: float
    noise_sd: float
    false_alarm_rate: float
    suggested_threshold: float | None = None
    minimal_detectable_drop: float | None = None
    per_case_variance: str = "{}"
