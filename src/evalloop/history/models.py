"""Every table evalloop keeps in a history database, declared once as SQLModel models.

The history proper — runs, per-scorer summaries, case results and scores, score vectors and
calibrations (:data:`HISTORY_TABLES`, created and stamped together by
:mod:`evalloop.history.engine`) — and beside it the lock and fire-claim tables
(:mod:`evalloop.history.locks`) and the schedule ledger (:mod:`evalloop.scheduling.ledger`). The models
live in a registry (and ``MetaData``) of their own, so a system under test that uses SQLModel
itself never finds evalloop's tables in its ``SQLModel.metadata``, nor evalloop its tables.

Reads that users see (``history``, ``show``, the Python API) return these objects. Writes where
speed matters (the case rows, written for every case of every run) are Core statements over
``Model.__table__`` (a model's ``model_dump()`` is its row).
"""

# no ``from __future__ import annotations``: the fields' types are objects already, and neither
# pydantic nor SQLAlchemy has to evaluate 130 annotation strings on every start (≈ 3 ms)

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar, TypeAlias

from pydantic import BaseModel, ConfigDict
from sqlalchemy import JSON, DateTime, Index, Row, Select, String, Table, TypeDecorator
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import registry
from sqlalchemy.types import TypeEngine
from sqlmodel import Field, SQLModel
from typing_extensions import TypeAliasType

#: a row of a Core select over evalloop's tables, and such a select (read by column name)
StoredRow: TypeAlias = Row[*tuple[object, ...]]
Query: TypeAlias = Select[*tuple[object, ...]]
#: a case row as the runner hands it over: a mapping by column, or a tuple in column order
CaseRow: TypeAlias = Mapping[str, object] | tuple[object, ...]
#: JSON as stored: what a JSON column (or a key of it no model names) holds
JSONValue = TypeAliasType("JSONValue", "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]")


class UTCDateTime(TypeDecorator[datetime]):
    """A point in time, stored in UTC and read back aware (``TIMESTAMP WITH TIME ZONE`` where the
    database has it; SQLite keeps the UTC text). A naive value is taken to be UTC already."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None or value.tzinfo is None:
            return value
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))


#: compact JSON (one encoder, built once, called directly: this runs for every case's output)
dumps: Callable[[object], str] = _ENCODER.encode


class JSONObject(TypeDecorator[dict[str, JSONValue]]):
    """A JSON object: a run's fingerprint and notes, a summary's details (read as models in
    :mod:`evalloop.history.details`). ``JSON`` on PostgreSQL; on SQLite compact JSON text in the
    ``VARCHAR`` column every SQLite history already has (SQLite keeps JSON as text either way).
    Read back as a dict — ``{}`` for a stored value that is not a JSON object (a damaged row) —
    and written from a dict, a pydantic model or JSON text (an older caller's ``dumps``)."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[str] | JSON:
        if dialect.name == "sqlite":
            text: TypeEngine[str] = dialect.type_descriptor(String())
            return text
        return JSON()  # the dialect's own JSON type is found from it

    def process_bind_param(self, value: object, dialect: Dialect) -> object:
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        elif isinstance(value, str | None):
            value = as_object(value)
        return dumps(value) if dialect.name == "sqlite" else value

    def process_result_value(self, value: object, dialect: Dialect) -> dict[str, JSONValue]:
        return value if isinstance(value, dict) else as_object(value if isinstance(value, str) else None)


def as_object(text: str | None) -> dict[str, JSONValue]:
    """JSON text as an object: ``{}`` for none, unreadable text, or a value that is not an object."""
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def utcnow() -> datetime:
    return datetime.now(UTC)


class TableModel(SQLModel, registry=registry()):
    """The base of evalloop's table models: their own registry and ``MetaData``. Their pydantic
    schemas are built when first used (a run dumps three of the eleven models; the others are
    read and written as rows)."""

    # SQLModel types this as its SQLModelConfig (ConfigDict plus its own keys), which it does not export
    model_config = ConfigDict(defer_build=True)  # type: ignore[assignment]

    if TYPE_CHECKING:  # set on each table model by SQLAlchemy's declarative mapping
        __table__: ClassVar[Table]  # type: ignore[explicit-any]  # SQLAlchemy 2.1's Table defaults its columns to Column[Any]


#: every table of every evalloop model (history, locks, ledger)
metadata = TableModel.metadata


class RunStatus(StrEnum):
    """Where a run ended. Only ``completed`` runs that are also valid feed baselines."""

    RUNNING = "running"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class Run(TableModel, table=True):
    """One execution of one suite."""

    __tablename__ = "runs"

    id: str = Field(primary_key=True)
    suite: str = Field(index=True)
    status: str = Field(default=RunStatus.RUNNING, index=True)
    valid: bool = True
    invalid_reason: str | None = None
    partial: bool = False  # run on a subset (--limit): compared, but never a baseline
    started_at: datetime = Field(default_factory=utcnow, index=True, sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    code_version: str | None = None
    fingerprint: dict[str, JSONValue] = Field(default_factory=dict, sa_type=JSONObject)
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
    cache_write_tokens: int | None = None  # prompt-cache writes (None: older evalloop)
    cache_read_tokens: int | None = None   # prompt-cache reads
    batched_calls: int | None = None       # calls answered through a batch API
    notes: dict[str, JSONValue] = Field(default_factory=dict, sa_type=JSONObject)  # history.details.RunNotes
    origin: str = "local"
    # the product part of the fingerprint (target, params, its own description: history.identity);
    # None: a run of an older evalloop without a fingerprint
    product_fingerprint: str | None = None
    # a bridge: the run whose stored outputs this run re-graded with a changed measurement (a judge
    # model, a rubric); a bridge is a baseline only of that measurement and is never listed as a run
    bridge_of: str | None = Field(default=None, index=True)

    @property
    def system_fingerprint(self) -> str:
        """The fingerprint a run reports (``--json``, JUnit): the system under test, without
        injected failure memories and case files (a run of an older evalloop: the full hash)."""
        return self.base_fingerprint or self.fingerprint_hash


class ScorerSummary(TableModel, table=True):
    """Per run and scorer: the mean over non-errored cases, counts, and the verdict."""

    __tablename__ = "scorer_summaries"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    scorer: str = Field(index=True)
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
    details: dict[str, JSONValue] = Field(default_factory=dict, sa_type=JSONObject)  # history.details.SummaryDetails
    # whether ``evalloop accept`` made this scorer of this run the new normal (its record is in
    # ``details``); a column, so the last acceptance is found by an index-friendly equality
    # (None: a row of a history not yet migrated to revision 0004 never reaches a reader)
    accepted: bool | None = None
    # what turned outputs into these scores: a hash of the scorer's code, parameters and judge
    # model (history.identity); a baseline holds only runs measured the same way
    measurement: str | None = None


class CaseResult(TableModel, table=True):
    """One case's output (or error) in one epoch of a run."""

    __tablename__ = "case_results"
    __table_args__ = (Index("ix_case_results_run_case", "run_id", "case_id", "epoch"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id")  # indexed first by ix_case_results_run_case
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
    output_bytes: int | None = None  # a truncated output's full size (bytes of its JSON); None: stored whole
    output_sha256: str | None = None  # a truncated output's SHA-256 (history.outputs)


class CaseScore(TableModel, table=True):
    """One scorer's grade of one case's output in one epoch."""

    __tablename__ = "case_scores"
    __table_args__ = (Index("ix_case_scores_run_scorer", "run_id", "scorer", "case_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id")  # indexed first by ix_case_scores_run_scorer
    case_id: str
    epoch: int = 0
    scorer: str
    value: float
    errored: bool = False
    skipped: bool = False
    message: str = ""
    meta: str | None = None


class ScoreVector(TableModel, table=True):
    """One scorer's per-case scores of one run, compact: float64 per case in case order (NaN
    where a case has no grade), for the case list named by ``digest``
    (:func:`evalloop.scoring.scorevec.ids_digest`). Baselines read it instead of the run's score rows
    when the case list is the same; the rows stay the record."""

    __tablename__ = "score_vectors"
    __table_args__ = (Index("ix_score_vectors_run_scorer", "run_id", "scorer"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id")
    scorer: str
    digest: str
    n: int
    data: bytes


class CalibrationRecord(TableModel, table=True):
    """What ``evalloop calibrate`` measured for one suite and scorer."""

    __tablename__ = "calibrations"

    id: int | None = Field(default=None, primary_key=True)
    suite: str = Field(index=True)
    scorer: str
    kind: str
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    repeats: int
    n_cases: int
    mean: float
    noise_sd: float
    false_alarm_rate: float
    suggested_threshold: float | None = None
    minimal_detectable_drop: float | None = None
    per_case_variance: str = "{}"


class RunBatch(TableModel, table=True):
    """A provider batch a run submitted (batch mode): a run killed while waiting on it is resumed
    from these (``evalloop run --resume``) instead of submitting and paying again."""

    __tablename__ = "run_batches"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    provider: str
    batch_id: str
    custom_ids: str = "[]"  # JSON list: the requests that went out in it
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


#: the history proper: created, migrated and stamped together (evalloop.history.engine)
HISTORY_TABLES = (Run.__table__, ScorerSummary.__table__, CaseResult.__table__, CaseScore.__table__,
                  ScoreVector.__table__, CalibrationRecord.__table__, RunBatch.__table__)


# -- beside the history: locks and the schedule ledger -----------------------------------------

class Lock(TableModel, table=True):
    """A lease on a name (``suite:<name>``, ``run:<id>``, a scheduler's job): who holds it, until when."""

    __tablename__ = "evalloop_locks"

    name: str = Field(primary_key=True, max_length=191)
    owner: str = Field(max_length=191)
    acquired_at: float
    expires_at: float
    refreshed_at: float | None = None
    beat_seconds: float | None = None


class FireClaim(TableModel, table=True):
    """Which scheduler process took one scheduled fire time of a job."""

    __tablename__ = "evalloop_fire_claims"

    job_id: str = Field(primary_key=True, max_length=191)
    fire_time: str = Field(primary_key=True, max_length=40)
    owner: str = Field(max_length=191)
    claimed_at: float


class LedgerEntry(TableModel, table=True):
    """One suite of one scheduled fire: what it did (run, skip, error) and its verdict."""

    __tablename__ = "evalloop_schedule_runs"

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True, max_length=191)
    fire_id: str = Field(max_length=40)
    suite: str = Field(max_length=191)
    owner: str = Field(max_length=191)
    status: str = Field(max_length=20)
    verdict: str | None = Field(default=None, max_length=40)
    run_id: str | None = Field(default=None, max_length=64)
    detail: str | None = Field(default=None, max_length=1000)
    started_at: float
    ended_at: float | None = None


class SchemaVersion(TableModel, table=True):
    """The schema version evalloops before numbered migrations read (one row, ``name = 'history'``):
    such a host refuses to write a database at another version, so each migration that changes
    what they would write sets it (:mod:`evalloop.history.version`)."""

    __tablename__ = "evalloop_schema"

    name: str = Field(primary_key=True, max_length=40)
    version: int
    written_by: str = Field(max_length=40)
    migrated_at: float


LOCK_TABLES = (Lock.__table__, FireClaim.__table__)


class AlembicVersion(TableModel, table=True):
    """The migration a database is at (Alembic's own table, one row): declared here so a new
    database is created and stamped in one transaction without importing Alembic
    (:mod:`evalloop.history.migrations`)."""

    __tablename__ = "alembic_version"

    version_num: str = Field(primary_key=True, max_length=32)
